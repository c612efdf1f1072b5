// Numeric formats and how an op's dtype maps to the peak a GPU offers for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace habitat {

// The peak-throughput columns of the device database. Element-wise work in any
// dtype runs on the SIMT units (Fp32Simt); matrix work picks a tensor-core column.
enum class Precision { Fp32Simt, Tf32Tensor, Fp16Tensor, Bf16Tensor, Fp8Tensor, Fp64 };

std::string_view to_string(Precision p);
std::optional<Precision> precision_from_string(std::string_view name);

// Size in bytes of one element of a torch dtype name as written in traces
// ("float32", "bfloat16", "int64", ...). Unknown names return nullopt.
std::optional<int> dtype_size(std::string_view dtype);

// True for floating dtypes ("float16", "bfloat16", "float32", "float64", fp8 variants).
bool is_floating(std::string_view dtype);

// Precision used by matrix-multiply-like work (GEMM, conv, attention) in `dtype`.
// float32 uses TF32 tensor cores only when the trace says TF32 was allowed.
Precision matmul_precision(std::string_view dtype, bool allow_tf32);

}  // namespace habitat
