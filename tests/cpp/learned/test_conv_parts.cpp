// A transposed convolution is forecast as the direct convolution whose passes it runs: its
// forward is that convolution's data gradient, its input gradient the forward pass, its
// weight gradient the weight gradient (before, transposed convolutions had no learned parts
// and fell back to the roofline: DCGAN's generator at a third of its measured H100 time).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "cost/test_op_cost_builders.h"
#include "habitat/learned_models.h"
#include "habitat/op_cost.h"

namespace habitat {
namespace {

using namespace habitat::test;

// x [8, 64, 8, 8] -> y [8, 32, 16, 16] by w [64, 32, 4, 4], stride 2, padding 1.
const TensorMeta kX = T({8, 64, 8, 8});
const TensorMeta kW = T({64, 32, 4, 4});
const TensorMeta kY = T({8, 32, 16, 16});

// The shape of an op's one learned part (a failure, and an empty shape, if it has another count).
LearnedShape the_part(const OpRecord& o) {
  const auto parts = learned_parts(o, estimate_cost(o));
  EXPECT_EQ(parts.size(), 1u);
  return parts.size() == 1 ? parts.front().shape : LearnedShape{};
}

OpRecord transposed_forward(const std::string& name, bool flag) {
  std::vector<Argument> args{tensor("input", kX), tensor("weight", kW), ints("stride", {2, 2}),
                             ints("padding", {1, 1})};
  if (flag) args.push_back(boolean("transposed", true));
  return op(name, "", args, {kY});
}

void expect_direct_pass(const LearnedShape& s, double grad) {
  EXPECT_EQ(s.at("batch"), 8);
  EXPECT_EQ(s.at("cin"), 32);   // the direct convolution reads y's 32 channels
  EXPECT_EQ(s.at("cout"), 64);  // and writes x's 64
  EXPECT_EQ(s.at("size"), 16);
  EXPECT_EQ(s.at("kernel"), 4);
  EXPECT_EQ(s.at("stride"), 2);
  EXPECT_EQ(s.at("padding"), 1);
  EXPECT_EQ(s.at("grad"), grad);
}

TEST(ConvParts, TransposedForwardIsTheDirectConvolutionsDataGradient) {
  for (const auto& [name, flag] : {std::pair{std::string("aten::convolution"), true},
                                   std::pair{std::string("aten::conv_transpose2d"), false}}) {
    SCOPED_TRACE(name);
    const OpRecord o = transposed_forward(name, flag);
    const auto parts = learned_parts(o, estimate_cost(o));
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].family, LearnedFamily::Conv);
    expect_direct_pass(parts[0].shape, 1);
  }
}

TEST(ConvParts, TransposedBackwardRunsTheForwardAndWeightGradientPasses) {
  const OpRecord o = op(
      "aten::convolution_backward", "",
      {tensor("grad_output", kY), tensor("input", kX), tensor("weight", kW), ints("stride", {2, 2}),
       ints("padding", {1, 1}), boolean("transposed", true), bools("output_mask", {1, 1, 0})},
      {kX, kW});
  const auto parts = learned_parts(o, estimate_cost(o));
  ASSERT_EQ(parts.size(), 2u);
  expect_direct_pass(parts[0].shape, 0);
  expect_direct_pass(parts[1].shape, 2);
}

// Its work is the direct convolution's: the cost rule counts the same FLOPs.
TEST(ConvParts, TransposedAndDirectPassesCostTheSameFlops) {
  const OpRecord t = transposed_forward("aten::convolution", true);
  const OpRecord direct = op(
      "aten::convolution", "",
      {tensor("input", kY), tensor("weight", kW), ints("stride", {2, 2}), ints("padding", {1, 1})},
      {kX});
  EXPECT_DOUBLE_EQ(estimate_cost(t).flops, estimate_cost(direct).flops);
}

// A grouped convolution is `groups` independent convolutions, which cuDNN runs as one batch: the
// learned shape is the per-group problem over batch x groups images (the same FLOPs).
TEST(ConvParts, AGroupedConvolutionKeepsItsChannelsAndNamesItsGroups) {
  const OpRecord o = op("aten::convolution", "",
                        {tensor("input", T({8, 64, 16, 16})), tensor("weight", T({128, 16, 3, 3})),
                         ints("stride", {1, 1}), ints("padding", {1, 1}), integer("groups", 4)},
                        {T({8, 128, 16, 16})});
  const LearnedShape s = the_part(o);
  EXPECT_EQ(s.at("batch"), 8);
  EXPECT_EQ(s.at("cin"), 64);
  EXPECT_EQ(s.at("cout"), 128);
  EXPECT_EQ(s.at("groups"), 4);
  const double out = 16 * 16;
  EXPECT_DOUBLE_EQ(2.0 * s.at("batch") * out * s.at("cout") * (s.at("cin") / 4) * 9,
                   estimate_cost(o).flops);
}

