// The forecast as users get it (habitat/engine.h): the shipped weights behind the dominance
// envelope, the memo and the packaged host model, run on the golden trace. Its totals and
// methods must be those the trace file saved (tests/python/data/test_golden_trace.py checks the
// same numbers through Python), and every number what the parts assembled by hand give.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "habitat/engine.h"
#include "habitat/file_io.h"
#include "habitat/forecast_rows.h"
#include "habitat/learned_envelope.h"
#include "habitat/learned_models.h"
#include "habitat/predictor.h"
#include "habitat/trace.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::db;

const char* const kGolden = HABITAT_SOURCE_DIR "/tests/python/fixtures/golden_trace.json";

// What a user's forecast reads: the packaged weights and host model
// (python/habitat/data/engine.py).
EngineConfig user_config() {
  EngineConfig config;
  config.weights_dir = HABITAT_SOURCE_DIR "/weights";
  config.host_model_json =
      read_file(HABITAT_SOURCE_DIR "/python/habitat/data/host_model.json", "host model");
  return config;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_identical(const Forecast& a, const Forecast& b) {
  ASSERT_EQ(a.targets, b.targets);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    for (std::size_t t = 0; t < a.targets.size(); ++t) {
      EXPECT_TRUE(same_bits(a.ops[i].per_target[t].time_us, b.ops[i].per_target[t].time_us));
      EXPECT_EQ(a.ops[i].per_target[t].method, b.ops[i].per_target[t].method);
      EXPECT_TRUE(same_bits(a.ops[i].share[t].time_us, b.ops[i].share[t].time_us));
    }
  }
  for (std::size_t t = 0; t < a.targets.size(); ++t) {
    EXPECT_TRUE(same_bits(a.totals[t].total_us, b.totals[t].total_us)) << a.targets[t];
    EXPECT_EQ(a.totals[t].method_ops, b.totals[t].method_ops);
    EXPECT_EQ(a.totals[t].phase_us, b.totals[t].phase_us);
  }
  EXPECT_EQ(a.unsupported, b.unsupported);
  ASSERT_EQ(a.timelines.size(), b.timelines.size());
  for (std::size_t t = 0; t < a.timelines.size(); ++t) {
    EXPECT_EQ(a.timelines[t].valid, b.timelines[t].valid);
    EXPECT_TRUE(same_bits(a.timelines[t].step_us, b.timelines[t].step_us)) << a.targets[t];
    EXPECT_TRUE(same_bits(a.timelines[t].host_us, b.timelines[t].host_us));
    EXPECT_EQ(a.timelines[t].notes, b.timelines[t].notes);
  }
}

TEST(ForecastEngine, GoldenTraceForecastIsTheSavedOne) {
  const ForecastEngine engine(db(), user_config());
  ASSERT_NE(engine.learned(), nullptr) << "no learned models in weights/";
  ASSERT_NE(engine.host_model(), nullptr);
  const Trace trace = load_trace(kGolden);
  const nlohmann::json saved = nlohmann::json::parse(read_file(kGolden, "trace"))["forecast"];
  const std::vector<std::string> targets = saved["targets"];
  ASSERT_EQ(saved["steps"].size(), trace.steps.size());
  for (std::size_t s = 0; s < trace.steps.size(); ++s) {
    const nlohmann::json& expected = saved["steps"][s];
    const Forecast f = engine.forecast(trace.steps[s], trace.origin, targets);
    ASSERT_EQ(f.targets, targets);
    int learned_ops = 0;
    for (std::size_t t = 0; t < targets.size(); ++t) {
      const TargetTotals& totals = f.totals[t];
      EXPECT_NEAR(totals.total_us / 1000.0, expected["total_ms"][targets[t]].get<double>(), 1e-12)
          << "step " << s << " on " << targets[t];
      // The saved phases are not compared: the fixture's A100 forward (0.01066 ms) predates the
      // weights its totals were recorded with. The phases add up to the total instead.
      double phases_us = 0;
      for (const auto& [phase, us] : totals.phase_us) phases_us += us;
      EXPECT_NEAR(phases_us, totals.total_us, 1e-9);
      std::map<std::string, int> methods;
      for (const auto& [method, n] : totals.method_ops) methods[to_string(method)] = n;
      EXPECT_EQ(methods, expected["method_ops"][targets[t]].get<decltype(methods)>());
      learned_ops += methods["learned_shape"];
      // A CPU origin's step as seen comes from the packaged host model.
      ASSERT_EQ(f.timelines.size(), targets.size());
      EXPECT_TRUE(f.timelines[t].valid);
      EXPECT_EQ(f.timelines[t].launch_source, LaunchSource::Modelled);
      EXPECT_GE(f.timelines[t].step_us, f.timelines[t].device_busy_us);
    }
    EXPECT_GT(learned_ops, 0) << "the learned models forecast none of the step's ops";
    EXPECT_EQ(f.unsupported, expected["unsupported"].get<std::vector<std::string>>());
  }
}

