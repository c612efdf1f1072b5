#include "habitat/predictor.h"

#include <algorithm>
#include <cstring>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "cost/aten_loops.h"
#include "habitat/forecast_rows.h"
#include "habitat/wave_scaling.h"
#include "predict/cuda_paths.h"
#include "predict/embedding_kernels.h"
#include "predict/kernel_overlap.h"
#include "predict/loss_kernels.h"
#include "predict/multi_tensor_kernels.h"
#include "predict/op_key.h"
#include "predict/optimizer_state.h"
#include "predict/shape_efficiency.h"
#include "predict/timeline_json.h"

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

// Every tensor the op touches is a CPU tensor (and it has one): in a step traced on a GPU such an
// op runs on the host and launches nothing (AdamW's step counters with capturable=False: .item()
// and add_ on CPU scalars, 770 ops of a BERT-base step).
bool host_tensors_only(const OpRecord& op) {
  bool any = false;
  const auto on_host = [&any](const TensorMeta& t) {
    if (!t.defined) return true;
    any = true;
    return t.device == "cpu";
  };
  for (const auto& a : op.args) {
    for (const auto& t : a.value.tensors) {
      if (!on_host(t)) return false;
    }
  }
  for (const auto& t : op.outputs) {
    if (!on_host(t)) return false;
  }
  return any;
}

bool has_complex_tensor(const OpRecord& op) {
  for (const auto& a : op.args) {
    for (const auto& t : a.value.tensors) {
      if (is_complex(t.dtype)) return true;
    }
  }
  return false;
}

// The per-op forecasts of a big step are many small heap blocks; once freed, the allocator
// keeps their pages, and the timeline's large arrays (one entry per host event, allocated
// apart) cannot reuse them. Returning the free pages to the system keeps the step's peak
// down (a step of a million ops: a few hundred MB). Only for big steps: trimming costs a
// walk over the heap.
void give_back_freed_memory(std::size_t n_ops) {
#if defined(__GLIBC__)
  if (n_ops >= (std::size_t{1} << 18)) malloc_trim(0);
#else
  (void)n_ops;
#endif
}

// One value per op and target in one block: a step of a million ops forecast for a few
// GPUs would otherwise hold a small heap vector per op for each of these tables.
template <class T>
class OpTargetTable {
 public:
  OpTargetTable(std::size_t n_ops, std::size_t n_targets, T fill)
      : n_targets_(n_targets), cells_(n_ops * n_targets, fill) {}
  T* operator[](std::size_t op) { return cells_.data() + op * n_targets_; }
  const T* operator[](std::size_t op) const { return cells_.data() + op * n_targets_; }
  void fill_row(std::size_t op, T value) { std::fill_n((*this)[op], n_targets_, value); }
  // Gives the memory back once the table is no longer read.
  void release() { std::vector<T>().swap(cells_); }
  template <class Range>
  void set_row(std::size_t op, const Range& values) {
    std::copy(values.begin(), values.end(), (*this)[op]);
  }

 private:
  std::size_t n_targets_;
  std::vector<T> cells_;
};

class OpPredictor {
 public:
  OpPredictor(const Device* origin, const ShapeModel* model) : origin_(origin), model_(model) {}

  // `origin_model_us` caches the learned model's origin-side time of this op across targets
  // (unset: not computed yet).
  OpPrediction predict(const OpRecord& op, const OpCost& cost, const Device& target,
                       std::optional<std::optional<double>>& origin_model_us) const {
    // Measured kernels come first: an op the cost model thinks launches none may still have
    // some (a compiled graph's kernels that matched no fused record).
    if (origin_ != nullptr && !op.kernels.empty()) {
      return runtime_based(op, cost, target, origin_model_us);
    }
    if (cost.op_class == OpClass::NoKernel) return {0.0, Method::NoKernel};
    if (origin_ != nullptr && host_tensors_only(op)) return {0.0, Method::NoKernel};
    return shape_based(op, cost, target);
  }
  // Without a cache of the origin-side time (ops forecast once, e.g. CPU paths mapped to CUDA).
  OpPrediction predict(const OpRecord& op, const OpCost& cost, const Device& target) const {
    std::optional<std::optional<double>> origin_model_us;
    return predict(op, cost, target, origin_model_us);
  }

