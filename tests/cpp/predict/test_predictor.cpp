#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cost/test_op_cost_builders.h"
#include "habitat/learned_models.h"
#include "habitat/predictor.h"
#include "habitat/trace.h"
#include "habitat/wave_scaling.h"
#include "hardware/roofline.h"
#include "predict/shape_efficiency.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::T;
using test::tensor;

using test::db;

OpRecord mm(uint64_t id, int64_t m, int64_t k, int64_t n) {
  OpRecord op;
  op.id = id;
  op.name = "aten::mm";
  op.args = {tensor("self", T({m, k})), tensor("mat2", T({k, n}))};
  op.outputs = {T({m, n})};
  op.phase = Phase::Forward;
  return op;
}

OpRecord relu(uint64_t id, int64_t n) {
  OpRecord op;
  op.id = id;
  op.name = "aten::relu";
  op.args = {tensor("self", T({n}))};
  op.outputs = {T({n})};
  op.phase = Phase::Backward;
  return op;
}

double shape_estimate(const OpRecord& op, const std::string& gpu) {
  return roofline_estimate_us(estimate_cost(op), db().find(gpu));
}

TEST(Predictor, ShapeBasedLeafOpsUseTheRooflineAndSumByPhase) {
  Step step;
  step.ops = {mm(0, 1024, 1024, 1024), relu(1, 1 << 20)};
  const Predictor predictor(db());
  const Forecast f = predictor.predict(step, TraceOrigin{}, {"a100", "H100"});
  ASSERT_EQ(f.targets, (std::vector<std::string>{"A100-SXM4-80GB", "H100-SXM5-80GB"}));
  for (std::size_t t = 0; t < 2; ++t) {
    const double gemm = shape_estimate(step.ops[0], f.targets[t]);
    const double pointwise = shape_estimate(step.ops[1], f.targets[t]);
    EXPECT_EQ(f.ops[0].per_target[t].method, Method::Roofline);
    EXPECT_DOUBLE_EQ(f.ops[0].per_target[t].time_us, gemm);
    EXPECT_DOUBLE_EQ(f.totals[t].total_us, gemm + pointwise);
    EXPECT_DOUBLE_EQ(f.totals[t].phase_us.at(Phase::Forward), gemm);
    EXPECT_DOUBLE_EQ(f.totals[t].phase_us.at(Phase::Backward), pointwise);
    EXPECT_EQ(f.totals[t].method_ops.at(Method::Roofline), 2);
  }
  // 2*1024^3 FLOPs at fp32: the H100's SIMT peak is above the A100's, so it must be faster.
  EXPECT_LT(f.totals[1].total_us, f.totals[0].total_us);
}

TEST(Predictor, ShapeBasedCompositeCountsItsWorkOnce) {
  // aten::linear decomposes into t (a view) and addmm: the same GEMM, counted once.
  OpRecord linear;
  linear.id = 0;
  linear.name = "aten::linear";
  linear.args = {tensor("input", T({512, 256})), tensor("weight", T({128, 256})),
                 tensor("bias", T({128}))};
  linear.outputs = {T({512, 128})};
  linear.has_children = true;
  OpRecord t;
  t.id = 1;
  t.parent = 0;
  t.depth = 1;
  t.name = "aten::t";
  t.args = {tensor("self", T({128, 256}))};
  t.outputs = {T({256, 128})};
  OpRecord addmm;
  addmm.id = 2;
  addmm.parent = 0;
  addmm.depth = 1;
  addmm.name = "aten::addmm";
  addmm.args = {tensor("self", T({128})), tensor("mat1", T({512, 256})),
                tensor("mat2", T({256, 128}))};
  addmm.outputs = {T({512, 128})};
  Step step;
  step.ops = {linear, t, addmm};
  const Forecast f = Predictor(db()).predict(step, TraceOrigin{}, {"L4"});
  const double own = shape_estimate(linear, "L4");
  const double children = shape_estimate(addmm, "L4");
  EXPECT_EQ(f.ops[1].per_target[0].method, Method::NoKernel);
  EXPECT_DOUBLE_EQ(f.ops[0].per_target[0].time_us, std::max(own, children));
  EXPECT_DOUBLE_EQ(f.totals[0].total_us, std::max(own, children));
  int counted = 0;
  for (const auto& [method, n] : f.totals[0].method_ops) counted += n;
  EXPECT_EQ(counted, own > children ? 1 : 2);  // the parent alone, or its two children
}

