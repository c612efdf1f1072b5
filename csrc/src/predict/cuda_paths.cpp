#include "predict/cuda_paths.h"

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

namespace habitat::cuda_paths {
namespace {

constexpr std::string_view kAten = "aten::";

// Per-tensor point-wise stems whose update torch.optim's foreach path runs as _foreach_<stem>
// (torch/optim/{adam,adamw,sgd,...}.py, _multi_tensor_*), and linalg_vector_norm, which
// clip_grad_norm_ runs per tensor on the CPU and as _foreach_norm on CUDA.
const std::set<std::string_view>& foreach_stems() {
  static const std::set<std::string_view> stems{
      "add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "maximum", "minimum",
      "clamp_min", "clamp_max", "sqrt", "rsqrt", "exp", "neg", "abs", "sign", "reciprocal",
      "copy", "zero"};
  return stems;
}

bool zero_dim(const TensorMeta& t) { return t.defined && t.shape.empty(); }

// Every tensor the op reads or writes is a 0-dim scalar.
bool only_scalars(const OpRecord& op) {
  bool any = false;
  for (const auto& a : op.args) {
    for (const auto& t : a.value.tensors) {
      if (!t.defined) continue;
      if (!zero_dim(t)) return false;
      any = true;
    }
  }
  for (const auto& t : op.outputs) {
    if (!zero_dim(t)) return false;
    any = true;
  }
  return any;
}

struct Stem {
  std::string foreach_name;  // "aten::_foreach_mul_"
  bool ok = false;
};

Stem foreach_name_of(const OpRecord& op) {
  std::string_view name = op.name;
  if (!name.starts_with(kAten)) return {};
  name.remove_prefix(kAten.size());
  if (name == "linalg_vector_norm") return {"aten::_foreach_norm", true};
  const bool in_place = name.size() > 1 && name.ends_with('_') && !name.ends_with("__");
  std::string_view stem = in_place ? name.substr(0, name.size() - 1) : name;
  if (!foreach_stems().contains(stem)) return {};
  return {"aten::_foreach_" + std::string(stem) + (in_place ? "_" : ""), true};
}

// What makes two per-tensor calls parts of one foreach call: the same op and overload, the
// same argument kinds, scalars in the same places, the same dtypes, the same phase.
using GroupKey = std::tuple<int, std::string, std::string, std::string>;

GroupKey group_key(const OpRecord& op) {
  std::string signature;
  for (const auto& a : op.args) {
    signature += std::to_string(static_cast<int>(a.value.kind));
    for (const auto& t : a.value.tensors) signature += (zero_dim(t) ? "s" : "t") + t.dtype;
    signature += ',';
  }
  return {static_cast<int>(op.phase), op.name, op.overload, signature};
}

// The _foreach_ op of a group: each tensor argument that is not a 0-dim scalar becomes the
// list of the members' tensors in that place; scalars are the first member's.
OpRecord foreach_op(const Step& step, const std::vector<std::size_t>& members, std::string name) {
  const OpRecord& first = step.ops[members.front()];
  OpRecord op;
  op.id = first.id;
  op.name = std::move(name);
  op.phase = first.phase;
  op.precision = first.precision;
  for (std::size_t j = 0; j < first.args.size(); ++j) {
    Argument arg = first.args[j];
    const bool list = arg.value.kind == ArgValue::Kind::Tensor && !arg.value.tensors.empty() &&
                      !zero_dim(arg.value.tensors.front());
    if (list) {
      arg.value.kind = ArgValue::Kind::TensorList;
      arg.value.tensors.clear();
      for (const std::size_t m : members) {
        const auto& tensors = step.ops[m].args[j].value.tensors;
        arg.value.tensors.insert(arg.value.tensors.end(), tensors.begin(), tensors.end());
      }
    }
    op.args.push_back(std::move(arg));
  }
  for (const std::size_t m : members) {
    const auto& outs = step.ops[m].outputs;
    op.outputs.insert(op.outputs.end(), outs.begin(), outs.end());
  }
  return op;
}

}  // namespace

Mapping map_cpu_step(const Step& step, const std::unordered_map<uint64_t, std::size_t>& index_of) {
  const std::size_t n = step.ops.size();
  Mapping m;
  m.host_only.assign(n, 0);
  m.parent_wins.assign(n, 0);
  std::map<GroupKey, std::vector<std::size_t>> groups;
  std::map<GroupKey, std::string> names;
  for (std::size_t i = 0; i < n; ++i) {
    const OpRecord& op = step.ops[i];
    if (op.name == "aten::_local_scalar_dense" || op.name == "aten::item") {
      m.host_only[i] = 1;  // a copy to the host on CUDA (and a sync), not a kernel
      continue;
    }
    if (op.name == "aten::_scaled_dot_product_attention_math" && op.parent) {
      const auto it = index_of.find(*op.parent);
      if (it != index_of.end() &&
          step.ops[it->second].name == "aten::scaled_dot_product_attention") {
        m.parent_wins[it->second] = 1;
      }
    }
    if (op.phase != Phase::Optimizer && op.phase != Phase::Other) continue;
    if (op.phase == Phase::Optimizer && only_scalars(op)) {
      m.host_only[i] = 1;  // step counters: CPU tensors on CUDA too (capturable=False)
      continue;
    }
    // Only calls made by the optimizer's (or clip_grad_norm_'s) Python code itself.
    if (op.parent) continue;
    const TensorMeta* self = op.first_tensor();
    if (self == nullptr || zero_dim(*self)) continue;
    const Stem stem = foreach_name_of(op);
    if (!stem.ok) continue;
    const GroupKey key = group_key(op);
    groups[key].push_back(i);
    names[key] = stem.foreach_name;
  }
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    for (const std::size_t i : members) m.parent_wins[i] = step.ops[i].has_children ? 1 : 0;
    m.foreach_groups.push_back({foreach_op(step, members, names[key]), members});
  }
  return m;
}

}  // namespace habitat::cuda_paths
