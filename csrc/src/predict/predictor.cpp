#include "habitat/predictor.h"

#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "predict/op_key.h"
#include "predict/shape_efficiency.h"
#include "habitat/wave_scaling.h"

namespace habitat {
namespace {

// Library-chosen kernels differ between GPUs, so their measured launch configurations do
// not carry over; these classes are scaled as a whole op instead (docs/references.md, Habitat).
bool kernels_vary_across_gpus(OpClass c) {
  return c == OpClass::Gemm || c == OpClass::Conv || c == OpClass::Attention;
}

double measured_kernel_us(const OpRecord& op) {
  return std::accumulate(op.kernels.begin(), op.kernels.end(), 0.0,
                         [](double sum, const KernelLaunch& k) { return sum + k.duration_us; });
}

// Bytes touched by every tensor argument and output: the only size we know for an op the
// cost model does not cover.
double tensor_bytes(const OpRecord& op) {
  double bytes = 0;
  for (const auto& a : op.args) {
    for (const auto& t : a.value.tensors) bytes += static_cast<double>(t.nbytes());
  }
  for (const auto& t : op.outputs) bytes += static_cast<double>(t.nbytes());
  return bytes;
}

class OpPredictor {
 public:
  OpPredictor(const Device* origin, const ShapeModel* model) : origin_(origin), model_(model) {}

  OpPrediction predict(const OpRecord& op, const OpCost& cost, const Device& target) const {
    // Measured kernels come first: an op the cost model thinks launches none may still have
    // some (a compiled graph's kernels that matched no fused record).
    if (origin_ != nullptr && !op.kernels.empty()) return runtime_based(op, cost, target);
    if (cost.op_class == OpClass::NoKernel) return {0.0, Method::NoKernel};
    return shape_based(op, cost, target);
  }

 private:
  OpPrediction shape_based(const OpRecord& op, const OpCost& cost, const Device& target) const {
    if (!cost.known()) {
      OpCost fallback = cost;
      fallback.bytes_read = tensor_bytes(op);
      fallback.kernels = 1;
      return {roofline_estimate_us(fallback, target), Method::Fallback};
    }
    if (model_ != nullptr) {
      if (auto t = model_->predict_us(op, cost, target)) return {*t, Method::LearnedShape};
    }
    return {roofline_estimate_us(cost, target), Method::Roofline};
  }

  OpPrediction runtime_based(const OpRecord& op, const OpCost& cost, const Device& target) const {
    const double measured = measured_kernel_us(op);
    if (kernels_vary_across_gpus(cost.op_class)) {
      if (model_ != nullptr) {
        auto on_target = model_->predict_us(op, cost, target);
        auto on_origin = model_->predict_us(op, cost, *origin_);
        if (on_target && on_origin && *on_origin > 0) {
          return {measured * *on_target / *on_origin, Method::LearnedRatio};
        }
      }
      const double origin_est = roofline_estimate_us(cost, *origin_);
      return {measured * roofline_estimate_us(cost, target) / origin_est, Method::RooflineRatio};
    }
    const double intensity = cost.known() ? cost.arithmetic_intensity() : -1.0;
    const WaveScaler scaler(*origin_, target);
    double total = 0;
    for (const auto& k : op.kernels) total += scaler.scale(k, intensity, cost.precision).time_us;
    return {total, Method::WaveScaling};
  }

