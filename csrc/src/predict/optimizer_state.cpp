#include "predict/optimizer_state.h"

#include <set>
#include <string>

namespace habitat {
namespace {

bool scalar(const TensorMeta& t) { return t.defined && t.shape.empty(); }

// Every tensor the call reads or writes is 0-dim, and it writes one.
bool scalar_only(const OpRecord& op) {
  for (const auto& a : op.args) {
    for (const auto& t : a.value.tensors) {
      if (t.defined && !scalar(t)) return false;
    }
  }
  if (op.outputs.empty()) return false;
  for (const auto& t : op.outputs) {
    if (!scalar(t)) return false;
  }
  return true;
}

bool creates_state(const OpRecord& op) {
  static const std::set<std::string, std::less<>> buffers{"aten::zeros_like", "aten::ones_like",
                                                          "aten::empty_like", "aten::full_like"};
  static const std::set<std::string, std::less<>> counters{"aten::empty",
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
  const std::string& name = op.name.str();
  if (buffers.contains(name)) return true;
  return counters.contains(name) && scalar_only(op);
}

}  // namespace

OptimizerStateInit optimizer_state_init(const Step& step) {
  OptimizerStateInit out;
  out.ops.assign(step.ops.size(), 0);
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (op.depth != 0 || op.phase != Phase::Optimizer || !creates_state(op)) continue;
    ++out.calls;
    out.ops[i] = 1;
    // Its subtree: the ops after it that are deeper (ops are in start order).
    for (std::size_t j = i + 1; j < step.ops.size() && step.ops[j].depth > 0; ++j) out.ops[j] = 1;
  }
  return out;
}

}  // namespace habitat