 private:
  std::optional<MeasuredRoofline> measured(const OpRecord& op, const OpCost& cost) const {
    return model_ != nullptr ? model_->measured_roofline(op, cost) : std::nullopt;
  }

  OpPrediction shape_based(const OpRecord& op, const OpCost& cost, const Device& target) const {
    if (!cost.known()) {
      OpCost fallback = cost;
      fallback.bytes_read = tensor_bytes(op);
      fallback.kernels = 1;
      return {roofline_estimate_us(fallback, target), Method::Fallback};
    }
    // The learned models read real dtypes' shapes; complex operands (4 real multiply-adds per
    // complex one, in the cost's FLOPs) take the roofline.
    if (model_ != nullptr && !has_complex_tensor(op)) {
      if (auto t = model_->predict_us(op, cost, target)) return {*t, Method::LearnedShape};
    }
    // Row gathers, the embedding gradient and nll_loss: bounded by their launch structure, not
    // by bytes.
    if (auto t = embedding_kernels_us(op, target)) return {*t, Method::Roofline};
    if (auto t = nll_loss_kernels_us(op, target)) return {*t, Method::Roofline};
    if (auto t = multi_tensor_kernels_us(op, cost, target)) return {*t, Method::Roofline};
    double t = roofline_estimate_us(cost, target, measured(op, cost));
    // A copy from a strided source, or a cat of strided inputs, runs ATen's element-bound loop
    // (cost/aten_loops.h).
    if ((cost.op_class == OpClass::Copy && aten_loops::copy_runs_vectorized(op) == false) ||
        aten_loops::cat_inputs_contiguous(op) == false) {
      t = std::max(t, aten_loops::non_vectorized_us(static_cast<double>(op.outputs.front().numel()),
                                                    target));
    }
    return {t, Method::Roofline};
  }

  OpPrediction runtime_based(const OpRecord& op, const OpCost& cost, const Device& target,
                             std::optional<std::optional<double>>& origin_model_us) const {
    // Kernels that ran side by side on several streams take the device for less than their
    // sum, on the target as on the origin.
    const double busy = kernel_busy_fraction(op.kernels);
    const double measured = measured_kernel_us(op) * busy;
    if (kernels_vary_across_gpus(cost.op_class)) {
      if (model_ != nullptr) {
        auto on_target = model_->predict_us(op, cost, target);
        if (!origin_model_us) origin_model_us = model_->predict_us(op, cost, *origin_);
        const std::optional<double>& on_origin = *origin_model_us;
        if (on_target && on_origin && *on_origin > 0) {
          return {measured * *on_target / *on_origin, Method::LearnedRatio};
        }
      }
      const std::optional<MeasuredRoofline> form = this->measured(op, cost);
      const double origin_est = roofline_estimate_us(cost, *origin_, form);
      return {measured * roofline_estimate_us(cost, target, form) / origin_est,
              Method::RooflineRatio};
    }
    const double intensity = cost.known() ? cost.arithmetic_intensity() : -1.0;
    const WaveScaler scaler(*origin_, target);
    double total = 0;
    for (const auto& k : op.kernels) total += scaler.scale(k, intensity, cost.precision).time_us;
    return {total * busy, Method::WaveScaling};
  }

  const Device* origin_;
  const ShapeModel* model_;
};

// Ops that call themselves again with other arguments: autocast's kernels (aten::linear with
// float32 arguments re-dispatches aten::linear on bfloat16 casts below the Autocast key, and
// capture records both), and any other layer that forwards an op to itself. The outer call's
// arguments are not what ran (a float32 estimate where bfloat16 kernels ran): its work is its
// children's, the casts and the inner op.
std::vector<char> redispatch_wrappers(const Step& step, const OpIndex& index_of) {
  std::vector<char> wrapper(step.ops.size(), 0);
  for (const OpRecord& op : step.ops) {
    if (!op.parent) continue;
    const std::size_t p = index_of.find(*op.parent);
    if (p == OpIndex::npos) continue;
    const OpRecord& parent = step.ops[p];
    if (parent.name == op.name && parent.overload == op.overload) wrapper[p] = 1;
  }
  return wrapper;
}

// Op `i` runs no kernel on the target: no cost, no time on any target.
void launches_nothing(std::size_t i, Forecast& f, OpTargetTable<OpPrediction>& own) {
  f.ops[i].cost = OpCost{};
  f.ops[i].cost.op_class = OpClass::NoKernel;
  own.fill_row(i, OpPrediction{0.0, Method::NoKernel});
}

