// A step doing the same work as the last one (same_work) reuses its per-op forecasts through
// the shared memo: every number must be what a forecast without any memo gives, timelines
// included (they are played from each step's own host times).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "habitat/forecast_rows.h"
#include "habitat/learned_models.h"
#include "habitat/predictor.h"
#include "habitat/trace.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::db;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_same_timelines(const std::vector<TimelineResult>& a,
                           const std::vector<TimelineResult>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t t = 0; t < a.size(); ++t) {
    const TimelineResult& x = a[t];
    const TimelineResult& y = b[t];
    EXPECT_EQ(x.valid, y.valid);
    EXPECT_TRUE(same_bits(x.step_us, y.step_us)) << t << ": " << x.step_us << " vs " << y.step_us;
    EXPECT_TRUE(same_bits(x.host_us, y.host_us)) << t;
    EXPECT_TRUE(same_bits(x.kernel_sum_us, y.kernel_sum_us)) << t;
    EXPECT_TRUE(same_bits(x.device_busy_us, y.device_busy_us)) << t;
    EXPECT_EQ(x.host_bound, y.host_bound);
    EXPECT_EQ(x.notes, y.notes);
    ASSERT_EQ(x.phases.size(), y.phases.size());
    for (const auto& [phase, p] : x.phases) {
      ASSERT_TRUE(y.phases.count(phase));
      EXPECT_TRUE(same_bits(p.host_us, y.phases.at(phase).host_us));
      EXPECT_TRUE(same_bits(p.device_us, y.phases.at(phase).device_us));
    }
  }
}

void expect_same_totals(const Forecast& a, const Forecast& b) {
  ASSERT_EQ(a.targets, b.targets);
  ASSERT_EQ(a.totals.size(), b.totals.size());
  for (std::size_t t = 0; t < a.totals.size(); ++t) {
    EXPECT_TRUE(same_bits(a.totals[t].total_us, b.totals[t].total_us));
    EXPECT_EQ(a.totals[t].method_ops, b.totals[t].method_ops);
    ASSERT_EQ(a.totals[t].phase_us.size(), b.totals[t].phase_us.size());
    for (const auto& [phase, us] : a.totals[t].phase_us)
      EXPECT_TRUE(same_bits(us, b.totals[t].phase_us.at(phase)));
  }
  EXPECT_EQ(a.unsupported, b.unsupported);
  expect_same_timelines(a.timelines, b.timelines);
}

// The golden step with a kernel on every leaf op, launched at recorded host times.
Step gpu_step(const Step& base) {
  Step step = base;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    OpRecord& op = step.ops[i];
    if (op.has_children) continue;
    KernelLaunch k;
    k.name = "kernel";
    k.grid[0] = 64 + static_cast<int>(i % 3);
    k.block[0] = 128;
    k.duration_us = 5.0 + static_cast<double>(i % 4);
    k.stream = i % 7 == 0 ? 1 : 0;
    k.launch_us = op.start_us + op.wall_us / 2;
    op.kernels = {k};
  }
  return step;
}

// The same work with other host times: the next step of a training loop.
Step later(const Step& step, double scale) {
  Step next = step;
  next.index += 1;
  next.wall_ms *= scale;
  for (OpRecord& op : next.ops) {
    op.start_us *= scale;
    op.wall_us *= scale;
    for (KernelLaunch& k : op.kernels) {
      if (k.launch_us) *k.launch_us *= scale;
    }
  }
  return next;
}

std::unique_ptr<LearnedModels> learned() {
  const std::string dir = std::string(HABITAT_SOURCE_DIR) + "/weights";
  if (!std::filesystem::exists(std::filesystem::path(dir) / "gemm.safetensors")) return nullptr;
  return std::make_unique<LearnedModels>(LearnedModels::load(dir));
}

