// Reading an op's aten schema arguments by name: the one reader the cost rules (cost/) and the
// learned features (learned/) share. Header-only, so every target that links trace.cpp can use
// it. `args` is the part of OpRecord::args to search: all of them, or the inputs only (the
// cost rules leave out the trailing out= arguments).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "habitat/trace.h"

namespace habitat::op_args {

using Args = std::span<const Argument>;

inline const ArgValue* find(Args args, std::string_view name) {
  for (const Argument& a : args) {
    if (a.name == name) return &a.value;
  }
  return nullptr;
}

// The defined tensor of a Tensor argument, or nullptr (absent, None or undefined).
inline const TensorMeta* tensor(Args args, std::string_view name) {
  const ArgValue* v = find(args, name);
  if (v == nullptr || v->kind != ArgValue::Kind::Tensor || v->tensors.empty()) return nullptr;
  return v->tensors.front().defined ? &v->tensors.front() : nullptr;
}

// The first of `names` that is a defined tensor argument (aten spells some operands two ways).
inline const TensorMeta* first_tensor(Args args, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (const TensorMeta* t = tensor(args, n)) return t;
  }
  return nullptr;
}

// The defined tensors of a Tensor or Tensor[] argument (empty when absent).
inline std::vector<const TensorMeta*> tensor_list(Args args, std::string_view name) {
  std::vector<const TensorMeta*> out;
  const ArgValue* v = find(args, name);
  if (v == nullptr ||
      (v->kind != ArgValue::Kind::Tensor && v->kind != ArgValue::Kind::TensorList)) {
    return out;
  }
  for (const auto& t : v->tensors) {
    if (t.defined) out.push_back(&t);
  }
  return out;
}

// Whether `pred` holds for any defined tensor of `args` (tensor and tensor-list arguments alike).
template <typename Pred>
bool any_tensor(Args args, Pred&& pred) {
  for (const Argument& a : args) {
    for (const TensorMeta& t : a.value.tensors) {
      if (t.defined && pred(t)) return true;
    }
  }
  return false;
}

// A Scalar/int/float/bool argument (arrives as Int, Double or Bool); nullopt when absent or None.
inline std::optional<double> number(Args args, std::string_view name) {
  const ArgValue* v = find(args, name);
  if (v == nullptr) return std::nullopt;
  if (v->kind == ArgValue::Kind::Double) return v->real;
  if ((v->kind == ArgValue::Kind::Int || v->kind == ArgValue::Kind::Bool) && !v->ints.empty()) {
    return static_cast<double>(v->ints.front());
  }
  return std::nullopt;
}

inline bool boolean(Args args, std::string_view name, bool fallback) {
  const auto n = number(args, name);
  return n ? *n != 0 : fallback;
}

// An int, int[], bool or bool[] argument as a list; empty when absent or None.
inline std::vector<int64_t> ints(Args args, std::string_view name) {
  const ArgValue* v = find(args, name);
  if (v == nullptr) return {};
  switch (v->kind) {
    case ArgValue::Kind::Int:
    case ArgValue::Kind::IntList:
    case ArgValue::Kind::Bool:
    case ArgValue::Kind::BoolList:
      return v->ints;
    default:
      return {};
  }
}

// The first entry of an int/int[] argument ("stride=[2, 2]" reads 2), or `fallback`.
inline int64_t first_int(Args args, std::string_view name, int64_t fallback) {
  const auto v = ints(args, name);
  return v.empty() ? fallback : v.front();
}

// A str argument; nullptr when absent or not a string.
inline const std::string* text(Args args, std::string_view name) {
  const ArgValue* v = find(args, name);
  return v != nullptr && v->kind == ArgValue::Kind::String ? &v->text.str() : nullptr;
}

}  // namespace habitat::op_args
