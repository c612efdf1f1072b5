#include "habitat/engine.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "habitat/learned_envelope.h"
#include "habitat/prediction_memo.h"
#include "learned/learned_model.h"

namespace habitat {

// Used by one forecast at a time (its mutex).
struct ForecastEngine::Memo {
  std::mutex mutex;
  PredictionMemo memo;
};

bool EngineConfig::op_memo_from_environment() {
  static const bool on = [] {
    const char* v = std::getenv("HABITAT_OP_MEMO");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

ForecastEngine::ForecastEngine(const DeviceDatabase& db, EngineConfig config)
    : db_(db), config_(std::move(config)) {
  if (!config_.weights_dir.empty()) learned_ = load_learned_models(config_.weights_dir);
  if (!config_.host_model_json.empty())
    host_model_ = host_cost_model_from_json(config_.host_model_json);
}

ForecastEngine::~ForecastEngine() = default;

void ForecastEngine::forget_predictions() {
  std::lock_guard<std::mutex> lock(memos_mutex_);
  memos_.clear();  // a forecast running now keeps its memo alive and drops it after
}

std::shared_ptr<ForecastEngine::Memo> ForecastEngine::memo_for(const TraceOrigin& o) const {
  // Every origin field, so that a predictor reading one more of them stays correct.
  std::string key;
  for (const std::string* part : {&o.device, &o.host, &o.torch_version, &o.habitat_version,
                                  &o.float32_matmul_precision, &o.autocast_dtype}) {
    key += *part;
    key += '\0';
  }
  key += std::string(o.allow_tf32 ? "t" : "f") + (o.autocast ? "a" : "-") +
         (o.cudnn_allow_tf32 ? "c" : "-");
  std::lock_guard<std::mutex> lock(memos_mutex_);
  auto it = memos_.find(key);
  if (it == memos_.end()) {
    if (memos_.size() >= 8) memos_.clear();  // a few origins per process; never unbounded
    it = memos_.emplace(key, std::make_shared<Memo>()).first;
  }
  return it->second;
}

template <class Result>
Result ForecastEngine::run(Result (Predictor::*predict)(const Step&, const TraceOrigin&,
                                                        const std::vector<std::string>&) const,
                           const Step& step, const TraceOrigin& origin,
                           const std::vector<std::string>& targets,
                           const StepTimeline& timeline) const {
  // A GPU at least as good on every figure is never forecast slower (learned_envelope.h).
  // The envelope memoises without a lock: one per forecast.
  std::optional<DominanceEnvelope> envelope;
  if (learned_ != nullptr) envelope.emplace(*learned_, db_);
  Predictor predictor(db_, envelope ? &*envelope : nullptr);
  TimelineOptions options;
  options.host_speed = timeline.host_speed;
  options.host_model = host_model();
  options.overhead_per_op_us = timeline.overhead_per_op_us;
  if (timeline.uninstrumented_wall_us > 0)
    options.uninstrumented_wall_us = timeline.uninstrumented_wall_us;
  predictor.set_timeline(true, options);
  predictor.set_memoize(config_.memoize);
  if (!config_.memoize) return (predictor.*predict)(step, origin, targets);
  const std::shared_ptr<Memo> memo = memo_for(origin);
  std::lock_guard<std::mutex> lock(memo->mutex);
  predictor.set_memo(&memo->memo);
  return (predictor.*predict)(step, origin, targets);
}

Forecast ForecastEngine::forecast(const Step& step, const TraceOrigin& origin,
                                  const std::vector<std::string>& targets,
                                  const StepTimeline& timeline) const {
  return run(&Predictor::predict, step, origin, targets, timeline);
}

ForecastParts ForecastEngine::forecast_parts(const Step& step, const TraceOrigin& origin,
                                             const std::vector<std::string>& targets,
                                             const StepTimeline& timeline) const {
  return run(&Predictor::predict_parts, step, origin, targets, timeline);
}

}  // namespace habitat
