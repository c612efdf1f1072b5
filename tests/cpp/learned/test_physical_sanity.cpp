// Physical sanity of the shipped learned forecasts, as properties over the whole device
// database and a grid of shapes and precisions (the engine's path: LearnedModels behind the
// DominanceEnvelope, as habitat._engine forecasts):
//   1. a GPU at least as good on every relevant figure is never forecast slower;
//   2. no op is forecast faster than its roofline bound;
//   3. time does not fall when one dimension of the problem doubles.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cost/test_op_cost_builders.h"
#include "habitat/learned_envelope.h"
#include "habitat/learned_models.h"
#include "habitat/op_cost.h"
#include "hardware/roofline.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::T;
using test::tensor;

using test::db;

const LearnedModels* models() {
  static const std::unique_ptr<LearnedModels> instance = [] {
    const std::string dir = std::string(HABITAT_SOURCE_DIR) + "/weights";
    if (!std::filesystem::exists(std::filesystem::path(dir) / "gemm.safetensors")) {
      return std::unique_ptr<LearnedModels>();
    }
    return std::make_unique<LearnedModels>(LearnedModels::load(dir));
  }();
  return instance.get();
}

struct Case {
  std::string what;
  OpRecord op;
  bool allow_tf32 = false;
};

OpRecord addmm(int64_t m, int64_t k, int64_t n, const std::string& dtype) {
  OpRecord op;
  op.name = "aten::addmm";
  op.args = {tensor("self", T({n}, dtype)), tensor("mat1", T({m, k}, dtype)),
             tensor("mat2", T({k, n}, dtype))};
  op.outputs = {T({m, n}, dtype)};
  return op;
}

OpRecord bmm(int64_t b, int64_t m, int64_t k, int64_t n, const std::string& dtype) {
  OpRecord op;
  op.name = "aten::bmm";
  op.args = {tensor("self", T({b, m, k}, dtype)), tensor("mat2", T({b, k, n}, dtype))};
  op.outputs = {T({b, m, n}, dtype)};
  return op;
}

OpRecord conv(int64_t batch, int64_t cin, int64_t cout, int64_t size, int64_t kernel,
              const std::string& dtype, bool backward) {
  const int64_t pad = kernel / 2;
  OpRecord op;
  const TensorMeta x = T({batch, cin, size, size}, dtype);
  const TensorMeta w = T({cout, cin, kernel, kernel}, dtype);
  const TensorMeta y = T({batch, cout, size, size}, dtype);
  if (backward) {
    op.name = "aten::convolution_backward";
    op.args = {tensor("grad_output", y),
               tensor("input", x),
               tensor("weight", w),
               test::ints("stride", {1, 1}),
               test::ints("padding", {pad, pad}),
               test::bools("output_mask", {1, 1, 0})};
    op.outputs = {x, w};
  } else {
    op.name = "aten::convolution";
    op.args = {tensor("input", x), tensor("weight", w), test::ints("stride", {1, 1}),
               test::ints("padding", {pad, pad})};
    op.outputs = {y};
  }
  return op;
}

struct Precision2 {
  std::string dtype;
  bool tf32;
  const char* name;
};
const std::vector<Precision2> kPrecisions{{"float32", false, "fp32"},
                                          {"float32", true, "tf32"},
                                          {"bfloat16", false, "bf16"},
                                          {"float16", false, "fp16"}};

// GEMM grid: powers of two and odd sizes, 16x64x128 (the issue's tiny addmm) included.
const std::vector<int64_t> kDims{1, 16, 64, 100, 128, 512, 1000, 2048, 8192};

std::vector<Case> grid() {
  std::vector<Case> out;
  for (const auto& p : kPrecisions) {
    for (int64_t m : kDims) {
      for (int64_t k : {16, 128, 1000, 4096}) {
        for (int64_t n : {64, 768, 4096}) {
          std::ostringstream what;
          what << p.name << " addmm " << m << "x" << k << "x" << n;
          out.push_back({what.str(), addmm(m, k, n, p.dtype), p.tf32});
        }
      }
    }
    for (int64_t b : {4, 96}) {
      for (int64_t m : {64, 512, 2048}) {
        out.push_back({std::string(p.name) + " bmm b" + std::to_string(b) + " " + std::to_string(m),
                       bmm(b, m, 64, m, p.dtype), p.tf32});
      }
    }
    for (int64_t c : {3, 64, 256}) {
      for (int64_t size : {7, 56}) {
        for (int64_t kernel : {1, 3}) {
          for (bool backward : {false, true}) {
            std::ostringstream what;
            what << p.name << (backward ? " conv_bwd " : " conv ") << c << "ch " << size << "px k"
                 << kernel;
            out.push_back({what.str(), conv(32, c, 128, size, kernel, p.dtype, backward), p.tf32});
          }
        }
      }
    }
  }
  return out;
}

class PhysicalSanity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (models() == nullptr) GTEST_SKIP() << "no weights in weights/";
    envelope_ = std::make_unique<DominanceEnvelope>(*models(), db());
  }
  double forecast(const OpRecord& op, const OpCost& cost, const Device& d) const {
    auto t = envelope_->predict_us(op, cost, d);
    EXPECT_TRUE(t.has_value()) << op.name;
    return t.value_or(0.0);
  }
  std::unique_ptr<DominanceEnvelope> envelope_;
};

