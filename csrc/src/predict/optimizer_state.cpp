#include "predict/optimizer_state.h"

#include <algorithm>
#include <set>
#include <string>

#include "trace/op_args.h"

namespace habitat {
namespace {

const std::set<std::string, std::less<>>& buffer_factories() {
  static const std::set<std::string, std::less<>> names{"aten::zeros_like", "aten::ones_like",
                                                        "aten::empty_like", "aten::full_like"};
  return names;
}

const std::set<std::string, std::less<>>& scalar_factories() {
  static const std::set<std::string, std::less<>> names{"aten::empty",
                                                        "aten::zeros",
                                                        "aten::ones",
                                                        "aten::full",
                                                        "aten::scalar_tensor",
                                                        "aten::lift_fresh",
                                                        "aten::lift_fresh_copy",
                                                        "aten::detach",
                                                        "aten::detach_",
                                                        "aten::to",
                                                        "aten::_to_copy"};
  return names;
}

bool top_level_optimizer_call(const OpRecord& op) {
  return op.depth == 0 && op.phase == Phase::Optimizer;
}

}  // namespace

bool only_scalars(const OpRecord& op) {
  bool any = false;
  const bool other = op_args::any_tensor(op.args, [&](const TensorMeta& t) {
    any = true;
    return !t.shape.empty();
  });
  if (other) return false;
  for (const auto& t : op.outputs) {
    if (!t.defined || !t.shape.empty()) return false;
    any = true;
  }
  return any;
}

OptimizerStateInit optimizer_state_init(const Step& step) {
  OptimizerStateInit out;
  out.ops.assign(step.ops.size(), 0);
  // A step that creates no state buffer creates no state: its 0-dim tensors are the update's
  // own (the foreach AdamW wraps its step increment in torch.tensor(1.0) every step).
  const bool creates_buffers =
      std::any_of(step.ops.begin(), step.ops.end(), [](const OpRecord& op) {
        return top_level_optimizer_call(op) && buffer_factories().contains(op.name.str());
      });
  if (!creates_buffers) return out;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (!top_level_optimizer_call(op)) continue;
    const std::string& name = op.name.str();
    if (!buffer_factories().contains(name) &&
        !(scalar_factories().contains(name) && !op.outputs.empty() && only_scalars(op))) {
      continue;
    }
    ++out.calls;
    out.ops[i] = 1;
    // Its subtree: the ops after it that are deeper (ops are in start order).
    for (std::size_t j = i + 1; j < step.ops.size() && step.ops[j].depth > 0; ++j) out.ops[j] = 1;
  }
  return out;
}

}  // namespace habitat