// A CPU-traced step forecast for CUDA targets costs what CUDA would run (cuda_paths.h): host
// bookkeeping launches nothing, and per-tensor optimizer ops take their share (by bytes) of
// the _foreach_ op CUDA launches for their group. Returns which ops' own estimates stand for
// their children too (cuda_paths::Mapping::parent_wins).
std::vector<char> map_to_cuda(const Step& step, const TraceOrigin& origin, const OpIndex& index_of,
                              const OpPredictor& predictor,
                              const std::vector<const Device*>& devices, Forecast& f,
                              OpTargetTable<OpPrediction>& own) {
  cuda_paths::Mapping cuda = cuda_paths::map_cpu_step(step, index_of, origin);
  // Host work, and the pieces of a fused op's backward (an attention's carriers are costed as
  // the fused backward below, an RMS norm's are expansions): no kernel of their own on CUDA.
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    if (cuda.host_only[i] || cuda.absorbed[i]) launches_nothing(i, f, own);
  }
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    if (cuda.children_win[i]) own.fill_row(i, OpPrediction{0.0, Method::Composite});
  }
  for (const auto& group : cuda.foreach_groups) {
    const OpCost cost = estimate_cost(group.op, op_precision(group.op, origin));
    if (!cost.known()) continue;
    double bytes = 0;
    for (const std::size_t m : group.members) bytes += f.ops[m].cost.bytes();
    for (std::size_t t = 0; t < devices.size(); ++t) {
      const OpPrediction whole = predictor.predict(group.op, cost, *devices[t]);
      for (const std::size_t m : group.members) {
        const double share = bytes > 0 ? f.ops[m].cost.bytes() / bytes
                                       : 1.0 / static_cast<double>(group.members.size());
        own[m][t] = {whole.time_us * share, whole.method};
      }
    }
  }
  for (const auto& e : cuda.expansions) {
    OpCost total;
    std::vector<OpPrediction> sums(devices.size(), OpPrediction{0.0, Method::Roofline});
    std::vector<double> largest(devices.size(), 0.0);
    for (const auto& [part, count] : e.parts) {
      const OpCost cost = estimate_cost(part, op_precision(part, origin));
      if (!cost.known()) continue;
      if (total.op_class == OpClass::Unknown || cost.op_class == OpClass::Gemm) {
        total.op_class = cost.op_class;
        total.precision = cost.precision;
      }
      total.flops += count * cost.flops;
      total.bytes_read += count * cost.bytes_read;
      total.bytes_written += count * cost.bytes_written;
      total.kernels += static_cast<int>(count) * cost.kernels;
      for (std::size_t t = 0; t < devices.size(); ++t) {
        const OpPrediction p = predictor.predict(part, cost, *devices[t]);
        // The op is labelled with the method of its GEMMs, else of its largest part.
        if (cost.op_class == OpClass::Gemm ||
            (total.op_class != OpClass::Gemm && count * p.time_us > largest[t])) {
          sums[t].method = p.method;
          largest[t] = count * p.time_us;
        }
        sums[t].time_us += count * p.time_us;
      }
    }
    for (OpPrediction& sum : sums) sum.time_us *= e.time_scale;
    if (total.op_class == OpClass::Unknown) continue;
    f.ops[e.index].cost = total;
    own.set_row(e.index, sums);
  }
  // Op `i` costed as the fused attention op the target runs for the SDPA call `source`.
  const auto cost_as_fused = [&](std::size_t i, const OpRecord& source, bool backward) {
    OpRecord fused = source;
    const TensorMeta* q = fused.tensor("query");
    if (q == nullptr) return;
    const bool masked = fused.tensor("attn_mask") != nullptr;
    for (std::size_t t = 0; t < devices.size(); ++t) {
      fused.name = cuda_paths::cuda_attention_op(q->dtype, *devices[t], backward, masked);
      const OpCost cost = estimate_cost(fused, op_precision(fused, origin));
      if (!cost.known()) continue;
      own[i][t] = predictor.predict(fused, cost, *devices[t]);
      if (t == 0) f.ops[i].cost = cost;
    }
  };
  for (const std::size_t i : cuda.attention) {
    cost_as_fused(i, step.ops[i], step.ops[i].name.ends_with("_backward"));
  }
  for (const auto& [carrier, forward] : cuda.attention_backward.carriers) {
    cost_as_fused(carrier, step.ops[forward], true);
  }
  return std::move(cuda.parent_wins);
}

