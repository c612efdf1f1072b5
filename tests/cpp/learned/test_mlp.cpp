// The MLP runtime, the safetensors reader and the learned models' op mapping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "habitat/learned_models.h"
#include "habitat/op_cost.h"
#include "hardware/roofline.h"
#include "learned/learned_model.h"
#include "learned/mlp.h"

namespace habitat {
namespace {

namespace fs = std::filesystem;

// Writes the safetensors layout by hand: the test must not trust the reader to check itself.
std::string safetensors_bytes(
    const std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>>&
        tensors) {
  std::string header = "{";
  std::string data;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(t.second.data()), t.second.size() * sizeof(float));
    std::string shape;
    for (size_t d = 0; d < t.first.size(); ++d)
      shape += (d ? "," : "") + std::to_string(t.first[d]);
    header += (i ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"F32\",\"shape\":[" +
              shape + "],\"data_offsets\":[" + std::to_string(begin) + "," +
              std::to_string(data.size()) + "]}";
  }
  header += "}";
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// 2 inputs -> 2 hidden (ReLU) -> 1 output.
std::string tiny_net() {
  return safetensors_bytes({
      {"norm.mean", {{2}, {1.0f, 2.0f}}},
      {"norm.std", {{2}, {2.0f, 4.0f}}},
      {"layers.0.weight", {{2, 2}, {1.0f, -1.0f, 0.5f, 2.0f}}},
      {"layers.0.bias", {{2}, {0.0f, -1.0f}}},
      {"layers.1.weight", {{1, 2}, {3.0f, -2.0f}}},
      {"layers.1.bias", {{1}, {0.25f}}},
  });
}

TEST(Mlp, ForwardMatchesHandComputation) {
  const Mlp mlp = Mlp::from_tensors(parse_safetensors(tiny_net(), "tiny"), 2, "tiny");
  ASSERT_EQ(mlp.inputs(), 2);
  // x = (5, 2) -> normalised (2, 0); hidden = relu(2, 1 - 1) = (2, 0); out = 6 + 0.25
  EXPECT_NEAR(mlp.forward({5.0, 2.0}), 6.25, 1e-6);
  // x = (1, 10) -> (0, 2); hidden = relu(-2, 3) = (0, 3); out = -6 + 0.25
  EXPECT_NEAR(mlp.forward({1.0, 10.0}), -5.75, 1e-6);
  EXPECT_THROW(mlp.forward({1.0}), std::invalid_argument);
}

TEST(Mlp, ZeroRunsOfARowAddNothing) {
  // An ensemble is stored block-diagonal (mlp.h): rows with leading or trailing zeros, and a
  // row of zeros, give what the dense sum gives.
  const std::string bytes = safetensors_bytes({
      {"norm.mean", {{2}, {1.0f, 2.0f}}},
      {"norm.std", {{2}, {2.0f, 4.0f}}},
      {"layers.0.weight", {{4, 2}, {1.0f, -1.0f, 0.5f, 2.0f, 0.0f, 0.0f, 0.0f, 3.0f}}},
      {"layers.0.bias", {{4}, {0.0f, -1.0f, 0.5f, 0.0f}}},
      {"layers.1.weight", {{1, 4}, {3.0f, -2.0f, 4.0f, 1.0f}}},
      {"layers.1.bias", {{1}, {0.25f}}},
  });
  const Mlp mlp = Mlp::from_tensors(parse_safetensors(bytes, "blocks"), 2, "blocks");
  // (5, 2) -> (2, 0); hidden relu(2, 0, 0.5, 0); out 6 + 2 + 0.25
  EXPECT_NEAR(mlp.forward({5.0, 2.0}), 8.25, 1e-6);
  // (1, 10) -> (0, 2); hidden relu(-2, 3, 0.5, 6) = (0, 3, 0.5, 6); out -6 + 2 + 6 + 0.25
  EXPECT_NEAR(mlp.forward({1.0, 10.0}), 2.25, 1e-6);
}

TEST(Mlp, RejectsCorruptFiles) {
  std::string bytes = tiny_net();
  EXPECT_THROW(parse_safetensors(bytes.substr(0, 5), "short"), std::runtime_error);
  EXPECT_THROW(parse_safetensors(bytes.substr(0, bytes.size() - 4), "truncated"),
               std::runtime_error);
  std::string bad_header = bytes;
  bad_header[9] = '[';
  EXPECT_THROW(parse_safetensors(bad_header, "header"), std::runtime_error);
  const SafeTensorsFile file = parse_safetensors(bytes, "ok");
  EXPECT_THROW(Mlp::from_tensors(file, 3, "ok"), std::runtime_error);  // no layers.2
  EXPECT_THROW(read_safetensors("/nonexistent/gemm.safetensors"), std::runtime_error);
}

TEST(LearnedModels, EmptyDirectoryGivesNoModel) {
  const fs::path dir = fs::temp_directory_path() / "habitat_learned_empty";
  fs::create_directories(dir);
  EXPECT_EQ(load_learned_models(dir.string()), nullptr);
}

TEST(LearnedModels, CorruptWeightFileNamesTheFile) {
  const fs::path dir = fs::temp_directory_path() / "habitat_learned_corrupt";
  fs::create_directories(dir);
  std::ofstream(dir / "gemm.safetensors") << "not a safetensors file";
  std::ofstream(dir / "gemm.json") << R"({"layers": 2, "e_max": 2.0, "features": []})";
  try {
    load_learned_models(dir.string());
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm"), std::string::npos) << e.what();
  }
}

Device test_device() {
  Device d;
  d.name = "TEST";
  d.sms = 80;
  d.memory_bandwidth_gbs = 900;
  d.l2_mb = 6;
  d.peak_tflops[Precision::Fp32Simt] = 14;
  d.peak_tflops[Precision::Fp16Tensor] = 112;
  return d;
}

TensorMeta tensor(std::vector<int64_t> shape, std::string dtype = "float32") {
  TensorMeta t;
  t.shape = std::move(shape);
  t.dtype = std::move(dtype);
  return t;
}

Argument tensor_arg(const std::string& name, TensorMeta t) {
  Argument a;
  a.name = name;
  a.value.kind = ArgValue::Kind::Tensor;
  a.value.tensors = {std::move(t)};
  return a;
}

Argument scalar_arg(const std::string& name, ArgValue::Kind kind, int64_t value) {
  Argument a;
  a.name = name;
  a.value.kind = kind;
  a.value.ints = {value};
  return a;
}

Argument ints_arg(const std::string& name, std::initializer_list<int64_t> values) {
  Argument a;
  a.name = name;
  a.value.kind = ArgValue::Kind::IntList;
  for (int64_t v : values) a.value.ints.push_back(v);
  return a;
}

TEST(LearnedParts, MapsGemmShapes) {
  OpRecord op;
  op.name = "aten::addmm";
  op.args = {tensor_arg("self", tensor({4096})), tensor_arg("mat1", tensor({512, 1024})),
             tensor_arg("mat2", tensor({1024, 4096}))};
  op.outputs = {tensor({512, 4096})};
  OpCost cost;
  cost.op_class = OpClass::Gemm;
  auto parts = learned_parts(op, cost);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].family, LearnedFamily::Gemm);
  EXPECT_EQ(parts[0].shape.at("m"), 512);
  EXPECT_EQ(parts[0].shape.at("k"), 1024);
  EXPECT_EQ(parts[0].shape.at("n"), 4096);
  EXPECT_EQ(parts[0].shape.at("b"), 1);

