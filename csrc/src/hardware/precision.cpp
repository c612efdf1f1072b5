#include "habitat/precision.h"

#include <array>
#include <utility>

namespace habitat {
namespace {

constexpr std::array<std::pair<Precision, std::string_view>, 6> kPrecisionNames{{
    {Precision::Fp32Simt, "fp32"},
    {Precision::Tf32Tensor, "tf32"},
    {Precision::Fp16Tensor, "fp16"},
    {Precision::Bf16Tensor, "bf16"},
    {Precision::Fp8Tensor, "fp8"},
    {Precision::Fp64, "fp64"},
}};

struct DtypeInfo {
  std::string_view name;
  int size;
  bool floating;
};

constexpr std::array<DtypeInfo, 17> kDtypes{{
    {"float32", 4, true},       {"float", 4, true},          {"float64", 8, true},
    {"double", 8, true},        {"float16", 2, true},        {"half", 2, true},
    {"bfloat16", 2, true},      {"float8_e4m3fn", 1, true},  {"float8_e5m2", 1, true},
    {"int64", 8, false},        {"long", 8, false},          {"int32", 4, false},
    {"int", 4, false},          {"int16", 2, false},         {"int8", 1, false},
    {"uint8", 1, false},        {"bool", 1, false},
}};

const DtypeInfo* find_dtype(std::string_view dtype) {
  if (dtype.starts_with("torch.")) dtype.remove_prefix(6);
  for (const auto& d : kDtypes) {
    if (d.name == dtype) return &d;
  }
  return nullptr;
}

}  // namespace

std::string_view to_string(Precision p) {
  for (const auto& [value, name] : kPrecisionNames) {
    if (value == p) return name;
  }
  return "fp32";
}

std::optional<Precision> precision_from_string(std::string_view name) {
  for (const auto& [value, text] : kPrecisionNames) {
    if (text == name) return value;
  }
  return std::nullopt;
}

std::optional<int> dtype_size(std::string_view dtype) {
  if (const auto* d = find_dtype(dtype)) return d->size;
  if (dtype.starts_with("complex")) return dtype == "complex64" ? 8 : 16;
  return std::nullopt;
}

bool is_floating(std::string_view dtype) {
  const auto* d = find_dtype(dtype);
  return d != nullptr && d->floating;
}

Precision matmul_precision(std::string_view dtype, bool allow_tf32) {
  if (dtype.starts_with("torch.")) dtype.remove_prefix(6);
  if (dtype == "bfloat16") return Precision::Bf16Tensor;
  if (dtype == "float16" || dtype == "half") return Precision::Fp16Tensor;
  if (dtype.starts_with("float8")) return Precision::Fp8Tensor;
  if (dtype == "float64" || dtype == "double") return Precision::Fp64;
  return allow_tf32 ? Precision::Tf32Tensor : Precision::Fp32Simt;
}

}  // namespace habitat
