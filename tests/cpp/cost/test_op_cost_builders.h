// Small builders for OpRecords in the op cost tests: arguments named as in the aten schemas.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "habitat/op_cost.h"
#include "habitat/trace.h"

namespace habitat::test {

// A contiguous tensor on cuda:0.
inline TensorMeta T(std::vector<int64_t> shape, std::string dtype = "float32") {
  TensorMeta t;
  t.strides.assign(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) t.strides[i - 1] = t.strides[i] * shape[i];
  t.shape = std::move(shape);
  t.dtype = std::move(dtype);
  t.device = "cuda:0";
  return t;
}

inline TensorMeta on_storage(TensorMeta t, uint64_t storage) {
  t.storage = storage;
  return t;
}

inline Argument tensor(std::string name, TensorMeta t) {
  Argument a{std::move(name), {}};
  a.value.kind = ArgValue::Kind::Tensor;
  a.value.tensors.push_back(std::move(t));
  return a;
}

inline Argument tensors(std::string name, std::vector<TensorMeta> ts) {
  Argument a{std::move(name), {}};
  a.value.kind = ArgValue::Kind::TensorList;
  a.value.tensors = std::move(ts);
  return a;
}

inline Argument none(std::string name) { return {std::move(name), {}}; }

inline Argument integer(std::string name, int64_t v) {
  Argument a{std::move(name), {}};
  a.value.kind = ArgValue::Kind::Int;
  a.value.ints = {v};
  return a;
}

inline Argument ints(std::string name, std::vector<int64_t> v) {
  Argument a{std::move(name), {}};
  a.value.kind = ArgValue::Kind::IntList;
  a.value.ints = std::move(v);
  return a;
}

inline Argument real(std::string name, double v) {
  Argument a{std::move(name), {}};
  a.value.kind = ArgValue::Kind::Double;
  a.value.real = v;
  return a;
}

inline Argument boolean(std::string name, bool v) {
  Argument a{std::move(name), {}};
  a.value.kind = ArgValue::Kind::Bool;
  a.value.ints = {v ? 1 : 0};
  return a;
}

inline Argument bools(std::string name, std::vector<int64_t> v) {
  Argument a{std::move(name), {}};
  a.value.kind = ArgValue::Kind::BoolList;
  a.value.ints = std::move(v);
  return a;
}

inline Argument text(std::string name, std::string v) {
  Argument a{std::move(name), {}};
  a.value.kind = ArgValue::Kind::String;
  a.value.text = std::move(v);
  return a;
}

inline OpRecord op(std::string name, std::string overload, std::vector<Argument> args,
                   std::vector<TensorMeta> outputs = {}) {
  OpRecord r;
  r.name = std::move(name);
  r.overload = std::move(overload);
  r.args = std::move(args);
  r.outputs = std::move(outputs);
  return r;
}

}  // namespace habitat::test
