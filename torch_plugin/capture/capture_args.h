// Reading an op's boxed arguments and results into habitat trace structs. Only metadata is
// read (sizes, strides, dtype, device, storage identity): never tensor data, so capture
// cannot change what the op computes.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <string>
#include <vector>

#include "habitat/trace.h"

namespace habitat::capture {

// How an int argument should be read: some schema types travel boxed as plain ints.
enum class IntMeaning : uint8_t { Number, ScalarType, Layout, MemoryFormat };

// What the capture needs of an operator, computed once per operator.
struct OpInfo {
  InternedString name;          // "aten::addmm"
  InternedString overload;      // "out", "" for the default overload
  bool skip = false;            // never recorded (profiler:: ops)
  bool compiled_graph = false;  // habitat::compiled_graph (csrc/include/habitat/compiled_kernels.h)
  uint64_t name_hash = 0;       // of "name.overload", stable across runs (the step fingerprint)
  size_t num_arguments = 0;
  size_t num_returns = 0;
  std::vector<InternedString> argument_names;  // interned once per operator, copied per op
  std::vector<IntMeaning> int_meanings;
};

// Cached per thread by schema address; the first lookup on a thread builds it.
const OpInfo& op_info(const c10::OperatorHandle& op);

struct TensorScan {
  bool plain = true;           // every tensor is an ordinary eager tensor
  bool requires_grad = false;  // some tensor requires grad
  // Rolling hash of the tensors' ranks, sizes and dtypes, in argument order (the step
  // fingerprint; see Recorder::add_fingerprint). Only meaningful when `plain`.
  uint64_t shape_hash = 0xcbf29ce484222325ULL;
};

// One step of the 64-bit rolling hash the fingerprint uses (FNV-1a over words).
inline uint64_t hash_mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }
// Looks at every tensor among `n` boxed values. Fake, functional, meta, functorch-wrapped
// and Python-subclass tensors are not plain: their ops do no real work of their own.
TensorScan scan_tensors(const c10::IValue* values, size_t n);

// Storages seen in a step, held weakly until it ends: a StorageImpl whose storage died keeps
// its address while a weak reference lives (its data is freed as usual), so a storage
// address names one storage for the whole step, never a later one at a recycled address.
using StorageRefs = std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>>;

// While it lives, read_arguments and read_outputs on this thread add the storages they see
// to `refs`.
class StorageSink {
 public:
  explicit StorageSink(StorageRefs& refs);
  ~StorageSink();
  StorageSink(const StorageSink&) = delete;
  StorageSink& operator=(const StorageSink&) = delete;

 private:
  StorageRefs* previous_;
};

void read_arguments(const OpInfo& info, const c10::IValue* values, std::vector<Argument>& out);
// Every tensor among the op's results, in order (lists flattened).
void read_outputs(const c10::IValue* values, size_t n, std::vector<TensorMeta>& out);

const char* dtype_name(c10::ScalarType t);

}  // namespace habitat::capture