// A depthwise convolution runs PyTorch's own kernels: no learned part (the roofline serves it),
// and each pass reads its large operands once per kernel row.
TEST(ConvParts, ADepthwiseConvolutionIsLeftToTheRooflineWithItsPassesReReads) {
  const TensorMeta x = T({8, 64, 16, 16}), w = T({64, 1, 3, 3}), y = T({8, 64, 16, 16});
  const OpRecord fwd = op("aten::convolution", "",
                          {tensor("input", x), tensor("weight", w), ints("stride", {1, 1}),
                           ints("padding", {1, 1}), integer("groups", 64)},
                          {y});
  EXPECT_TRUE(learned_parts(fwd, estimate_cost(fwd)).empty());
  const double weight_bytes = 64.0 * 9 * 4;
  EXPECT_DOUBLE_EQ(estimate_cost(fwd).bytes_read, 3 * 8.0 * 64 * 16 * 16 * 4 + weight_bytes);
  auto backward = [&](int64_t groups) {
    return op(
        "aten::convolution_backward", "",
        {tensor("grad_output", y), tensor("input", x), tensor("weight", w), ints("stride", {1, 1}),
         ints("padding", {1, 1}), integer("groups", groups), bools("output_mask", {0, 1, 0})},
        {w});
  };
  const double bytes = 8.0 * 64 * 16 * 16 * 4;  // grad_output, and the input, each
  EXPECT_DOUBLE_EQ(estimate_cost(backward(64)).bytes_read, 3 * 2 * bytes);
  EXPECT_DOUBLE_EQ(estimate_cost(backward(4)).bytes_read, 2 * bytes);  // grouped: once
  EXPECT_TRUE(learned_parts(backward(64), estimate_cost(backward(64))).empty());
}

// The conv model knows square convolutions. A 1-D one (wav2vec 2.0's feature encoder: 512
// channels, filter 3, stride 2) runs in cuDNN as a 2-D convolution of height 1; its square
// stand-in keeps the implicit GEMM: output pixels, filter taps and channels.
double square_output_pixels(const LearnedShape& s) {
  const double out =
      conv_output_size(s.at("size"), s.at("padding"), s.at("kernel"), s.at("stride"));
  return out * out;
}

TEST(ConvParts, AOneDimensionalConvolutionKeepsItsOutputPixelsAndTaps) {
  const TensorMeta x = T({4, 512, 6399}), w = T({512, 512, 3}), y = T({4, 512, 3199});
  const OpRecord fwd = op("aten::convolution", "",
                          {tensor("input", x), tensor("weight", w), ints("stride", {2}),
                           ints("padding", {0}), ints("dilation", {1}), integer("groups", 1)},
                          {y});
  const auto parts = learned_parts(fwd, estimate_cost(fwd));
  ASSERT_EQ(parts.size(), 1u);
  const LearnedShape& s = parts[0].shape;
  EXPECT_EQ(s.at("cin"), 512);
  EXPECT_EQ(s.at("cout"), 512);
  EXPECT_DOUBLE_EQ(s.at("kernel") * s.at("kernel"), 3);
  EXPECT_DOUBLE_EQ(s.at("stride") * s.at("stride"), 2);
  EXPECT_DOUBLE_EQ(s.at("size") * s.at("size"), 6399);
  EXPECT_EQ(square_output_pixels(s), 57 * 57);  // the square nearest 3199 (56.6^2)
  // Its backward, recorded with the same 3-D tensors, gets the same two passes' shapes.
  const OpRecord bwd = op("aten::convolution_backward", "",
                          {tensor("grad_output", y), tensor("input", x), tensor("weight", w),
                           ints("stride", {2}), ints("padding", {0}), ints("dilation", {1}),
                           integer("groups", 1), bools("output_mask", {1, 1, 0})},
                          {x, w});
  const auto passes = learned_parts(bwd, estimate_cost(bwd));
  ASSERT_EQ(passes.size(), 2u);
  EXPECT_EQ(passes[0].shape.at("grad"), 1);
  EXPECT_EQ(passes[1].shape.at("grad"), 2);
  EXPECT_EQ(square_output_pixels(passes[1].shape), square_output_pixels(s));
}