  OpRecord lin;
  lin.name = "aten::linear";
  lin.args = {tensor_arg("input", tensor({8, 128, 768}, "bfloat16")),
              tensor_arg("weight", tensor({3072, 768}, "bfloat16"))};
  lin.outputs = {tensor({8, 128, 3072}, "bfloat16")};
  parts = learned_parts(lin, cost);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].shape.at("m"), 1024);
  EXPECT_EQ(parts[0].shape.at("n"), 3072);
  EXPECT_EQ(parts[0].shape.at("elem_bytes"), 2);
}

TEST(LearnedParts, AttentionWithoutItsOwnModelIsTwoBatchedGemms) {
  OpRecord op;
  op.name = "aten::_scaled_dot_product_flash_attention";
  op.args = {tensor_arg("query", tensor({2, 16, 1024, 64}, "bfloat16")),
             tensor_arg("key", tensor({2, 16, 1024, 64}, "bfloat16")),
             tensor_arg("value", tensor({2, 16, 1024, 64}, "bfloat16"))};
  OpCost cost;
  cost.op_class = OpClass::Attention;
  const auto parts = learned_parts(op, cost);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].shape.at("b"), 32);
  EXPECT_EQ(parts[0].shape.at("n"), 1024);
  EXPECT_EQ(parts[1].shape.at("k"), 1024);
}