// One step's forecast, phase by phase (Predictor::predict_ops): each op's own work, the CUDA
// paths of a CPU-traced step, the roll-up of children into their parents, the totals.
class StepForecaster {
 public:
  StepForecaster(const Step& step, const TraceOrigin& origin, const Device* origin_gpu,
                 const ShapeModel* model, const std::vector<const Device*>& devices)
      : step_(step),
        origin_(origin),
        origin_gpu_(origin_gpu),
        devices_(devices),
        predictor_(origin_gpu, model),
        n_ops_(step.ops.size()),
        n_targets_(devices.size()),
        index_of_(step),
        own_(n_ops_, n_targets_, OpPrediction{}) {
    for (const Device* d : devices) f_.targets.push_back(d->name);
    f_.ops.resize(n_ops_);
    f_.totals.resize(n_targets_);
  }

  // Each op's own work. A composite op's own work is what it launched itself: measured
  // kernels on a GPU origin; on the shape path, its cost-model estimate, which stands for
  // the whole decomposition (see roll_up).
  // Training steps repeat the same ops (layers, optimizer updates): the cost and the
  // per-target predictions are computed once per distinct op (see OpKey) and copied, which
  // gives the very numbers computing them again would (the functions are pure).
  // Returns whether every op was in the memo already (a step seen before).
  bool own_work(PredictionMemo& memo, bool memoize) {
    std::vector<std::size_t> slots(n_targets_);
    for (std::size_t t = 0; t < n_targets_; ++t) slots[t] = memo.slot(devices_[t]);
    OpKey op_key;
    bool all_known = true;
    for (std::size_t i = 0; i < n_ops_; ++i) {
      const OpRecord& op = step_.ops[i];
      OpForecast& of = f_.ops[i];
      of.op_id = op.id;
      PredictionMemo::Entry fresh;
      PredictionMemo::Entry* m = &fresh;
      bool cached = false;
      if (memoize) {
        auto [entry, inserted] = memo.find_or_add(op_key.of(op));
        m = entry;
        cached = !inserted;
      }
      all_known = all_known && cached;
      if (!cached) m->cost = estimate_cost(op, op_precision(op, origin_));
      of.cost = m->cost;
      const bool composite_only =
          op.has_children && (origin_gpu_ != nullptr ? op.kernels.empty() : !of.cost.known());
      if (!of.cost.known() && !op.has_children) unsupported_.insert(op.name);
      of.share.assign(n_targets_, OpPrediction{0.0, Method::Composite});
      if (composite_only) {
        own_.fill_row(i, OpPrediction{0.0, Method::Composite});
        continue;
      }
      predict_targets(i, *m, slots);
    }
    return all_known;
  }

  // A CPU-traced step costs what CUDA would run (map_to_cuda above); a GPU origin's ops ran,
  // but those creating a first step's optimizer state run in no later step (optimizer_state.h).
  void map_to_cuda_work() {
    if (origin_.device == "cpu") {
      parent_wins_ = map_to_cuda(step_, origin_, index_of_, predictor_, devices_, f_, own_);
      return;
    }
    parent_wins_.assign(n_ops_, 0);
    const OptimizerStateInit init = optimizer_state_init(step_);
    for (std::size_t i = 0; i < n_ops_; ++i) {
      if (init.ops[i]) launches_nothing(i, f_, own_);
    }
  }

