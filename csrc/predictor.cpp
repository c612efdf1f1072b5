#include "predictor.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "roofline.h"
#include "shape_efficiency.h"
#include "wave_scaling.h"

namespace habitat {
namespace {

// Library-chosen kernels differ between GPUs, so their measured launch configurations do
// not carry over; these classes are scaled as a whole op instead (prior-art.md §1).
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
    if (cost.op_class == OpClass::NoKernel) return {0.0, Method::NoKernel};
    if (origin_ != nullptr && !op.kernels.empty()) return runtime_based(op, cost, target);
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

  std::unordered_map<uint64_t, std::size_t> index_of;
  index_of.reserve(step.ops.size());
  f.ops.resize(step.ops.size());
  f.totals.resize(devices.size());
  std::set<std::string> unsupported;

  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    index_of[op.id] = i;
    OpForecast& of = f.ops[i];
    of.op_id = op.id;
    of.per_target.resize(devices.size());
    if (op.has_children) {
      for (auto& p : of.per_target) p.method = Method::Composite;
      continue;
    }
    of.cost = estimate_cost(op, origin.allow_tf32);
    if (!of.cost.known()) unsupported.insert(op.name);
    for (std::size_t t = 0; t < devices.size(); ++t) {
      const OpPrediction p = op_predictor.predict(op, of.cost, *devices[t]);
      of.per_target[t] = p;
      TargetTotals& totals = f.totals[t];
      totals.total_us += p.time_us;
      totals.phase_us[op.phase] += p.time_us;
      totals.method_ops[p.method] += 1;
    }
  }

  // Children follow their parent in start order, so a reverse pass rolls each op's time
  // up into its parent exactly once, however deep the nesting.
  for (std::size_t i = step.ops.size(); i-- > 0;) {
    const OpRecord& op = step.ops[i];
    if (!op.parent) continue;
    auto it = index_of.find(*op.parent);
    if (it == index_of.end()) continue;
    auto& parent = f.ops[it->second].per_target;
    for (std::size_t t = 0; t < devices.size(); ++t) parent[t].time_us += f.ops[i].per_target[t].time_us;
  }
  f.unsupported.assign(unsupported.begin(), unsupported.end());
  return f;
}

std::string forecast_to_json(const Forecast& f, const Step& step) {
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
  json ops = json::array();
  for (std::size_t i = 0; i < f.ops.size(); ++i) {
    const OpForecast& of = f.ops[i];
    json predictions = json::array();
    for (const auto& p : of.per_target) predictions.push_back({p.time_us, to_string(p.method)});
    json op = {{"id", of.op_id}, {"predictions", std::move(predictions)}};
    if (!step.ops[i].has_children) {
      op["class"] = to_string(of.cost.op_class);
      op["flops"] = of.cost.flops;
      op["bytes"] = of.cost.bytes();
      op["precision"] = std::string(to_string(of.cost.precision));
    }
    ops.push_back(std::move(op));
  }
  doc["ops"] = std::move(ops);
  doc["unsupported"] = f.unsupported;
  return doc.dump();
}

}  // namespace habitat
