// The trace document (docs/trace-format.md): a compact, versioned JSON encoding of Trace.
//
// Writing omits every field equal to its default (the struct's default value; for strides,
// the row-major strides of the shape) because a trace is written every step; reading fills
// the defaults back in. Reading validates each field it uses and reports the first problem
// with its location ("steps[0].ops[3] (aten::mm).args[1].tensor.shape[0]"). Unknown keys are
// ignored so that other documents (reports) can embed a trace.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "habitat/file_io.h"
#include "habitat/precision.h"
#include "habitat/trace.h"
#include "habitat/trace_tree.h"
#include "trace/json_dom.h"
#include "trace/json_reader.h"
#include "trace/op_consistency.h"

namespace habitat {

using nlohmann::json;
// Written documents keep their keys in a readable order: "format" and "version" first.
using ojson = nlohmann::ordered_json;

namespace {

using namespace json_reader;  // Loc, DecodeError, fail, read_*
// Traces are read from json_dom's arena tree (fast on large traces), not nlohmann's.
using json = json_reader::Value;

constexpr const char* kFormatName = Trace::kFormatName;

// One schema argument value kind and the key that carries it in the document.
constexpr std::pair<ArgValue::Kind, const char*> kArgKeys[] = {
    {ArgValue::Kind::Tensor, "tensor"},  {ArgValue::Kind::TensorList, "tensors"},
    {ArgValue::Kind::Int, "int"},        {ArgValue::Kind::IntList, "ints"},
    {ArgValue::Kind::Double, "float"},   {ArgValue::Kind::Bool, "bool"},
    {ArgValue::Kind::BoolList, "bools"}, {ArgValue::Kind::String, "str"},
    {ArgValue::Kind::None, "none"},      {ArgValue::Kind::Other, "other"},
};

// torch's contiguous strides: size-0 dimensions count as 1 so strides stay non-zero.
std::vector<int64_t> contiguous_strides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

// ---------------------------------------------------------------------------------------------
// Writing

// JSON has no infinities or NaN, yet scalar arguments carry them (masked_fill(-inf), clamp).
ojson encode_real(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

ojson encode_tensor(const TensorMeta& t) {
  ojson j = ojson::object();
  if (!t.shape.empty()) j["shape"] = t.shape;
  if (t.strides != contiguous_strides(t.shape)) j["strides"] = t.strides;
  if (!t.dtype.empty()) j["dtype"] = t.dtype;
  if (!t.device.empty()) j["device"] = t.device;
  if (!t.contiguous) j["contiguous"] = false;
  if (!t.defined) j["defined"] = false;
  if (t.storage != 0) j["storage"] = t.storage;
  if (t.storage_offset != 0) j["storage_offset"] = t.storage_offset;
  return j;
}

ojson encode_tensors(const std::vector<TensorMeta>& tensors) {
  ojson j = ojson::array();
  for (const auto& t : tensors) j.push_back(encode_tensor(t));
  return j;
}

ojson encode_bools(std::span<const int64_t> values) {
  ojson j = ojson::array();
  for (int64_t v : values) j.push_back(v != 0);
  return j;
}

ojson encode_value(const ArgValue& v) {
  using Kind = ArgValue::Kind;
  const int64_t first_int = v.ints.empty() ? 0 : v.ints.front();
  switch (v.kind) {
    case Kind::Tensor: {
      TensorMeta undefined;
      undefined.defined = false;
      return encode_tensor(v.tensors.empty() ? undefined : v.tensors.front());
    }
    case Kind::TensorList:
      return encode_tensors(v.tensors);
    case Kind::Int:
      return first_int;
    case Kind::IntList:
      return v.ints;
    case Kind::Double:
      return encode_real(v.real);
    case Kind::Bool:
      return first_int != 0;
    case Kind::BoolList:
      return encode_bools(v.ints);
    case Kind::String:
    case Kind::Other:
      return v.text;
    case Kind::None:
      break;
  }
  return true;  // "none": true
}

ojson encode_arg(const Argument& a) {
  ojson j = ojson::object();
  j["name"] = a.name;
  for (const auto& [kind, key] : kArgKeys) {
    if (kind == a.value.kind) j[key] = encode_value(a.value);
  }
  return j;
}

ojson encode_kernel(const KernelLaunch& k) {
  ojson j = ojson::object();
  j["name"] = k.name;
  if (k.grid[0] != 1 || k.grid[1] != 1 || k.grid[2] != 1) {
    j["grid"] = {k.grid[0], k.grid[1], k.grid[2]};
  }
  if (k.block[0] != 1 || k.block[1] != 1 || k.block[2] != 1) {
    j["block"] = {k.block[0], k.block[1], k.block[2]};
  }
  if (k.registers_per_thread != 0) j["registers_per_thread"] = k.registers_per_thread;
  if (k.static_shared_bytes != 0) j["static_shared_bytes"] = k.static_shared_bytes;
  if (k.dynamic_shared_bytes != 0) j["dynamic_shared_bytes"] = k.dynamic_shared_bytes;
  if (k.duration_us != 0) j["duration_us"] = k.duration_us;
  if (k.stream != 0) j["stream"] = k.stream;
  if (k.launch_us) j["launch_us"] = *k.launch_us;
  if (k.device_start_us) j["device_start_us"] = *k.device_start_us;
  if (k.launch_wall_us) j["launch_wall_us"] = *k.launch_wall_us;
  return j;
}

ojson encode_sync(const SyncRecord& s) {
  ojson j = ojson::object();
  j["kind"] = to_string(s.kind);
  j["start_us"] = s.start_us;
  if (s.wall_us != 0) j["wall_us"] = s.wall_us;
  if (s.stream != 0) j["stream"] = s.stream;
  if (s.kind == SyncRecord::Kind::StreamWait) j["wait_stream"] = s.wait_stream;
  return j;
}

ojson encode_precision(const PrecisionFlags& p) {
  ojson j{{"matmul_allow_tf32", p.matmul_allow_tf32},
          {"cudnn_allow_tf32", p.cudnn_allow_tf32},
          {"float32_matmul_precision", p.float32_matmul_precision}};
  if (p.autocast()) j["autocast_dtype"] = p.autocast_dtype;
  return j;
}

ojson encode_op(const OpRecord& op) {
  ojson j = ojson::object();
  j["id"] = op.id;
  if (op.parent) j["parent"] = *op.parent;
  if (op.depth != 0) j["depth"] = op.depth;
  if (op.has_children) j["has_children"] = true;
  j["name"] = op.name;
  if (!op.overload.empty()) j["overload"] = op.overload;
  if (!op.args.empty()) {
    ojson& args = j["args"] = ojson::array();
    for (const auto& a : op.args) args.push_back(encode_arg(a));
  }
  if (!op.outputs.empty()) j["outputs"] = encode_tensors(op.outputs);
  if (op.phase != Phase::Other) j["phase"] = to_string(op.phase);
  if (!op.module_path.empty()) j["module_path"] = op.module_path;
  if (!op.autograd_node.empty()) j["autograd_node"] = op.autograd_node;
  if (op.thread != 0) j["thread"] = op.thread;
  if (op.start_us != 0) j["start_us"] = op.start_us;
  if (op.wall_us != 0) j["wall_us"] = op.wall_us;
  if (op.overhead_us) j["overhead_us"] = *op.overhead_us;
  if (op.own_before_us) j["own_before_us"] = *op.own_before_us;
  if (!op.kernels.empty()) {
    ojson& kernels = j["kernels"] = ojson::array();
    for (const auto& k : op.kernels) kernels.push_back(encode_kernel(k));
  }
  if (op.precision) j["precision"] = encode_precision(*op.precision);
  return j;
}

// The origin is written in full: it appears once and people read it.
ojson encode_origin(const TraceOrigin& o) {
  return ojson{{"device", o.device},
               {"host", o.host},
               {"torch_version", o.torch_version},
               {"habitat_version", o.habitat_version},
               {"allow_tf32", o.allow_tf32},
               {"autocast", o.autocast},
               {"cudnn_allow_tf32", o.cudnn_allow_tf32},
               {"float32_matmul_precision", o.float32_matmul_precision},
               {"autocast_dtype", o.autocast_dtype}};
}

// ---------------------------------------------------------------------------------------------
// Reading

// Largest tensor a trace may describe: 2^48 elements (256 Ti elements, far past any GPU's
// memory). More is a corrupt or hand-made trace whose forecast would be meaningless.
constexpr int64_t kMaxElements = int64_t{1} << 48;

// Every dtype torch has (c10::ScalarType, lower-cased as capture writes it) and the aliases
// users write by hand; an optional "torch." prefix is accepted. Anything else is a typo.
constexpr std::string_view kDtypeNames[] = {
    "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32",
    "complex64", "complex128", "bool", "bfloat16", "qint8", "quint8", "qint32", "quint4x2",
    "quint2x4", "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16", "float8_e5m2", "float8_e4m3fn",
    "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "uint16", "uint32",
    "uint64", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7", "int1", "int2", "int3",
    "int4", "int5", "int6", "int7",
    // aliases
    "float", "double", "half", "long", "int", "short", "cfloat", "cdouble", "chalf", "byte", "char",
    "undefined"};

// torch's device types (c10::DeviceType names), optionally followed by ":<index>".
constexpr std::string_view kDeviceTypes[] = {
    "cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip",  "ve",  "fpga", "maia",
    "xla", "lazy", "vulkan", "mps",    "meta",   "hpu",   "mtia", "xpu", "ipu",  "privateuseone"};

bool known_dtype(std::string_view dtype) {
  if (dtype.starts_with("torch.")) dtype.remove_prefix(6);
  for (const auto name : kDtypeNames) {
    if (name == dtype) return true;
  }
  return false;
}

bool known_device(std::string_view device) {
  std::string_view type = device;
  if (const auto colon = device.find(':'); colon != std::string_view::npos) {
    type = device.substr(0, colon);
    const std::string_view index = device.substr(colon + 1);
    if (index.empty() || index.size() > 9) return false;
    for (const char c : index) {
      if (c < '0' || c > '9') return false;
    }
  }
  for (const auto name : kDeviceTypes) {
    if (name == type) return true;
  }
  return false;
}

void read_dim3(const json& j, const Loc& loc, int (&out)[3]) {
  expect_array(j, loc);
  if (j.size() != 3) fail(loc, "expected 3 dimensions, got " + std::to_string(j.size()));
  for (int i = 0; i < 3; ++i) out[i] = read_int32(j[i], loc.at(i), 1);
}

// How far into its storage a tensor reaches: storage_offset + sum((size - 1) * stride), in
// elements. Bounded like the element count, so the engine's byte arithmetic on it cannot
// overflow (strides [2^62, 1] on a [3, 3] shape overflowed int64 in
// csrc/src/memory/step_memory.cpp's storage_bytes).
void check_reach(const TensorMeta& t, const Loc& loc) {
  for (const int64_t d : t.shape) {
    if (d == 0) return;  // addresses no element
  }
  int64_t reach = t.storage_offset;
  bool past = reach > kMaxElements;
  for (std::size_t i = 0; !past && i < t.shape.size() && i < t.strides.size(); ++i) {
    const int64_t steps = t.shape[i] - 1;
    past = steps != 0 && t.strides[i] > (kMaxElements - reach) / steps;
    if (!past) reach += steps * t.strides[i];
  }
  if (past) {
    fail(loc,
         "storage_offset + (size - 1) * stride passes 2^48 elements, which no GPU addresses "
         "(a corrupt trace?)");
  }
}

TensorMeta decode_tensor(const json& j, const Loc& loc) {
  expect_object(j, loc);
  TensorMeta t;
  optional(j, loc, "shape", [&](const json& v, const Loc& l) {
    t.shape = read_ints(v, l, true);
    // The span of the shape's contiguous strides: the element count with a zero dimension
    // counted as one, as torch computes strides. Bounding it, not the (then zero) element
    // count, keeps contiguous_strides from overflowing on a shape like [0, 2^40, 2^40]
    // (torch refuses that one: "Stride calculation overflowed"). Checked before each
    // multiplication so it cannot overflow itself.
    int64_t span = 1;
    bool empty = false;
    for (const int64_t d : t.shape) {
      empty = empty || d == 0;
      const int64_t factor = std::max<int64_t>(d, 1);
      if (span > kMaxElements / factor) {
        span = kMaxElements + 1;
        break;
      }
      span *= factor;
    }
    if (span > kMaxElements) {
      fail(l, "is " + v.dump() +
                  (empty ? ": strides past 2^48 (a zero dimension counts as 1, as in torch), "
                           "which no GPU addresses (a corrupt trace?)"
                         : ": more than 2^48 elements, which no GPU holds (a corrupt trace?)"));
    }
  });
  if (const json* v = find(j, "strides")) {
    const Loc l = loc.child("strides");
    t.strides = read_ints(*v, l, true);
    if (t.strides.size() != t.shape.size()) {
      fail(l, "has " + std::to_string(t.strides.size()) + " entries but shape has " +
                  std::to_string(t.shape.size()));
    }
  } else {
    t.strides = contiguous_strides(t.shape);
  }
  optional(j, loc, "dtype", [&](const json& v, const Loc& l) {
    t.dtype = read_string(v, l);
    if (!t.dtype.empty() && !known_dtype(t.dtype)) {
      fail(l, "unknown dtype \"" + t.dtype +
                  "\" (expected a torch dtype: float32, bfloat16, int64, ...)");
    }
  });
  optional(j, loc, "device", [&](const json& v, const Loc& l) {
    t.device = read_string(v, l);
    if (!t.device.empty() && !known_device(t.device)) {
      fail(l,
           "unknown device \"" + t.device + "\" (expected a torch device: cpu, cuda:0, meta, ...)");
    }
  });
  optional(j, loc, "contiguous",
           [&](const json& v, const Loc& l) { t.contiguous = read_bool(v, l); });
  optional(j, loc, "defined", [&](const json& v, const Loc& l) { t.defined = read_bool(v, l); });
  optional(j, loc, "storage", [&](const json& v, const Loc& l) { t.storage = read_id(v, l); });
  optional(j, loc, "storage_offset",
           [&](const json& v, const Loc& l) { t.storage_offset = read_count(v, l); });
  check_reach(t, loc);
  return t;
}

std::vector<TensorMeta> decode_tensors(const json& j, const Loc& loc) {
  expect_array(j, loc);
  std::vector<TensorMeta> out;
  out.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    out.push_back(decode_tensor(j[i], loc.at(static_cast<int64_t>(i))));
  }
  return out;
}

ArgValue decode_value(ArgValue::Kind kind, const json& j, const Loc& loc) {
  using Kind = ArgValue::Kind;
  ArgValue v;
  v.kind = kind;
  switch (kind) {
    case Kind::Tensor:
      v.tensors.push_back(decode_tensor(j, loc));
      break;
    case Kind::TensorList:
      v.tensors = decode_tensors(j, loc);
      break;
    case Kind::Int:
      v.ints.push_back(read_int(j, loc));
      break;
    case Kind::IntList:
      v.ints = read_ints(j, loc, false);
      break;
    case Kind::Double:
      v.real = read_real(j, loc);
      break;
    case Kind::Bool:
      v.ints.push_back(read_bool(j, loc) ? 1 : 0);
      break;
    case Kind::BoolList:
      v.ints = read_bools(j, loc);
      break;
    case Kind::String:
    case Kind::Other:
      v.text = read_string(j, loc);
      break;
    case Kind::None:
      if (!j.is_boolean() || !j.get<bool>()) fail(loc, "must be true, got " + j.dump());
      break;
  }
  return v;
}

Argument decode_arg(const json& j, const Loc& loc) {
  expect_object(j, loc);
  Argument a;
  a.name = read_string(required(j, loc, "name"), loc.child("name"));
  int found = 0;
  for (const auto& [kind, key] : kArgKeys) {
    if (const json* v = find(j, key)) {
      a.value = decode_value(kind, *v, loc.child(key));
      ++found;
    }
  }
  if (found != 1) {
    fail(loc,
         "needs exactly one value field (tensor, tensors, int, ints, float, bool, bools, str, "
         "none, other), found " +
             std::to_string(found));
  }
  return a;
}

KernelLaunch decode_kernel(const json& j, const Loc& loc) {
  expect_object(j, loc);
  KernelLaunch k;
  k.name = read_string(required(j, loc, "name"), loc.child("name"));
  optional(j, loc, "grid", [&](const json& v, const Loc& l) { read_dim3(v, l, k.grid); });
  optional(j, loc, "block", [&](const json& v, const Loc& l) { read_dim3(v, l, k.block); });
  optional(j, loc, "registers_per_thread",
           [&](const json& v, const Loc& l) { k.registers_per_thread = read_int32(v, l, 0); });
  optional(j, loc, "static_shared_bytes",
           [&](const json& v, const Loc& l) { k.static_shared_bytes = read_int32(v, l, 0); });
  optional(j, loc, "dynamic_shared_bytes",
           [&](const json& v, const Loc& l) { k.dynamic_shared_bytes = read_int32(v, l, 0); });
  optional(j, loc, "duration_us",
           [&](const json& v, const Loc& l) { k.duration_us = read_duration(v, l); });
  optional(j, loc, "stream", [&](const json& v, const Loc& l) {
    const uint64_t s = read_id(v, l);
    if (s > std::numeric_limits<uint32_t>::max())
      fail(l, "stream id " + v.dump() + " is out of range");
    k.stream = static_cast<uint32_t>(s);
  });
  optional(j, loc, "launch_us",
           [&](const json& v, const Loc& l) { k.launch_us = read_duration(v, l); });
  optional(j, loc, "device_start_us",
           [&](const json& v, const Loc& l) { k.device_start_us = read_duration(v, l); });
  optional(j, loc, "launch_wall_us",
           [&](const json& v, const Loc& l) { k.launch_wall_us = read_duration(v, l); });
  return k;
}

uint32_t read_stream(const json& v, const Loc& l) {
  const uint64_t s = read_id(v, l);
  if (s > std::numeric_limits<uint32_t>::max())
    fail(l, "stream id " + v.dump() + " is out of range");
  return static_cast<uint32_t>(s);
}

SyncRecord decode_sync(const json& j, const Loc& loc) {
  expect_object(j, loc);
  SyncRecord s;
  const Loc kind_loc = loc.child("kind");
  const std::string kind = read_string(required(j, loc, "kind"), kind_loc);
  const auto parsed = sync_kind_from_string(kind);
  if (!parsed) {
    fail(kind_loc, "unknown sync kind \"" + kind +
                       "\" (expected stream, device, event, memcpy or stream_wait)");
  }
  s.kind = *parsed;
  s.start_us = read_duration(required(j, loc, "start_us"), loc.child("start_us"));
  optional(j, loc, "wall_us",
           [&](const json& v, const Loc& l) { s.wall_us = read_duration(v, l); });
  optional(j, loc, "stream", [&](const json& v, const Loc& l) { s.stream = read_stream(v, l); });
  optional(j, loc, "wait_stream",
           [&](const json& v, const Loc& l) { s.wait_stream = read_stream(v, l); });
  return s;
}

// torch.get_float32_matmul_precision()'s values; anything else is a typo.
std::string read_matmul_precision(const json& v, const Loc& l) {
  std::string text = read_string(v, l);
  if (text != "highest" && text != "high" && text != "medium") {
    fail(l, "unknown float32 matmul precision \"" + text + "\" (expected highest, high or medium)");
  }
  return text;
}

std::string read_autocast_dtype(const json& v, const Loc& l) {
  std::string text = read_string(v, l);
  if (!text.empty() && !known_dtype(text)) {
    fail(l, "unknown autocast dtype \"" + text + "\" (expected a torch dtype such as bfloat16)");
  }
  if (text.starts_with("torch.")) text.erase(0, 6);
  return text;
}

PrecisionFlags decode_precision(const json& j, const Loc& loc) {
  expect_object(j, loc);
  PrecisionFlags p;
  optional(j, loc, "matmul_allow_tf32",
           [&](const json& v, const Loc& l) { p.matmul_allow_tf32 = read_bool(v, l); });
  optional(j, loc, "cudnn_allow_tf32",
           [&](const json& v, const Loc& l) { p.cudnn_allow_tf32 = read_bool(v, l); });
  optional(j, loc, "float32_matmul_precision", [&](const json& v, const Loc& l) {
    p.float32_matmul_precision = read_matmul_precision(v, l);
  });
  optional(j, loc, "autocast_dtype",
           [&](const json& v, const Loc& l) { p.autocast_dtype = read_autocast_dtype(v, l); });
  return p;
}

OpRecord decode_op(const json& j, Loc loc) {
  expect_object(j, loc);
  OpRecord op;
  const json& name = required(j, loc, "name");
  op.name = read_string(name, loc.child("name"));
  loc.note = name.get_ref<const std::string&>();  // later messages name the op
  op.id = read_id(required(j, loc, "id"), loc.child("id"));
  optional(j, loc, "parent", [&](const json& v, const Loc& l) {
    if (!v.is_null()) op.parent = read_id(v, l);
  });
  optional(j, loc, "depth", [&](const json& v, const Loc& l) { op.depth = read_int32(v, l, 0); });
  optional(j, loc, "has_children",
           [&](const json& v, const Loc& l) { op.has_children = read_bool(v, l); });
  optional(j, loc, "overload",
           [&](const json& v, const Loc& l) { op.overload = read_string(v, l); });
  optional(j, loc, "args", [&](const json& v, const Loc& l) {
    expect_array(v, l);
    op.args.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      op.args.push_back(decode_arg(v[i], l.at(static_cast<int64_t>(i))));
    }
  });
  optional(j, loc, "outputs",
           [&](const json& v, const Loc& l) { op.outputs = decode_tensors(v, l); });
  optional(j, loc, "phase", [&](const json& v, const Loc& l) {
    const std::string text = read_string(v, l);
    const auto phase = phase_from_string(text);
    if (!phase) {
      fail(l, "unknown phase \"" + text + "\" (expected forward, backward, optimizer or other)");
    }
    op.phase = *phase;
  });
  optional(j, loc, "module_path",
           [&](const json& v, const Loc& l) { op.module_path = read_string(v, l); });
  optional(j, loc, "autograd_node",
           [&](const json& v, const Loc& l) { op.autograd_node = read_string(v, l); });
  optional(j, loc, "thread", [&](const json& v, const Loc& l) { op.thread = read_id(v, l); });
  optional(j, loc, "start_us",
           [&](const json& v, const Loc& l) { op.start_us = read_duration(v, l); });
  optional(j, loc, "wall_us",
           [&](const json& v, const Loc& l) { op.wall_us = read_duration(v, l); });
  optional(j, loc, "overhead_us",
           [&](const json& v, const Loc& l) { op.overhead_us = read_duration(v, l); });
  optional(j, loc, "own_before_us",
           [&](const json& v, const Loc& l) { op.own_before_us = read_duration(v, l); });
  optional(j, loc, "kernels", [&](const json& v, const Loc& l) {
    expect_array(v, l);
    op.kernels.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      op.kernels.push_back(decode_kernel(v[i], l.at(static_cast<int64_t>(i))));
    }
  });
  optional(j, loc, "precision",
           [&](const json& v, const Loc& l) { op.precision = decode_precision(v, l); });
  if (const auto why = op_inconsistency(op)) fail(loc, *why + " (an edited or damaged trace?)");
  return op;
}