TEST(Predictor, UnknownOpsAreFlaggedAndForecastFromTheirBytes) {
  OpRecord op;
  op.id = 0;
  op.name = "aten::definitely_not_an_op";
  op.args = {tensor("self", T({1 << 20}))};
  op.outputs = {T({1 << 20})};
  Step step;
  step.ops = {op};
  const Forecast f = Predictor(db()).predict(step, TraceOrigin{}, {"T4"});
  EXPECT_EQ(f.ops[0].per_target[0].method, Method::Fallback);
  // 8 MiB through 320 GB/s at the fallback efficiency.
  const double expected = 8.0 * (1 << 20) / 320e9 * 1e6 / roofline_efficiency(OpClass::Unknown);
  EXPECT_NEAR(f.ops[0].per_target[0].time_us, expected, 1e-9);
  EXPECT_EQ(f.unsupported, (std::vector<std::string>{"aten::definitely_not_an_op"}));
}

TEST(Predictor, RuntimeBasedWaveScalesMeasuredKernelsFromAGpuOrigin) {
  OpRecord op = relu(0, 1 << 24);
  KernelLaunch k;
  k.name = "vectorized_elementwise_kernel";
  k.grid[0] = 65536;
  k.block[0] = 128;
  k.registers_per_thread = 16;
  k.duration_us = 100.0;
  op.kernels = {k};
  Step step;
  step.ops = {op};
  TraceOrigin origin;
  origin.device = "NVIDIA H100 80GB HBM3";
  const Forecast f = Predictor(db()).predict(step, origin, {"A100"});
  const OpCost cost = estimate_cost(op);
  const WaveScaler scaler(db().find("H100"), db().find("A100"));
  const double expected = scaler.scale(k, cost.arithmetic_intensity(), cost.precision).time_us;
  EXPECT_EQ(f.ops[0].per_target[0].method, Method::WaveScaling);
  EXPECT_DOUBLE_EQ(f.ops[0].per_target[0].time_us, expected);
  // A memory-bound kernel slows down by about the bandwidth ratio going to the A100.
  EXPECT_GT(expected, 100.0);
}

// AdamW's step counters (capturable=False) are CPU scalars: in a step traced on a GPU their
// add_ and .item() run on the host. A GPU tensor's op without measured kernels (CUPTI off) is
// still forecast from its shape.
TEST(Predictor, AnOpOnCpuTensorsInAGpuTraceLaunchesNothing) {
  OpRecord host = relu(0, 1);
  host.args[0].value.tensors[0].device = "cpu";
  host.outputs[0].device = "cpu";
  Step step;
  step.ops = {host, relu(1, 1 << 20)};
  TraceOrigin origin;
  origin.device = "H100";
  const Forecast f = Predictor(db()).predict(step, origin, {"A100"});
  EXPECT_EQ(f.ops[0].per_target[0].method, Method::NoKernel);
  EXPECT_EQ(f.ops[0].per_target[0].time_us, 0.0);
  EXPECT_NE(f.ops[1].per_target[0].method, Method::NoKernel);
  EXPECT_GT(f.ops[1].per_target[0].time_us, 0.0);
  // traced on the CPU, the same op stands for the CUDA op the GPU would run
  const Forecast cpu = Predictor(db()).predict(step, TraceOrigin{}, {"A100"});
  EXPECT_GT(cpu.ops[0].per_target[0].time_us, 0.0);
}

