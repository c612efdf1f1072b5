// A CPU trace forecast for a CUDA GPU: autocast wrappers, optimizer per-tensor ops as foreach,
// host bookkeeping, SDPA's math fallback, complex operands, and the precision switches.
#include <gtest/gtest.h>

#include <filesystem>

#include "cost/test_op_cost_builders.h"
#include "habitat/learned_models.h"
#include "habitat/op_cost.h"
#include "habitat/predictor.h"
#include "hardware/roofline.h"
#include "predict/cuda_paths.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::T;
using test::tensor;

using test::db;

OpRecord make(uint64_t id, std::string name, std::vector<Argument> args,
              std::vector<TensorMeta> outputs, std::optional<uint64_t> parent = std::nullopt) {
  OpRecord op;
  op.id = id;
  op.name = std::move(name);
  op.args = std::move(args);
  op.outputs = std::move(outputs);
  op.parent = parent;
  op.depth = parent ? 1 : 0;
  op.phase = Phase::Forward;
  return op;
}

OpRecord linear(uint64_t id, const std::string& dtype,
                std::optional<uint64_t> parent = std::nullopt) {
  return make(id, "aten::linear",
              {tensor("input", T({4096, 3072}, dtype)), tensor("weight", T({768, 3072}, dtype)),
               tensor("bias", T({768}, dtype))},
              {T({4096, 768}, dtype)}, parent);
}

OpRecord addmm(uint64_t id, const std::string& dtype, uint64_t parent) {
  return make(id, "aten::addmm",
              {tensor("self", T({768}, dtype)), tensor("mat1", T({4096, 3072}, dtype)),
               tensor("mat2", T({3072, 768}, dtype))},
              {T({4096, 768}, dtype)}, parent);
}

// A copy as the CPU records it below op 0: `outer` (id 1) -> `inner` (id 2) -> copy_ (id 3)
// of `src` into `dst`.
std::vector<OpRecord> copy_chain(const std::string& outer, const std::string& inner,
                                 const TensorMeta& src, const TensorMeta& dst) {
  OpRecord a = make(1, outer, {tensor("self", src)}, {dst}, 0);
  a.has_children = true;
  OpRecord b = make(2, inner, {tensor("self", src)}, {dst}, 1);
  b.has_children = true;
  return {a, b, make(3, "aten::copy_", {tensor("self", dst), tensor("src", src)}, {dst}, 2)};
}

double total_us(const Step& step, const std::string& gpu, const TraceOrigin& origin = {}) {
  return Predictor(db()).predict(step, origin, {gpu}).totals[0].total_us;
}

// The step's first op is what CUDA runs for its whole subtree: it stands for its children, which
// forecast nothing on the H100. Returns its own forecast there (us).
double parent_stands_for_children(const Step& step) {
  const OpIndex index_of(step);
  std::vector<char> expected(step.ops.size(), 0);
  expected[0] = 1;
  EXPECT_EQ(cuda_paths::map_cpu_step(step, index_of).parent_wins, expected);
  const Forecast f = Predictor(db()).predict(step, TraceOrigin{}, {"H100"});
  double children = 0;
  for (std::size_t i = 1; i < f.ops.size(); ++i) children += f.ops[i].share[0].time_us;
  EXPECT_DOUBLE_EQ(children, 0.0);
  EXPECT_GT(f.ops[0].share[0].time_us, 0.0);
  return f.ops[0].share[0].time_us;
}

TEST(CudaPaths, AutocastWrapperCountsTheBf16OpItRedispatched) {
  // torch.autocast: aten::linear(fp32) -> [cast of the input, aten::linear(bf16) -> addmm(bf16)].
  OpRecord outer = linear(0, "float32");
  outer.has_children = true;
  OpRecord cast = make(1, "aten::_to_copy", {tensor("self", T({4096, 3072}))},
                       {T({4096, 3072}, "bfloat16")}, 0);
  OpRecord inner = linear(2, "bfloat16", 0);
  inner.has_children = true;
  OpRecord gemm = addmm(3, "bfloat16", 2);
  Step autocast;
  autocast.ops = {outer, cast, inner, gemm};
  Step bf16_alone;
  bf16_alone.ops = {cast, gemm};
  bf16_alone.ops[0].parent.reset();
  bf16_alone.ops[1].parent.reset();
  Step fp32;
  fp32.ops = {linear(0, "float32")};
  const double wrapped = total_us(autocast, "H100");
  EXPECT_DOUBLE_EQ(wrapped, total_us(bf16_alone, "H100"));  // the cast and the bf16 GEMM
  EXPECT_LT(wrapped, total_us(fp32, "H100"));               // not the fp32 estimate
}