TEST(ConvParts, ARectangularConvolutionIsTheSquareOfItsGeometricMeans) {
  // The CPU records a 1-D convolution's forward as the 2-D one it runs: [4, 1, 1, 32000] by
  // [512, 1, 1, 10], stride (1, 5): 6399 outputs per channel, not the 176^2 of a stride-1 square.
  const OpRecord first =
      op("aten::mkldnn_convolution", "",
         {tensor("self", T({4, 1, 1, 32000})), tensor("weight", T({512, 1, 1, 10})),
          ints("padding", {0, 0}), ints("stride", {1, 5}), ints("dilation", {1, 1}),
          integer("groups", 1)},
         {T({4, 512, 1, 6399})});
  const auto parts = learned_parts(first, estimate_cost(first));
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(square_output_pixels(parts[0].shape), 80 * 80);  // 6399 pixels
  EXPECT_NEAR(parts[0].shape.at("stride"), std::sqrt(5.0), 1e-12);
  // A dilated square convolution (DeepLab's atrous 3x3, dilation and padding 2) keeps its size.
  const OpRecord atrous =
      op("aten::convolution", "",
         {tensor("input", T({2, 64, 33, 33})), tensor("weight", T({64, 64, 3, 3})),
          ints("stride", {1, 1}), ints("padding", {2, 2}), ints("dilation", {2, 2}),
          integer("groups", 1)},
         {T({2, 64, 33, 33})});
  EXPECT_EQ(square_output_pixels(learned_parts(atrous, estimate_cost(atrous))[0].shape), 33 * 33);
  // A 1x1 stride-1 pass stays an exact square of its pixels (the NCHW GEMM path reads them).
  const OpRecord pointwise =
      op("aten::convolution", "",
         {tensor("input", T({4, 256, 1, 400})), tensor("weight", T({128, 256, 1, 1})),
          ints("stride", {1}), ints("padding", {0}), integer("groups", 1)},
         {T({4, 128, 1, 400})});
  const LearnedShape p = learned_parts(pointwise, estimate_cost(pointwise))[0].shape;
  EXPECT_EQ(p.at("size"), 20);
  EXPECT_EQ(p.at("padding"), 0);
  EXPECT_EQ(p.at("kernel"), 1);
}

TEST(ConvParts, AThreeDimensionalConvolutionKeepsItsOutputVoxelsAndTaps) {
  // R3D-18's 3x3x3 convolution on [4, 64, 16, 56, 56]: 16 x 56 x 56 = 50176 output voxels
  // (224^2) and 27 taps, as the square of side 224 and filter sqrt(27).
  const auto conv3d = [](int64_t stride, std::vector<int64_t> out) {
    return op("aten::convolution", "",
              {tensor("input", T({4, 64, 16, 56, 56}, "bfloat16")),
               tensor("weight", T({128, 64, 3, 3, 3}, "bfloat16")),
               ints("stride", {stride, stride, stride}), ints("padding", {1, 1, 1}),
               ints("dilation", {1, 1, 1}), integer("groups", 1)},
              {T(std::move(out), "bfloat16")});
  };
  const LearnedShape s = the_part(conv3d(1, {4, 128, 16, 56, 56}));
  EXPECT_EQ(s.at("batch"), 4);
  EXPECT_EQ(s.at("cin"), 64);
  EXPECT_EQ(s.at("cout"), 128);
  EXPECT_DOUBLE_EQ(s.at("size"), 224);
  EXPECT_DOUBLE_EQ(s.at("kernel") * s.at("kernel"), 27);
  EXPECT_EQ(square_output_pixels(s), 224 * 224);
  EXPECT_EQ(s.at("nchw"), 1);  // NCDHW: cuDNN transforms it as it does NCHW
  // Strided in time and space (2 x 2 x 2): 8 x 28 x 28 = 6272 voxels, the square nearest 79^2.
  const LearnedShape d = the_part(conv3d(2, {4, 128, 8, 28, 28}));
  EXPECT_DOUBLE_EQ(d.at("stride") * d.at("stride"), 8);
  EXPECT_EQ(square_output_pixels(d), 79 * 79);
}

TEST(ConvParts, AChannelsLast3dConvolutionRunsWithoutLayoutTransforms) {
  TensorMeta x = T({2, 32, 8, 16, 16}, "bfloat16");
  x.strides = {32 * 8 * 16 * 16, 1, 16 * 16 * 32, 16 * 32, 32};  // channels_last_3d
  x.contiguous = false;
  const OpRecord fwd = op("aten::convolution", "",
                          {tensor("input", x), tensor("weight", T({32, 32, 3, 3, 3}, "bfloat16")),
                           ints("stride", {1}), ints("padding", {1}), integer("groups", 1)},
                          {T({2, 32, 8, 16, 16}, "bfloat16")});
  EXPECT_EQ(the_part(fwd).at("nchw"), 0);
}

TEST(ConvParts, AThreeDimensionalDepthwiseConvolutionIsLeftToTheRoofline) {
  // X3D's channel-wise 3x3x3 convolutions run PyTorch's DepthwiseConv3d kernels.
  const OpRecord dw =
      op("aten::convolution", "",
         {tensor("input", T({2, 48, 8, 16, 16})), tensor("weight", T({48, 1, 3, 3, 3})),
          ints("stride", {1}), ints("padding", {1}), integer("groups", 48)},
         {T({2, 48, 8, 16, 16})});
  EXPECT_TRUE(learned_parts(dw, estimate_cost(dw)).empty());
}

}  // namespace
}  // namespace habitat