TEST(Predictor, RuntimeBasedGemmScalesByTheModelRatioAndAddsChildKernels) {
  OpRecord parent = mm(0, 4096, 4096, 4096);
  parent.has_children = true;
  KernelLaunch gemm;
  gemm.duration_us = 500.0;
  gemm.grid[0] = 1024;
  gemm.block[0] = 256;
  parent.kernels = {gemm};
  OpRecord child = relu(1, 1 << 20);
  child.parent = 0;
  child.depth = 1;
  KernelLaunch pointwise;
  pointwise.duration_us = 10.0;
  pointwise.grid[0] = 8192;
  pointwise.block[0] = 128;
  child.kernels = {pointwise};
  Step step;
  step.ops = {parent, child};
  TraceOrigin origin;
  origin.device = "H100";
  const Forecast f = Predictor(db()).predict(step, origin, {"L4"});
  const OpCost cost = estimate_cost(parent);
  const double ratio =
      roofline_estimate_us(cost, db().find("L4")) / roofline_estimate_us(cost, db().find("H100"));
  EXPECT_EQ(f.ops[0].per_target[0].method, Method::RooflineRatio);
  const double child_us = f.ops[1].per_target[0].time_us;
  EXPECT_DOUBLE_EQ(f.ops[0].per_target[0].time_us, 500.0 * ratio + child_us);
  EXPECT_DOUBLE_EQ(f.totals[0].total_us, 500.0 * ratio + child_us);
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_identical(const Forecast& a, const Forecast& b) {
  ASSERT_EQ(a.ops.size(), b.ops.size());
  ASSERT_EQ(a.targets, b.targets);
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const OpForecast& x = a.ops[i];
    const OpForecast& y = b.ops[i];
    EXPECT_EQ(x.op_id, y.op_id);
    EXPECT_EQ(x.cost.op_class, y.cost.op_class) << i;
    EXPECT_TRUE(same_bits(x.cost.flops, y.cost.flops)) << i;
    EXPECT_TRUE(same_bits(x.cost.bytes(), y.cost.bytes())) << i;
    for (std::size_t t = 0; t < a.targets.size(); ++t) {
      EXPECT_TRUE(same_bits(x.per_target[t].time_us, y.per_target[t].time_us)) << i << " " << t;
      EXPECT_EQ(x.per_target[t].method, y.per_target[t].method);
      EXPECT_TRUE(same_bits(x.share[t].time_us, y.share[t].time_us)) << i << " " << t;
      EXPECT_EQ(x.share[t].method, y.share[t].method);
    }
  }
  for (std::size_t t = 0; t < a.targets.size(); ++t) {
    EXPECT_TRUE(same_bits(a.totals[t].total_us, b.totals[t].total_us));
    EXPECT_EQ(a.totals[t].method_ops, b.totals[t].method_ops);
  }
  EXPECT_EQ(a.unsupported, b.unsupported);
}

TEST(Predictor, MemoisedPredictionsAreBitIdentical) {
  Trace trace = load_trace(HABITAT_SOURCE_DIR "/tests/python/fixtures/golden_trace.json");
  const std::vector<std::string> targets = {"A100", "H100", "L4", "T4", "V100"};
  std::unique_ptr<LearnedModels> models;
  const std::string dir = std::string(HABITAT_SOURCE_DIR) + "/weights";
  if (std::filesystem::exists(std::filesystem::path(dir) / "gemm.safetensors")) {
    models = std::make_unique<LearnedModels>(LearnedModels::load(dir));
  }
  for (const ShapeModel* model :
       {static_cast<const ShapeModel*>(nullptr), static_cast<const ShapeModel*>(models.get())}) {
    Predictor memoised(db(), model);
    Predictor plain(db(), model);
    plain.set_memoize(false);
    for (const Step& step : trace.steps) {
      expect_identical(memoised.predict(step, trace.origin, targets),
                       plain.predict(step, trace.origin, targets));
    }
    // A GPU origin with measured kernels on every leaf op, some repeated, some not.
    TraceOrigin gpu = trace.origin;
    gpu.device = "H100";
    Step step = trace.steps[0];
    for (std::size_t i = 0; i < step.ops.size(); ++i) {
      if (step.ops[i].has_children) continue;
      KernelLaunch k;
      k.name = "kernel";
      k.grid[0] = 64 + static_cast<int>(i % 3);
      k.block[0] = 128;
      k.duration_us = 5.0 + static_cast<double>(i % 4);
      step.ops[i].kernels = {k};
    }
    expect_identical(memoised.predict(step, gpu, targets), plain.predict(step, gpu, targets));
  }
}