TEST(CudaPaths, ConvolutionsFollowCudnnSwitchAndGemmsTheMatmulOne) {
  const OpRecord conv =
      test::op("aten::convolution", "",
               {tensor("input", T({64, 256, 56, 56})), tensor("weight", T({64, 256, 1, 1})),
                test::none("bias"), test::ints("stride", {1, 1}), test::ints("padding", {0, 0}),
                test::ints("dilation", {1, 1}), test::boolean("transposed", false),
                test::ints("output_padding", {0, 0}), test::integer("groups", 1)},
               {T({64, 64, 56, 56})});
  const OpRecord mm = addmm(0, "float32", 0);
  PrecisionFlags defaults;  // torch's: matmul TF32 off, cuDNN TF32 on
  EXPECT_EQ(estimate_cost(conv, defaults).precision, Precision::Tf32Tensor);
  EXPECT_EQ(estimate_cost(mm, defaults).precision, Precision::Fp32Simt);
  PrecisionFlags strict;
  strict.cudnn_allow_tf32 = false;
  EXPECT_EQ(estimate_cost(conv, strict).precision, Precision::Fp32Simt);
  PrecisionFlags high;
  high.float32_matmul_precision = "high";
  EXPECT_EQ(estimate_cost(mm, high).precision, Precision::Tf32Tensor);
  // The old switch-only API keeps its meaning: one flag for all matrix work.
  EXPECT_EQ(estimate_cost(conv, false).precision, Precision::Fp32Simt);
  EXPECT_EQ(estimate_cost(conv, true).precision, Precision::Tf32Tensor);
  // A trace's per-op switches override its origin's.
  OpRecord strict_conv = conv;
  strict_conv.precision = strict;
  EXPECT_EQ(op_precision(strict_conv, TraceOrigin{}), strict);
  EXPECT_EQ(op_precision(conv, TraceOrigin{}), defaults);
}

TEST(CudaPaths, ComplexMatmulIsFourRealOnes) {
  auto mm = [](const std::string& dtype) {
    return test::op(
        "aten::mm", "",
        {tensor("self", T({1024, 1024}, dtype)), tensor("mat2", T({1024, 1024}, dtype))},
        {T({1024, 1024}, dtype)});
  };
  const OpCost real = estimate_cost(mm("float32"));
  const OpCost complex = estimate_cost(mm("complex64"));
  EXPECT_DOUBLE_EQ(complex.flops, 4 * real.flops);
  EXPECT_DOUBLE_EQ(complex.bytes(), 2 * real.bytes());
  EXPECT_EQ(complex.precision, Precision::Fp32Simt);
  EXPECT_EQ(estimate_cost(mm("complex128")).precision, Precision::Fp64);
  Step fp32, c64;
  fp32.ops = {mm("float32")};
  c64.ops = {mm("complex64")};
  EXPECT_GT(total_us(c64, "H100"), 3 * total_us(fp32, "H100"));
}

// torch.optim's per-tensor Adam on the CPU: step += 1 on a 0-dim tensor, .item(), and one
// exp_avg.lerp_ per parameter.
Step per_tensor_optimizer(int params) {
  Step step;
  uint64_t id = 0;
  for (int p = 0; p < params; ++p) {
    OpRecord counter =
        make(id++, "aten::add_", {tensor("self", T({})), tensor("other", T({}))}, {T({})});
    counter.overload = "Tensor";
    OpRecord item = make(id++, "aten::_local_scalar_dense", {tensor("self", T({}))}, {});
    OpRecord lerp =
        make(id++, "aten::lerp_",
             {tensor("self", T({64, 64})), tensor("end", T({64, 64})), test::real("weight", 0.1)},
             {T({64, 64})});
    lerp.overload = "Scalar";
    for (OpRecord* op : {&counter, &item, &lerp}) {
      op->phase = Phase::Optimizer;
      step.ops.push_back(*op);
    }
  }
  return step;
}

TEST(CudaPaths, PerTensorOptimizerOpsAreCostedAsOneForeachLaunch) {
  const Step step = per_tensor_optimizer(8);
  const OpIndex index_of(step);
  const cuda_paths::Mapping m = cuda_paths::map_cpu_step(step, index_of);
  ASSERT_EQ(m.foreach_groups.size(), 1u);
  const auto& group = m.foreach_groups.front();
  EXPECT_EQ(group.op.name, "aten::_foreach_lerp_");
  EXPECT_EQ(group.members.size(), 8u);
  EXPECT_EQ(group.op.args[0].value.tensors.size(), 8u);
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    EXPECT_EQ(m.host_only[i] != 0, step.ops[i].name != "aten::lerp_") << step.ops[i].name;
  }
  // The forecast: the counters and .item() launch nothing; the small lerps share one foreach
  // op's time, less than eight launches of their own.
  const Forecast f = Predictor(db()).predict(step, TraceOrigin{}, {"H100"});
  const OpCost whole = estimate_cost(group.op);
  double lerps = 0;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    if (m.host_only[i]) {
      EXPECT_EQ(f.ops[i].per_target[0].time_us, 0.0);
      EXPECT_EQ(f.ops[i].cost.op_class, OpClass::NoKernel);
    } else {
      lerps += f.ops[i].per_target[0].time_us;
    }
  }
  EXPECT_NEAR(f.totals[0].total_us, lerps, 1e-9);
  Step single;
  single.ops = {step.ops[2]};
  single.ops[0].phase = Phase::Forward;
  EXPECT_LT(f.totals[0].total_us, 8 * total_us(single, "H100"));
  EXPECT_EQ(whole.op_class, OpClass::Optimizer);
  // A GPU origin's trace is what ran: nothing is remapped.
  TraceOrigin gpu;
  gpu.device = "H100-SXM5-80GB";
  const Forecast g = Predictor(db()).predict(step, gpu, {"H100"});
  EXPECT_GT(g.ops[0].per_target[0].time_us, 0.0);
}

