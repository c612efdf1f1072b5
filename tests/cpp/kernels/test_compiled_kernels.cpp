#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "habitat/compiled_kernels.h"
#include "habitat/op_cost.h"

namespace habitat {
namespace {

Argument graph_arg(int64_t graph) {
  Argument a;
  a.name = "graph";
  a.value.kind = ArgValue::Kind::Int;
  a.value.ints = {graph};
  return a;
}

OpRecord op_named(const std::string& name, int64_t graph, uint64_t thread = 0) {
  OpRecord op;
  op.name = name;
  op.args = {graph_arg(graph)};
  op.thread = thread;
  return op;
}

KernelLaunch kernel(const std::string& name, double us) {
  KernelLaunch k;
  k.name = name;
  k.duration_us = us;
  return k;
}

std::vector<std::string> names(const std::vector<KernelLaunch>& kernels) {
  std::vector<std::string> out;
  for (const auto& k : kernels) out.push_back(k.name);
  return out;
}

TEST(CompiledKernels, EachKernelGoesToTheRecordOfItsNameInItsRun) {
  std::vector<OpRecord> ops = {
      op_named("habitat_fused::triton_poi_fused_gelu_0", 4),
      op_named("habitat_fused::triton_red_fused_sum_1", 4),
      op_named("habitat_fused::triton_poi_fused_gelu_0", 4),  // launched twice per run
      op_named("habitat::compiled_graph", 4),
  };
  ops[3].kernels = {kernel("triton_poi_fused_gelu_0", 3), kernel("triton_red_fused_sum_1", 5),
                    kernel("triton_poi_fused_gelu_0", 7)};
  EXPECT_EQ(attribute_compiled_kernels(ops), 3u);
  EXPECT_TRUE(ops[3].kernels.empty());
  ASSERT_EQ(ops[0].kernels.size(), 1u);
  EXPECT_EQ(ops[0].kernels[0].duration_us, 3);  // in launch order
  EXPECT_EQ(ops[2].kernels[0].duration_us, 7);
  EXPECT_EQ(names(ops[1].kernels), std::vector<std::string>{"triton_red_fused_sum_1"});
}

TEST(CompiledKernels, UnknownKernelsStayOnTheGraphOp) {
  std::vector<OpRecord> ops = {op_named("habitat_fused::triton_poi_fused_add_0", 1),
                               op_named("habitat::compiled_graph", 1)};
  ops[1].kernels = {kernel("triton_poi_fused_add_0", 2), kernel("some_other_kernel", 4)};
  EXPECT_EQ(attribute_compiled_kernels(ops), 1u);
  EXPECT_EQ(names(ops[1].kernels), std::vector<std::string>{"some_other_kernel"});
}

TEST(CompiledKernels, RunsKeepTheirOwnRecords) {
  // Two runs of the same graph, and another thread's op issued between a run's records.
  std::vector<OpRecord> ops = {
      op_named("habitat_fused::k_0", 2),      op_named("habitat::compiled_graph", 2),
      op_named("habitat_fused::k_0", 2),      op_named("aten::mm", 2, /*thread=*/1),
      op_named("habitat::compiled_graph", 2),
  };
  ops[1].kernels = {kernel("k_0", 1)};
  ops[4].kernels = {kernel("k_0", 9)};
  EXPECT_EQ(attribute_compiled_kernels(ops), 2u);
  EXPECT_EQ(ops[0].kernels[0].duration_us, 1);
  EXPECT_EQ(ops[2].kernels[0].duration_us, 9);
  EXPECT_TRUE(ops[3].kernels.empty());
}

TEST(CompiledKernels, RecordsOfAnotherGraphAreNotTaken) {
  std::vector<OpRecord> ops = {op_named("habitat_fused::k_0", 7),
                               op_named("habitat::compiled_graph", 8)};
  ops[1].kernels = {kernel("k_0", 1)};
  EXPECT_EQ(attribute_compiled_kernels(ops), 0u);
  EXPECT_EQ(ops[1].kernels.size(), 1u);
}

TEST(CompiledKernels, TheGraphOpItselfLaunchesNothing) {
  EXPECT_EQ(estimate_cost(op_named("habitat::compiled_graph", 0)).op_class, OpClass::NoKernel);
}

}  // namespace
}  // namespace habitat