// Ids are unique within a step and every parent names an op of the same step.
void check_links(const Step& step, const json& ops, const Loc& ops_loc) {
  std::unordered_map<uint64_t, std::size_t> position;
  position.reserve(step.ops.size());
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const auto [it, inserted] = position.emplace(step.ops[i].id, i);
    if (!inserted) {
      Loc loc = ops_loc.at(static_cast<int64_t>(i));
      loc.note = ops[i]["name"].get_ref<const std::string&>();
      fail(loc.child("id"), "duplicate op id " + std::to_string(step.ops[i].id) +
                                " (also used by ops[" + std::to_string(it->second) + "])");
    }
  }
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const auto& parent = step.ops[i].parent;
    if (!parent) continue;
    if (!position.contains(*parent) || *parent == step.ops[i].id) {
      Loc loc = ops_loc.at(static_cast<int64_t>(i));
      loc.note = ops[i]["name"].get_ref<const std::string&>();
      fail(loc.child("parent"),
           "op id " + std::to_string(*parent) +
               (*parent == step.ops[i].id ? " is the op itself" : " not found in this step"));
    }
  }
  // No parent cycle (a -> b -> a): walk each chain once, marking ops on the current walk.
  enum : unsigned char { kUnseen, kOnPath, kDone };
  std::vector<unsigned char> state(step.ops.size(), kUnseen);
  std::vector<std::size_t> path;
  for (std::size_t start = 0; start < step.ops.size(); ++start) {
    path.clear();
    std::size_t i = start;
    while (state[i] == kUnseen) {
      state[i] = kOnPath;
      path.push_back(i);
      const auto& parent = step.ops[i].parent;
      if (!parent) break;
      i = position.at(*parent);
      if (state[i] == kOnPath) {
        Loc loc = ops_loc.at(static_cast<int64_t>(i));
        loc.note = ops[i]["name"].get_ref<const std::string&>();
        fail(loc.child("parent"), "parent chain loops back to op id " +
                                      std::to_string(step.ops[i].id) +
                                      " (a cycle: ops cannot be their own ancestors)");
      }
    }
    for (const std::size_t k : path) state[k] = kDone;
  }
}