// The user's own loop of point-wise ops outside optimizer.step() (an EMA of 32 weights) runs
// one kernel per call on CUDA as on the CPU: it is not folded into a foreach launch, so N
// calls cost N times one (issue 34: N top-level add_ calls were 2 us whatever N).
TEST(CudaPaths, UserLoopsOutsideTheOptimizerAreNotFolded) {
  for (const Phase phase : {Phase::Other, Phase::Forward}) {
    Step step = per_tensor_optimizer(32);
    for (OpRecord& op : step.ops) op.phase = phase;
    const OpIndex index_of(step);
    EXPECT_TRUE(cuda_paths::map_cpu_step(step, index_of).foreach_groups.empty());
    Step one;
    one.ops = {step.ops[2]};
    Step lerps;
    for (const OpRecord& op : step.ops) {
      if (op.name == "aten::lerp_") lerps.ops.push_back(op);
    }
    const double single = total_us(one, "H100");
    EXPECT_NEAR(total_us(lerps, "H100"), 32 * single, 1e-6 * single);
  }
}

TEST(CudaPaths, SdpaMathFallbackIsCostedAsTheFusedKernel) {
  const auto q = T({8, 12, 512, 64});
  OpRecord sdpa =
      make(0, "aten::scaled_dot_product_attention",
           {tensor("query", q), tensor("key", q), tensor("value", q), test::none("attn_mask"),
            test::real("dropout_p", 0.1), test::boolean("is_causal", false)},
           {q});
  sdpa.has_children = true;
  OpRecord math = make(1, "aten::_scaled_dot_product_attention_math",
                       {tensor("query", q), tensor("key", q), tensor("value", q)}, {q}, 0);
  math.has_children = true;
  const auto scores = T({8, 12, 512, 512});
  OpRecord bmm = make(2, "aten::matmul", {tensor("self", q), tensor("other", T({8, 12, 64, 512}))},
                      {scores}, 1);
  OpRecord softmax = make(
      3, "aten::_softmax",
      {tensor("self", scores), test::integer("dim", -1), test::boolean("half_to_float", false)},
      {scores}, 1);
  OpRecord dropout =
      make(4, "aten::native_dropout", {tensor("input", scores), test::real("p", 0.1)},
           {scores, T({8, 12, 512, 512}, "bool")}, 1);
  OpRecord pv = make(5, "aten::matmul", {tensor("self", scores), tensor("other", q)}, {q}, 1);
  Step step;
  step.ops = {sdpa, math, bmm, softmax, dropout, pv};
  Step fused;
  fused.ops = {sdpa};
  fused.ops[0].has_children = false;
  EXPECT_DOUBLE_EQ(total_us(step, "H100"), total_us(fused, "H100"));
}

TEST(CudaPaths, MaskedSdpaIsNotCostedAsFlash) {
  // A bf16 call with a padding mask, math path on the CPU: an A100 runs it on the
  // memory-efficient kernels (flash takes no mask), as the efficient op's own forecast.
  const auto q = T({8, 12, 512, 64}, "bfloat16");
  const auto mask = T({8, 1, 512, 512}, "bfloat16");
  OpRecord sdpa =
      make(0, "aten::scaled_dot_product_attention",
           {tensor("query", q), tensor("key", q), tensor("value", q), tensor("attn_mask", mask),
            test::real("dropout_p", 0.0), test::boolean("is_causal", false)},
           {q});
  sdpa.has_children = true;
  OpRecord math = make(1, "aten::_scaled_dot_product_attention_math",
                       {tensor("query", q), tensor("key", q), tensor("value", q)}, {q}, 0);
  Step step;
  step.ops = {sdpa, math};
  Step efficient;
  efficient.ops = {sdpa};
  efficient.ops[0].name = "aten::_scaled_dot_product_efficient_attention";
  efficient.ops[0].has_children = false;
  Step flash = efficient;
  flash.ops[0].name = "aten::_scaled_dot_product_flash_attention";
  // The backends differ only to the learned attention model (the roofline costs them alike).
  const std::filesystem::path weights = std::filesystem::path(HABITAT_SOURCE_DIR) / "weights";
  if (!std::filesystem::exists(weights / "attention.safetensors")) GTEST_SKIP();
  const LearnedModels models = LearnedModels::load(weights.string());
  const auto us = [&](const Step& s) {
    return Predictor(db(), &models)
        .predict(s, TraceOrigin{}, {"A100-SXM4-80GB"})
        .totals[0]
        .total_us;
  };
  EXPECT_DOUBLE_EQ(us(step), us(efficient));
  EXPECT_NE(us(step), us(flash));
}

}  // namespace
}  // namespace habitat

