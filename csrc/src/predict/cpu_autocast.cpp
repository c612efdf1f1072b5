#include "predict/cpu_autocast.h"

#include <array>
#include <map>
#include <string_view>

namespace habitat::cuda_paths {
namespace {

constexpr std::array<std::string_view, 1> kCpuFloatOps{"aten::cross_entropy_loss"};
// The backward ops of the ops below a promoted loss, which read what the forward wrote.
constexpr std::array<std::string_view, 3> kBackwardOps{
    "aten::_log_softmax_backward_data", "aten::nll_loss_backward", "aten::nll_loss2d_backward"};

template <std::size_t N>
bool named(const OpRecord& op, const std::array<std::string_view, N>& names) {
  for (const std::string_view n : names) {
    if (op.name == n) return true;
  }
  return false;
}

bool low_precision(std::string_view dtype) { return dtype == "bfloat16" || dtype == "float16"; }

void retype(TensorMeta& t, const InternedString& dtype) {
  if (t.dtype == "float32") t.dtype = dtype;
}

// `op` as CUDA runs it: its fp32 tensors and dtype arguments (a log_softmax's `dtype`, a
// backward's `input_dtype`) in `dtype`, no children.
OpRecord in_dtype(const OpRecord& op, const InternedString& dtype) {
  OpRecord out = op;
  out.has_children = false;
  for (Argument& a : out.args) {
    for (TensorMeta& t : a.value.tensors) retype(t, dtype);
    if ((a.name == "dtype" || a.name == "input_dtype") && a.value.kind == ArgValue::Kind::String &&
        a.value.text == "float32") {
      a.value.text = dtype;
    }
  }
  for (TensorMeta& t : out.outputs) retype(t, dtype);
  return out;
}

}  // namespace

std::vector<Expansion> cpu_autocast_float_ops(const Step& step, const OpIndex& index_of) {
  const std::size_t n = step.ops.size();
  // The promoted ops on low-precision tensors (most steps have none: no child index then).
  std::vector<std::size_t> wrappers;
  for (std::size_t i = 0; i < n; ++i) {
    const OpRecord& op = step.ops[i];
    const TensorMeta* first = op.first_tensor();
    if (named(op, kCpuFloatOps) && op.has_children && first != nullptr &&
        low_precision(first->dtype)) {
      wrappers.push_back(i);
    }
  }
  if (wrappers.empty()) return {};
  std::vector<std::vector<std::size_t>> children(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!step.ops[i].parent) continue;
    const std::size_t p = index_of.find(*step.ops[i].parent);
    if (p != OpIndex::npos) children[p].push_back(i);
  }
  std::vector<Expansion> out;
  // The storages the promoted ops wrote, and their dtype on CUDA.
  std::map<uint64_t, InternedString> written;
  for (const std::size_t i : wrappers) {
    const OpRecord& op = step.ops[i];
    const TensorMeta* logits = op.first_tensor();
    std::size_t inner = OpIndex::npos;
    for (const std::size_t c : children[i]) {
      if (step.ops[c].name == op.name) inner = c;
    }
    if (inner == OpIndex::npos) continue;  // not autocast's re-dispatch
    Expansion e;
    e.index = i;
    // Children follow their parent in start order: the re-dispatch's subtree's leaves.
    std::vector<std::size_t> stack{inner};
    while (!stack.empty()) {
      const std::size_t k = stack.back();
      stack.pop_back();
      if (children[k].empty()) {
        e.parts.emplace_back(in_dtype(step.ops[k], logits->dtype), 1.0);
        for (const TensorMeta& t : step.ops[k].outputs) {
          if (t.storage != 0) written[t.storage] = logits->dtype;
        }
      }
      stack.insert(stack.end(), children[k].rbegin(), children[k].rend());
    }
    out.push_back(std::move(e));
  }
  if (written.empty()) return out;
  for (std::size_t i = 0; i < n; ++i) {
    const OpRecord& op = step.ops[i];
    if (op.phase != Phase::Backward || !named(op, kBackwardOps)) continue;
    const InternedString* dtype = nullptr;
    for (const Argument& a : op.args) {
      for (const TensorMeta& t : a.value.tensors) {
        const auto it = written.find(t.storage);
        if (it != written.end()) dtype = &it->second;
      }
    }
    if (dtype == nullptr) continue;
    Expansion e;
    e.index = i;
    e.parts.emplace_back(in_dtype(op, *dtype), 1.0);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace habitat::cuda_paths
