#include "cost/aten_loops.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

#include "habitat/precision.h"
#include "trace/op_args.h"

namespace habitat::aten_loops {

bool dense(const TensorMeta& t) {
  if (t.strides.size() != t.shape.size()) return t.contiguous;
  std::vector<std::size_t> order;
  for (std::size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] != 1) order.push_back(d);
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return t.strides[a] < t.strides[b]; });
  int64_t expected = 1;
  for (const std::size_t d : order) {
    if (t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

bool runs_vectorized(const OpRecord& op, double n) {
  std::string_view dtype;
  const TensorMeta* layout = nullptr;
  auto check = [&](const TensorMeta& t) {
    const auto e = static_cast<double>(t.numel());
    if (e <= 1) return true;
    if (e < n || !dense(t)) return false;  // broadcast or strided
    if (layout == nullptr) layout = &t;
    if (t.strides != layout->strides) return false;  // another dimension order
    if (!is_floating(t.dtype)) return true;
    if (dtype.empty()) dtype = t.dtype.str();
    return t.dtype.str() == dtype;
  };
  for (const Argument& a : op.args) {
    for (const TensorMeta& t : a.value.tensors) {
      if (t.defined && !check(t)) return false;
    }
  }
  for (const TensorMeta& t : op.outputs) {
    if (!check(t)) return false;
  }
  return true;
}

std::optional<bool> copy_runs_vectorized(const OpRecord& op) {
  static constexpr std::array<std::string_view, 10> kCopies = {
      "aten::copy_", "aten::copy",    "aten::_to_copy",   "aten::clone",   "aten::contiguous",
      "aten::to",    "aten::reshape", "aten::reshape_as", "aten::flatten", "aten::_reshape_copy"};
  const std::string_view name = op.name;
  if (std::find(kCopies.begin(), kCopies.end(), name) == kCopies.end()) return std::nullopt;
  const TensorMeta* src =
      op_args::first_tensor(op.args, {name == "aten::copy_" ? "src" : "self", "src", "self"});
  if (src == nullptr || op.outputs.empty()) return std::nullopt;
  const TensorMeta& dst = op.outputs.front();
  if (src->numel() != dst.numel()) return std::nullopt;
  return dense(*src) && dense(dst) && src->strides == dst.strides;
}

std::optional<bool> cat_inputs_contiguous(const OpRecord& op) {
  if (op.name != "aten::cat" && op.name != "aten::_cat") return std::nullopt;
  const auto row_major = [](const TensorMeta& t) {
    if (t.strides.size() != t.shape.size()) return t.contiguous;
    int64_t expected = 1;
    for (std::size_t d = t.shape.size(); d-- > 0;) {
      if (t.shape[d] != 1 && t.strides[d] != expected) return false;
      expected *= t.shape[d];
    }
    return true;
  };
  for (const Argument& a : op.args) {
    for (const TensorMeta& t : a.value.tensors) {
      if (t.defined && t.numel() > 0 && !row_major(t)) return false;
    }
  }
  return true;
}

double non_vectorized_us(double n, const Device& device) {
  return device.sm_cycles_us(n * kNonVectorizedCyclesPerElement);
}

}  // namespace habitat::aten_loops