namespace habitat {
namespace {

TEST(CudaPaths, CpuAttentionMapsToTheBackendTorchPicksOnTheTarget) {
  using cuda_paths::cuda_attention_op;
  EXPECT_EQ(cuda_attention_op("bfloat16", db().find("H100"), false),
            "aten::_scaled_dot_product_cudnn_attention");
  EXPECT_EQ(cuda_attention_op("float16", db().find("A100-SXM4-80GB"), true),
            "aten::_scaled_dot_product_flash_attention_backward");
  EXPECT_EQ(cuda_attention_op("float32", db().find("H100"), false),
            "aten::_scaled_dot_product_efficient_attention");
  EXPECT_EQ(cuda_attention_op("float16", db().find("T4"), false),
            "aten::_scaled_dot_product_efficient_attention");
  // Flash takes no attn_mask: a masked call runs the memory-efficient kernels on an A100; the
  // H100's cuDNN kernels take the mask.
  EXPECT_EQ(cuda_attention_op("bfloat16", db().find("A100-SXM4-80GB"), false, true),
            "aten::_scaled_dot_product_efficient_attention");
  EXPECT_EQ(cuda_attention_op("bfloat16", db().find("H100"), true, true),
            "aten::_scaled_dot_product_cudnn_attention_backward");
  // A CPU flash-attention backward is costed as the target's kernel: one kernel for
  // cuDNN's backward where flash's launches three.
  const auto q = T({8, 12, 512, 64}, "bfloat16");
  OpRecord bwd = make(0, "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                      {tensor("grad_out", q), tensor("query", q), tensor("key", q),
                       tensor("value", q), tensor("out", q), test::boolean("is_causal", true)},
                      {q, q, q});
  bwd.phase = Phase::Backward;
  Step step;
  step.ops = {bwd};
  const Forecast f = Predictor(db()).predict(step, TraceOrigin{}, {"H100"});
  EXPECT_EQ(f.ops[0].cost.kernels, 1);
  EXPECT_EQ(f.ops[0].cost.op_class, OpClass::Attention);
}

}  // namespace
}  // namespace habitat

