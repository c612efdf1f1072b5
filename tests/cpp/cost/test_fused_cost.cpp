#include <gtest/gtest.h>

#include "cost/fused_cost.h"

namespace habitat {
namespace {

Argument str_arg(const char* name, const char* text) {
  Argument a;
  a.name = name;
  a.value.kind = ArgValue::Kind::String;
  a.value.text = text;
  return a;
}

Argument real_arg(const char* name, double v) {
  Argument a;
  a.name = name;
  a.value.kind = ArgValue::Kind::Double;
  a.value.real = v;
  return a;
}

OpRecord fused(const char* kind, const char* sources, double flops, const char* reads,
               const char* writes) {
  OpRecord op;
  op.name = "habitat_fused::cpp_fused_gelu_0";
  Argument graph;
  graph.name = "graph";
  graph.value.kind = ArgValue::Kind::Int;
  graph.value.ints = {3};
  op.args = {graph,
             str_arg("kind", kind),
             str_arg("sources", sources),
             real_arg("flops", flops),
             str_arg("reads", reads),
             str_arg("writes", writes)};
  return op;
}

TEST(FusedCost, OtherOpsAreNotFusedKernels) {
  OpRecord op;
  op.name = "aten::mul";
  EXPECT_FALSE(fused_kernel_cost(op).has_value());
  op.name = "inductor::_alloc_from_pool";  // torch's own inductor ops are ordinary ops
  EXPECT_FALSE(fused_kernel_cost(op).has_value());
}

TEST(FusedCost, PointwiseMovesItsReadsAndWritesOnly) {
  // gelu over an 8x32 buffer: one read, one write; the four intermediates stay in registers.
  const auto cost =
      fused_kernel_cost(fused("pointwise", "aten::mul.Tensor;aten::erf.default;aten::add.Tensor",
                              1280, "float32[8,32]", "float32[8,32]"));
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->op_class, OpClass::Elementwise);
  EXPECT_DOUBLE_EQ(cost->bytes_read, 8 * 32 * 4);
  EXPECT_DOUBLE_EQ(cost->bytes_written, 8 * 32 * 4);
  EXPECT_DOUBLE_EQ(cost->flops, 1280);
  EXPECT_EQ(cost->precision, Precision::Fp32Simt);
  EXPECT_EQ(cost->kernels, 1);
}

TEST(FusedCost, ReductionsStridesAndBroadcasts) {
  // A permuted 16x32 view spans all 512 elements; a broadcast row (stride 0) is read once.
  const auto cost = fused_kernel_cost(fused("reduction", "aten::sum.dim_IntList", 512,
                                            "float32[16,32](1,16);bfloat16[8,32](0,1)",
                                            "float32[1,32];float32[]"));
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->op_class, OpClass::Reduction);
  EXPECT_DOUBLE_EQ(cost->bytes_read, 512 * 4 + 32 * 2);
  EXPECT_DOUBLE_EQ(cost->bytes_written, 32 * 4 + 4);
}

TEST(FusedCost, TemplatesAreMatrixWork) {
  const auto cost = fused_kernel_cost(fused("template", "aten::addmm.default;aten::relu.default",
                                            2.0 * 64 * 64 * 64, "float16[64,64];float16[64,64]",
                                            "float16[64,64]"));
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->op_class, OpClass::Gemm);
  EXPECT_EQ(cost->precision, Precision::Fp16Tensor);
  const auto conv = fused_kernel_cost(
      fused("template", "aten::convolution.default", 1, "float32[1,3,8,8]", "float32[1,4,8,8]"));
  EXPECT_EQ(conv->op_class, OpClass::Conv);
  EXPECT_EQ(conv->precision, Precision::Fp32Simt);
  EXPECT_EQ(
      fused_kernel_cost(fused("template", "aten::mm.default", 1, "float32[4,4]", "float32[4,4]"),
                        /*allow_tf32=*/true)
          ->precision,
      Precision::Tf32Tensor);
}

TEST(FusedCost, UnreadableRecordsAreUnknownNotFree) {
  EXPECT_FALSE(fused_kernel_cost(fused("unknown", "", 0, "", ""))->known());
  EXPECT_FALSE(fused_kernel_cost(fused("pointwise", "", 0, "float32[8,", "float32[8]"))->known());
  EXPECT_FALSE(
      fused_kernel_cost(fused("pointwise", "", 0, "float32[8](1,1)", "float32[8]"))->known());
  OpRecord bare;
  bare.name = "habitat_fused::triton_poi_fused_add_0";
  EXPECT_FALSE(fused_kernel_cost(bare)->known());
}

TEST(FusedCost, ParsesBufferLists) {
  const auto spaced = parse_fused_buffers(" float32[2, 3] ; int64[](  ) ");
  ASSERT_TRUE(spaced.has_value());
  EXPECT_EQ(spaced->size(), 2u);
  const auto ok = parse_fused_buffers("float32[2,3];int64[];float16[4,5](1,4)");
  ASSERT_TRUE(ok.has_value());
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE((*ok)[1].shape.empty());
  EXPECT_EQ((*ok)[1].numel(), 1);
  EXPECT_EQ((*ok)[2].strides, (std::vector<int64_t>{1, 4}));
  EXPECT_TRUE(parse_fused_buffers("")->empty());
}

}  // namespace
}  // namespace habitat
