// The step's peak memory from its trace, the only implementation of the method that
// python/habitat/analysis/memory.py documents (its estimate_step_memory calls this one).
#include "habitat/step_memory.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace habitat {
namespace {

// The element size of each dtype name a trace may hold.
int64_t dtype_bytes(std::string_view dtype, bool* known) {
  static const std::unordered_map<std::string_view, int64_t> kBytes = {
      {"float64", 8},
      {"double", 8},
      {"float32", 4},
      {"float", 4},
      {"float16", 2},
      {"half", 2},
      {"bfloat16", 2},
      {"complex128", 16},
      {"complex64", 8},
      {"complex32", 4},
      {"int64", 8},
      {"long", 8},
      {"int32", 4},
      {"int", 4},
      {"int16", 2},
      {"short", 2},
      {"int8", 1},
      {"uint8", 1},
      {"uint16", 2},
      {"uint32", 4},
      {"uint64", 8},
      {"bool", 1},
      {"float8_e4m3fn", 1},
      {"float8_e5m2", 1},
      {"float8_e4m3fnuz", 1},
      {"float8_e5m2fnuz", 1},
      {"float8_e8m0fnu", 1},
      {"qint8", 1},
      {"quint8", 1},
      {"qint32", 4},
  };
  const auto it = kBytes.find(dtype);
  if (known != nullptr) *known = it != kBytes.end();
  return it == kBytes.end() ? 0 : it->second;
}

// Ops that make a new tensor without computing it from data: how optimizers create state.
bool is_factory(std::string_view base) {
  static const std::unordered_set<std::string_view> kFactory = {
      "zeros",      "zeros_like",      "empty",    "empty_like", "empty_strided",
      "full",       "full_like",       "ones",     "ones_like",  "scalar_tensor",
      "lift_fresh", "lift_fresh_copy", "clone",    "new_zeros",  "new_empty",
      "new_full",   "new_ones",        "_to_copy", "tensor"};
  return kFactory.count(base) != 0;
}

bool is_matmul(std::string_view base) {
  static const std::unordered_set<std::string_view> kMatmul = {
      "mm",     "addmm",      "bmm",     "baddbmm", "matmul", "linear", "_addmm_activation",
      "addbmm", "_scaled_mm", "_int_mm", "addmv",   "mv"};
  return kMatmul.count(base) != 0;
}

// Fused optimizer kernels update these list arguments in place besides "self".
bool is_fused_state_arg(std::string_view name) {
  return name == "exp_avgs" || name == "exp_avg_sqs" || name == "max_exp_avg_sqs" ||
         name == "momentum_buffer_list" || name == "state_sums";
}

std::string_view base_name(std::string_view name) {
  const auto at = name.find("::");
  return at == std::string_view::npos ? name : name.substr(at + 2);
}

bool in_place(const OpRecord& op) {
  const std::string_view base = base_name(op.name);
  return base.ends_with("_") && !base.ends_with("__");
}

// The arguments an op updates in place.
struct Mutable {
  enum class Kind { None, Out, Self, SelfAndFusedState } kind = Kind::None;
  bool contains(std::string_view arg) const {
    switch (kind) {
      case Kind::None:
        return false;
      case Kind::Out:
        return arg == "out";
      case Kind::Self:
        return arg == "self";
      case Kind::SelfAndFusedState:
        return arg == "self" || is_fused_state_arg(arg);
    }
    return false;
  }
};

Mutable mutable_args(const OpRecord& op) {
  if (op.overload.starts_with("out")) return {Mutable::Kind::Out};
  if (!in_place(op)) return {};
  return {base_name(op.name).starts_with("_fused_") ? Mutable::Kind::SelfAndFusedState
                                                    : Mutable::Kind::Self};
}

// Each tensor among an op's arguments, in order (trace.py's tensor_args).
template <class Fn>
void for_each_tensor_arg(const OpRecord& op, Fn&& fn) {
  for (const Argument& arg : op.args) {
    if (arg.value.kind != ArgValue::Kind::Tensor && arg.value.kind != ArgValue::Kind::TensorList) {
      continue;
    }
    for (const TensorMeta& meta : arg.value.tensors) fn(arg.name, meta);
  }
}

bool contiguous(const TensorMeta& t) {
  if (t.strides.size() != t.shape.size()) return false;
  int64_t step = 1;
  for (std::size_t i = t.shape.size(); i-- > 0;) {
    if (t.strides[i] != step) return false;
    step *= std::max<int64_t>(t.shape[i], 1);
  }
  return true;
}

// Bytes from the storage's start to the tensor's last element.
int64_t storage_bytes(const TensorMeta& t) {
  const int64_t size = dtype_bytes(t.dtype, nullptr);
  if (std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d == 0; })) return 0;
  int64_t extent = 1;
  if (contiguous(t)) {  // a trace file omits row-major strides
    for (int64_t d : t.shape) extent *= d;
  } else {
    for (std::size_t i = 0; i < t.shape.size() && i < t.strides.size(); ++i) {
      extent += (t.shape[i] - 1) * std::abs(t.strides[i]);
    }
  }
  return (t.storage_offset + extent) * size;
}

