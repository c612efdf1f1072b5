// Numeric formats and how an op's dtype maps to the peak a GPU offers for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "habitat/interned_string.h"

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

// Which of torch's switches decides whether float32 matrix work of an op may run on TF32
// tensor cores: cuBLAS GEMMs follow torch.backends.cuda.matmul.allow_tf32 (the same state as
// torch.set_float32_matmul_precision), cuDNN convolutions follow torch.backends.cudnn.allow_tf32
// (True by default, so "fp32" convs run on TF32 tensor cores unless a user turns it off), and
// attention's matrix work follows the matmul switch (its math path is bmm; the fused kernels
// run fp32 on the same rule).
// Recurrent layers (cuDNN RNN) follow the cuDNN switch too.
enum class MatrixFamily { Matmul, Conv, Attention, Rnn };

// The precision switches in force when an op ran. A trace holds them for its origin (the
// switches when capture began) and, per op, where they differed from the origin's.
struct PrecisionFlags {
  bool matmul_allow_tf32 = false;  // torch.backends.cuda.matmul.allow_tf32 (torch default False)
  bool cudnn_allow_tf32 = true;    // torch.backends.cudnn.allow_tf32 (torch default True)
  // Interned: ops recorded under other switches than their origin's each hold a copy.
  InternedString float32_matmul_precision = "highest";  // "highest", "high" or "medium"
  InternedString autocast_dtype;  // dtype autocast casts eligible ops to ("bfloat16"); "" = off

  bool autocast() const { return !autocast_dtype.empty(); }
  // True when float32 work of `family` may use TF32 tensor cores under these switches.
  bool tf32(MatrixFamily family) const;
  bool operator==(const PrecisionFlags&) const = default;
};

// Precision of matrix work of `family` in `dtype` under `flags` (float32 picks TF32 or SIMT
// by the family's switch; narrower dtypes their own tensor-core column).
Precision matmul_precision(std::string_view dtype, MatrixFamily family,
                           const PrecisionFlags& flags);

// True for complex dtypes ("complex64", "complex128", "complex32", "cfloat", ...).
bool is_complex(std::string_view dtype);

}  // namespace habitat
