// Convolution memory layout (learned_model.cpp conv_transform_us; evidence and constants in
// python/habitat/learned/conv_layout.py): an NCHW convolution on tensor cores is forecast with
// cuDNN's NCHW <-> NHWC transforms around each pass (a fixed cost plus its input, weight and
// output read and written at a share of the DRAM bandwidth per element width, both from the conv
// model's metadata); the same convolution channels-last, or in FP32 SIMT, without them; an NCHW
// TF32 convolution as the faster of that and its FP32 SIMT pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "cost/test_op_cost_builders.h"
#include "habitat/learned_models.h"
#include "habitat/op_cost.h"
#include "hardware/roofline.h"
#include "test_devices.h"

namespace habitat {
namespace {

using namespace habitat::test;

const std::string kWeights = std::string(HABITAT_SOURCE_DIR) + "/weights";

// The same tensor with channels-last strides (NHWC in memory).
TensorMeta channels_last(TensorMeta t) {
  const int64_t c = t.shape[1], h = t.shape[2], w = t.shape[3];
  t.strides = {h * w * c, 1, w * c, c};
  t.contiguous = false;
  return t;
}

// x [32, 64, 28, 28] * w [128, 64, 3, 3], stride 1, padding 1 -> y [32, 128, 28, 28].
struct Conv {
  TensorMeta x, w, y;
};

Conv conv(const std::string& dtype, bool cl_input, bool cl_weight, int64_t cin = 64) {
  Conv c{T({32, cin, 28, 28}, dtype), T({128, cin, 3, 3}, dtype), T({32, 128, 28, 28}, dtype)};
  if (cl_input) c.x = channels_last(c.x), c.y = channels_last(c.y);
  if (cl_weight) c.w = channels_last(c.w);
  return c;
}

OpRecord forward(const Conv& c) {
  return op("aten::convolution", "",
            {tensor("input", c.x), tensor("weight", c.w), ints("stride", {1, 1}),
             ints("padding", {1, 1})},
            {c.y});
}

OpRecord backward(const Conv& c) {
  return op("aten::convolution_backward", "",
            {tensor("grad_output", c.y), tensor("input", c.x), tensor("weight", c.w),
             ints("stride", {1, 1}), ints("padding", {1, 1}), bools("output_mask", {1, 1, 0})},
            {c.x, c.w});
}

// The transform time of one pass, written out from the rule and the shipped metadata's
// constants (not the engine's code).
double expected_transform_us(const Device& d, double elem_bytes) {
  const double fixed = 3.5, share = elem_bytes == 2 ? 0.53 : 0.89;  // weights/conv.json
  const double elements = 32.0 * 64 * 28 * 28 + 128.0 * 64 * 3 * 3 + 32.0 * 128 * 28 * 28;
  return fixed + 2 * elem_bytes * elements / (share * d.memory_bandwidth_gbs * 1e9) * 1e6;
}

TEST(ConvLayout, PartsSayWhetherCudnnRunsNchw) {
  const auto nchw = learned_parts(forward(conv("bfloat16", false, false)),
                                  estimate_cost(forward(conv("bfloat16", false, false))));
  ASSERT_EQ(nchw.size(), 1u);
  EXPECT_EQ(nchw[0].shape.at("nchw"), 1.0);
  // Channels-last input or weight: cuDNN runs NHWC (PyTorch's cudnn_conv_suggest_memory_format).
  for (const auto& [in, wt] :
       {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    const OpRecord o = forward(conv("bfloat16", in, wt));
    const auto parts = learned_parts(o, estimate_cost(o));
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].shape.at("nchw"), 0.0) << in << wt;
  }
  const OpRecord b = backward(conv("bfloat16", true, true));
  for (const auto& p : learned_parts(b, estimate_cost(b))) EXPECT_EQ(p.shape.at("nchw"), 0.0);
  const OpRecord nb = backward(conv("bfloat16", false, false));
  for (const auto& p : learned_parts(nb, estimate_cost(nb))) EXPECT_EQ(p.shape.at("nchw"), 1.0);
  // Grouped convolutions transform as dense ones do (the H100 collections' grouped NCHW rows).
  OpRecord grouped = forward(conv("bfloat16", false, false));
  grouped.args.push_back(integer("groups", 2));
  EXPECT_EQ(learned_parts(grouped, estimate_cost(grouped))[0].shape.at("nchw"), 1.0);
}

TEST(ConvLayout, Bf16NchwIsChannelsLastPlusTheTransformsOfEachPass) {
  if (!std::filesystem::exists(kWeights + "/conv.safetensors")) GTEST_SKIP() << "no conv weights";
  const LearnedModels models = LearnedModels::load(kWeights);
  for (const char* gpu : {"H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-40GB"}) {
    SCOPED_TRACE(gpu);
    const Device& d = db().find(gpu);
    const double per_pass = expected_transform_us(d, 2.0);
    for (int passes : {1, 2}) {
      auto make = passes == 1 ? forward : backward;
      const OpRecord nchw = make(conv("bfloat16", false, false));
      const OpRecord cl = make(conv("bfloat16", true, true));
      const double t_nchw = *models.predict_us(nchw, estimate_cost(nchw), d);
      const double t_cl = *models.predict_us(cl, estimate_cost(cl), d);
      EXPECT_NEAR(t_nchw - t_cl, passes * per_pass, 1e-6 * t_nchw) << passes;
      EXPECT_GT(t_cl, 0.0);
    }
  }
}

TEST(ConvLayout, Fp32SimtConvolutionsGetNoTransforms) {
  if (!std::filesystem::exists(kWeights + "/conv.safetensors")) GTEST_SKIP() << "no conv weights";
  const LearnedModels models = LearnedModels::load(kWeights);
  const Device& d = db().find("H100-SXM5-80GB");
  OpRecord nchw = forward(conv("float32", false, false));
  OpRecord cl = forward(conv("float32", true, true));
  OpCost cost_nchw = estimate_cost(nchw), cost_cl = estimate_cost(cl);
  cost_nchw.precision = cost_cl.precision = Precision::Fp32Simt;
  EXPECT_DOUBLE_EQ(*models.predict_us(nchw, cost_nchw, d), *models.predict_us(cl, cost_cl, d));
}

TEST(ConvLayout, Tf32NchwIsTheFasterOfTheTensorCorePathAndTheFp32Path) {
  if (!std::filesystem::exists(kWeights + "/conv.safetensors")) GTEST_SKIP() << "no conv weights";
  const LearnedModels models = LearnedModels::load(kWeights);
  for (const char* gpu : {"H100-SXM5-80GB", "A100-SXM4-40GB", "L4"}) {
    SCOPED_TRACE(gpu);
    const Device& d = db().find(gpu);
    for (int64_t cin : {3, 64}) {
      const OpRecord nchw = backward(conv("float32", false, false, cin));
      const OpRecord cl = backward(conv("float32", true, true, cin));
      OpCost tf32 = estimate_cost(nchw), tf32_cl = estimate_cost(cl), simt = estimate_cost(nchw);
      tf32.precision = tf32_cl.precision = Precision::Tf32Tensor;
      simt.precision = Precision::Fp32Simt;
      for (const LearnedPart& part : learned_parts(nchw, tf32)) {
        EXPECT_EQ(learned_part_precision(tf32, part), Precision::Tf32Tensor);
      }
      const double t_simt = *models.predict_us(nchw, simt, d);
      const double t_cl = *models.predict_us(cl, tf32_cl, d);
      const double t_nchw = *models.predict_us(nchw, tf32, d);
      // per pass the faster path: at most each of the two, at least the faster whole op
      EXPECT_LE(t_nchw, t_simt * (1 + 1e-9));
      EXPECT_LE(t_nchw, (t_cl + 2 * expected_transform_us(d, 4.0)) * (1 + 1e-9));
      EXPECT_GT(t_nchw, 0.0);
      // channels-last TF32 stays on tensor cores unless its FP32 SIMT pass is faster
      EXPECT_LE(t_cl, *models.predict_us(cl, simt, d) * (1 + 1e-9));
    }
  }
}

// An NCHW 1x1 stride-1 convolution is a GEMM over the tensors as they lie (MobileNetV3's
// pointwise layers: cuDNN ran 11 of 13 such TF32 forward passes of the H100 collection without
// layout transforms): its forecast is at most that GEMM's, per image, and never more than the
// tensor-core pass between transforms.
TEST(ConvLayout, AnNchwPointwiseConvolutionIsAtMostItsGemm) {
  if (!std::filesystem::exists(kWeights + "/gemm.safetensors")) GTEST_SKIP() << "no weights";
  const LearnedModels models = LearnedModels::load(kWeights);
  const Device& d = db().find("H100-SXM5-80GB");
  const TensorMeta x = T({128, 16, 112, 112}, "bfloat16"), w = T({64, 16, 1, 1}, "bfloat16");
  const TensorMeta y = T({128, 64, 112, 112}, "bfloat16");
  const OpRecord conv1x1 =
      op("aten::convolution", "",
         {tensor("input", x), tensor("weight", w), ints("stride", {1, 1}), ints("padding", {0, 0})},
         {y});
  const LearnedShape gemm{{"b", 128}, {"m", 64}, {"k", 16}, {"n", 112 * 112}, {"elem_bytes", 2}};
  const double t_gemm =
      *models.predict_family_us(LearnedFamily::Gemm, gemm, d, Precision::Bf16Tensor);
  const double t = *models.predict_us(conv1x1, estimate_cost(conv1x1), d);
  const double roofline = roofline_time_us(d, Precision::Bf16Tensor, estimate_cost(conv1x1).flops,
                                           estimate_cost(conv1x1).bytes());
  EXPECT_LE(t, std::max(t_gemm, roofline) * (1 + 1e-9));
}

// cuDNN runs some 16-bit NCHW forward passes on SIMT kernels, no layout transforms, in about the
// FP32 pass's time: such a forward is at most its FP32 twin's forecast; its backward passes and a
// channels-last forward keep the tensor-core forecast (the 1x1 stride-2 shape of the H100's
// 2026-11-26 collection, 392 -> 16 channels at 85 x 85, which ran so in 51 us).
TEST(ConvLayout, ASixteenBitNchwForwardIsAtMostItsFp32Pass) {
  if (!std::filesystem::exists(kWeights + "/conv.safetensors")) GTEST_SKIP() << "no weights";
  const LearnedModels models = LearnedModels::load(kWeights);
  const Device& d = db().find("H100-SXM5-80GB");
  auto strided = [](const std::string& dtype, bool cl) {
    TensorMeta x = T({21, 392, 85, 85}, dtype), w = T({16, 392, 1, 1}, dtype);
    TensorMeta y = T({21, 16, 43, 43}, dtype);
    if (cl) x = channels_last(x), w = channels_last(w), y = channels_last(y);
    return op(
        "aten::convolution", "",
        {tensor("input", x), tensor("weight", w), ints("stride", {2, 2}), ints("padding", {0, 0})},
        {y});
  };
  const OpRecord bf16 = strided("bfloat16", false), fp32 = strided("float32", false);
  const double t_bf16 = *models.predict_us(bf16, estimate_cost(bf16), d);
  const double t_fp32 = *models.predict_us(fp32, estimate_cost(fp32), d);
  EXPECT_LE(t_bf16, t_fp32 * (1 + 1e-9));
  // the tensor-core pass alone: what the channels-last forward is forecast, no transforms
  const OpRecord cl = strided("bfloat16", true);
  const std::vector<LearnedPart> parts = learned_parts(bf16, estimate_cost(bf16));
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].shape.at("spatial_dims"), 2.0);
  const double t_cl = *models.predict_us(cl, estimate_cost(cl), d);
  EXPECT_GE(t_bf16 * (1 + 1e-9), std::min(t_fp32, t_cl));
}