Step decode_step(const json& j, const Loc& loc) {
  expect_object(j, loc);
  Step step;
  const Loc index_loc = loc.child("index");
  step.index = read_count(required(j, loc, "index"), index_loc);
  step.wall_ms = read_duration(required(j, loc, "wall_ms"), loc.child("wall_ms"));
  optional(j, loc, "measured_peak_bytes",
           [&](const json& v, const Loc& l) { step.measured_peak_bytes = read_count(v, l); });
  optional(j, loc, "dropped_ops",
           [&](const json& v, const Loc& l) { step.dropped_ops = read_count(v, l); });
  optional(j, loc, "hook_overhead_us",
           [&](const json& v, const Loc& l) { step.hook_overhead_us = read_duration(v, l); });
  optional(j, loc, "launch_overhead_us",
           [&](const json& v, const Loc& l) { step.launch_overhead_us = read_duration(v, l); });
  optional(j, loc, "uninstrumented_wall_ms",
           [&](const json& v, const Loc& l) { step.uninstrumented_wall_ms = read_duration(v, l); });
  optional(j, loc, "syncs", [&](const json& v, const Loc& l) {
    expect_array(v, l);
    step.syncs.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      step.syncs.push_back(decode_sync(v[i], l.at(static_cast<int64_t>(i))));
    }
  });
  const Loc ops_loc = loc.child("ops");
  const json& ops = expect_array(required(j, loc, "ops"), ops_loc);
  step.ops.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    step.ops.push_back(decode_op(ops[i], ops_loc.at(static_cast<int64_t>(i))));
  }
  check_links(step, ops, ops_loc);
  return step;
}

