#include "capture/capture_args.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/jit_type.h>
#include <c10/core/DispatchKeySet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <unordered_map>

#include "capture/torch_compat.h"
#include "habitat/compiled_kernels.h"

namespace habitat::capture {
namespace {

std::unique_ptr<OpInfo> build_op_info(const c10::FunctionSchema& schema) {
  auto info = std::make_unique<OpInfo>();
  info->name = schema.name();
  info->overload = schema.overload_name();
  {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a: std::hash may differ between builds
    for (const char c : info->name + "." + info->overload)
      h = hash_mix(h, static_cast<unsigned char>(c));
    info->name_hash = h;
  }
  info->skip = info->name.starts_with("profiler::");
  info->compiled_graph = info->name == kCompiledGraphOp;
  const auto& args = schema.arguments();
  info->num_arguments = args.size();
  info->num_returns = schema.returns().size();
  for (const auto& a : args) {
    info->argument_names.push_back(a.name());
    // real_type: the fake type of ScalarType/Layout/MemoryFormat arguments is plain int.
    c10::TypePtr type = a.real_type();
    if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
    switch (type->kind()) {
      case c10::TypeKind::ScalarTypeType:
        info->int_meanings.push_back(IntMeaning::ScalarType);
        break;
      case c10::TypeKind::LayoutType:
        info->int_meanings.push_back(IntMeaning::Layout);
        break;
      case c10::TypeKind::MemoryFormatType:
        info->int_meanings.push_back(IntMeaning::MemoryFormat);
        break;
      default:
        info->int_meanings.push_back(IntMeaning::Number);
    }
  }
  return info;
}

// Keys of tensors that are not real eager data: FakeTensor and other Python subclasses
// (Python), functionalization wrappers, functorch wrappers. Looked up by name so a key
// missing from some torch release is simply not part of the set.
c10::DispatchKeySet non_plain_keys() {
  c10::DispatchKeySet set;
  for (const char* name : {"Python", "PythonTLSSnapshot", "Functionalize", "FuncTorchGradWrapper",
                           "FuncTorchBatched", "BatchedNestedTensor", "Batched", "Fake"}) {
    try {
      set = set | c10::DispatchKeySet(c10::parseDispatchKey(name));
    } catch (const c10::Error&) {
    }
  }
  return set;
}

const c10::DispatchKeySet& skip_keys() {
  static const c10::DispatchKeySet keys = non_plain_keys();
  return keys;
}

void scan_tensor(const at::Tensor& t, TensorScan& scan) {
  if (!t.defined()) return;
  if (t.key_set().has_any(skip_keys()) || t.is_meta()) scan.plain = false;
  if (t.requires_grad()) scan.requires_grad = true;
  if (!scan.plain) return;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  uint64_t h = hash_mix(scan.shape_hash, static_cast<uint64_t>(t.scalar_type()) + 1);
  if (impl->is_nested() || impl->has_symbolic_sizes_strides()) {
    scan.shape_hash = hash_mix(h, 0xfffffffffULL);
    return;
  }
  const auto sizes = impl->sizes();
  h = hash_mix(h, sizes.size());
  for (const int64_t s : sizes) h = hash_mix(h, static_cast<uint64_t>(s));
  scan.shape_hash = h;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

const char* layout_name(int64_t v) {
  switch (static_cast<c10::Layout>(v)) {
    case c10::kStrided:
      return "strided";
    case c10::kSparse:
      return "sparse_coo";
    case c10::kSparseCsr:
      return "sparse_csr";
    case c10::kMkldnn:
      return "_mkldnn";
    default:
      return "layout";
  }
}

const char* memory_format_name(int64_t v) {
  switch (static_cast<c10::MemoryFormat>(v)) {
    case c10::MemoryFormat::Contiguous:
      return "contiguous_format";
    case c10::MemoryFormat::Preserve:
      return "preserve_format";
    case c10::MemoryFormat::ChannelsLast:
      return "channels_last";
    case c10::MemoryFormat::ChannelsLast3d:
      return "channels_last_3d";
    default:
      return "memory_format";
  }
}

std::string device_name(const c10::Device& d) {
  if (d.is_cpu()) return "cpu";
  std::string out = c10::DeviceTypeName(d.type(), /*lower_case=*/true);
  if (d.has_index()) {
    out += ':';
    out += std::to_string(d.index());
  }
  return out;
}

// The interned name of a device, cached per thread for the last device seen (a step's
// tensors live on one or two devices): no pool lookup per tensor.
InternedString interned_device(const c10::Device& d) {
  struct Last {
    c10::Device device{c10::DeviceType::CPU};
    InternedString name{"cpu"};
  };
  thread_local Last last;
  if (d != last.device) last = {d, InternedString(device_name(d))};
  return last.name;
}

// The interned dtype name, cached per thread by scalar type.
InternedString interned_dtype(c10::ScalarType t) {
  thread_local std::unordered_map<int, InternedString> names;
  const int key = static_cast<int>(t);
  if (key >= 0 && key < 64) {
    thread_local std::array<InternedString, 64> common;
    InternedString& slot = common[static_cast<std::size_t>(key)];
    if (slot.empty()) slot = dtype_name(t);
    return slot;
  }
  auto& slot = names[key];
  if (slot.empty()) slot = dtype_name(t);
  return slot;
}

// A fixed name (a string literal) interned once per thread: no pool lookup per argument.
InternedString interned_literal(const char* literal) {
  thread_local std::unordered_map<const char*, InternedString> names;
  InternedString& slot = names[literal];
  if (slot.empty()) slot = literal;
  return slot;
}

thread_local StorageRefs* t_storage_sink = nullptr;

void read_tensor(const at::Tensor& t, TensorMeta& m) {
  if (!t.defined()) {
    m.defined = false;
    return;
  }
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (!t.is_nested()) {
    const auto sizes = impl->sizes();
    m.shape.assign(sizes.begin(), sizes.end());
    if (t.layout() == c10::kStrided) {
      const auto strides = impl->strides();
      m.strides.assign(strides.begin(), strides.end());
      m.contiguous = impl->is_contiguous();
    } else {
      m.contiguous = false;
    }
  }
  m.dtype = interned_dtype(t.scalar_type());
  m.device = interned_device(t.device());
  if (impl->has_storage()) {
    // The StorageImpl's address identifies the storage while it lives (the whole step for
    // anything the step uses) without touching the data pointer.
    m.storage = reinterpret_cast<uintptr_t>(impl->unsafe_storage().unsafeGetStorageImpl());
    m.storage_offset = impl->storage_offset();
    if (t_storage_sink != nullptr) {
      t_storage_sink->push_back(impl->unsafe_storage().getWeakStorageImpl());
    }
  }
}

// A list whose elements are tensors or None (Tensor?[]), read element by element.
bool read_tensor_elements(c10::ArrayRef<c10::IValue> elems, ArgValue& out) {
  for (const auto& e : elems) {
    if (!e.isTensor() && !e.isNone()) return false;
  }
  out.kind = ArgValue::Kind::TensorList;
  out.tensors.resize(elems.size());
  for (size_t i = 0; i < elems.size(); ++i) {
    if (elems[i].isTensor()) {
      read_tensor(elems[i].toTensor(), out.tensors[i]);
    } else {
      out.tensors[i].defined = false;
    }
  }
  return true;
}

std::optional<int64_t> concrete_int(const c10::IValue& v) {
  if (v.isInt()) return v.toInt();
  if (v.isSymInt()) return v.toSymInt().maybe_as_int();
  return std::nullopt;
}

void read_value(const c10::IValue& v, IntMeaning meaning, ArgValue& out) {
  using Kind = ArgValue::Kind;
  if (v.isTensor()) {
    out.kind = Kind::Tensor;
    out.tensors.resize(1);
    read_tensor(v.toTensor(), out.tensors[0]);
  } else if (v.isNone()) {
    out.kind = Kind::None;
  } else if (v.isInt()) {
    const int64_t i = v.toInt();
    switch (meaning) {
      case IntMeaning::ScalarType:
        out.kind = Kind::String;
        out.text = interned_dtype(static_cast<c10::ScalarType>(i));
        break;
      case IntMeaning::Layout:
        out.kind = Kind::String;
        out.text = interned_literal(layout_name(i));
        break;
      case IntMeaning::MemoryFormat:
        out.kind = Kind::String;
        out.text = interned_literal(memory_format_name(i));
        break;
      case IntMeaning::Number:
        out.kind = Kind::Int;
        out.ints.push_back(i);
    }
  } else if (v.isDouble()) {
    out.kind = Kind::Double;
    out.real = v.toDouble();
  } else if (v.isBool()) {
    out.kind = Kind::Bool;
    out.ints.push_back(v.toBool() ? 1 : 0);
  } else if (v.isIntList()) {
    out.kind = Kind::IntList;
    const auto list = v.toIntList();
    out.ints.reserve(list.size());
    for (const int64_t i : list) out.ints.push_back(i);
  } else if (v.isTensorList()) {
    out.kind = Kind::TensorList;
    const auto list = v.toTensorList();
    out.tensors.resize(list.size());
    for (size_t i = 0; i < list.size(); ++i) read_tensor(list.get(i), out.tensors[i]);
  } else if (v.isBoolList()) {
    out.kind = Kind::BoolList;
    for (const bool b : v.toBoolList()) out.ints.push_back(b ? 1 : 0);
  } else if (v.isList()) {
    const auto elems = v.toListRef();
    if (read_tensor_elements(elems, out)) return;
    out.kind = Kind::IntList;
    for (const auto& e : elems) {
      const auto i = concrete_int(e);
      if (!i) {
        out = ArgValue{};
        out.kind = Kind::Other;
        out.text = v.type()->str();
        return;
      }
      out.ints.push_back(*i);
    }
  } else if (v.isSymInt()) {
    if (const auto i = concrete_int(v)) {
      out.kind = Kind::Int;
      out.ints.push_back(*i);
    } else {
      out.kind = Kind::Other;
      out.text = "SymInt";
    }
  } else if (v.isString()) {
    out.kind = Kind::String;
    out.text = v.toStringRef();
  } else if (v.isDevice()) {
    out.kind = Kind::String;
    out.text = interned_device(v.toDevice());
  } else if (const auto group = compat::process_group_size_rank(v)) {
    // c10d collectives: the trace keeps the group's size and this rank (trace format 1's
    // "other" text, so older readers still load it).
    out.kind = Kind::Other;
    out.text = "ProcessGroup(size=" + std::to_string(group->first) +
               ", rank=" + std::to_string(group->second) + ")";
  } else {
    out.kind = Kind::Other;
    out.text = v.tagKind();
  }
}

}  // namespace

const OpInfo& op_info(const c10::OperatorHandle& op) {
  // Schemas live as long as their operator is registered; the names are compared on a hit
  // in case an operator was removed and another registered at the same address.
  struct Cache {
    std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpInfo>> infos;
  };
  thread_local Cache cache;
  const c10::FunctionSchema& schema = op.schema();
  auto& slot = cache.infos[&schema];
  if (slot == nullptr || slot->name != schema.name() || slot->overload != schema.overload_name()) {
    slot = build_op_info(schema);
  }
  return *slot;
}

TensorScan scan_tensors(const c10::IValue* values, size_t n) {
  TensorScan scan;
  for (size_t i = 0; i < n; ++i) {
    const c10::IValue& v = values[i];
    if (v.isTensor()) {
      scan_tensor(v.toTensor(), scan);
    } else if (v.isList()) {  // tensor lists too: their elements are tensor IValues
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) scan_tensor(e.toTensor(), scan);
      }
    }
  }
  return scan;
}

