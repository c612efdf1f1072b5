// GEMM, convolution and attention costs, checked against hand-computed formulas. FLOP
// figures marked "flop_counter" were also printed by torch.utils.flop_counter (torch 2.13)
// for the same shapes.
#include <gtest/gtest.h>

#include "cost/attention_problem.h"
#include "cost/test_op_cost_builders.h"
#include "habitat/op_cost.h"

namespace habitat {
namespace {

using namespace habitat::test;

TEST(OpCostGemm, AddmmCountsMultiplyAddsAndCompulsoryBytes) {
  // bias [256] + [64,128] @ [128,256], fp32.
  const auto rec = op("aten::addmm", "",
                      {tensor("self", T({256})), tensor("mat1", T({64, 128})),
                       tensor("mat2", T({128, 256})), integer("beta", 1), integer("alpha", 1)},
                      {T({64, 256})});
  const OpCost c = estimate_cost(rec);
  EXPECT_EQ(c.op_class, OpClass::Gemm);
  EXPECT_DOUBLE_EQ(c.flops,
                   2.0 * 64 * 128 * 256);  // 4,194,304 (flop_counter); bias add not counted
  // Reads: bias 256*4 + A 64*128*4 + B 128*256*4 = 1,024 + 32,768 + 131,072.
  EXPECT_DOUBLE_EQ(c.bytes_read, 164864);
  EXPECT_DOUBLE_EQ(c.bytes_written, 64 * 256 * 4);  // 65,536
  EXPECT_EQ(c.precision, Precision::Fp32Simt);
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(estimate_cost(rec, /*allow_tf32=*/true).precision, Precision::Tf32Tensor);
}

TEST(OpCostGemm, AddmmWithBetaZeroDoesNotReadBias) {
  const auto rec = op("aten::addmm", "",
                      {tensor("self", T({64, 256})), tensor("mat1", T({64, 128})),
                       tensor("mat2", T({128, 256})), integer("beta", 0), integer("alpha", 1)},
                      {T({64, 256})});
  EXPECT_DOUBLE_EQ(estimate_cost(rec).bytes_read, 32768 + 131072);
}

TEST(OpCostGemm, BmmInBf16UsesBf16TensorCores) {
  const auto rec =
      op("aten::bmm", "",
         {tensor("self", T({8, 32, 64}, "bfloat16")), tensor("mat2", T({8, 64, 16}, "bfloat16"))},
         {T({8, 32, 16}, "bfloat16")});
  const OpCost c = estimate_cost(rec);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 8 * 32 * 64 * 16);  // 524,288 (flop_counter)
  EXPECT_DOUBLE_EQ(c.bytes_read, (8 * 32 * 64 + 8 * 64 * 16) * 2.0);
  EXPECT_DOUBLE_EQ(c.bytes_written, 8 * 32 * 16 * 2.0);
  EXPECT_EQ(c.precision, Precision::Bf16Tensor);
}

TEST(OpCostGemm, LinearOverBatchedInputAndOutVariantWithoutOutputs) {
  // [4,10,32] @ [64,32]^T -> [4,10,64]: 2 * 40 * 32 * 64.
  const auto rec =
      op("aten::linear", "",
         {tensor("input", T({4, 10, 32})), tensor("weight", T({64, 32})), none("bias")},
         {T({4, 10, 64})});
  EXPECT_DOUBLE_EQ(estimate_cost(rec).flops, 163840);

  // mm.out with no recorded outputs: the out= tensor is written, not read; the product's
  // size comes from the operands.
  const auto out = op(
      "aten::mm", "out",
      {tensor("self", T({64, 128})), tensor("mat2", T({128, 256})), tensor("out", T({64, 256}))});
  const OpCost c = estimate_cost(out);
  EXPECT_DOUBLE_EQ(c.flops, 4194304);
  EXPECT_DOUBLE_EQ(c.bytes_read, 32768 + 131072);
  EXPECT_DOUBLE_EQ(c.bytes_written, 65536);
}

// aten::convolution's arguments for a square stride and padding: no bias, dilation 1, not
// transposed, one group.
std::vector<Argument> convolution_args(TensorMeta input, TensorMeta weight, int64_t stride,
                                       int64_t padding) {
  return {tensor("input", std::move(input)),
          tensor("weight", std::move(weight)),
          none("bias"),
          ints("stride", {stride, stride}),
          ints("padding", {padding, padding}),
          ints("dilation", {1, 1}),
          boolean("transposed", false),
          ints("output_padding", {0, 0}),
          integer("groups", 1)};
}

// aten::convolution_backward's arguments for the same convolution and output_mask.
std::vector<Argument> convolution_backward_args(TensorMeta grad_output, TensorMeta input,
                                                TensorMeta weight, int64_t stride, int64_t padding,
                                                std::vector<int64_t> mask) {
  const int64_t out_channels = weight.shape[0];
  return {tensor("grad_output", std::move(grad_output)),
          tensor("input", std::move(input)),
          tensor("weight", std::move(weight)),
          ints("bias_sizes", {out_channels}),
          ints("stride", {stride, stride}),
          ints("padding", {padding, padding}),
          ints("dilation", {1, 1}),
          boolean("transposed", false),
          ints("output_padding", {0, 0}),
          integer("groups", 1),
          bools("output_mask", std::move(mask))};
}

TEST(OpCostConv, StridedPaddedConvolution) {
  // [2,3,32,32] * [8,3,3,3], stride 2, padding 1 -> [2,8,16,16] ((32 + 2 - 2 - 1) / 2 + 1 = 16).
  // FLOPs = 2 * (2*8*16*16) * (3*3*3) = 2 * 4096 * 27 = 221,184 (flop_counter).
  const std::vector<Argument> args = convolution_args(T({2, 3, 32, 32}), T({8, 3, 3, 3}), 2, 1);
  const OpCost with_output = estimate_cost(op("aten::convolution", "", args, {T({2, 8, 16, 16})}));
  EXPECT_EQ(with_output.op_class, OpClass::Conv);
  EXPECT_DOUBLE_EQ(with_output.flops, 221184);
  EXPECT_DOUBLE_EQ(with_output.bytes_read, (2 * 3 * 32 * 32 + 8 * 27) * 4.0);  // 25,440
  EXPECT_DOUBLE_EQ(with_output.bytes_written, 4096 * 4.0);
  EXPECT_EQ(with_output.kernels, 1);
  // Without a recorded output the shape comes from stride/padding/dilation.
  const OpCost computed = estimate_cost(op("aten::convolution", "", args));
  EXPECT_DOUBLE_EQ(computed.flops, 221184);
  EXPECT_DOUBLE_EQ(computed.bytes_written, 4096 * 4.0);
}

TEST(OpCostConv, GroupedDilatedConvolutionWithBias) {
  // [1,16,20,20] * [32,4,3,3], groups 4, dilation 2, padding 2 -> [1,32,20,20]
  // ((20 + 4 - 2*2 - 1) / 1 + 1 = 20). FLOPs = 2 * 12,800 * (4*9) = 921,600 (flop_counter).
  std::vector<Argument> args = {tensor("input", T({1, 16, 20, 20})),
                                tensor("weight", T({32, 4, 3, 3})),
                                tensor("bias", T({32})),
                                ints("stride", {1}),
                                ints("padding", {2}),
                                ints("dilation", {2}),
                                integer("groups", 4)};
  const OpCost c = estimate_cost(op("aten::conv2d", "", args));
  EXPECT_DOUBLE_EQ(c.flops, 921600);
  EXPECT_DOUBLE_EQ(c.bytes_written, 32 * 400 * 4.0);
  EXPECT_DOUBLE_EQ(c.bytes_read, (16 * 400 + 32 * 36 + 32) * 4.0);
  EXPECT_EQ(c.kernels, 2);  // the bias is added by a second kernel
}

TEST(OpCostConv, TransposedConvolutionCountsInputPositions) {
  // conv_transpose2d [1,8,5,5] with weight [8,4,3,3], stride 2 -> [1,4,11,11].
  // FLOPs = 2 * elements(input) * elements(weight) / 8 = 2 * 200 * 36 = 14,400 (flop_counter).
  const auto rec =
      op("aten::conv_transpose2d", "input",
         {tensor("input", T({1, 8, 5, 5})), tensor("weight", T({8, 4, 3, 3})), none("bias"),
          ints("stride", {2, 2}), ints("padding", {0, 0}), ints("output_padding", {0, 0}),
          integer("groups", 1), ints("dilation", {1, 1})},
         {T({1, 4, 11, 11})});
  EXPECT_DOUBLE_EQ(estimate_cost(rec).flops, 14400);
}

OpRecord conv_backward(std::vector<int64_t> mask) {
  std::vector<TensorMeta> outs = {T({2, 3, 32, 32}), T({8, 3, 3, 3}), T({8})};
  for (std::size_t i = 0; i < 3; ++i) outs[i].defined = mask[i] != 0;
  return op("aten::convolution_backward", "",
            convolution_backward_args(T({2, 8, 16, 16}), T({2, 3, 32, 32}), T({8, 3, 3, 3}), 2, 1,
                                      std::move(mask)),
            outs);
}

TEST(OpCostConv, BackwardFollowsOutputMask) {
  // Each of grad_input and grad_weight is a 221,184-FLOP convolution (flop_counter gives
  // 442,368 for both); grad_bias sums grad_output's 4,096 elements.
  const OpCost all = estimate_cost(conv_backward({1, 1, 1}));
  EXPECT_DOUBLE_EQ(all.flops, 2 * 221184.0 + 4096);
  EXPECT_EQ(all.kernels, 3);

  const OpCost weight_only = estimate_cost(conv_backward({0, 1, 0}));
  EXPECT_DOUBLE_EQ(weight_only.flops, 221184);
  EXPECT_EQ(weight_only.kernels, 1);
  // Reads grad_output (4,096 * 4) and input (6,144 * 4); writes grad_weight (216 * 4).
  EXPECT_DOUBLE_EQ(weight_only.bytes_read, 16384 + 24576);
  EXPECT_DOUBLE_EQ(weight_only.bytes_written, 864);

  const OpCost input_only = estimate_cost(conv_backward({1, 0, 0}));
  EXPECT_DOUBLE_EQ(input_only.flops, 221184);
  EXPECT_DOUBLE_EQ(input_only.bytes_read, 16384 + 864);  // grad_output + weight
  EXPECT_DOUBLE_EQ(input_only.bytes_written, 24576);
}

TEST(OpCostConv, AFilterNarrowerThanItsStrideReadsPartOfItsInput) {
  // A ResNet shortcut: [2,16,9,9] * [8,16,1,1], stride 2 -> [2,8,5,5]; the taps touch rows and
  // columns 0, 2, ..., 8: 5 x 5 of each 9 x 9 channel.
  const std::vector<Argument> args = convolution_args(T({2, 16, 9, 9}), T({8, 16, 1, 1}), 2, 0);
  const OpCost fwd = estimate_cost(op("aten::convolution", "", args, {T({2, 8, 5, 5})}));
  EXPECT_DOUBLE_EQ(fwd.bytes_read, (2 * 16 * 25 + 8 * 16) * 4.0);
  // The weight gradient reads the same pixels; the data gradient writes the whole input's.
  const std::vector<Argument> bwd_args = convolution_backward_args(
      T({2, 8, 5, 5}), T({2, 16, 9, 9}), T({8, 16, 1, 1}), 2, 0, {1, 1, 0});
  const OpCost bwd = estimate_cost(
      op("aten::convolution_backward", "", bwd_args, {T({2, 16, 9, 9}), T({8, 16, 1, 1})}));
  const double go = 2 * 8 * 25 * 4.0, w = 8 * 16 * 4.0;
  EXPECT_DOUBLE_EQ(bwd.bytes_read, (go + w) + (go + 2 * 16 * 25 * 4.0));
  EXPECT_DOUBLE_EQ(bwd.bytes_written, 2 * 16 * 81 * 4.0 + w);
}

OpRecord flash_forward(bool causal, TensorMeta kv) {
  const TensorMeta q = T({2, 4, 128, 64}, "bfloat16");
  return op("aten::_scaled_dot_product_flash_attention", "",
            {tensor("query", q), tensor("key", kv), tensor("value", kv), real("dropout_p", 0),
             boolean("is_causal", causal), boolean("return_debug_mask", false), none("scale")},
            {T({2, 4, 128, 64}, "bfloat16"), T({2, 4, 128}, "float32")});
}

TEST(OpCostAttention, ForwardCausalHalvesTheWork) {
  // 2 batches * 4 heads * 128 * 128 pairs = 131,072; 2 * pairs * (64 + 64) = 33,554,432
  // (flop_counter, which ignores masks).
  const TensorMeta kv = T({2, 4, 128, 64}, "bfloat16");
  const OpCost full = estimate_cost(flash_forward(false, kv));
  EXPECT_EQ(full.op_class, OpClass::Attention);
  EXPECT_DOUBLE_EQ(full.flops, 33554432);
  EXPECT_EQ(full.precision, Precision::Bf16Tensor);
  EXPECT_DOUBLE_EQ(full.bytes_read, 3 * 65536 * 2.0);              // Q, K, V
  EXPECT_DOUBLE_EQ(full.bytes_written, 65536 * 2.0 + 1024 * 4.0);  // out + logsumexp
  EXPECT_DOUBLE_EQ(estimate_cost(flash_forward(true, kv)).flops, 33554432 / 2.0);
  // Grouped-query attention: one K/V head for four query heads does the same work.
  EXPECT_DOUBLE_EQ(estimate_cost(flash_forward(false, T({2, 1, 128, 64}, "bfloat16"))).flops,
                   33554432);
}

TEST(OpCostAttention, BackwardAndBatchSeqHeadLayout) {
  // _flash_attention_backward takes [batch, seq, heads, dim]. Backward FLOPs =
  // 2 * pairs * (3*64 + 2*64) = 2 * 131,072 * 320 = 83,886,080 (flop_counter for BHSD).
  const TensorMeta x = T({2, 128, 4, 64}, "float16");
  const auto rec = op(
      "aten::_flash_attention_backward", "",
      {tensor("grad_out", x), tensor("query", x), tensor("key", x), tensor("value", x),
       tensor("out", x), tensor("logsumexp", T({2, 4, 128})), none("cum_seq_q"), none("cum_seq_k"),
       integer("max_q", 128), integer("max_k", 128), real("dropout_p", 0),
       boolean("is_causal", true), tensor("rng_state", T({2}, "int64")), tensor("unused", T({0}))},
      {x, x, x});
  const OpCost c = estimate_cost(rec);
  EXPECT_DOUBLE_EQ(c.flops, 83886080 / 2.0);
  EXPECT_EQ(c.precision, Precision::Fp16Tensor);
  EXPECT_EQ(c.kernels, 3);
}

TEST(OpCostAttention, EfficientAttentionCustomMaskIsCausal) {
  const TensorMeta x = T({2, 128, 4, 64}, "bfloat16");
  auto rec = [&](int64_t mask_type) {
    return op("aten::_efficient_attention_forward", "",
              {tensor("query", x), tensor("key", x), tensor("value", x), none("bias"),
               none("cu_seqlens_q"), none("cu_seqlens_k"), none("max_seqlen_q"),
               none("max_seqlen_k"), real("dropout_p", 0), integer("custom_mask_type", mask_type)},
              {x});
  };
  EXPECT_DOUBLE_EQ(estimate_cost(rec(0)).flops, 33554432);
  EXPECT_DOUBLE_EQ(estimate_cost(rec(1)).flops, 33554432 / 2.0);
}

TEST(OpCostAttention, NonSquareCausalKeepsTheTopLeftTriangle) {
  // 128 queries over 512 keys: query i sees keys 0..i, 128^2 / 2 of the 128 x 512 pairs (an
  // eighth); unmasked 2 * 4 * 128 * 512 pairs * 2 * (64 + 64) = 134,217,728 FLOPs.
  const TensorMeta long_kv = T({2, 4, 512, 64}, "bfloat16");
  EXPECT_DOUBLE_EQ(estimate_cost(flash_forward(false, long_kv)).flops, 134217728);
  EXPECT_DOUBLE_EQ(estimate_cost(flash_forward(true, long_kv)).flops, 134217728 / 8.0);
  // More queries than keys (128 over 32): every query past the 32nd sees all 32 keys.
  const TensorMeta short_kv = T({2, 4, 32, 64}, "bfloat16");
  EXPECT_DOUBLE_EQ(estimate_cost(flash_forward(true, short_kv)).flops,
                   estimate_cost(flash_forward(false, short_kv)).flops * (1 - 32 / 256.0));
  // custom_mask_type 2 ends the diagonal in the bottom-right corner: the last query sees all keys.
  const TensorMeta q = T({2, 128, 4, 64}, "bfloat16"), kv = T({2, 512, 4, 64}, "bfloat16");
  const auto efficient = op("aten::_efficient_attention_forward", "",
                            {tensor("query", q), tensor("key", kv), tensor("value", kv),
                             none("bias"), real("dropout_p", 0), integer("custom_mask_type", 2)},
                            {q});
  EXPECT_DOUBLE_EQ(estimate_cost(efficient).flops, 134217728 * (1 - 1 / 8.0));
  EXPECT_DOUBLE_EQ(op_cost::causal_share(128, 512), 0.125);
  EXPECT_DOUBLE_EQ(op_cost::causal_share(512, 512), 0.5);
}

TEST(OpCostAttention, EmptyBatchCostsNothingRatherThanNaN) {
  const OpCost c = estimate_cost(flash_forward(false, T({2, 4, 0, 64}, "bfloat16")));
  EXPECT_DOUBLE_EQ(c.flops, 0);
  const TensorMeta empty = T({2, 4, 0, 64}, "bfloat16");
  const auto rec = op("aten::_scaled_dot_product_efficient_attention", "",
                      {tensor("query", empty), tensor("key", empty), tensor("value", empty),
                       none("attn_bias"), boolean("compute_log_sumexp", false)},
                      {empty});
  const OpCost e = estimate_cost(rec);
  EXPECT_DOUBLE_EQ(e.flops, 0);
  EXPECT_EQ(e.kernels, 0);
}

TEST(OpCostAttention, VariableLengthBatchAssumesEqualSequences) {
  // 3 packed sequences, 300 query and key tokens, 4 heads of 64: taken as 100 tokens each,
  // pairs = 4 * 300 * 300 / 3 = 120,000; FLOPs = 2 * 120,000 * (64 + 64) = 30,720,000.
  const TensorMeta x = T({300, 4, 64}, "bfloat16");
  const TensorMeta offsets = T({4}, "int32");
  const auto rec =
      op("aten::_flash_attention_forward", "",
         {tensor("query", x), tensor("key", x), tensor("value", x), tensor("cum_seq_q", offsets),
          tensor("cum_seq_k", offsets), integer("max_q", 120), integer("max_k", 120),
          real("dropout_p", 0), boolean("is_causal", false), boolean("return_debug_mask", false)},
         {x});
  EXPECT_DOUBLE_EQ(estimate_cost(rec).flops, 30720000);
}

}  // namespace
}  // namespace habitat