TEST(RepeatedStep, SameWorkIgnoresHostTimesAndLabelsOnly) {
  const Trace trace = load_trace(HABITAT_SOURCE_DIR "/tests/python/fixtures/golden_trace.json");
  const Step step = gpu_step(trace.steps[0]);
  EXPECT_TRUE(same_work(step, step));
  EXPECT_TRUE(same_work(step, later(step, 1.7)));
  Step labelled = step;
  labelled.ops[3].module_path = "elsewhere";
  labelled.ops[3].overhead_us = 4.0;
  labelled.syncs.push_back(SyncRecord{});
  EXPECT_TRUE(same_work(step, labelled));

  auto differs = [&](auto change) {
    Step other = step;
    change(other);
    return !same_work(step, other);
  };
  EXPECT_TRUE(differs([](Step& s) { s.ops[2].outputs.at(0).shape.at(0) += 1; }));
  EXPECT_TRUE(differs([](Step& s) { s.ops[2].name += "_"; }));
  EXPECT_TRUE(differs([](Step& s) { s.ops[2].phase = Phase::Optimizer; }));
  EXPECT_TRUE(differs([](Step& s) { s.ops[2].parent = 12345; }));
  EXPECT_TRUE(differs([](Step& s) { s.ops[2].precision = PrecisionFlags{}; }));
  EXPECT_TRUE(differs([](Step& s) { s.ops.pop_back(); }));
  EXPECT_TRUE(differs([](Step& s) {
    for (OpRecord& op : s.ops) {
      if (!op.kernels.empty()) {
        op.kernels[0].duration_us += 0.5;
        return;
      }
    }
  }));
  EXPECT_TRUE(differs([](Step& s) {
    for (OpRecord& op : s.ops) {
      for (Argument& a : op.args) {
        if (a.value.kind == ArgValue::Kind::Double || !a.value.ints.empty()) {
          if (a.value.ints.empty())
            a.value.real = -a.value.real - 1;
          else
            a.value.ints[0] += 1;
          return;
        }
      }
    }
  }));
}

// Steps forecast through a kept memo (the repeat path from the third on) against a predictor
// without any memo, for a GPU origin (measured kernels, CUPTI launch times) and a CPU origin
// (modelled host), with and without the learned models.
TEST(RepeatedStep, ForecastsAreBitIdenticalToForecastsWithoutMemo) {
  const Trace trace = load_trace(HABITAT_SOURCE_DIR "/tests/python/fixtures/golden_trace.json");
  const std::unique_ptr<LearnedModels> models = learned();
  HostCostModel host;
  host.default_op_us = 7;
  host.top_level_gap_us = 11;
  host.op_us["aten::addmm"] = 13;
  TimelineOptions options;
  options.host_model = &host;
  TraceOrigin gpu = trace.origin;
  gpu.device = "H100";
  const std::vector<std::string> targets = {"A100", "H100", "L4", "T4", "V100"};
  struct Case {
    TraceOrigin origin;
    Step step;
  };
  for (const Case& c : {Case{gpu, gpu_step(trace.steps[0])}, Case{trace.origin, trace.steps[0]}}) {
    for (const ShapeModel* model :
         {static_cast<const ShapeModel*>(nullptr), static_cast<const ShapeModel*>(models.get())}) {
      PredictionMemo memo;
      Predictor kept(db(), model);
      kept.set_memo(&memo);
      kept.set_timeline(true, options);
      Predictor plain(db(), model);
      plain.set_memoize(false);
      plain.set_timeline(true, options);
      std::shared_ptr<const std::string> last_rows;
      for (int n = 0; n < 5; ++n) {
        const Step step = later(c.step, 1.0 + 0.25 * n);
        const Forecast expected = plain.predict(step, c.origin, targets);
        ASSERT_FALSE(expected.timelines.empty());
        if (n % 2 == 0) {
          const ForecastParts parts = kept.predict_parts(step, c.origin, targets);
          EXPECT_TRUE(parts.summary.ops.empty());
          EXPECT_EQ(*parts.rows, forecast_ops_to_rows(expected));
          expect_same_totals(parts.summary, expected);
          // Remembered at the second step (every op known), read back from the third on: the
          // fifth step's rows are the third's, not built again.
          if (n == 4) {
            EXPECT_TRUE(parts.rows == last_rows);
          }
          last_rows = parts.rows;
        } else {
          const Forecast got = kept.predict(step, c.origin, targets);
          EXPECT_EQ(forecast_ops_to_rows(got), forecast_ops_to_rows(expected));
          expect_same_totals(got, expected);
        }
      }
      // Other work after a repeat: forecast op by op again, still the same numbers.
      Step changed = c.step;
      for (OpRecord& op : changed.ops) {
        if (op.name == "aten::addmm" && op.args.size() > 1 && !op.outputs.empty()) {
          op.args[1].value.tensors.at(0).shape[0] *= 2;  // mat1: twice the rows
          op.outputs[0].shape[0] *= 2;
          break;
        }
      }
      ASSERT_FALSE(same_work(changed, c.step));
      const Forecast expected = plain.predict(changed, c.origin, targets);
      const ForecastParts parts = kept.predict_parts(changed, c.origin, targets);
      EXPECT_TRUE(parts.rows != last_rows);
      EXPECT_EQ(*parts.rows, forecast_ops_to_rows(expected));
      expect_same_totals(parts.summary, expected);
      // Other targets for the same work: not the remembered forecast either.
      const std::vector<std::string> fewer = {"T4", "A100"};
      const ForecastParts other = kept.predict_parts(c.step, c.origin, fewer);
      EXPECT_EQ(*other.rows, forecast_ops_to_rows(plain.predict(c.step, c.origin, fewer)));
    }
  }
}

}  // namespace
}  // namespace habitat