using Phases = unsigned;  // a set of phases, one bit each
Phases bit(Phase p) { return 1u << static_cast<unsigned>(p); }

struct Storage {
  int64_t nbytes = 0;
  std::size_t first = 0;
  std::size_t last = 0;
  bool created = false;  // first seen as an output of an op of this step
  uint64_t last_id = 0;  // id of the last op that used it
  std::string_view created_by;
  Phase created_phase = Phase::Other;
  Phases read_in = 0;
  Phases mutated_in = 0;
};

enum class Category { Parameters, Gradients, OptimizerState, Inputs, Activations };

Category category(const Storage& s) {
  if (!s.created && (s.mutated_in & bit(Phase::Optimizer)) && (s.read_in & bit(Phase::Forward))) {
    return Category::Parameters;
  }
  const bool written_by_backward =
      (s.created && s.created_phase == Phase::Backward) || (s.mutated_in & bit(Phase::Backward));
  if (written_by_backward && (s.read_in & bit(Phase::Optimizer))) return Category::Gradients;
  if ((s.mutated_in & bit(Phase::Optimizer)) && (!s.created || is_factory(s.created_by))) {
    return Category::OptimizerState;
  }
  return s.created ? Category::Activations : Category::Inputs;
}

// Per storage id, the composite ops (in order) that returned it without receiving it, and
// whether their ids increase (then searched by bisection).
struct Makers {
  std::vector<const OpRecord*> ops;
  bool increasing = true;
};

// Storage ids among an op's tensor arguments (0 included).
std::unordered_set<uint64_t> input_storages(const OpRecord& op) {
  std::unordered_set<uint64_t> ids;
  for_each_tensor_arg(op, [&](const std::string&, const TensorMeta& m) { ids.insert(m.storage); });
  return ids;
}

std::unordered_map<uint64_t, Makers> made_by_composites(const std::vector<OpRecord>& ops) {
  std::unordered_map<uint64_t, Makers> made;
  for (const OpRecord& op : ops) {
    if (!op.has_children) continue;
    const auto inputs = input_storages(op);
    for (const TensorMeta& meta : op.outputs) {
      if (meta.storage == 0 || inputs.count(meta.storage)) continue;
      Makers& m = made[meta.storage];
      if (!m.ops.empty() && m.ops.back()->id > op.id) m.increasing = false;
      m.ops.push_back(&op);
    }
  }
  return made;
}

// The composite op that made `sid` most recently at or before op `op_id`.
const OpRecord* maker(uint64_t op_id, uint64_t sid,
                      const std::unordered_map<uint64_t, Makers>& made_by) {
  const auto it = made_by.find(sid);
  if (it == made_by.end()) return nullptr;
  const auto& ops = it->second.ops;
  if (it->second.increasing) {
    const auto at = std::upper_bound(ops.begin(), ops.end(), op_id,
                                     [](uint64_t id, const OpRecord* m) { return id < m->id; });
    return at == ops.begin() ? nullptr : *(at - 1);
  }
  for (auto m = ops.rbegin(); m != ops.rend(); ++m) {
    if ((*m)->id <= op_id) return *m;
  }
  return nullptr;
}

// A step's leaf ops in order (they allocate; a composite op's outputs are its sub-ops', or
// views of its inputs) and every op by id.
struct StepOps {
  std::vector<const OpRecord*> leaves;
  std::unordered_map<uint64_t, const OpRecord*> by_id;

  explicit StepOps(const Step& step) {
    by_id.reserve(step.ops.size());
    for (const OpRecord& op : step.ops) {
      by_id[op.id] = &op;
      if (!op.has_children) leaves.push_back(&op);
    }
  }
  const OpRecord* parent(const OpRecord& op) const {
    if (!op.parent) return nullptr;
    const auto it = by_id.find(*op.parent);
    return it == by_id.end() ? nullptr : it->second;
  }
  const OpRecord* root(const OpRecord* op) const {  // the op user code or autograd called
    while (const OpRecord* up = parent(*op)) op = up;
    return op;
  }
};