TEST(LearnedParts, FusedAttentionIsOneAttentionPartWhenThatModelIsLoaded) {
  OpRecord op;
  op.name = "aten::_scaled_dot_product_flash_attention_backward";
  op.args = {tensor_arg("query", tensor({2, 16, 1024, 64}, "bfloat16")),
             tensor_arg("key", tensor({2, 16, 512, 64}, "bfloat16")),
             tensor_arg("value", tensor({2, 16, 512, 64}, "bfloat16"))};
  OpCost cost;
  cost.op_class = OpClass::Attention;
  const auto parts = learned_parts(op, cost, true);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].family, LearnedFamily::Attention);
  EXPECT_EQ(parts[0].shape.at("batch_heads"), 32);
  EXPECT_EQ(parts[0].shape.at("l"), 1024);
  EXPECT_EQ(parts[0].shape.at("s"), 512);
  EXPECT_EQ(parts[0].shape.at("backward"), 1);
  EXPECT_EQ(parts[0].shape.at("elem_bytes"), 2);
  EXPECT_EQ(parts[0].shape.at("backend"), 0);  // flash
  // The fused kernel's library is part of the shape (cuda_paths names a CPU trace's attention
  // after the backend PyTorch picks on the target).
  for (const auto& [name, backend] :
       {std::pair{"aten::_scaled_dot_product_efficient_attention", 1.0},
        std::pair{"aten::_efficient_attention_backward", 1.0},
        std::pair{"aten::_scaled_dot_product_cudnn_attention_backward", 2.0},
        std::pair{"aten::_cudnn_attention_forward", 2.0}}) {
    op.name = name;
    const auto p = learned_parts(op, cost, true);
    ASSERT_EQ(p.size(), 1u) << name;
    EXPECT_EQ(p[0].shape.at("backend"), backend) << name;
  }
  // The unfused math path stays two GEMMs and a softmax.
  op.name = "aten::_scaled_dot_product_attention_math";
  EXPECT_EQ(learned_parts(op, cost, true).size(), 3u);
}

TEST(LearnedParts, KernelEntryPointsReadTheirSequenceBeforeTheirHeads) {
  // _efficient_attention_* and _flash_attention_* take [batch, seq, heads, dim] (SDPA
  // transposes before calling them): the same problem as SDPA's [batch, heads, seq, dim].
  // GPT-2 small's attention: 8 x 12 heads, 512 tokens; a causal mask_type counts as causal.
  OpRecord sdpa;
  sdpa.name = "aten::_scaled_dot_product_efficient_attention";
  for (const char* name : {"query", "key", "value"}) {
    sdpa.args.push_back(tensor_arg(name, tensor({8, 12, 512, 64})));
  }
  sdpa.args.push_back(scalar_arg("is_causal", ArgValue::Kind::Bool, 1));
  OpRecord kernel;
  kernel.name = "aten::_efficient_attention_forward";
  for (const char* name : {"query", "key", "value"}) {
    kernel.args.push_back(tensor_arg(name, tensor({8, 512, 12, 64})));
  }
  kernel.args.push_back(scalar_arg("custom_mask_type", ArgValue::Kind::Int, 1));
  OpCost cost;
  cost.op_class = OpClass::Attention;
  const auto a = learned_parts(sdpa, cost, true);
  const auto b = learned_parts(kernel, cost, true);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].shape, a[0].shape);
  EXPECT_EQ(b[0].shape.at("batch_heads"), 96);
  EXPECT_EQ(b[0].shape.at("l"), 512);
  EXPECT_EQ(b[0].shape.at("causal"), 1);
  EXPECT_EQ(estimate_cost(kernel).flops, estimate_cost(sdpa).flops);
}

