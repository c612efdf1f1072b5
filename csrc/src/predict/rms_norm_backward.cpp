#include "predict/rms_norm_backward.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>
#include <unordered_map>

#include "trace/op_args.h"

namespace habitat::cuda_paths {
namespace {

// The autograd nodes of the decomposition's pieces (torch/csrc/autograd/generated names): the
// weight's and rstd's multiplications, rsqrt, the eps add (no op of its own), the mean, the
// square and the input's upcast; AccumulateGrad (the weight's gradient) runs among them.
const std::set<std::string_view>& piece_nodes() {
  static const std::set<std::string_view> nodes{"MulBackward0",   "RsqrtBackward0", "AddBackward0",
                                                "MeanBackward0",  "MeanBackward1",  "PowBackward0",
                                                "ToCopyBackward0"};
  return nodes;
}
constexpr std::string_view kAccumulateGrad = "torch::autograd::AccumulateGrad";

// A norm's shapes: its input's, the per-row statistics' (the normalized dims kept as 1s), the
// weight's (alone or behind leading 1s), and scalars.
struct Geometry {
  Dims input;
  std::size_t normalized = 0;  // trailing dims normalized over

  bool holds(const Dims& s) const {
    if (s.empty() || s == input) return true;
    const std::size_t lead = input.size() - normalized;
    if (s.size() == input.size()) {
      bool rows = true, weight = true;
      for (std::size_t d = 0; d < s.size(); ++d) {
        rows = rows && s[d] == (d < lead ? input[d] : 1);
        weight = weight && s[d] == (d < lead ? 1 : input[d]);
      }
      return rows || weight;
    }
    if (s.size() != normalized) return false;
    for (std::size_t d = 0; d < normalized; ++d) {
      if (s[d] != input[lead + d]) return false;
    }
    return true;
  }
};

bool shaped(const OpRecord& op, const Geometry& g) {
  return !op_args::any_tensor(op.args, [&](const TensorMeta& t) { return !g.holds(t.shape); });
}

struct Norm {
  std::size_t forward = 0;
  Geometry geometry;
  bool upcast = false;               // the decomposition cast its (16-bit) input to float32 first
  std::set<uint64_t> intermediates;  // the weight and the decomposition's own tensors
  uint64_t input = 0;                // the input's storage
};

bool reads_own(const OpRecord& op, const Norm& n) {
  return op_args::any_tensor(op.args, [&](const TensorMeta& t) {
    return t.storage != 0 && (t.storage == n.input || n.intermediates.contains(t.storage));
  });
}

// What identifies one forward's backward: the storages only its backward reads.
Norm norm_of(const Step& step, std::size_t f) {
  const OpRecord& fwd = step.ops[f];
  Norm n;
  n.forward = f;
  const TensorMeta* x = op_args::tensor(fwd.args, "input");
  if (x == nullptr) return n;
  n.geometry = {x->shape, op_args::ints(fwd.args, "normalized_shape").size()};
  n.upcast = x->dtype == "bfloat16" || x->dtype == "float16";  // float32 is its own opmath type
  if (const TensorMeta* w = op_args::tensor(fwd.args, "weight"); w && w->storage != 0) {
    n.intermediates.insert(w->storage);
  }
  std::set<uint64_t> inside{fwd.id};
  for (std::size_t i = f + 1; i < step.ops.size() && step.ops[i].depth > fwd.depth; ++i) {
    const OpRecord& op = step.ops[i];
    if (!op.parent || !inside.contains(*op.parent)) continue;
    inside.insert(op.id);
    for (const auto& t : op.outputs) {
      if (t.storage != 0) n.intermediates.insert(t.storage);
    }
  }
  // The result and the input are read by the ops around the norm as well.
  if (!fwd.outputs.empty()) n.intermediates.erase(fwd.outputs.front().storage);
  n.intermediates.erase(x->storage);
  n.input = x->storage;
  return n;
}

bool top_level_backward(const OpRecord& op) { return op.phase == Phase::Backward && !op.parent; }

// The norm whose storages `op` reads, or `none`.
std::size_t norm_read_by(const OpRecord& op,
                         const std::unordered_map<uint64_t, std::size_t>& norm_of_storage,
                         std::size_t none) {
  std::size_t found = none;
  op_args::any_tensor(op.args, [&](const TensorMeta& t) {
    const auto it = norm_of_storage.find(t.storage);
    if (it != norm_of_storage.end()) found = it->second;
    return it != norm_of_storage.end();
  });
  return found;
}

// The top-level op before `i` (skipping children), or `i` when there is none.
std::size_t previous_top_level(const Step& step, std::size_t i) {
  std::size_t before = i;
  while (before > 0 && step.ops[--before].parent) {
  }
  return before < i && !step.ops[before].parent ? before : i;
}

bool shares_storage(const OpRecord& a, const OpRecord& b) {
  return op_args::any_tensor(a.args, [&](const TensorMeta& t) {
    return t.storage != 0 &&
           op_args::any_tensor(b.args, [&](const TensorMeta& u) { return u.storage == t.storage; });
  });
}

// The run's first op: `start`, after the ops of its own autograd node before it (they read the
// incoming gradient it reads, and the norm's input or its own tensors: without a weight, the rstd
// gradient's product with the input comes first), after the cast back to the input's dtype (the
// last op of an upcast decomposition, so the first of its backward).
std::size_t run_first(const Step& step, std::size_t start, const Norm& n) {
  std::size_t first = start;
  for (std::size_t b = previous_top_level(step, first); b < first;
       b = previous_top_level(step, first)) {
    const OpRecord& op = step.ops[b];
    if (op.phase != Phase::Backward || op.autograd_node != step.ops[start].autograd_node ||
        !shaped(op, n.geometry) || !shares_storage(op, step.ops[start]) || !reads_own(op, n)) {
      break;
    }
    first = b;
  }
  const std::size_t before = previous_top_level(step, first);
  const OpRecord& op = step.ops[before];
  const bool cast = n.upcast && before < first && op.phase == Phase::Backward &&
                    op.autograd_node == "ToCopyBackward0" && shaped(op, n.geometry);
  return cast ? before : first;
}

// One past the run's last op.
std::size_t run_end(const Step& step, std::size_t start, const Norm& n) {
  bool squared = false;  // past the square's backward: only its ops and the upcast's follow
  for (std::size_t end = start; end < step.ops.size(); ++end) {
    const OpRecord& op = step.ops[end];
    if (op.parent || op.autograd_node == kAccumulateGrad) continue;
    const std::string_view node = op.autograd_node;
    if (op.phase != Phase::Backward || !piece_nodes().contains(node) || !shaped(op, n.geometry)) {
      return end;
    }
    if (squared && node != "PowBackward0" && !(n.upcast && node == "ToCopyBackward0")) return end;
    squared = squared || node == "PowBackward0";
    if (squared && node == "ToCopyBackward0") return end + 1;
  }
  return step.ops.size();
}

}  // namespace

FusedBackward decomposed_rms_norm_backward(const Step& step,
                                           const std::vector<std::size_t>& forwards) {
  FusedBackward out;
  out.pieces.assign(step.ops.size(), 0);
  std::vector<Norm> norms;
  std::unordered_map<uint64_t, std::size_t> norm_of_storage;
  std::set<uint64_t> shared;  // a module applied twice, or recomputed (checkpointing): its weight
  for (const std::size_t f : forwards) {
    Norm n = norm_of(step, f);
    if (n.geometry.normalized == 0 || n.geometry.normalized > n.geometry.input.size()) continue;
    for (const uint64_t s : n.intermediates) {
      if (!norm_of_storage.emplace(s, norms.size()).second) shared.insert(s);
    }
    norms.push_back(std::move(n));
  }
  for (const uint64_t s : shared) norm_of_storage.erase(s);  // says no one norm
  std::vector<char> found(norms.size(), 0);
  std::size_t claimed = 0;  // ops before it belong to a run already
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& start = step.ops[i];
    if (i < claimed || !top_level_backward(start) || !piece_nodes().contains(start.autograd_node)) {
      continue;
    }
    const std::size_t k = norm_read_by(start, norm_of_storage, norms.size());
    if (k == norms.size() || found[k] || !shaped(start, norms[k].geometry)) continue;
    found[k] = 1;
    const std::size_t first = std::max(claimed, run_first(step, i, norms[k]));
    claimed = run_end(step, i, norms[k]);
    for (std::size_t j = first; j < claimed; ++j) {
      const OpRecord& op = step.ops[j];
      if (!op.parent && op.autograd_node != kAccumulateGrad) out.pieces[j] = 1;
    }
    out.carriers.emplace_back(first, norms[k].forward);
  }
  return out;
}

