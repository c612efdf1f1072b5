// Per-op costs and predictions kept across steps and targets: training steps repeat the same
// ops step after step, so a long run forecasts each distinct op once per GPU.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "habitat/device.h"
#include "habitat/op_cost.h"
#include "habitat/trace.h"

namespace habitat {

struct OpPrediction;
struct Forecast;

// Whether two steps do the same device work: equal in every field the per-op forecasts and
// totals read. That is every field but their host times (an op's start_us, wall_us,
// overhead_us, own_before_us, its kernels' launch_us and device_start_us; the step's index, wall
// time, syncs and hook time), which only the timeline reads, and the labels no forecast reads (an
// op's module_path, autograd_node and thread). Two such steps get the same per-op forecasts and
// totals; only their timelines can differ. A predictor that starts reading one of the fields
// left out must add it here (prediction_memo.cpp, visit_work).
bool same_work(const Step& a, const Step& b);

// What the predictor computed for one distinct op (Predictor's op key): its cost, the origin
// side of a ratio method (computed once per op, not once per target) and its prediction on
// each target seen so far. The values are those computing them again would give (the cost
// model and the predictors are pure functions of the key, the device and the memo's context).
class PredictionMemo {
 public:
  struct Entry {
    OpCost cost;
    // The learned model's time of the op on the origin GPU: unset until a ratio method needs
    // it, then the model's answer (which may be "no model").
    std::optional<std::optional<double>> origin_model_us;
    std::vector<double> time_us;        // by target slot
    std::vector<unsigned char> method;  // by target slot; kUnset: not predicted yet
  };
  static constexpr unsigned char kUnset = 0xff;

  // At most `max_ops` distinct ops are kept; the memo starts afresh when it is full, so a run
  // whose ops never repeat holds a bounded amount of memory.
  explicit PredictionMemo(std::size_t max_ops = kDefaultMaxOps) : max_ops_(max_ops) {}
  static constexpr std::size_t kDefaultMaxOps = 1 << 16;

  // The entry of `key` and whether it was added now (its cost is then still to compute).
  // The pointer stays valid until the next call.
  std::pair<Entry*, bool> find_or_add(const std::string& key);
  // A small index for `target`, the same for the life of the memo.
  std::size_t slot(const Device* target);

  std::size_t size() const { return entries_.size(); }

  // The last step forecast through this memo whose every op was already in it (a training
  // loop's steady state), kept to answer the next step that does the same work (same_work)
  // for the same targets without forecasting op by op. Its forecast has no timelines: the
  // predictor plays the new step's own host times. Null when there is none.
  // Steps of more ops are not kept (the copy of a step's work and forecast grows with it; a
  // step of a million ops would hold hundreds of MB for one memo).
  static constexpr std::size_t kMaxRepeatOps = std::size_t{1} << 18;

  struct Repeat {
    std::shared_ptr<const Forecast> forecast;
    std::shared_ptr<const std::string> rows;  // its ops as rows (forecast_rows.h), once asked for
    std::vector<double> shares;               // shares_by_target (predictor.h), once asked for
  };
  Repeat* repeat_of(const Step& step, const std::vector<const Device*>& targets);
  Repeat* remember(const Step& step, const std::vector<const Device*>& targets,
                   std::shared_ptr<const Forecast> forecast);

 private:
  struct LastStep {
    std::string work;  // the step's work as bytes (what same_work compares)
    std::vector<const Device*> targets;
    Repeat repeat;
  };
  std::optional<LastStep> last_;
  std::unordered_map<std::string, Entry> entries_;
  std::unordered_map<const Device*, std::size_t> slots_;
  std::size_t max_ops_;
};

}  // namespace habitat