TEST(LearnedParts, NormAndSoftmaxBackwardsAreTheirOwnProblemsNotScaledForwards) {
  OpRecord ln;
  ln.name = "aten::native_layer_norm_backward";
  ln.args = {tensor_arg("grad_out", tensor({8, 512, 768})),
             tensor_arg("input", tensor({8, 512, 768})), ints_arg("normalized_shape", {768})};
  OpCost cost;
  cost.op_class = OpClass::Norm;
  auto parts = learned_parts(ln, cost);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].family, LearnedFamily::LayerNorm);
  EXPECT_EQ(parts[0].shape.at("backward"), 1);
  EXPECT_EQ(parts[0].shape.at("rows"), 4096);
  EXPECT_EQ(parts[0].scale, 1.0);
  ln.name = "aten::native_layer_norm";
  EXPECT_EQ(learned_parts(ln, cost)[0].shape.at("backward"), 0);

  OpRecord sm;
  sm.name = "aten::_softmax_backward_data";
  sm.args = {tensor_arg("grad_output", tensor({64, 1024})),
             tensor_arg("output", tensor({64, 1024})), scalar_arg("dim", ArgValue::Kind::Int, -1)};
  cost.op_class = OpClass::Softmax;
  parts = learned_parts(sm, cost);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].shape.at("backward"), 1);
  EXPECT_EQ(parts[0].shape.at("log"), 0);
  EXPECT_EQ(parts[0].scale, 1.0);
  // The features see it, and the backward's roofline counts its third tensor, and CUDA's mul of
  // g and y before it (three more passes); the log-softmax backward is the one kernel.
  const Device d = test_device();
  const auto roofline = [&](const LearnedShape& s) {
    return compute_learned_features(LearnedFamily::Softmax, s, d, Precision::Fp32Simt).roofline_us;
  };
  const auto bwd = parts[0].shape;
  LearnedShape f = bwd;
  f["backward"] = 0;
  EXPECT_NEAR(roofline(bwd) / roofline(f), 3.0, 1e-9);
  sm.name = "aten::_log_softmax_backward_data";
  const auto log_bwd = learned_parts(sm, cost)[0].shape;
  EXPECT_EQ(log_bwd.at("log"), 1);
  EXPECT_NEAR(roofline(log_bwd) / roofline(f), 1.5, 1e-9);
}

TEST(LearnedParts, SumsAndMeansAreRowsOfColsReducedAlongOrAcrossTheInnerDim) {
  OpRecord sum;
  sum.name = "aten::sum";
  sum.args = {tensor_arg("self", tensor({4096, 1024})), ints_arg("dim", {0})};
  sum.outputs = {tensor({1024})};
  OpCost cost;
  cost.op_class = OpClass::Reduction;
  auto parts = learned_parts(sum, cost);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].family, LearnedFamily::Reduction);
  EXPECT_EQ(parts[0].shape.at("rows"), 1024);  // a bias gradient: a column sum
  EXPECT_EQ(parts[0].shape.at("cols"), 4096);
  EXPECT_EQ(parts[0].shape.at("strided"), 1);
  sum.args[1] = ints_arg("dim", {-1});
  sum.outputs = {tensor({4096})};
  parts = learned_parts(sum, cost);
  EXPECT_EQ(parts[0].shape.at("rows"), 4096);
  EXPECT_EQ(parts[0].shape.at("strided"), 0);
  sum.args.pop_back();  // the whole tensor
  sum.outputs = {tensor({})};
  EXPECT_EQ(learned_parts(sum, cost)[0].shape.at("rows"), 1);
  // Reductions of other kernels (an arg-max, a variance) take the measured roofline.
  sum.name = "aten::var";
  EXPECT_TRUE(learned_parts(sum, cost).empty());
}

TEST(LearnedParts, TrainingBatchNormIsPerChannelStatisticsInferenceIsNot) {
  TensorMeta x = tensor({32, 64, 28, 28}, "bfloat16");
  x.strides = {64 * 28 * 28, 1, 28 * 64, 64};
  x.contiguous = false;
  OpRecord bn;
  bn.name = "aten::cudnn_batch_norm";
  bn.args = {tensor_arg("input", x), scalar_arg("training", ArgValue::Kind::Bool, 1)};
  OpCost cost;
  cost.op_class = OpClass::Norm;
  auto parts = learned_parts(bn, cost);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].family, LearnedFamily::BatchNorm);
  EXPECT_EQ(parts[0].shape.at("count"), 32 * 28 * 28);
  EXPECT_EQ(parts[0].shape.at("channels"), 64);
  EXPECT_EQ(parts[0].shape.at("elem_bytes"), 2);
  EXPECT_EQ(parts[0].shape.at("channels_last"), 1);
  EXPECT_EQ(parts[0].shape.at("backward"), 0);
  bn.args[1] = scalar_arg("training", ArgValue::Kind::Bool, 0);
  EXPECT_TRUE(learned_parts(bn, cost).empty());
  bn.name = "aten::native_batch_norm_backward";
  bn.args = {tensor_arg("input", x), scalar_arg("train", ArgValue::Kind::Bool, 1)};
  EXPECT_EQ(learned_parts(bn, cost).at(0).shape.at("backward"), 1);
  bn.name = "aten::_batch_norm_impl_index";  // a wrapper: its leaf is costed
  EXPECT_TRUE(learned_parts(bn, cost).empty());
}

