// OpKey: the memo key of an op, shared by the predictor's per-op memo and the dominance
// envelope's (learned/learned_envelope.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "habitat/trace.h"

namespace habitat {

// The memo key of an op: everything its cost and prediction read (name, overload, every
// argument and output with shapes, strides, dtypes, devices and scalars, measured kernels),
// and nothing they do not (id, parent, phase, module, wall time). Storage ids are renumbered
// by first appearance within the op, so two ops alias their tensors alike exactly when their
// keys match (the cost model only compares storage ids for equality).
class OpKey {
 public:
  const std::string& of(const OpRecord& op) {
    key_.clear();
    storages_.clear();
    text(op.name);
    text(op.overload);
    number(op.args.size());
    for (const auto& a : op.args) {
      text(a.name);
      const ArgValue& v = a.value;
      number(static_cast<int64_t>(v.kind));
      tensors(v.tensors);
      number(v.ints.size());
      for (const int64_t i : v.ints) number(i);
      raw(&v.real, sizeof v.real);
      text(v.text);
    }
    tensors(op.outputs);
    number(op.kernels.size());
    for (const auto& k : op.kernels) {
      text(k.name);
      raw(k.grid, sizeof k.grid);
      raw(k.block, sizeof k.block);
      number(k.registers_per_thread);
      number(k.static_shared_bytes);
      number(k.dynamic_shared_bytes);
      raw(&k.duration_us, sizeof k.duration_us);
      number(k.stream);
    }
    // The switches decide the cost's precision: ops differing only in them differ.
    number(op.precision.has_value());
    if (op.precision) {
      number(op.precision->matmul_allow_tf32 | (op.precision->cudnn_allow_tf32 << 1));
      text(op.precision->float32_matmul_precision);
      text(op.precision->autocast_dtype);
    }
    return key_;
  }

 private:
  void raw(const void* p, std::size_t n) { key_.append(static_cast<const char*>(p), n); }
  template <class Integer>
  void number(Integer v) {
    const int64_t wide = static_cast<int64_t>(v);
    raw(&wide, sizeof wide);
  }
  void text(const std::string& s) {
    number(s.size());
    key_.append(s);
  }
  void tensors(const std::vector<TensorMeta>& ts) {
    number(ts.size());
    for (const auto& t : ts) {
      number(t.shape.size());
      for (const int64_t d : t.shape) number(d);
      number(t.strides.size());
      for (const int64_t d : t.strides) number(d);
      text(t.dtype);
      text(t.device);
      number(static_cast<int64_t>(t.contiguous) | (static_cast<int64_t>(t.defined) << 1));
      uint64_t storage = 0;
      if (t.storage != 0) {
        storage = storages_.try_emplace(t.storage, storages_.size() + 1).first->second;
      }
      number(static_cast<int64_t>(storage));
      number(t.storage_offset);
    }
  }

  std::string key_;
  std::unordered_map<uint64_t, uint64_t> storages_;
};

}  // namespace habitat
