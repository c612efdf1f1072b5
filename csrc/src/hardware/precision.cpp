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
    {"float32", 4, true},
    {"float", 4, true},
    {"float64", 8, true},
    {"double", 8, true},
    {"float16", 2, true},
    {"half", 2, true},
    {"bfloat16", 2, true},
    {"float8_e4m3fn", 1, true},
    {"float8_e5m2", 1, true},
    {"int64", 8, false},
    {"long", 8, false},
    {"int32", 4, false},
    {"int", 4, false},
    {"int16", 2, false},
    {"int8", 1, false},
    {"uint8", 1, false},
    {"bool", 1, false},
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
  if (dtype.starts_with("torch.")) dtype.remove_prefix(6);
  if (dtype == "complex32" || dtype == "chalf") return 4;
  if (dtype == "complex64" || dtype == "cfloat") return 8;
  if (dtype == "complex128" || dtype == "cdouble") return 16;
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
  if (dtype == "float64" || dtype == "double" || dtype == "complex128" || dtype == "cdouble") {
    return Precision::Fp64;
  }
  return allow_tf32 ? Precision::Tf32Tensor : Precision::Fp32Simt;
}

bool PrecisionFlags::tf32(MatrixFamily family) const {
  if (family == MatrixFamily::Conv || family == MatrixFamily::Rnn) return cudnn_allow_tf32;
  // allow_tf32 and the float32 matmul precision are one state in torch; "medium" allows
  // bf16 internally where a backend has such a kernel, which cuBLAS does not: TF32 as "high".
  return matmul_allow_tf32 ||
         (!float32_matmul_precision.empty() && float32_matmul_precision != "highest");
}

Precision matmul_precision(std::string_view dtype, MatrixFamily family,
                           const PrecisionFlags& flags) {
  if (dtype.starts_with("torch.")) dtype.remove_prefix(6);
  // A complex GEMM is real GEMMs on its parts, in the parts' precision.
  if (dtype == "complex64" || dtype == "cfloat") dtype = "float32";
  if (dtype == "complex128" || dtype == "cdouble") dtype = "float64";
  if (dtype == "complex32" || dtype == "chalf") dtype = "float16";
  return matmul_precision(dtype, flags.tf32(family));
}

bool is_complex(std::string_view dtype) {
  if (dtype.starts_with("torch.")) dtype.remove_prefix(6);
  return dtype.starts_with("complex") || dtype == "cfloat" || dtype == "cdouble" ||
         dtype == "chalf";
}

}  // namespace habitat
