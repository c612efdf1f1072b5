// The forecast as users get it, assembled in one place: the learned models of a weights
// directory wrapped in the dominance envelope (learned_envelope.h), handed to the predictor
// (predictor.h) with a memo of per-op predictions kept across steps (prediction_memo.h) and
// the timeline's options, the host model for CPU origins included (timeline.h). Every caller
// forecasts through it: habitat._engine's bindings (bindings/engine/) only convert types.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "habitat/device.h"
#include "habitat/predictor.h"
#include "habitat/timeline.h"
#include "habitat/trace.h"

namespace habitat {

// What an engine reads besides the steps it forecasts, fixed for its life.
struct EngineConfig {
  // The learned models' directory (weights/); "" or a folder without models: shape-based
  // forecasts use the roofline alone.
  std::string weights_dir;
  // The eager-PyTorch host model (JSON, HostCostModel) that plays the timeline of steps
  // traced on a CPU; "": such steps get no timeline.
  std::string host_model_json;
  // Per-op predictions memoised within a step and across steps (bit-identical either way);
  // off only to compare the two. The default is on unless HABITAT_OP_MEMO=0.
  bool memoize = op_memo_from_environment();

  static bool op_memo_from_environment();
};

// How one step's timeline is played (the rest of TimelineOptions is the engine's).
struct StepTimeline {
  double host_speed = 1.0;  // the host's speed relative to the origin's
  // Habitat's per-op recording cost to take out of a format-1 step; < 0: estimated from it.
  double overhead_per_op_us = -1;
  // > 0: the wall time of the same step run without recording, to calibrate the host to.
  double uninstrumented_wall_us = -1;
};

class ForecastEngine {
 public:
  // `db` must outlive the engine; after it changed in place (a device file merged), call
  // forget_predictions(). Throws std::runtime_error naming the file when a model
  // file is corrupt (std::invalid_argument for a host model that is not one).
  ForecastEngine(const DeviceDatabase& db, EngineConfig config);
  ~ForecastEngine();
  ForecastEngine(const ForecastEngine&) = delete;
  ForecastEngine& operator=(const ForecastEngine&) = delete;

  // One step forecast for each target. Thread-safe: forecasts of steps of one origin take
  // turns on that origin's memo; others run side by side.
  Forecast forecast(const Step& step, const TraceOrigin& origin,
                    const std::vector<std::string>& targets,
                    const StepTimeline& timeline = {}) const;
  // The same forecast as parts (totals, and the ops as rows: forecast_rows.h).
  ForecastParts forecast_parts(const Step& step, const TraceOrigin& origin,
                               const std::vector<std::string>& targets,
                               const StepTimeline& timeline = {}) const;

  // The learned models (null: roofline only), without the envelope.
  const ShapeModel* learned() const { return learned_.get(); }
  const HostCostModel* host_model() const { return host_model_ ? &*host_model_ : nullptr; }

  // The device database changed: what was memoised from it is stale.
  void forget_predictions();

 private:
  struct Memo;
  template <class Result>
  Result run(Result (Predictor::*predict)(const Step&, const TraceOrigin&,
                                          const std::vector<std::string>&) const,
             const Step& step, const TraceOrigin& origin, const std::vector<std::string>& targets,
             const StepTimeline& timeline) const;
  std::shared_ptr<Memo> memo_for(const TraceOrigin& origin) const;

  const DeviceDatabase& db_;
  EngineConfig config_;
  std::unique_ptr<ShapeModel> learned_;
  std::optional<HostCostModel> host_model_;
  mutable std::mutex memos_mutex_;
  // One memo per origin (everything a prediction reads besides the op, the target and what
  // the engine fixes), a few per process.
  mutable std::map<std::string, std::shared_ptr<Memo>> memos_;
};

}  // namespace habitat