  const Device* origin_;
  const ShapeModel* model_;
};

}  // namespace

const char* to_string(Method m) {
  switch (m) {
    case Method::WaveScaling:
      return "wave_scaling";
    case Method::LearnedRatio:
      return "learned_ratio";
    case Method::RooflineRatio:
      return "roofline_ratio";
    case Method::LearnedShape:
      return "learned_shape";
    case Method::Roofline:
      return "roofline";
    case Method::Fallback:
      return "fallback";
    case Method::NoKernel:
      return "no_kernel";
    case Method::Composite:
      return "composite";
  }
  return "unknown";
}

Forecast Predictor::predict(const Step& step, const TraceOrigin& origin,
                            const std::vector<std::string>& targets) const {
  Forecast f;
  std::vector<const Device*> devices;
  for (const auto& name : targets) {
    const Device& d = db_.find(name);
    devices.push_back(&d);
    f.targets.push_back(d.name);
  }
  const Device* origin_gpu = origin.device == "cpu" ? nullptr : db_.try_find(origin.device);
  const OpPredictor op_predictor(origin_gpu, model_);

  const std::size_t n_ops = step.ops.size();
  const std::size_t n_targets = devices.size();
  std::unordered_map<uint64_t, std::size_t> index_of;
  index_of.reserve(n_ops);
  f.ops.resize(n_ops);
  f.totals.resize(n_targets);
  std::set<std::string> unsupported;

  // Each op's own work. A composite op's own work is what it launched itself: measured
  // kernels on a GPU origin; on the shape path, its cost-model estimate, which stands for
  // the whole decomposition (see the roll-up below).
  // Training steps repeat the same ops (layers, optimizer updates): the cost and the
  // per-target predictions are computed once per distinct op (see OpKey) and copied, which
  // gives the very numbers computing them again would (the functions are pure).
  struct Memo {
    OpCost cost;
    std::vector<OpPrediction> predictions;  // empty until a non-composite op needs them
  };
  std::unordered_map<std::string, Memo> memo;
  OpKey op_key;
  std::vector<std::vector<OpPrediction>> own(n_ops);
  for (std::size_t i = 0; i < n_ops; ++i) {
    const OpRecord& op = step.ops[i];
    index_of[op.id] = i;
    OpForecast& of = f.ops[i];
    of.op_id = op.id;
    Memo fresh;
    Memo* m = &fresh;
    bool cached = false;
    if (memoize_) {
      auto [it, inserted] = memo.try_emplace(op_key.of(op));
      m = &it->second;
      cached = !inserted;
    }
    if (!cached) m->cost = estimate_cost(op, origin.allow_tf32);
    of.cost = m->cost;
    const bool composite_only =
        op.has_children && (origin_gpu != nullptr ? op.kernels.empty() : !of.cost.known());
    if (!of.cost.known() && !op.has_children) unsupported.insert(op.name);
    of.share.assign(n_targets, OpPrediction{0.0, Method::Composite});
    if (composite_only) {
      own[i].assign(n_targets, OpPrediction{0.0, Method::Composite});
      continue;
    }
    if (m->predictions.empty()) {
      m->predictions.resize(n_targets);
      for (std::size_t t = 0; t < n_targets; ++t) {
        m->predictions[t] = op_predictor.predict(op, of.cost, *devices[t]);
      }
    }
    own[i] = m->predictions;
  }

  // Children follow their parent in start order, so a reverse pass sees every child's final
  // time before its parent. Measured kernels are attributed to the innermost op, so on a GPU
  // origin a parent's time is its own kernels plus its children's. On the shape path the
  // parent's estimate and its children's sum describe the same work: take the larger, which
  // keeps the work of ops that call helpers (e.g. a zero fill) without counting it twice.
  std::vector<std::vector<double>> children_us(n_ops, std::vector<double>(n_targets, 0.0));
  std::vector<std::vector<char>> children_count(n_ops, std::vector<char>(n_targets, 1));
  for (std::size_t i = n_ops; i-- > 0;) {
    const OpRecord& op = step.ops[i];
    auto& final_prediction = f.ops[i].per_target;
    final_prediction = own[i];
    if (op.has_children) {
      for (std::size_t t = 0; t < n_targets; ++t) {
        const OpPrediction& mine = own[i][t];
        const double kids = children_us[i][t];
        if (mine.method == Method::Composite) {
          final_prediction[t] = {kids, Method::Composite};
        } else if (origin_gpu != nullptr) {
          final_prediction[t] = {mine.time_us + kids, mine.method};
        } else if (mine.time_us > kids) {
          children_count[i][t] = 0;
        } else {
          final_prediction[t] = {kids, Method::Composite};
        }
      }
    }
    if (!op.parent) continue;
    auto it = index_of.find(*op.parent);
    if (it == index_of.end()) continue;
    for (std::size_t t = 0; t < n_targets; ++t) children_us[it->second][t] += final_prediction[t].time_us;
  }

  // Totals: walk down from the roots, counting each op's own share once.
  std::vector<std::vector<char>> active(n_ops, std::vector<char>(n_targets, 1));
  for (std::size_t i = 0; i < n_ops; ++i) {
    const OpRecord& op = step.ops[i];
    const auto parent = op.parent ? index_of.find(*op.parent) : index_of.end();
    for (std::size_t t = 0; t < n_targets; ++t) {
      if (parent != index_of.end()) {
        const std::size_t p = parent->second;
        active[i][t] = active[p][t] && children_count[p][t];
      }
      if (!active[i][t]) continue;
      // An op whose children carry its work adds only what it measured itself (GPU origin).
      const bool counts_children = op.has_children && children_count[i][t];
      if (counts_children && origin_gpu == nullptr) continue;
      const OpPrediction& share = counts_children ? own[i][t] : f.ops[i].per_target[t];
      if (share.method == Method::Composite) continue;
      f.ops[i].share[t] = share;
      TargetTotals& totals = f.totals[t];
      totals.total_us += share.time_us;
      totals.phase_us[op.phase] += share.time_us;
      totals.method_ops[share.method] += 1;
    }
  }
  f.unsupported.assign(unsupported.begin(), unsupported.end());
  return f;
}

namespace {

nlohmann::json summary_json(const Forecast& f) {
  using nlohmann::json;
  json doc;
  doc["targets"] = f.targets;
  json totals = json::array();
  for (std::size_t t = 0; t < f.targets.size(); ++t) {
    const TargetTotals& tt = f.totals[t];
    json phases = json::object();
    for (const auto& [phase, us] : tt.phase_us) phases[to_string(phase)] = us / 1000.0;
    json methods = json::object();
    for (const auto& [method, n] : tt.method_ops) methods[to_string(method)] = n;
    totals.push_back({{"target", f.targets[t]},
                      {"total_ms", tt.total_us / 1000.0},
                      {"phases", phases},
                      {"methods", methods}});
  }
  doc["totals"] = std::move(totals);
  doc["unsupported"] = f.unsupported;
  return doc;
}

nlohmann::json ops_json(const Forecast& f) {
  using nlohmann::json;
  json ops = json::array();
  for (const OpForecast& of : f.ops) {
    json predictions = json::array();
    for (std::size_t t = 0; t < of.per_target.size(); ++t) {
      const OpPrediction& p = of.per_target[t];
      const OpPrediction& share = of.share[t];
      predictions.push_back({p.time_us, to_string(p.method), share.time_us, to_string(share.method)});
    }
    ops.push_back({{"id", of.op_id},
                   {"predictions", std::move(predictions)},
                   {"class", to_string(of.cost.op_class)},
                   {"flops", of.cost.flops},
                   {"bytes", of.cost.bytes()},
                   {"precision", std::string(to_string(of.cost.precision))}});
  }
  return ops;
}

}  // namespace

std::string forecast_to_json(const Forecast& f) {
  nlohmann::json doc = summary_json(f);
  doc["ops"] = ops_json(f);
  return doc.dump();
}

std::string forecast_summary_to_json(const Forecast& f) { return summary_json(f).dump(); }

std::string forecast_ops_to_json(const Forecast& f) { return ops_json(f).dump(); }

}  // namespace habitat
