// The trace structs' helpers (trace.h); the JSON encoding is trace_json.cpp.
#include "habitat/trace.h"

#include "habitat/precision.h"

namespace habitat {

// ---------------------------------------------------------------------------------------------
// Struct helpers

int64_t TensorMeta::numel() const {
  if (!defined) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorMeta::nbytes() const {
  const auto size = dtype_size(dtype);
  return size ? numel() * *size : 0;
}

const ArgValue* OpRecord::arg(const std::string& arg_name) const {
  for (const auto& a : args) {
    if (a.name == arg_name) return &a.value;
  }
  return nullptr;
}

const TensorMeta* OpRecord::tensor(const std::string& arg_name) const {
  const ArgValue* v = arg(arg_name);
  if (v == nullptr || v->kind != ArgValue::Kind::Tensor || v->tensors.empty()) return nullptr;
  return v->tensors.front().defined ? &v->tensors.front() : nullptr;
}

// Tensor lists count too: for aten::cat the first listed tensor is the one cost models want.
const TensorMeta* OpRecord::first_tensor() const {
  for (const auto& a : args) {
    if (a.value.kind != ArgValue::Kind::Tensor && a.value.kind != ArgValue::Kind::TensorList) {
      continue;
    }
    for (const auto& t : a.value.tensors) {
      if (t.defined) return &t;
    }
  }
  return nullptr;
}

namespace {

constexpr std::pair<Phase, const char*> kPhaseNames[] = {
    {Phase::Forward, "forward"},
    {Phase::Backward, "backward"},
    {Phase::Optimizer, "optimizer"},
    {Phase::Other, "other"},
};

constexpr std::pair<SyncRecord::Kind, const char*> kSyncKindNames[] = {
    {SyncRecord::Kind::Stream, "stream"},
    {SyncRecord::Kind::Device, "device"},
    {SyncRecord::Kind::Event, "event"},
    {SyncRecord::Kind::Memcpy, "memcpy"},
    {SyncRecord::Kind::StreamWait, "stream_wait"},
};

}  // namespace

const char* to_string(Phase p) {
  for (const auto& [phase, name] : kPhaseNames) {
    if (phase == p) return name;
  }
  return "other";
}

std::optional<Phase> phase_from_string(const std::string& s) {
  for (const auto& [phase, name] : kPhaseNames) {
    if (s == name) return phase;
  }
  return std::nullopt;
}

const char* to_string(SyncRecord::Kind k) {
  for (const auto& [kind, name] : kSyncKindNames) {
    if (kind == k) return name;
  }
  return "device";
}

std::optional<SyncRecord::Kind> sync_kind_from_string(const std::string& s) {
  for (const auto& [kind, name] : kSyncKindNames) {
    if (s == name) return kind;
  }
  return std::nullopt;
}

PrecisionFlags TraceOrigin::precision() const {
  PrecisionFlags flags;
  flags.matmul_allow_tf32 = allow_tf32;
  flags.cudnn_allow_tf32 = cudnn_allow_tf32;
  flags.float32_matmul_precision = float32_matmul_precision;
  flags.autocast_dtype = autocast_dtype;
  return flags;
}

PrecisionFlags op_precision(const OpRecord& op, const TraceOrigin& origin) {
  return op.precision ? *op.precision : origin.precision();
}

}  // namespace habitat