// On a GPU capture only CUDA tensors occupy device memory; on a CPU capture all count.
bool only_cuda_counts(const std::vector<const OpRecord*>& leaves) {
  const auto cuda = [](const TensorMeta& m) { return m.device.starts_with("cuda"); };
  bool only_cuda = false;
  for (const OpRecord* op : leaves) {
    for_each_tensor_arg(*op,
                        [&](const std::string&, const TensorMeta& m) { only_cuda |= cuda(m); });
    only_cuda |= std::any_of(op->outputs.begin(), op->outputs.end(), cuda);
    if (only_cuda) break;
  }
  return only_cuda;
}

// The storages the leaf ops use, op by op: each storage's size, its lifetime (first and last
// use) and the phases that read and update it; outputs without a storage id by op.
class StorageWalk {
 public:
  StorageWalk(const Step& step, const StepOps& ops)
      : anonymous(ops.leaves.size() + 1, 0),
        ops_(ops),
        only_cuda_(only_cuda_counts(ops.leaves)),
        made_by_(made_by_composites(step.ops)) {}

  void visit(std::size_t i) {
    const OpRecord& op = *ops_.leaves[i];
    uses_matmul = uses_matmul || is_matmul(base_name(op.name));
    collect_inputs(op);
    for (const Input& in : inputs_) use_input(i, op, in);
    collect_outputs(op);
    made_here_.clear();  // nested composites return the same storage: one storage
    for (const TensorMeta* m : outputs_) add_output(i, op, *m);
  }

  std::vector<Storage> storages;
  std::vector<int64_t> anonymous;  // outputs without a storage id, by leaf op
  std::set<std::string> unknown_dtypes;
  bool uses_matmul = false;

 private:
  struct Input {
    const std::string* name;
    const TensorMeta* meta;
    Mutable mutable_here;
  };

  bool counted(const TensorMeta& m) {
    if (!m.defined || m.device == "meta") return false;
    bool known = false;
    dtype_bytes(m.dtype, &known);
    if (!known) unknown_dtypes.insert(m.dtype.empty() ? "(none)" : m.dtype);
    return !only_cuda_ || m.device.starts_with("cuda");
  }

  void add_inputs(const OpRecord& op) {
    const Mutable updated = mutable_args(op);
    for_each_tensor_arg(op, [&](const std::string& name, const TensorMeta& m) {
      if (counted(m)) inputs_.push_back({&name, &m, updated});
    });
  }

  // The op's tensor arguments, then those of the composite ops it starts: a composite op's
  // arguments are used at its first leaf (its kernel may read or update them itself).
  void collect_inputs(const OpRecord& op) {
    inputs_.clear();
    add_inputs(op);
    input_ids_.clear();
    for (const Input& in : inputs_) input_ids_.insert(in.meta->storage);
    started_.clear();
    for (const OpRecord* a = ops_.parent(op); a != nullptr; a = ops_.parent(*a)) {
      if (!applied_.insert(a->id).second) break;
      started_.push_back(a);
      add_inputs(*a);
    }
  }

  void use_input(std::size_t i, const OpRecord& op, const Input& in) {
    const uint64_t sid = in.meta->storage;
    if (sid == 0) return;
    const OpRecord* made = maker(op.id, sid, made_by_);
    auto cur = current_.find(sid);
    if (cur != current_.end() && made != nullptr && made->id > storages[cur->second].last_id) {
      current_.erase(cur);
      cur = current_.end();
    }
    if (cur == current_.end()) {  // existed before the step, unless a composite made it
      Storage s;
      s.nbytes = storage_bytes(*in.meta);
      s.first = s.last = i;
      s.created = made != nullptr;
      if (made != nullptr) {
        s.created_by = base_name(made->name);
        s.created_phase = made->phase;
      }
      cur = current_.emplace(sid, storages.size()).first;
      storages.push_back(s);
    }
    Storage& s = storages[cur->second];
    s.nbytes = std::max(s.nbytes, storage_bytes(*in.meta));
    s.last = i;
    s.last_id = op.id;
    s.read_in |= bit(op.phase);
    if (in.mutable_here.contains(*in.name)) s.mutated_in |= bit(op.phase);
  }

  // The op's outputs, then the results of the composite ops it starts: they exist from their
  // first leaf.
  void collect_outputs(const OpRecord& op) {
    outputs_.clear();
    for (const TensorMeta& m : op.outputs) outputs_.push_back(&m);
    for (const OpRecord* a : started_) {
      if (!a->has_children) continue;
      const auto a_inputs = input_storages(*a);
      for (const TensorMeta& m : a->outputs) {
        if (m.storage != 0 && !a_inputs.count(m.storage)) outputs_.push_back(&m);
      }
    }
  }