TraceOrigin decode_origin(const json& j, const Loc& loc) {
  expect_object(j, loc);
  TraceOrigin o;
  optional(j, loc, "device", [&](const json& v, const Loc& l) { o.device = read_string(v, l); });
  optional(j, loc, "host", [&](const json& v, const Loc& l) { o.host = read_string(v, l); });
  optional(j, loc, "torch_version",
           [&](const json& v, const Loc& l) { o.torch_version = read_string(v, l); });
  optional(j, loc, "habitat_version",
           [&](const json& v, const Loc& l) { o.habitat_version = read_string(v, l); });
  optional(j, loc, "allow_tf32",
           [&](const json& v, const Loc& l) { o.allow_tf32 = read_bool(v, l); });
  optional(j, loc, "autocast", [&](const json& v, const Loc& l) { o.autocast = read_bool(v, l); });
  optional(j, loc, "cudnn_allow_tf32",
           [&](const json& v, const Loc& l) { o.cudnn_allow_tf32 = read_bool(v, l); });
  optional(j, loc, "float32_matmul_precision", [&](const json& v, const Loc& l) {
    o.float32_matmul_precision = read_matmul_precision(v, l);
  });
  optional(j, loc, "autocast_dtype",
           [&](const json& v, const Loc& l) { o.autocast_dtype = read_autocast_dtype(v, l); });
  return o;
}