// Its weight gradient runs one GEMM per image into fp32 partials and cuDNN's
// reduce_wgrad_nchw_helper sums them over the batch: at most that batched GEMM plus the reduction
// model's column sum, and more than one GEMM over every image's pixels would take (the shape of
// MobileNetV3's 24 -> 72 expansion at 56 x 56).
TEST(ConvLayout, AnNchwPointwiseWeightGradientSumsItsPerImagePartials) {
  if (!std::filesystem::exists(kWeights + "/reduction.safetensors")) GTEST_SKIP() << "no weights";
  const LearnedModels models = LearnedModels::load(kWeights);
  const Device& d = db().find("H100-SXM5-80GB");
  const TensorMeta x = T({128, 24, 56, 56}, "bfloat16"), w = T({72, 24, 1, 1}, "bfloat16");
  const TensorMeta dy = T({128, 72, 56, 56}, "bfloat16");
  const OpRecord wgrad =
      op("aten::convolution_backward", "",
         {tensor("grad_output", dy), tensor("input", x), tensor("weight", w),
          ints("stride", {1, 1}), ints("padding", {0, 0}), bools("output_mask", {0, 1, 0})},
         {w});
  const auto gemm = [&](double b, double k) {
    const LearnedShape shape{{"b", b}, {"m", 72}, {"k", k}, {"n", 24}, {"elem_bytes", 2}};
    return *models.predict_family_us(LearnedFamily::Gemm, shape, d, Precision::Bf16Tensor);
  };
  const double reduce = *models.predict_family_us(
      LearnedFamily::Reduction,
      {{"rows", 72 * 24}, {"cols", 128}, {"elem_bytes", 4}, {"strided", 1}}, d,
      Precision::Fp32Simt);
  const double t = *models.predict_us(wgrad, estimate_cost(wgrad), d);
  EXPECT_LE(t, (gemm(128, 56 * 56) + reduce) * (1 + 1e-9));
  EXPECT_GT(t, gemm(1, 128 * 56 * 56));
  EXPECT_GT(gemm(128, 56 * 56) + reduce, gemm(1, 128 * 56 * 56));
}

}  // namespace
}  // namespace habitat