StorageSink::StorageSink(StorageRefs& refs) : previous_(t_storage_sink) { t_storage_sink = &refs; }

StorageSink::~StorageSink() { t_storage_sink = previous_; }

void read_arguments(const OpInfo& info, const c10::IValue* values, std::vector<Argument>& out) {
  out.resize(info.num_arguments);
  for (size_t i = 0; i < info.num_arguments; ++i) {
    out[i].name = info.argument_names[i];
    read_value(values[i], info.int_meanings[i], out[i].value);
  }
}

void read_outputs(const c10::IValue* values, size_t n, std::vector<TensorMeta>& out) {
  out.reserve(n);  // one tensor each, mostly: no growth
  for (size_t i = 0; i < n; ++i) {
    const c10::IValue& v = values[i];
    if (v.isTensor()) {
      read_tensor(v.toTensor(), out.emplace_back());
    } else if (v.isTensorList()) {
      // Through the IValues: a Tensor& from toTensorList()'s proxy would dangle (GCC 13 warns).
      for (const c10::IValue& e : v.toListRef()) read_tensor(e.toTensor(), out.emplace_back());
    }
  }
}

const char* dtype_name(c10::ScalarType t) {
  using S = c10::ScalarType;
  switch (t) {
    case S::Byte:
      return "uint8";
    case S::Char:
      return "int8";
    case S::Short:
      return "int16";
    case S::Int:
      return "int32";
    case S::Long:
      return "int64";
    case S::Half:
      return "float16";
    case S::Float:
      return "float32";
    case S::Double:
      return "float64";
    case S::ComplexHalf:
      return "complex32";
    case S::ComplexFloat:
      return "complex64";
    case S::ComplexDouble:
      return "complex128";
    case S::Bool:
      return "bool";
    case S::BFloat16:
      return "bfloat16";
    case S::Float8_e5m2:
      return "float8_e5m2";
    case S::Float8_e4m3fn:
      return "float8_e4m3fn";
    case S::Float8_e5m2fnuz:
      return "float8_e5m2fnuz";
    case S::Float8_e4m3fnuz:
      return "float8_e4m3fnuz";
    case S::UInt16:
      return "uint16";
    case S::UInt32:
      return "uint32";
    case S::UInt64:
      return "uint64";
    default: {
      // Rare types (quantized, sub-byte): torch's own spelling, lower-cased, interned.
      static thread_local std::unordered_map<int, std::string> names;
      auto& name = names[static_cast<int>(t)];
      if (name.empty()) name = lower(c10::toString(t));
      return name.c_str();
    }
  }
}

}  // namespace habitat::capture