void check_cap(uint64_t count, uint64_t cap, const char* what, const std::string& basis,
               const char* variable) {
  if (count <= cap) return;
  throw InputLimitError("the trace holds " + std::to_string(count) + " " + what +
                        ", more than the cap of " + std::to_string(cap) + " (" + basis +
                        "): if the memory is there, set " + variable + "=" + std::to_string(count) +
                        " to read it");
}

// The one reader of trace documents, whether parsed from text or built as a TraceTree.
Trace decode_document(const json& doc) {
  const Loc root;
  if (!doc.is_object()) {
    throw DecodeError{std::string("not a habitat trace: expected a JSON object, got ") +
                      doc.type_name()};
  }
  const json* format = find(doc, "format");
  if (format == nullptr) {
    throw DecodeError{"not a habitat trace: missing \"format\": \"habitat-trace\""};
  }
  if (!format->is_string() || format->get_ref<const std::string&>() != kFormatName) {
    throw DecodeError{"not a habitat trace: \"format\" is " + format->dump() +
                      ", expected \"habitat-trace\""};
  }
  const Loc version_loc = root.child("version");
  const int64_t version = read_int(required(doc, root, "version"), version_loc);
  if (version > Trace::kFormatVersion) {
    throw DecodeError{"written by a newer Habitat (version " + std::to_string(version) +
                      "); this build reads up to version " + std::to_string(Trace::kFormatVersion) +
                      ": upgrade habitat"};
  }
  if (version < 1) fail(version_loc, "unsupported version " + std::to_string(version));

  Trace trace;
  trace.origin = decode_origin(required(doc, root, "origin"), root.child("origin"));
  const Loc steps_loc = root.child("steps");
  const json& steps = expect_array(required(doc, root, "steps"), steps_loc);
  // Each step and op read is kept and forecast: refuse a trace that would not fit in memory
  // before reading it, not after the machine ran out.
  const InputLimits limits = input_limits();
  check_cap(steps.size(), limits.max_steps, "steps", limits.steps_basis, "HABITAT_MAX_TRACE_STEPS");
  uint64_t ops = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (const json* step_ops = steps[i].is_object() ? find(steps[i], "ops") : nullptr) {
      ops += step_ops->size();
    }
  }
  check_cap(ops, limits.max_ops, "ops", limits.ops_basis, "HABITAT_MAX_TRACE_OPS");
  trace.steps.reserve(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    trace.steps.push_back(decode_step(steps[i], steps_loc.at(static_cast<int64_t>(i))));
  }
  return trace;
}