  // Children follow their parent in start order, so a reverse pass sees every child's final
  // time before its parent. Measured kernels are attributed to the innermost op, so on a GPU
  // origin a parent's time is its own kernels plus its children's. On the shape path the
  // parent's estimate and its children's sum describe the same work: take the larger, which
  // keeps the work of ops that call helpers (e.g. a zero fill) without counting it twice;
  // except for a wrapper that re-dispatches itself (see redispatch_wrappers), whose children
  // are what ran.
  void roll_up() {
    const std::vector<char> wrapper = redispatch_wrappers(step_, index_of_);
    OpTargetTable<double> children_us(n_ops_, n_targets_, 0.0);
    children_count_ = OpTargetTable<char>(n_ops_, n_targets_, 1);
    for (std::size_t i = n_ops_; i-- > 0;) {
      const OpRecord& op = step_.ops[i];
      auto& final_prediction = f_.ops[i].per_target;
      final_prediction.assign(own_[i], own_[i] + n_targets_);
      if (op.has_children) {
        for (std::size_t t = 0; t < n_targets_; ++t) {
          const OpPrediction& mine = own_[i][t];
          const double kids = children_us[i][t];
          if (mine.method == Method::Composite) {
            final_prediction[t] = {kids, Method::Composite};
          } else if (origin_gpu_ != nullptr) {
            final_prediction[t] = {mine.time_us + kids, mine.method};
          } else if ((mine.time_us > kids && !wrapper[i]) || parent_wins_[i]) {
            children_count_[i][t] = 0;
          } else {
            final_prediction[t] = {kids, Method::Composite};
          }
        }
      }
      if (!op.parent) continue;
      const std::size_t p = index_of_.find(*op.parent);
      if (p == OpIndex::npos) continue;
      for (std::size_t t = 0; t < n_targets_; ++t) children_us[p][t] += final_prediction[t].time_us;
    }
    children_us.release();
  }

  // Totals: walk down from the roots, counting each op's own share once.
  void add_totals() {
    OpTargetTable<char> active(n_ops_, n_targets_, 1);
    for (std::size_t i = 0; i < n_ops_; ++i) {
      const OpRecord& op = step_.ops[i];
      const std::size_t p = op.parent ? index_of_.find(*op.parent) : OpIndex::npos;
      for (std::size_t t = 0; t < n_targets_; ++t) {
        if (p != OpIndex::npos) active[i][t] = active[p][t] && children_count_[p][t];
        if (!active[i][t]) continue;
        // An op whose children carry its work adds only what it measured itself (GPU origin).
        const bool counts_children = op.has_children && children_count_[i][t];
        if (counts_children && origin_gpu_ == nullptr) continue;
        const OpPrediction& share = counts_children ? own_[i][t] : f_.ops[i].per_target[t];
        if (share.method == Method::Composite) continue;
        f_.ops[i].share[t] = share;
        TargetTotals& totals = f_.totals[t];
        totals.total_us += share.time_us;
        totals.phase_us[op.phase] += share.time_us;
        totals.method_ops[share.method] += 1;
      }
    }
  }

  Forecast take() {
    f_.unsupported.assign(unsupported_.begin(), unsupported_.end());
    return std::move(f_);
  }

 private:
  // Op i's prediction on every target, from the memo entry `m` where it holds one.
  void predict_targets(std::size_t i, PredictionMemo::Entry& m,
                       const std::vector<std::size_t>& slots) {
    const OpRecord& op = step_.ops[i];
    for (std::size_t t = 0; t < n_targets_; ++t) {
      const std::size_t s = slots[t];
      if (m.method.size() <= s) {
        m.method.resize(s + 1, PredictionMemo::kUnset);
        m.time_us.resize(s + 1, 0.0);
      }
      if (m.method[s] == PredictionMemo::kUnset) {
        const OpPrediction p =
            predictor_.predict(op, f_.ops[i].cost, *devices_[t], m.origin_model_us);
        m.time_us[s] = p.time_us;
        m.method[s] = static_cast<unsigned char>(p.method);
      }
      own_[i][t] = {m.time_us[s], static_cast<Method>(m.method[s])};
    }
  }