// The engine is the hand-assembled forecast, no more: learned models in the envelope, the
// predictor, the host model and the step's timeline settings; kept memos change no number.
TEST(ForecastEngine, IsTheEnvelopedPredictorWithTheTimeline) {
  const EngineConfig config = user_config();
  const ForecastEngine engine(db(), config);
  const LearnedModels models = LearnedModels::load(config.weights_dir);
  const DominanceEnvelope envelope(models, db());
  const HostCostModel host = host_cost_model_from_json(config.host_model_json);
  const Trace trace = load_trace(kGolden);
  const std::vector<std::string> targets = {"A100", "H100", "L4", "T4", "V100"};
  StepTimeline timeline;
  timeline.host_speed = 1.5;
  TimelineOptions options;
  options.host_speed = timeline.host_speed;
  options.host_model = &host;
  Predictor plain(db(), &envelope);
  plain.set_memoize(false);
  plain.set_timeline(true, options);
  for (int round = 0; round < 3; ++round) {  // the second and third from the engine's memo
    for (const Step& step : trace.steps) {
      const Forecast expected = plain.predict(step, trace.origin, targets);
      expect_identical(engine.forecast(step, trace.origin, targets, timeline), expected);
      const ForecastParts parts = engine.forecast_parts(step, trace.origin, targets, timeline);
      EXPECT_EQ(*parts.rows, forecast_ops_to_rows(expected));
      Forecast summary = expected;
      summary.ops.clear();
      expect_identical(parts.summary, summary);
    }
  }
}

TEST(ForecastEngine, ForgetsItsMemosWithoutChangingANumber) {
  ForecastEngine engine(db(), user_config());
  const Trace trace = load_trace(kGolden);
  const Forecast first = engine.forecast(trace.steps[0], trace.origin, {"A100", "L4"});
  engine.forget_predictions();
  expect_identical(engine.forecast(trace.steps[0], trace.origin, {"A100", "L4"}), first);
}

TEST(ForecastEngine, WithoutWeightsOrHostModelForecastsOnTheRoofline) {
  const ForecastEngine engine(db(), EngineConfig{});
  EXPECT_EQ(engine.learned(), nullptr);
  EXPECT_EQ(engine.host_model(), nullptr);
  const Trace trace = load_trace(kGolden);
  const Forecast f = engine.forecast(trace.steps[0], trace.origin, {"A100"});
  EXPECT_EQ(f.totals[0].method_ops.count(Method::LearnedShape), 0u);
  ASSERT_EQ(f.timelines.size(), 1u);
  EXPECT_FALSE(f.timelines[0].valid);  // a CPU origin without a host model: no timeline
  Predictor plain(db());
  plain.set_memoize(false);
  expect_identical(f, plain.predict(trace.steps[0], trace.origin, {"A100"}));
}

TEST(ForecastEngine, BadHostModelIsRejectedWhenBuilt) {
  EngineConfig config;
  config.host_model_json = "{\"op_us\": 3}";
  EXPECT_THROW(ForecastEngine(db(), config), std::invalid_argument);
}

}  // namespace
}  // namespace habitat
