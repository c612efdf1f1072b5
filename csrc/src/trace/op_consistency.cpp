#include "trace/op_consistency.h"

#include <array>
#include <string_view>

namespace habitat {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

const TensorMeta* defined_tensor(const OpRecord& op, const char* name) {
  const TensorMeta* t = op.tensor(name);
  return t != nullptr && t->defined ? t : nullptr;
}

// The product's shape for mm ([n, k] x [k, m]) and bmm ([b, n, k] x [b, k, m]); a message
// when the inner sizes differ.
std::optional<std::string> product(const OpRecord& op, const char* left, const char* right,
                                   std::size_t rank) {
  const TensorMeta* a = defined_tensor(op, left);
  const TensorMeta* b = defined_tensor(op, right);
  if (a == nullptr || b == nullptr || a->shape.size() != rank || b->shape.size() != rank) {
    return std::nullopt;  // another overload or a layout this check does not know
  }
  const std::string name(std::string_view(op.name));
  if (rank == 3 && a->shape[0] != b->shape[0]) {
    return name + " multiplies batches of " + std::to_string(a->shape[0]) + " and " +
           std::to_string(b->shape[0]) + " matrices (" + shape_text(a->shape) + " and " +
           shape_text(b->shape) + ")";
  }
  if (a->shape[rank - 1] != b->shape[rank - 2]) {
    return name + " of " + shape_text(a->shape) + " and " + shape_text(b->shape) +
           ": the inner sizes differ (" + std::to_string(a->shape[rank - 1]) + " and " +
           std::to_string(b->shape[rank - 2]) + ")";
  }
  std::vector<int64_t> expected(a->shape.begin(), a->shape.end() - 1);
  expected.push_back(b->shape[rank - 1]);
  if (op.outputs.empty() || !op.outputs.front().defined) return std::nullopt;
  const auto& got = op.outputs.front().shape;
  if (got != expected) {
    return "outputs[0].shape is " + shape_text(got) + ", but " + name + " of " +
           shape_text(a->shape) + " and " + shape_text(b->shape) + " makes " + shape_text(expected);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> op_inconsistency(const OpRecord& op) {
  const std::string_view name = op.name;
  if (name == "aten::mm") return product(op, "self", "mat2", 2);
  if (name == "aten::addmm") return product(op, "mat1", "mat2", 2);
  if (name == "aten::bmm") return product(op, "self", "mat2", 3);
  if (name == "aten::baddbmm") return product(op, "batch1", "batch2", 3);
  // Window arguments of convolutions and pooling: a size, stride or dilation below 1, or a
  // negative padding, never ran (as_strided's strides may be 0: not checked).
  if (name.find("conv") == std::string_view::npos && name.find("pool") == std::string_view::npos) {
    return std::nullopt;
  }
  constexpr std::array<std::pair<const char*, int64_t>, 4> kWindow{
      {{"kernel_size", 1}, {"stride", 1}, {"dilation", 1}, {"padding", 0}}};
  for (const auto& [arg, min] : kWindow) {
    const ArgValue* v = op.arg(arg);
    if (v == nullptr || v->kind != ArgValue::Kind::IntList) continue;
    for (const int64_t x : v->ints) {
      if (x < min) {
        return std::string(arg) + " " + shape_text(v->ints) + " holds " + std::to_string(x) +
               ": every entry must be >= " + std::to_string(min);
      }
    }
  }
  return std::nullopt;
}

}  // namespace habitat