  void add_output(std::size_t i, const OpRecord& op, const TensorMeta& m) {
    if (!counted(m)) return;
    const uint64_t sid = m.storage;
    if (sid == 0) {
      anonymous[i] += storage_bytes(m);
      return;
    }
    if (!made_here_.insert(sid).second) return;
    auto cur = current_.find(sid);
    if (cur != current_.end() && !input_ids_.count(sid)) {  // a new storage at a freed address
      current_.erase(cur);
      cur = current_.end();
    }
    if (cur == current_.end()) {
      Storage s;
      s.nbytes = storage_bytes(m);
      s.first = s.last = i;
      s.created = true;
      s.created_by = base_name(ops_.root(&op)->name);
      s.created_phase = op.phase;
      cur = current_.emplace(sid, storages.size()).first;
      storages.push_back(s);
    }
    Storage& s = storages[cur->second];
    s.nbytes = std::max(s.nbytes, storage_bytes(m));
    s.last = i;
    s.last_id = op.id;
  }

  const StepOps& ops_;
  const bool only_cuda_;
  const std::unordered_map<uint64_t, Makers> made_by_;
  std::unordered_map<uint64_t, std::size_t> current_;  // storage id -> its live generation
  std::unordered_set<uint64_t> applied_;  // composite ops whose in-place updates are counted
  // Per op, reused: its inputs, the composite ops it starts, its outputs.
  std::vector<Input> inputs_;
  std::vector<const OpRecord*> started_;
  std::vector<const TensorMeta*> outputs_;
  std::unordered_set<uint64_t> input_ids_, made_here_;
};

// What the estimate cannot see, in words.
void add_notes(StepMemory& result, const Step& step, const std::vector<const OpRecord*>& leaves,
               const std::set<std::string>& unknown_dtypes) {
  if (!leaves.empty() && std::none_of(leaves.begin(), leaves.end(), [](const OpRecord* op) {
        return op->phase == Phase::Optimizer;
      })) {
    result.notes.push_back("no optimizer step in this step: parameters are counted with inputs");
  }
  if (step.dropped_ops != 0) {
    result.notes.push_back(
        std::to_string(step.dropped_ops) +
        " op(s) were not recorded (capture cap): the estimate misses their tensors");
  }
  if (!unknown_dtypes.empty()) {
    std::string note = "tensors of unknown dtype counted as 0 bytes: ";
    bool first = true;
    for (const std::string& d : unknown_dtypes) {
      note += (first ? "" : ", ") + d;
      first = false;
    }
    result.notes.push_back(note);
  }
}

// The storages by category, and the live and activation totals' peaks over the leaf ops.
void add_peaks(StepMemory& result, const std::vector<const OpRecord*>& leaves,
               const StorageWalk& walk) {
  const std::size_t n = leaves.size();
  std::vector<int64_t> delta_live(n + 1, 0), delta_act(n + 1, 0);
  for (const Storage& s : walk.storages) {
    switch (category(s)) {
      case Category::Activations:
        for (auto* delta : {&delta_act, &delta_live}) {
          (*delta)[s.first] += s.nbytes;
          (*delta)[s.last + 1] -= s.nbytes;
        }
        continue;
      case Category::Parameters:
        result.parameters += s.nbytes;
        break;
      case Category::Gradients:
        result.gradients += s.nbytes;
        break;
      case Category::OptimizerState:
        result.optimizer_state += s.nbytes;
        break;
      case Category::Inputs:
        result.inputs += s.nbytes;
        break;
    }
    // pre-existing storages live all step; ones made in the step live from creation on
    delta_live[s.created ? s.first : 0] += s.nbytes;
  }
  for (std::size_t at = 0; at < n; ++at) {
    for (auto* delta : {&delta_act, &delta_live}) {
      (*delta)[at] += walk.anonymous[at];
      (*delta)[at + 1] -= walk.anonymous[at];
    }
  }
  int64_t live = 0, act = 0, peak = 0, act_peak = 0;
  std::size_t peak_at = 0;
  for (std::size_t t = 0; t < n; ++t) {
    live += delta_live[t];
    act += delta_act[t];
    if (live > peak) {
      peak = live;
      peak_at = t;
    }
    act_peak = std::max(act_peak, act);
  }
  result.activations = act_peak;
  result.live_peak = peak;
  if (n != 0) {
    result.peak_op = leaves[peak_at]->name;
    result.peak_phase = to_string(leaves[peak_at]->phase);
  }
}

}  // namespace

StepMemory estimate_step_memory(const Step& step) {
  StepMemory result;
  result.measured_peak_bytes = step.measured_peak_bytes;
  const StepOps ops(step);
  StorageWalk walk(step, ops);
  for (std::size_t i = 0; i < ops.leaves.size(); ++i) walk.visit(i);
  result.uses_matmul = walk.uses_matmul;
  add_notes(result, step, ops.leaves, walk.unknown_dtypes);
  add_peaks(result, ops.leaves, walk);
  return result;
}

}  // namespace habitat
