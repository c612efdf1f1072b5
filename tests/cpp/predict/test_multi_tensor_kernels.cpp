#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cost/multi_tensor_apply.h"
#include "cost/test_op_cost_builders.h"
#include "habitat/op_cost.h"
#include "predict/multi_tensor_kernels.h"
#include "predict/test_structure_models.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::db;
using test::none;
using test::op;
using test::real;
using test::T;
using test::tensors;

std::vector<TensorMeta> list(const std::vector<int64_t>& sizes, const char* dtype = "float32") {
  std::vector<TensorMeta> out;
  for (int64_t n : sizes) out.push_back(T({n}, dtype));
  return out;
}

double us(const OpRecord& rec, const char* gpu = "H100-SXM5-80GB") {
  const auto model = [](const OpRecord& o, const Device& d) {
    return multi_tensor_kernels_us(o, estimate_cost(o), d);
  };
  return test::structure_us(model, rec, gpu);
}

// torch 2.11's _multi_tensor_adamw on CUDA (torch/optim/adam.py), as the collector timed it:
// eight multi-tensor ops per step (the step counters live on the host).
double foreach_adamw_us(const std::vector<int64_t>& sizes, const char* dtype = "float32") {
  const auto p = list(sizes, dtype);
  double total = 0;
  total += us(op("aten::_foreach_mul_", "Scalar", {tensors("self", p), real("scalar", 0.99)}));
  total += us(op("aten::_foreach_lerp_", "Scalar",
                 {tensors("self", p), tensors("tensors1", p), real("weight", 0.1)}));
  total += us(op("aten::_foreach_mul_", "Scalar", {tensors("self", p), real("scalar", 0.999)}));
  total += us(
      op("aten::_foreach_addcmul_", "Scalar",
         {tensors("self", p), tensors("tensor1", p), tensors("tensor2", p), real("value", 0.001)}));
  total += us(op("aten::_foreach_sqrt", "", {tensors("self", p)}, p));
  total += us(op("aten::_foreach_div_", "ScalarList", {tensors("self", p)}));
  total += us(op("aten::_foreach_add_", "Scalar", {tensors("self", p), real("scalar", 1e-8)}));
  total += us(op("aten::_foreach_addcdiv_", "ScalarList",
                 {tensors("self", p), tensors("tensor1", p), tensors("tensor2", p)}));
  return total;
}

double fused_adamw_us(const std::vector<int64_t>& sizes) {
  const auto p = list(sizes);
  const std::vector<TensorMeta> steps(sizes.size(), T({}));
  return us(op("aten::_foreach_add_", "Scalar", {tensors("self", steps), real("scalar", 1)})) +
         us(op("aten::_fused_adamw_", "",
               {tensors("self", p), tensors("grads", p), tensors("exp_avgs", p),
                tensors("exp_avg_sqs", p), tensors("max_exp_avg_sqs", {}),
                tensors("state_steps", steps), real("lr", 1e-3), real("beta1", 0.9),
                real("beta2", 0.999), real("weight_decay", 0.01), real("eps", 1e-8),
                test::boolean("amsgrad", false), test::boolean("maximize", false),
                none("grad_scale"), none("found_inf")}));
}

TEST(MultiTensorApply, LaunchesCarryTheirElementsAndLongestBlock) {
  // 1,000 tensors of 10 elements: ten launches of 110 tensors (the last of 10), each block 10
  // elements long.
  const auto small = list(std::vector<int64_t>(1000, 10));
  std::vector<const TensorMeta*> ptrs;
  for (const auto& t : small) ptrs.push_back(&t);
  const auto launches = op_cost::multi_tensor_launches(ptrs, 1, false);
  ASSERT_EQ(launches.size(), 10u);
  EXPECT_DOUBLE_EQ(launches.front().elements, 1100);
  EXPECT_DOUBLE_EQ(launches.back().elements, 100);
  EXPECT_DOUBLE_EQ(launches.front().longest_block, 10);

  // One tensor of 400 full chunks and a 7-element one: the first launch takes 320 chunks, the
  // second the other 80 and the small tensor; both have a full chunk.
  const auto mixed = list({400 * 65536, 7});
  const auto split = op_cost::multi_tensor_launches({&mixed[0], &mixed[1]}, 2, false);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_DOUBLE_EQ(split[0].elements, 320.0 * 65536);
  EXPECT_DOUBLE_EQ(split[1].elements, 80.0 * 65536 + 7);
  EXPECT_DOUBLE_EQ(split[1].longest_block, 65536);
}

TEST(MultiTensorKernels, AdamWStepsAsTheH100Measured) {
  // Rows of the H100 families collection (benchmarks/results/kernels/
  // H100-SXM5-80GB-2026-11-26-families/adamw_fp32.csv), CUPTI device time of a whole step;
  // within the fit's p90 (benchmarks/results/multi-tensor-fit.txt).
  EXPECT_NEAR(foreach_adamw_us({22778, 74085}), 98.6, 0.2 * 98.6);
  EXPECT_NEAR(foreach_adamw_us({17, 8}), 12.1, 0.2 * 12.1);
  EXPECT_NEAR(fused_adamw_us({17, 8}), 5.3, 0.2 * 5.3);
  // Among the fused fit's worst rows (-23 %): one full chunk's walk of the fused functor took
  // ~2200 cycles a step here, where the launches of many chunks average the fitted 1436.
  EXPECT_NEAR(fused_adamw_us({22778, 74085}), 36.4, 0.25 * 36.4);
}

TEST(MultiTensorKernels, ALaunchWaitsOnItsLongestBlock) {
  // One 65536-element tensor beside small ones walks 32 steps: far above the bytes' time, and
  // above the same bytes spread over many short blocks.
  const auto mul = [](const std::vector<int64_t>& sizes) {
    return us(op("aten::_foreach_mul_", "Scalar", {tensors("self", list(sizes)), real("s", 2)}));
  };
  const double one_chunk = mul({65536});
  const double spread = mul(std::vector<int64_t>(64, 1024));
  EXPECT_GT(one_chunk, 2 * spread);
  // More elements never take less time.
  EXPECT_LE(mul({1000}), mul({2000}));
  EXPECT_LE(mul({65536}), mul({65536, 65536 * 50}));
  // At scale the stream dominates: 16-bit lists move half the bytes.
  const auto big = std::vector<int64_t>(8, 64 << 20);
  const double fp32 =
      us(op("aten::_foreach_mul_", "Scalar", {tensors("self", list(big)), real("s", 2)}));
  const double bf16 = us(
      op("aten::_foreach_mul_", "Scalar", {tensors("self", list(big, "bfloat16")), real("s", 2)}));
  EXPECT_GT(bf16, 0.5 * fp32);
  EXPECT_LT(bf16, 0.7 * fp32);
}

TEST(MultiTensorKernels, OtherOpsAreNotThisModels) {
  const Device& h100 = db().find("H100-SXM5-80GB");
  const OpRecord add = op("aten::add", "Tensor",
                          {test::tensor("self", T({1024})), test::tensor("other", T({1024}))});
  EXPECT_FALSE(multi_tensor_kernels_us(add, estimate_cost(add), h100));
  const OpRecord empty = op("aten::_foreach_mul_", "Scalar", {tensors("self", {}), real("s", 2)});
  EXPECT_FALSE(multi_tensor_kernels_us(empty, estimate_cost(empty), h100));
}

}  // namespace
}  // namespace habitat