TEST(LearnedParts, UnmodelledClassesGiveNothing) {
  OpRecord op;
  op.name = "aten::embedding";
  OpCost cost;
  cost.op_class = OpClass::Embedding;
  EXPECT_TRUE(learned_parts(op, cost).empty());
}

TEST(LearnedFeatures, NamesMatchValues) {
  const Device d = test_device();
  const LearnedShape gemm{{"b", 1}, {"m", 512}, {"n", 512}, {"k", 512}, {"elem_bytes", 4}};
  const auto f = compute_learned_features(LearnedFamily::Gemm, gemm, d, Precision::Fp32Simt);
  EXPECT_EQ(f.values.size(), feature_names(LearnedFamily::Gemm).size());
  // The roofline time is the engine's roofline for the same FLOPs and bytes.
  const double flops = 2.0 * 512 * 512 * 512, bytes = 4.0 * 3 * 512 * 512;
  EXPECT_NEAR(f.roofline_us, roofline_time_us(d, Precision::Fp32Simt, flops, bytes),
              1e-9 * f.roofline_us);
  EXPECT_THROW(compute_learned_features(LearnedFamily::Gemm, {{"b", 1}}, d, Precision::Fp32Simt),
               std::invalid_argument);
}

// The committed weights load, and forecasts stay above the roofline / e_max bound.
TEST(LearnedModels, CommittedWeightsPredictAboveTheRoofline) {
  const std::string dir = std::string(HABITAT_SOURCE_DIR) + "/weights";
  if (!fs::exists(fs::path(dir) / "gemm.safetensors")) GTEST_SKIP() << "weights not trained yet";
  const LearnedModels models = LearnedModels::load(dir);
  ASSERT_TRUE(models.has(LearnedFamily::Gemm));
  const Device d = test_device();
  for (double size : {64.0, 512.0, 4096.0}) {
    const LearnedShape s{{"b", 1}, {"m", size}, {"n", size}, {"k", size}, {"elem_bytes", 4}};
    const auto t = models.predict_family_us(LearnedFamily::Gemm, s, d, Precision::Fp32Simt);
    ASSERT_TRUE(t.has_value());
    const auto f = compute_learned_features(LearnedFamily::Gemm, s, d, Precision::Fp32Simt);
    EXPECT_GE(*t, f.roofline_us / 2.0 * 0.999);
  }
  // Bigger GEMMs take longer.
  const auto small = models.predict_family_us(
      LearnedFamily::Gemm, {{"b", 1}, {"m", 1024}, {"n", 1024}, {"k", 1024}, {"elem_bytes", 4}}, d,
      Precision::Fp32Simt);
  const auto big = models.predict_family_us(
      LearnedFamily::Gemm, {{"b", 1}, {"m", 8192}, {"n", 8192}, {"k", 8192}, {"elem_bytes", 4}}, d,
      Precision::Fp32Simt);
  EXPECT_GT(*big, 10 * *small);
}

// Models of device time carry a launch floor: a tiny element-wise op is forecast at a few us, not
// at the 25-60 us per-call floor of the harness that measured NeuSight's data.
TEST(LearnedModels, CommittedElementwiseModelForecastsTinyOpsAtDeviceTime) {
  const std::string dir = std::string(HABITAT_SOURCE_DIR) + "/weights";
  std::ifstream meta_file(fs::path(dir) / "elementwise.json");
  if (!meta_file) GTEST_SKIP() << "weights not trained yet";
  const double floor_us = nlohmann::json::parse(meta_file).value("launch_floor_us", 0.0);
  if (floor_us <= 0) GTEST_SKIP() << "elementwise weights predate the launch floor";
  const LearnedModels models = LearnedModels::load(dir);
  const Device d = test_device();
  auto add = [&](double n) {
    const LearnedShape s{{"n", n}, {"inputs", 2}, {"transcendental", 0}, {"elem_bytes", 4}};
    return *models.predict_family_us(LearnedFamily::Elementwise, s, d, Precision::Fp32Simt);
  };
  // a few microseconds of device time, not a harness's tens
  EXPECT_GE(add(1000), floor_us);
  EXPECT_LT(add(1000), 5.0);
  EXPECT_GT(add(1e8), 100 * floor_us);
}

}  // namespace
}  // namespace habitat