namespace habitat {
namespace {

OpRecord rnn_layer_op(const std::string& dtype) {
  OpRecord op =
      make(0, "aten::mkldnn_rnn_layer",
           {tensor("input", T({32, 128, 512}, dtype)), tensor("weight0", T({4096, 512}, dtype)),
            tensor("weight1", T({4096, 1024}, dtype)), tensor("weight2", T({4096}, dtype)),
            tensor("weight3", T({4096}, dtype)), tensor("hx_", T({128, 1024}, dtype)),
            tensor("cx_", T({128, 1024}, dtype)), test::boolean("reverse", false),
            test::ints("batch_sizes", {}), test::integer("mode", 2),
            test::integer("hidden_size", 1024), test::integer("num_layers", 1),
            test::boolean("has_biases", true), test::boolean("bidirectional", false),
            test::boolean("batch_first", true), test::boolean("train", true)},
           {T({32, 128, 1024}, dtype), T({128, 1024}, dtype), T({128, 1024}, dtype)});
  return op;
}

TEST(CudaPaths, OneDnnRnnLayerIsCostedAsCudnnsGemmsAndCellKernels) {
  Step step;
  step.ops = {rnn_layer_op("float32")};
  const OpIndex index_of(step);
  const cuda_paths::Mapping m = cuda_paths::map_cpu_step(step, index_of);
  ASSERT_EQ(m.expansions.size(), 1u);
  const auto& parts = m.expansions[0].parts;
  ASSERT_EQ(parts.size(), 5u);
  EXPECT_EQ(parts[0].second, 1.0);   // the input projection of all 32 steps
  EXPECT_EQ(parts[1].second, 32.0);  // one recurrent GEMM per step
  EXPECT_EQ(parts[0].first.args[0].value.tensors[0].shape, (std::vector<int64_t>{32 * 128, 512}));
  EXPECT_EQ(parts[1].first.args[1].value.tensors[0].shape, (std::vector<int64_t>{1024, 4096}));
  const Forecast f = Predictor(db()).predict(step, TraceOrigin{}, {"H100"});
  EXPECT_EQ(f.ops[0].cost.op_class, OpClass::Gemm);
  EXPECT_EQ(f.ops[0].cost.precision, Precision::Tf32Tensor);  // cuDNN's switch, on by default
  // 2 * T * B * 4H * (I + H) FLOPs of GEMMs.
  EXPECT_GE(f.ops[0].cost.flops, 2.0 * 32 * 128 * 4096 * (512 + 1024));
  EXPECT_GT(f.totals[0].total_us, 0.0);
  TraceOrigin strict;
  strict.cudnn_allow_tf32 = false;
  EXPECT_EQ(Predictor(db()).predict(step, strict, {"H100"}).ops[0].cost.precision,
            Precision::Fp32Simt);
}

TEST(CudaPaths, CudnnRnnLayerTakesItsMeasuredFactorOverItsParts) {
  Step step;
  step.ops = {rnn_layer_op("float32")};
  const OpIndex index_of(step);
  const cuda_paths::Expansion e = cuda_paths::map_cpu_step(step, index_of).expansions.at(0);
  // The forward transforms both weight matrices' layout.
  ASSERT_EQ(e.parts.size(), 5u);
  EXPECT_EQ(e.parts[3].first.name, "aten::clone");
  EXPECT_EQ(e.parts[3].first.args[0].value.tensors[0].shape, (std::vector<int64_t>{4096, 512}));
  EXPECT_EQ(e.parts[4].first.args[0].value.tensors[0].shape, (std::vector<int64_t>{4096, 1024}));
  // cuDNN's TF32 layer keeps the device busy longer than its parts' forecasts add up to.
  EXPECT_GT(e.time_scale, 1.0);
  double parts_us = 0;
  for (const auto& [part, count] : e.parts) {
    Step one;
    one.ops = {part};
    parts_us += count * total_us(one, "H100");
  }
  EXPECT_NEAR(total_us(step, "H100"), e.time_scale * parts_us, 1e-9 * parts_us);
  // TF32 off: cuDNN's true FP32 kernels were never measured, so no factor.
  TraceOrigin strict;
  strict.cudnn_allow_tf32 = false;
  EXPECT_EQ(cuda_paths::map_cpu_step(step, index_of, strict).expansions.at(0).time_scale, 1.0);
}

// A ResNet-style batch norm as the CPU records it: batch_norm -> _batch_norm_impl_index ->
// native_batch_norm (whose CPU helpers are children), and its backward.
Step batch_norm_step(const std::string& dtype, bool cudnn_enabled) {
  const TensorMeta x = T({64, 256, 56, 56}, dtype);
  auto args = [&](bool with_switch) {
    std::vector<Argument> a{tensor("input", x),
                            tensor("weight", T({256})),
                            tensor("bias", T({256})),
                            tensor("running_mean", T({256})),
                            tensor("running_var", T({256})),
                            test::boolean("training", true),
                            test::real("momentum", 0.1),
                            test::real("eps", 1e-5)};
    if (with_switch) a.push_back(test::boolean("cudnn_enabled", cudnn_enabled));
    return a;
  };
  const std::vector<TensorMeta> outs{x, T({256}), T({256})};
  OpRecord outer = make(0, "aten::batch_norm", args(true), {x});
  outer.has_children = true;
  OpRecord impl = make(1, "aten::_batch_norm_impl_index", args(true), outs, 0);
  impl.has_children = true;
  OpRecord native = make(2, "aten::native_batch_norm", args(false), outs, 1);
  native.has_children = true;
  OpRecord fill = make(3, "aten::zero_", {tensor("self", T({2, 256}))}, {T({2, 256})}, 2);
  OpRecord bwd = make(
      4, "aten::native_batch_norm_backward",
      {tensor("grad_out", x), tensor("input", x), tensor("weight", T({256})),
       tensor("running_mean", T({256})), tensor("running_var", T({256})),
       tensor("save_mean", T({256})), tensor("save_invstd", T({256})), test::boolean("train", true),
       test::real("eps", 1e-5), test::bools("output_mask", {1, 1, 1})},
      {x, T({256}), T({256})});
  bwd.phase = Phase::Backward;
  Step step;
  step.ops = {outer, impl, native, fill, bwd};
  return step;
}

TEST(CudaPaths, BatchNormRunsCudnnUnlessBf16OrCudnnIsOff) {
  // PyTorch picks cuDNN for float32 (and half with float weights), its native kernels for
  // bfloat16 or with cuDNN disabled (Normalization.cpp, _select_batch_norm_backend).
  auto mapped = [](const Step& step) {
    const OpIndex index_of(step);
    std::vector<std::string> names;
    for (const auto& e : cuda_paths::map_cpu_step(step, index_of).expansions) {
      names.push_back(e.parts.at(0).first.name);
    }
    return names;
  };
  EXPECT_EQ(
      mapped(batch_norm_step("float32", true)),
      (std::vector<std::string>{"aten::cudnn_batch_norm", "aten::cudnn_batch_norm_backward"}));
  EXPECT_TRUE(mapped(batch_norm_step("bfloat16", true)).empty());
  EXPECT_TRUE(mapped(batch_norm_step("float32", false)).empty());
  Step half = batch_norm_step("float16", true);  // half input, float32 weight: cuDNN
  EXPECT_EQ(mapped(half).size(), 2u);

  // Forecast: the float32 step costs cuDNN's one read of x forward (not the native two), and
  // the CPU's helper fill under native_batch_norm is not a CUDA kernel.
  const Forecast f =
      Predictor(db()).predict(batch_norm_step("float32", true), TraceOrigin{}, {"H100"});
  const double x_bytes = 64.0 * 256 * 56 * 56 * 4;
  EXPECT_LT(f.ops[2].cost.bytes_read, 1.01 * x_bytes);
  EXPECT_EQ(f.ops[2].cost.kernels, 1);
  EXPECT_DOUBLE_EQ(f.ops[3].share[0].time_us, 0.0);
  // bfloat16 runs the native kernels: two passes over half the bytes forward, and the
  // backward reads x and dy twice.
  const Forecast b =
      Predictor(db()).predict(batch_norm_step("bfloat16", true), TraceOrigin{}, {"H100"});
  EXPECT_GT(b.ops[2].cost.bytes_read, 0.99 * x_bytes);
  EXPECT_GT(b.ops[4].cost.bytes_read, 1.99 * x_bytes);
}

TEST(CudaPaths, BatchNormWrappersAreTheirLeafNotTheLargerOfTheTwo) {
  // batch_norm and _batch_norm_impl_index cost the same work with their class's roofline; the
  // leaf (cuDNN's op here) is what CUDA runs, so the step's forward is the leaf's time even
  // where the wrappers' own estimates are larger.
  const Step step = batch_norm_step("float32", true);
  const OpIndex index_of(step);
  const auto m = cuda_paths::map_cpu_step(step, index_of);
  EXPECT_EQ(m.children_win, (std::vector<char>{1, 1, 0, 0, 0}));
  const Forecast f = Predictor(db()).predict(step, TraceOrigin{}, {"H100"});
  EXPECT_DOUBLE_EQ(f.ops[0].share[0].time_us, 0.0);
  EXPECT_DOUBLE_EQ(f.ops[1].share[0].time_us, 0.0);
  EXPECT_GT(f.ops[2].share[0].time_us, 0.0);
  EXPECT_DOUBLE_EQ(f.ops[0].per_target[0].time_us, f.ops[2].per_target[0].time_us);
}

TEST(CudaPaths, AMeanIsOneReduceKernelNotTheCpusSumAndDivide) {
  const TensorMeta x = T({4096, 1024});
  OpRecord mean = make(0, "aten::mean", {tensor("self", x), test::ints("dim", {1})}, {T({4096})});
  mean.has_children = true;
  OpRecord sum = make(1, "aten::sum", {tensor("self", x), test::ints("dim", {1})}, {T({4096})}, 0);
  OpRecord div = make(2, "aten::div_", {tensor("self", T({4096}))}, {T({4096})}, 0);
  Step step;
  step.ops = {mean, sum, div};
  parent_stands_for_children(step);
}

TEST(CudaPaths, TrainingDropoutIsOneFusedKernelNotTheCpusDrawScaleAndMultiply) {
  const TensorMeta x = T({16, 512, 512}, "bfloat16");
  OpRecord dropout =
      make(0, "aten::dropout",
           {tensor("input", x), test::real("p", 0.1), test::boolean("train", true)}, {x});
  dropout.has_children = true;
  OpRecord draw = make(1, "aten::bernoulli_", {tensor("self", x), test::real("p", 0.9)}, {x}, 0);
  OpRecord scale = make(2, "aten::div_", {tensor("self", x), test::real("other", 0.9)}, {x}, 0);
  OpRecord mul = make(3, "aten::mul", {tensor("self", x), tensor("other", x)}, {x}, 0);
  Step step;
  step.ops = {dropout, draw, scale, mul};
  parent_stands_for_children(step);
  // native_dropout reads the input and writes the output and a one-byte mask.
  const OpCost cost = estimate_cost(dropout);
  const auto n = static_cast<double>(x.numel());
  EXPECT_DOUBLE_EQ(cost.bytes_read, 2.0 * n);
  EXPECT_DOUBLE_EQ(cost.bytes_written, 3.0 * n);
}

TEST(CudaPaths, AddmmWithABiasVectorIsTheGemmAloneNotTheCpusBiasCopy) {
  // The CPU copies the broadcast bias into the result before its GEMM; CUDA's addmm adds it in
  // cuBLASLt's epilogue. A copy from a stride-0 source is an element-bound loop on CUDA, which
  // must not stand for the GEMM.
  const TensorMeta out = T({8192, 3072}, "bfloat16");
  OpRecord addmm =
      make(0, "aten::addmm",
           {tensor("self", T({3072}, "bfloat16")), tensor("mat1", T({8192, 768}, "bfloat16")),
            tensor("mat2", T({768, 3072}, "bfloat16"))},
           {out});
  addmm.has_children = true;
  TensorMeta bias = T({8192, 3072}, "bfloat16");
  bias.strides = {0, 1};
  bias.contiguous = false;
  OpRecord copy = make(1, "aten::copy_", {tensor("self", out), tensor("src", bias)}, {out}, 0);
  Step step;
  step.ops = {addmm, copy};
  parent_stands_for_children(step);
}

TEST(CudaPaths, OneDnnConvolutionIsCudnnsPassNotItsLayoutReorder) {
  // MobileNetV3-Large's first expansion in bf16 as the CPU records it: oneDNN writes the result
  // channels-last and reorders it to NCHW (contiguous -> clone -> copy_ of 206 MB), a copy CUDA
  // does not run and which must not stand for the pass.
  const TensorMeta x = T({128, 16, 112, 112}, "bfloat16");
  const TensorMeta out = T({128, 64, 112, 112}, "bfloat16");
  TensorMeta nhwc = out;
  nhwc.strides = {64 * 112 * 112, 1, 112 * 64, 64};
  nhwc.contiguous = false;
  OpRecord conv = make(0, "aten::mkldnn_convolution",
                       {tensor("self", x), tensor("weight", T({64, 16, 1, 1}, "bfloat16")),
                        test::ints("padding", {0, 0}), test::ints("stride", {1, 1}),
                        test::ints("dilation", {1, 1}), test::integer("groups", 1)},
                       {out});
  Step alone;
  alone.ops = {conv};
  conv.has_children = true;
  Step step;
  step.ops = {conv};
  for (OpRecord& op : copy_chain("aten::contiguous", "aten::clone", nhwc, out)) {
    step.ops.push_back(std::move(op));
  }
  EXPECT_DOUBLE_EQ(parent_stands_for_children(step), total_us(alone, "H100"));
}

TEST(CudaPaths, AMixedDtypeAddIsOneCastingKernelNotTheCpusCastAndAdd) {
  // T5's residual add under autocast as the CPU records it: the bf16 operand converted into a
  // temporary (to -> _to_copy -> copy_), then the add. CUDA casts inside its one kernel.
  const TensorMeta x = T({16, 512, 512});
  const TensorMeta y = T({16, 512, 512}, "bfloat16");
  OpRecord add = make(0, "aten::add", {tensor("self", x), tensor("other", y)}, {x});
  add.has_children = true;
  Step step;
  step.ops = {add};
  for (OpRecord& op : copy_chain("aten::to", "aten::_to_copy", y, x)) {
    step.ops.push_back(std::move(op));
  }
  parent_stands_for_children(step);
  // An add with another child (a reduction, say) keeps its children.
  OpRecord other = make(4, "aten::sum", {tensor("self", y)}, {T({1})}, 0);
  step.ops.push_back(other);
  const OpIndex index2(step);
  EXPECT_EQ(cuda_paths::map_cpu_step(step, index2).parent_wins[0], 0);
}

TEST(CudaPaths, EmbeddingGradientIsCudasKernelsNotTheCpusZeroFill) {
  // T5's decoder embedding gradient as the CPU records it: the zero fill is a child, the row
  // sums are the op's own loop. CUDA's feature kernel and fill ran 108 us on an H100.
  const TensorMeta grad = T({2048, 512});
  OpRecord backward = make(0, "aten::embedding_dense_backward",
                           {tensor("grad_output", grad), tensor("indices", T({2048}, "int64")),
                            test::integer("num_weights", 32128)},
                           {T({32128, 512})});
  backward.has_children = true;
  OpRecord zeros = make(1, "aten::zeros", {}, {T({32128, 512})}, 0);
  OpRecord fill = make(2, "aten::zero_", {tensor("self", T({32128, 512}))}, {T({32128, 512})}, 0);
  Step step;
  step.ops = {backward, zeros, fill};
  EXPECT_NEAR(parent_stands_for_children(step), 108.0, 0.2 * 108.0);
}

// The backward of one layer as the CPU records it (weight1 = W_ih, weight2 = W_hh, then the
// biases); `input` is the tensor the forward layer read.
OpRecord rnn_layer_backward_op(uint64_t id, const TensorMeta& input) {
  const int64_t in = input.shape[2];
  OpRecord op = make(id, "aten::mkldnn_rnn_layer_backward",
                     {tensor("input", input),
                      tensor("weight1", T({4096, in})),
                      tensor("weight2", T({4096, 1024})),
                      tensor("weight3", T({4096})),
                      tensor("weight4", T({4096})),
                      tensor("hx_", T({128, 1024})),
                      tensor("cx_tmp", T({128, 1024})),
                      tensor("output", T({32, 128, 1024})),
                      tensor("hy_", T({128, 1024})),
                      tensor("cy_", T({128, 1024})),
                      tensor("grad_output", T({32, 128, 1024})),
                      test::none("grad_hy"),
                      test::none("grad_cy"),
                      test::boolean("reverse", false),
                      test::integer("mode", 2),
                      test::integer("hidden_size", 1024),
                      test::integer("num_layers", 1),
                      test::boolean("has_biases", true),
                      test::boolean("train", true),
                      test::boolean("bidirectional", false),
                      test::ints("batch_sizes", {}),
                      test::boolean("batch_first", false),
                      tensor("workspace", T({1000}))},
                     {T({32, 128, in}), T({4096, in}), T({4096, 1024}), T({4096}), T({4096})});
  op.phase = Phase::Backward;
  return op;
}

TEST(CudaPaths, StackedRnnLayersTakeTheirInputGradientStepByStep) {
  // Two stacked layers: layer 2 reads layer 1's output (the same storage). cuDNN computes a
  // stacked layer's input gradient per time step ([128, 4096] x [4096, 1024], 32 times) and
  // the first layer's as one GEMM over the sequence; each layer sums its gate gradients
  // into the bias gradient.
  OpRecord layer1 = rnn_layer_op("float32");
  layer1.outputs[0] = test::on_storage(layer1.outputs[0], 7);
  OpRecord layer2 = rnn_layer_op("float32");
  layer2.id = 1;
  layer2.args[0] = tensor("input", test::on_storage(T({32, 128, 1024}), 7));
  layer2.args[1] = tensor("weight0", T({4096, 1024}));
  Step step;
  step.ops = {layer1, layer2, rnn_layer_backward_op(2, layer2.args[0].value.tensors[0]),
              rnn_layer_backward_op(3, test::on_storage(T({32, 128, 512}), 9))};
  const OpIndex index_of(step);
  const cuda_paths::Mapping m = cuda_paths::map_cpu_step(step, index_of);
  ASSERT_EQ(m.expansions.size(), 4u);
  const auto& stacked = m.expansions[2].parts;
  const auto& first = m.expansions[3].parts;
  ASSERT_EQ(stacked.size(), 6u);
  ASSERT_EQ(first.size(), 6u);
  EXPECT_EQ(stacked[2].second, 32.0);
  EXPECT_EQ(stacked[2].first.args[0].value.tensors[0].shape, (std::vector<int64_t>{128, 4096}));
  EXPECT_EQ(first[2].second, 1.0);
  EXPECT_EQ(first[2].first.args[0].value.tensors[0].shape, (std::vector<int64_t>{32 * 128, 4096}));
  EXPECT_EQ(first[5].first.name, "aten::sum");
  EXPECT_EQ(first[5].first.args[0].value.tensors[0].shape, (std::vector<int64_t>{32 * 128, 4096}));
  EXPECT_EQ(first[5].first.outputs[0].shape, (std::vector<int64_t>{4096}));
  // Same FLOPs either way; the per-step GEMMs cost more (32 launches of a small GEMM).
  const Forecast f = Predictor(db()).predict(step, TraceOrigin{}, {"H100"});
  EXPECT_GT(f.ops[2].cost.kernels, f.ops[3].cost.kernels);
}
TEST(CudaPaths, CrossEntropyOfHalfLogitsRunsInTheirDtypeNotTheCpusFp32) {
  // T5's loss under autocast as the CPU records it: cross_entropy_loss on bf16 logits, their
  // cast to fp32 and the op again in fp32 (CPU autocast's fp32 list), then the fp32 backward ops
  // reading the log-softmax's output. CUDA's autocast has no policy for the op: it runs in bf16.
  const TensorMeta half = T({2048, 32128}, "bfloat16");
  const TensorMeta full = T({2048, 32128});
  const TensorMeta target = T({2048}, "int64");
  const TensorMeta log_probs = test::on_storage(full, 77);
  OpRecord wrapper = make(0, "aten::cross_entropy_loss",
                          {tensor("self", half), tensor("target", target)}, {T({})});
  wrapper.has_children = true;
  OpRecord inner = make(4, "aten::cross_entropy_loss",
                        {tensor("self", full), tensor("target", target)}, {T({})}, 0);
  inner.has_children = true;
  OpRecord log_softmax =
      make(5, "aten::_log_softmax",
           {tensor("self", full), test::integer("dim", 1), test::boolean("half_to_float", false)},
           {log_probs}, 4);
  OpRecord nll = make(6, "aten::nll_loss_forward",
                      {tensor("self", log_probs), tensor("target", target),
                       test::integer("reduction", 1), test::integer("ignore_index", -100)},
                      {T({}), T({})}, 4);
  OpRecord nll_backward = make(7, "aten::nll_loss_backward",
                               {tensor("grad_output", T({})), tensor("self", log_probs),
                                tensor("target", target), test::integer("reduction", 1),
                                test::integer("ignore_index", -100), tensor("total_weight", T({}))},
                               {full});
  nll_backward.phase = Phase::Backward;
  nll_backward.has_children = true;
  OpRecord fill = make(8, "aten::zero_", {tensor("self", full)}, {full}, 7);
  fill.phase = Phase::Backward;
  OpRecord log_softmax_backward =
      make(9, "aten::_log_softmax_backward_data",
           {tensor("grad_output", full), tensor("output", log_probs), test::integer("dim", 1),
            test::text("input_dtype", "float32")},
           {full});
  log_softmax_backward.phase = Phase::Backward;
  Step step;
  step.ops = {wrapper};
  for (OpRecord& op : copy_chain("aten::to", "aten::_to_copy", half, full)) {
    step.ops.push_back(std::move(op));
  }
  for (const OpRecord& op : {inner, log_softmax, nll, nll_backward, fill, log_softmax_backward}) {
    step.ops.push_back(op);
  }
  const OpIndex index_of(step);
  const cuda_paths::Mapping m = cuda_paths::map_cpu_step(step, index_of);
  ASSERT_EQ(m.expansions.size(), 3u);
  // What CUDA runs: the leaves in bf16, the cast and the fp32 ops gone.
  Step cuda;
  for (const auto& e : m.expansions) {
    EXPECT_EQ(m.parent_wins[e.index], 1);
    for (const auto& [part, count] : e.parts) {
      EXPECT_EQ(part.first_tensor()->dtype, "bfloat16") << part.name;
      OpRecord top = part;
      top.parent.reset();
      top.depth = 0;
      top.id = cuda.ops.size();
      cuda.ops.push_back(top);
    }
  }
  ASSERT_EQ(cuda.ops.size(), 4u);
  EXPECT_EQ(cuda.ops[3].args[3].value.text, "bfloat16");  // the backward's input_dtype
  EXPECT_NEAR(total_us(step, "H100"), total_us(cuda, "H100"), 1e-9);
  // Logits already in fp32 (the program called .float()): nothing to map.
  step.ops[0].args[0].value.tensors[0].dtype = "float32";
  const OpIndex index2(step);
  EXPECT_TRUE(cuda_paths::map_cpu_step(step, index2).expansions.empty());
}

}  // namespace
}  // namespace habitat