  const Step& step_;
  const TraceOrigin& origin_;
  const Device* origin_gpu_;
  const std::vector<const Device*>& devices_;
  const OpPredictor predictor_;
  const std::size_t n_ops_;
  const std::size_t n_targets_;
  const OpIndex index_of_;
  Forecast f_;
  OpTargetTable<OpPrediction> own_;  // each op's own work (own_work, map_to_cuda)
  std::vector<char> parent_wins_;    // ops whose own estimate stands for their children's
  OpTargetTable<char> children_count_{0, 0, 1};  // whether an op's children carry its work
  std::set<std::string> unsupported_;
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

std::vector<const Device*> Predictor::devices_of(const std::vector<std::string>& targets) const {
  std::vector<const Device*> devices;
  devices.reserve(targets.size());
  for (const auto& name : targets) devices.push_back(&db_.find(name));
  return devices;
}

PredictionMemo::Repeat* Predictor::repeat_of(const Step& step,
                                             const std::vector<const Device*>& devices) const {
  // A step doing the same work as the last one this memo saw in full: the same per-op
  // forecasts and totals (they read no host time); only the timeline is the new step's own.
  if (!memoize_ || shared_memo_ == nullptr) return nullptr;
  return shared_memo_->repeat_of(step, devices);
}

Forecast Predictor::predict(const Step& step, const TraceOrigin& origin,
                            const std::vector<std::string>& targets) const {
  const std::vector<const Device*> devices = devices_of(targets);
  if (const PredictionMemo::Repeat* repeat = repeat_of(step, devices)) {
    Forecast again = *repeat->forecast;
    again.dropped_ops = step.dropped_ops;
    if (timeline_on_) add_timelines(again, step, origin, timeline_);
    return again;
  }
  bool repeats = false;
  Forecast f = predict_ops(step, origin, devices, repeats);
  f.dropped_ops = step.dropped_ops;
  if (repeats) shared_memo_->remember(step, devices, std::make_shared<const Forecast>(f));
  if (timeline_on_) add_timelines(f, step, origin, timeline_);
  return f;
}

ForecastParts Predictor::predict_parts(const Step& step, const TraceOrigin& origin,
                                       const std::vector<std::string>& targets) const {
  const std::vector<const Device*> devices = devices_of(targets);
  std::shared_ptr<const Forecast> whole;
  PredictionMemo::Repeat* repeat = repeat_of(step, devices);
  if (repeat != nullptr) {
    whole = repeat->forecast;
  } else {
    bool repeats = false;
    whole = std::make_shared<const Forecast>(predict_ops(step, origin, devices, repeats));
    if (repeats) repeat = shared_memo_->remember(step, devices, whole);
  }
  ForecastParts out;
  if (repeat != nullptr) {
    if (repeat->rows == nullptr)
      repeat->rows = std::make_shared<const std::string>(forecast_ops_to_rows(*whole));
    out.rows = repeat->rows;
  } else {
    out.rows = std::make_shared<const std::string>(forecast_ops_to_rows(*whole));
  }
  out.summary.targets = whole->targets;
  out.summary.totals = whole->totals;
  out.summary.unsupported = whole->unsupported;
  out.summary.dropped_ops = step.dropped_ops;
  if (timeline_on_ && whole->ops.size() == step.ops.size()) {
    const std::size_t n_targets = whole->targets.size();
    std::vector<double> step_shares;
    if (repeat != nullptr) {
      if (repeat->shares.empty()) repeat->shares = shares_by_target(whole->ops, n_targets);
    } else {
      step_shares = shares_by_target(whole->ops, n_targets);
    }
    // The per-op forecasts are in the rows now: a step not kept for reuse gives them back
    // before its timeline is played (a step of a million ops holds hundreds of MB in them).
    const bool one_off = repeat == nullptr;
    whole.reset();
    if (one_off) give_back_freed_memory(step.ops.size());
    out.summary.timelines = step_timelines(repeat != nullptr ? repeat->shares : step_shares,
                                           n_targets, step, origin, timeline_);
  }
  return out;
}

Forecast Predictor::predict_ops(const Step& step, const TraceOrigin& origin,
                                const std::vector<const Device*>& devices, bool& repeats) const {
  const Device* origin_gpu = origin.device == "cpu" ? nullptr : db_.try_find(origin.device);
  StepForecaster forecaster(step, origin, origin_gpu, model_, devices);
  // The memo lasts one call, or across calls when the caller keeps one (set_memo).
  PredictionMemo call_memo;
  const bool all_known =
      forecaster.own_work(shared_memo_ != nullptr ? *shared_memo_ : call_memo, memoize_);
  forecaster.map_to_cuda_work();
  forecaster.roll_up();
  forecaster.add_totals();
  // Kept (by the caller) only once a step repeats, every op known: a one-off step costs no copy.
  repeats =
      all_known && shared_memo_ != nullptr && step.ops.size() <= PredictionMemo::kMaxRepeatOps;
  return forecaster.take();
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
  if (f.dropped_ops != 0) doc["dropped_ops"] = f.dropped_ops;
  if (!f.timelines.empty()) doc["timelines"] = timelines_json(f);
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
      predictions.push_back(
          {p.time_us, to_string(p.method), share.time_us, to_string(share.method)});
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
