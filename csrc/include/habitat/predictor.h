// Turns a captured step into per-op, per-target forecasts.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "habitat/device.h"
#include "habitat/op_cost.h"
#include "habitat/prediction_memo.h"
#include "habitat/timeline.h"
#include "habitat/trace.h"

namespace habitat {

enum class Method {
  WaveScaling,    // runtime-based: measured kernels wave-scaled (Habitat)
  LearnedRatio,   // runtime-based: measured time x model(target) / model(origin)
  RooflineRatio,  // runtime-based: measured time x roofline(target) / roofline(origin)
  LearnedShape,   // shape-based: learned efficiency on the roofline
  Roofline,       // shape-based: roofline with a measured (per op) or per-class efficiency, or
                  // the launch-structure bound of the embedding and nll_loss kernels
                  // (embedding_kernels.h, loss_kernels.h)
  Fallback,       // op not modelled: bytes / bandwidth, flagged as unsupported
  NoKernel,       // views and metadata ops: no device work
  Composite,      // sum of the ops it decomposed into
};
const char* to_string(Method m);

// An op's device time where no learned family covers it, fitted on measured kernels:
// fixed_us + roofline / efficiency (python/habitat/learned/roofline_table.py).
struct MeasuredRoofline {
  double fixed_us = 0;
  double efficiency = 1;
  // time = fixed_us + (SM-side bound) / efficiency, never under the DRAM roofline, where the
  // fit found the op's time does not follow DRAM bandwidth (hardware/roofline.h sm_side_time_us).
  bool sm_bound = false;
};

// A model that predicts an op's device time from its shape alone (learned predictors).
// Returns nullopt when it has no model for the op, so the caller can fall back.
class ShapeModel {
 public:
  virtual ~ShapeModel() = default;
  virtual std::optional<double> predict_us(const OpRecord& op, const OpCost& cost,
                                           const Device& target) const = 0;
  // The measured roofline of an op predict_us does not cover; nullopt: the class's built-in
  // efficiency (shape_efficiency.h).
  virtual std::optional<MeasuredRoofline> measured_roofline(const OpRecord& /*op*/,
                                                            const OpCost& /*cost*/) const {
    return std::nullopt;
  }
};

struct OpPrediction {
  double time_us = 0;
  Method method = Method::Roofline;
};

struct OpForecast {
  uint64_t op_id = 0;
  OpCost cost;
  std::vector<OpPrediction> per_target;  // aligned with Forecast::targets
  // What this op adds to each target's total: 0 for an op whose work its parent's estimate
  // already covers, or whose children carry it; the parts of the totals, op by op.
  std::vector<OpPrediction> share;
};

struct TargetTotals {
  double total_us = 0;  // each op's own work counted once (see predict)
  std::map<Phase, double> phase_us;
  std::map<Method, int> method_ops;  // how many leaf ops each method forecast
};

struct Forecast {
  std::vector<std::string> targets;      // canonical device names
  std::vector<OpForecast> ops;           // aligned with Step::ops
  std::vector<TargetTotals> totals;      // aligned with targets
  std::vector<std::string> unsupported;  // distinct op names forecast by Fallback
  // Ops the capture did not record (Step::dropped_ops, predict_on's max_ops_per_step): the
  // forecast misses them, and every view says so.
  int64_t dropped_ops = 0;
  // The step as the user sees it on each target (host cadence and syncs included), aligned
  // with targets; empty when the timeline is off (Predictor::set_timeline).
  std::vector<TimelineResult> timelines;
};

// Plays the step's host schedule on every target of `f` from its op shares (see timeline.h).
void add_timelines(Forecast& f, const Step& step, const TraceOrigin& origin,
                   const TimelineOptions& options);
// The op shares of `ops` (aligned with a step's ops) target by target: [t * ops.size() + i].
std::vector<double> shares_by_target(const std::vector<OpForecast>& ops, std::size_t n_targets);
// The timelines of `step` on `n_targets` targets from its op shares (shares_by_target).
std::vector<TimelineResult> step_timelines(const std::vector<double>& shares, std::size_t n_targets,
                                           const Step& step, const TraceOrigin& origin,
                                           const TimelineOptions& options);

// A forecast for readers of totals and columns: everything but the per-op part (`summary.ops`
// is empty), and that part as rows (forecast_rows.h). The rows of a repeated step are shared
// with the last one's, not built again.
struct ForecastParts {
  Forecast summary;
  std::shared_ptr<const std::string> rows;
};

class Predictor {
 public:
  // `model` may be null: shape-based forecasts then use the roofline path only.
  Predictor(const DeviceDatabase& db, const ShapeModel* model = nullptr) : db_(db), model_(model) {}

  // Runtime-based for ops with kernels measured on a known GPU origin; shape-based otherwise.
  Forecast predict(const Step& step, const TraceOrigin& origin,
                   const std::vector<std::string>& targets) const;
  // The same forecast as parts: what predict gives, its ops as rows.
  ForecastParts predict_parts(const Step& step, const TraceOrigin& origin,
                              const std::vector<std::string>& targets) const;

  // Per-op predictions are memoised within a step by everything they depend on (op name,
  // overload, arguments, outputs, kernels): bit-identical results, each distinct op computed
  // once. Off only to check that (tests).
  void set_memoize(bool on) { memoize_ = on; }
  // Host-aware step times (Forecast::timelines): on by default; `options` as in timeline.h.
  void set_timeline(bool on, const TimelineOptions& options = {}) {
    timeline_on_ = on;
    timeline_ = options;
  }

  // Keeps the memo in `memo` across calls (steps), not just within one step. The caller owns
  // it and keeps one per context (device database, learned models, trace origin: everything
  // a prediction reads besides the op and the target), used by one thread at a time.
  // Null (the default): a fresh memo per call. With a memo, a step doing the same work as
  // the last fully known step (same_work, prediction_memo.h) reuses its per-op forecasts and
  // totals wholesale; only its timeline is played again from its own host times.
  void set_memo(PredictionMemo* memo) { shared_memo_ = memo; }

 private:
  std::vector<const Device*> devices_of(const std::vector<std::string>& targets) const;
  // The forecast without timelines; `repeats`: every op was in the shared memo already (the
  // caller remembers the forecast there).
  Forecast predict_ops(const Step& step, const TraceOrigin& origin,
                       const std::vector<const Device*>& devices, bool& repeats) const;
  // The shared memo's entry for a step doing the same work as the last one, or null.
  PredictionMemo::Repeat* repeat_of(const Step& step,
                                    const std::vector<const Device*>& devices) const;

  const DeviceDatabase& db_;
  const ShapeModel* model_;
  bool memoize_ = true;
  PredictionMemo* shared_memo_ = nullptr;
  bool timeline_on_ = true;
  TimelineOptions timeline_;
};

// Forecast as a JSON document (for Python and saved reports).
std::string forecast_to_json(const Forecast& f);
// The same document in two parts, read at different times: everything but "ops", and the
// "ops" array alone.
std::string forecast_summary_to_json(const Forecast& f);
std::string forecast_ops_to_json(const Forecast& f);

}  // namespace habitat