OpRecord fused_backward_op(const OpRecord& forward) {
  OpRecord op;
  op.id = forward.id;
  op.name = "aten::_fused_rms_norm_backward";
  op.phase = Phase::Backward;
  op.precision = forward.precision;
  const TensorMeta* x = op_args::tensor(forward.args, "input");
  const TensorMeta* w = op_args::tensor(forward.args, "weight");
  const auto tensor = [](std::string name, const TensorMeta& t) {
    Argument a{std::move(name), {}};
    a.value.kind = ArgValue::Kind::Tensor;
    a.value.tensors.push_back(t);
    return a;
  };
  if (x == nullptr) return op;
  const TensorMeta& y = forward.outputs.empty() ? *x : forward.outputs.front();
  op.args.push_back(tensor("grad_out", y));
  op.args.push_back(tensor("input", *x));
  if (const ArgValue* shape = op_args::find(forward.args, "normalized_shape")) {
    op.args.push_back({"normalized_shape", *shape});
  }
  if (forward.outputs.size() > 1) op.args.push_back(tensor("rstd", forward.outputs[1]));
  Argument weight{"weight", {}};
  if (w != nullptr) weight = tensor("weight", *w);
  op.args.push_back(std::move(weight));
  Argument mask{"output_mask", {}};
  mask.value.kind = ArgValue::Kind::BoolList;
  mask.value.ints.push_back(1);
  mask.value.ints.push_back(w != nullptr ? 1 : 0);
  op.args.push_back(std::move(mask));
  op.outputs.push_back(*x);
  if (w != nullptr) op.outputs.push_back(*w);
  return op;
}

}  // namespace habitat::cuda_paths