TEST_F(PhysicalSanity, ABetterGpuIsNeverForecastSlower) {
  int pairs = 0;
  for (const Case& c : grid()) {
    const OpCost cost = estimate_cost(c.op, c.allow_tf32);
    std::vector<double> t;
    for (const Device& d : db().all()) t.push_back(forecast(c.op, cost, d));
    for (std::size_t a = 0; a < t.size(); ++a) {
      for (std::size_t b = 0; b < t.size(); ++b) {
        if (a == b || !at_least_as_good(db().all()[a], db().all()[b], cost.precision)) continue;
        ++pairs;
        EXPECT_LE(t[a], t[b]) << c.what << ": " << db().all()[a].name << " is at least as good as "
                              << db().all()[b].name;
      }
    }
  }
  EXPECT_GT(pairs, 1000);  // the database has many such pairs (A100 80GB >= 40GB, H200 >= H100)
}

TEST_F(PhysicalSanity, TheIssuesTinyAddmmRanksGpusByTheirSpecs) {
  // 16x64x128 addmm was forecast 28.2 us on A100-40GB, 30.5 us on A100-80GB (better on every
  // figure) and 23.8 us on L4 by the previous weights.
  const OpRecord op = addmm(16, 64, 128, "float32");
  const OpCost cost = estimate_cost(op, false);
  const double a40 = forecast(op, cost, db().find("A100-SXM4-40GB"));
  const double a80 = forecast(op, cost, db().find("A100-SXM4-80GB"));
  EXPECT_LE(a80, a40);
  EXPECT_LE(forecast(op, cost, db().find("H200")), forecast(op, cost, db().find("H100")));
}

TEST_F(PhysicalSanity, NothingIsForecastBelowItsRoofline) {
  for (const Case& c : grid()) {
    const OpCost cost = estimate_cost(c.op, c.allow_tf32);
    for (const Device& d : db().all()) {
      const double bound = roofline_time_us(d, cost.precision, cost.flops, cost.bytes());
      EXPECT_GE(forecast(c.op, cost, d), bound * (1 - 1e-12)) << c.what << " on " << d.name;
    }
  }
}

// Size monotonicity is trained for (a penalty on each training problem with one dimension
// doubled, habitat.learned.train.monotone_pairs), not built in: the MLP can still
// dip where wave quantisation or the 16-byte alignment flips. Bounded here: few doublings
// come out faster at all, and none by more than kMaxDip (measured with the shipped weights:
// docs/accuracy.md, "Modern precisions").
constexpr double kMaxDip = 0.25;
constexpr double kMaxFallingShare = 0.05;

TEST_F(PhysicalSanity, GrowingAProblemRarelyMakesItFasterAndNeverMuchFaster) {
  // Doubling m, k or n of a GEMM, on every GPU and precision.
  int checked = 0, falling = 0;
  double worst = 1.0;
  for (const auto& p : kPrecisions) {
    for (int64_t m : {16, 128, 1000, 4096}) {
      for (int64_t k : {16, 128, 1000, 4096}) {
        for (int64_t n : {64, 768, 4096}) {
          const OpRecord base = addmm(m, k, n, p.dtype);
          const OpCost base_cost = estimate_cost(base, p.tf32);
          for (const OpRecord& grown : {addmm(2 * m, k, n, p.dtype), addmm(m, 2 * k, n, p.dtype),
                                        addmm(m, k, 2 * n, p.dtype)}) {
            const OpCost grown_cost = estimate_cost(grown, p.tf32);
            for (const Device& d : db().all()) {
              ++checked;
              const double ratio = forecast(grown, grown_cost, d) / forecast(base, base_cost, d);
              if (ratio < 1.0) ++falling;
              worst = std::min(worst, ratio);
              EXPECT_GE(ratio, 1.0 - kMaxDip)
                  << p.name << " addmm " << m << "x" << k << "x" << n << " grown on " << d.name;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_LE(falling, kMaxFallingShare * checked)
      << falling << " of " << checked << " doublings fall";
  std::cout << "size monotonicity: " << falling << " of " << checked
            << " doublings forecast faster, worst ratio " << worst << "\n";
}

// Autocast's residual add (a bf16 result into the fp32 stream) runs ATen's unrolled kernel,
// bound by its elements: measured 0.91x as long on the H200 as on the H100 (same SMs and
// clock), where a same-dtype add streams up to 1.43x faster.
TEST_F(PhysicalSanity, AMixedDtypeAddIsBoundByItsElementsNotTheBandwidth) {
  const TensorMeta x = T({64, 512, 1024});
  OpRecord mixed;
  mixed.name = "aten::add";
  mixed.overload = "Tensor";
  mixed.args = {tensor("self", x), tensor("other", T({64, 512, 1024}, "bfloat16"))};
  mixed.outputs = {x};
  OpRecord same = mixed;
  same.args[1] = tensor("other", x);
  const Device& h100 = db().find("H100-SXM5-80GB");
  const Device& h200 = db().find("H200-SXM-141GB");
  const double n = 64.0 * 512 * 1024;
  for (const Device* d : {&h100, &h200}) {
    EXPECT_GE(forecast(mixed, estimate_cost(mixed), *d), n * 0.9 / (d->sms * d->boost_clock_mhz))
        << d->name;
  }
  // Measured on the training runs: 0.99 and 0.90 SM cycles per element (H100, H200).
  const double mixed_ratio =
      forecast(mixed, estimate_cost(mixed), h200) / forecast(mixed, estimate_cost(mixed), h100);
  EXPECT_GT(mixed_ratio, 0.88);
  EXPECT_LT(forecast(same, estimate_cost(same), h200),
            0.85 * forecast(same, estimate_cost(same), h100));
}

}  // namespace
}  // namespace habitat