TEST(Predictor, MemoKeptAcrossStepsAndTargetsIsBitIdentical) {
  Trace trace = load_trace(HABITAT_SOURCE_DIR "/tests/python/fixtures/golden_trace.json");
  std::unique_ptr<LearnedModels> models;
  const std::string dir = std::string(HABITAT_SOURCE_DIR) + "/weights";
  if (std::filesystem::exists(std::filesystem::path(dir) / "gemm.safetensors")) {
    models = std::make_unique<LearnedModels>(LearnedModels::load(dir));
  }
  TraceOrigin gpu = trace.origin;
  gpu.device = "H100";
  Step step = trace.steps[0];
  for (std::size_t i = 0; i < step.ops.size(); ++i) {  // runtime-based: origin side memoised
    if (step.ops[i].has_children) continue;
    KernelLaunch k;
    k.name = "kernel";
    k.grid[0] = 64 + static_cast<int>(i % 3);
    k.block[0] = 128;
    k.duration_us = 5.0 + static_cast<double>(i % 4);
    step.ops[i].kernels = {k};
  }
  PredictionMemo memo;  // one per origin: the caller's rule
  Predictor kept(db(), models.get());
  kept.set_memo(&memo);
  Predictor plain(db(), models.get());
  plain.set_memoize(false);
  // Steps again and again, target lists in other orders and subsets: the memo fills up and
  // is read back, and every number stays what a fresh computation gives.
  for (const auto& targets : std::vector<std::vector<std::string>>{
           {"A100", "H100"}, {"L4", "A100", "T4"}, {"H100", "A100"}, {"T4"}}) {
    expect_identical(kept.predict(step, gpu, targets), plain.predict(step, gpu, targets));
  }
  EXPECT_GT(memo.size(), 0u);
  PredictionMemo tiny(2);  // full: starts afresh, same numbers
  kept.set_memo(&tiny);
  expect_identical(kept.predict(step, gpu, {"A100", "L4"}),
                   plain.predict(step, gpu, {"A100", "L4"}));
  EXPECT_LE(tiny.size(), 2u);
}

TEST(Predictor, MemoKeepsOpsThatAliasDifferentlyApart) {
  // add_(x, x) reads one buffer; add_(x, y) reads two: same shapes, different storage pattern.
  auto add = [](uint64_t id, uint64_t a, uint64_t b) {
    OpRecord op;
    op.id = id;
    op.name = "aten::add";
    op.overload = "Tensor";
    TensorMeta x = T({1 << 20}), y = T({1 << 20});
    x.storage = a;
    y.storage = b;
    op.args = {tensor("self", x), tensor("other", y)};
    TensorMeta out = T({1 << 20});
    out.storage = a;
    op.outputs = {out};
    return op;
  };
  Step step;
  step.ops = {add(1, 10, 10), add(2, 20, 21), add(3, 30, 30)};
  Predictor memoised(db());
  Predictor plain(db());
  plain.set_memoize(false);
  expect_identical(memoised.predict(step, TraceOrigin{}, {"A100"}),
                   plain.predict(step, TraceOrigin{}, {"A100"}));
}

TEST(Predictor, UnknownTargetNamesTheClosestDevices) {
  Step step;
  step.ops = {relu(0, 16)};
  try {
    Predictor(db()).predict(step, TraceOrigin{}, {"A1000"});
    FAIL() << "expected UnknownDeviceError";
  } catch (const UnknownDeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("A100"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace habitat