Trace decode_trace(std::string_view text) {
  const json_reader::Document document = json_reader::parse_document(text);
  return decode_document(document.root());
}

std::system_error io_error(const std::string& what, int err) {
  return std::system_error(err != 0 ? err : EIO, std::generic_category(), what);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public entry points

std::string trace_to_json(const Trace& trace) {
  ojson doc = ojson::object();
  doc["format"] = kFormatName;
  doc["version"] = Trace::kFormatVersion;
  doc["origin"] = encode_origin(trace.origin);
  ojson& steps = doc["steps"] = ojson::array();
  for (const auto& step : trace.steps) {
    ojson& s = steps.emplace_back(ojson::object());
    s["index"] = step.index;
    s["wall_ms"] = step.wall_ms;
    if (step.measured_peak_bytes != 0) s["measured_peak_bytes"] = step.measured_peak_bytes;
    if (step.dropped_ops != 0) s["dropped_ops"] = step.dropped_ops;
    if (step.hook_overhead_us) s["hook_overhead_us"] = *step.hook_overhead_us;
    if (step.launch_overhead_us) s["launch_overhead_us"] = *step.launch_overhead_us;
    if (step.uninstrumented_wall_ms) s["uninstrumented_wall_ms"] = *step.uninstrumented_wall_ms;
    if (!step.syncs.empty()) {
      ojson& syncs = s["syncs"] = ojson::array();
      for (const auto& sync : step.syncs) syncs.push_back(encode_sync(sync));
    }
    ojson& ops = s["ops"] = ojson::array();
    for (const auto& op : step.ops) ops.push_back(encode_op(op));
  }
  // Invalid UTF-8 in a name (a user's module path) is replaced rather than aborting capture.
  return doc.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

Trace trace_from_json(std::string_view text) {
  try {
    return decode_trace(text);
  } catch (const DecodeError& e) {
    throw TraceFormatError("invalid habitat trace: " + e.message);
  }
}

Trace trace_from_tree(const TraceTree& tree) {
  try {
    return decode_document(tree.document().root());
  } catch (const DecodeError& e) {
    throw TraceFormatError("invalid habitat trace: " + e.message);
  }
}

// File errors are std::system_error (errno inside) so callers can tell "no such file" from a
// corrupt one; the write goes through a temporary file so a crash never leaves half a trace.
void save_trace(const Trace& trace, const std::string& path) {
  const std::string text = trace_to_json(trace);
  const std::string tmp = path + ".tmp";
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw io_error("cannot write habitat trace '" + path + "'", errno);
    out << text;
    out.flush();
    if (!out) {
      const int err = errno;
      out.close();
      std::remove(tmp.c_str());
      throw io_error("cannot write habitat trace '" + path + "'", err);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw std::system_error(ec, "cannot write habitat trace '" + path + "'");
  }
}

Trace load_trace(const std::string& path) {
  const std::string text = read_file(path, "habitat trace");
  try {
    return decode_trace(text);
  } catch (const DecodeError& e) {
    throw TraceFormatError("invalid habitat trace '" + path + "': " + e.message);
  } catch (const InputLimitError& e) {
    throw InputLimitError("habitat trace '" + path + "': " + e.what());
  }
}

}  // namespace habitat
