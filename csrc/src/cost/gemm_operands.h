// The matrix products' operands by aten schema name, and their GEMM dimensions: the one
// source for the GEMM cost rule (op_cost_gemm.cpp) and the learned GEMM features
// (learned/learned_model.cpp), so the two cannot read different operands or batches.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "habitat/trace.h"
#include "trace/op_args.h"

namespace habitat::op_cost {

struct GemmOperands {
  std::string_view stem;
  const char* a;            // left operand: its last dimension is the contraction K
  const char* b;            // right operand
  const char* bias;         // added input scaled by beta, or nullptr
  bool sums_batch = false;  // addbmm: a [B,M,K] x b [B,K,N] summed into one [M,N]
  bool weight_nk = false;   // linear: b is a [N,K] weight, a flattens to [M,K]
  bool learned = false;     // the learned GEMM model was trained on this op's shapes
};

// Operand names from the aten schemas.
inline constexpr std::array<GemmOperands, 13> kGemmOperands{{
    {"mm", "self", "mat2", nullptr, false, false, true},
    {"bmm", "self", "mat2", nullptr, false, false, true},
    {"_scaled_mm", "self", "mat2", nullptr},
    {"addmm", "mat1", "mat2", "self", false, false, true},
    {"_addmm_activation", "mat1", "mat2", "self", false, false, true},
    {"baddbmm", "batch1", "batch2", "self", false, false, true},
    {"addbmm", "batch1", "batch2", "self", true, false, true},
    {"matmul", "self", "other", nullptr, false, false, true},
    {"linear", "input", "weight", nullptr, false, true, true},
    {"mv", "self", "vec", nullptr},
    {"addmv", "mat", "vec", "self"},
    {"dot", "self", "tensor", nullptr},
    {"vdot", "self", "tensor", nullptr},
}};

inline const GemmOperands* find_gemm(std::string_view stem) {
  for (const auto& g : kGemmOperands) {
    if (g.stem == stem) return &g;
  }
  return nullptr;
}

// A product's size: `products` matrix products of [m,k] x [k,n]. Fractional `products` (or
// zeros) only for inconsistent shapes; the cost rule counts 2 * elements * k * summed FLOPs.
struct GemmDims {
  double elements = 0;  // elements of the product (one matrix per output element group)
  double m = 0, n = 0, k = 0;
  double summed = 1;  // products summed into each output element (addbmm's batch)
  double products() const { return m * n > 0 ? elements / (m * n) * summed : 0.0; }
  double flops() const { return 2.0 * elements * k * summed; }
};

// `out` is the product as recorded (nullptr: sized from the operands).
inline GemmDims gemm_dims(const GemmOperands& g, const TensorMeta& a, const TensorMeta& b,
                          const TensorMeta* out) {
  GemmDims d;
  // A 1-D vector contracts over its only dimension.
  d.k = a.shape.empty() ? 1.0 : static_cast<double>(a.shape.back());
  const auto dim = [](const TensorMeta& t, std::size_t from_end) {
    return t.shape.size() >= 2 ? static_cast<double>(t.shape[t.shape.size() - from_end]) : 1.0;
  };
  // torch.matmul of a >= 3-D left operand by a 2-D right one folds the batch into the rows
  // (at::matmul's fold: one [B*M, K] x [K, N] GEMM, aten::mm on the GPU), so it is one GEMM
  // that reads the right operand once, not a batch of B products each reading it.
  const bool folds = g.stem == "matmul" && a.shape.size() >= 3 && b.shape.size() == 2;
  if (g.weight_nk || folds) {
    d.m = d.k > 0 ? static_cast<double>(a.numel()) / d.k : 0.0;
    if (folds) {
      d.n = dim(b, 1);
    } else {
      d.n = b.shape.size() >= 2 ? static_cast<double>(b.shape.front()) : 1.0;
    }
  } else {
    d.m = dim(a, 2);
    d.n = dim(b, 1);
  }
  if (out != nullptr) {
    d.elements = static_cast<double>(out->numel());
  } else {
    d.elements = d.k > 0 ? static_cast<double>(a.numel()) / d.k * d.n : 0.0;
  }
  if (g.sums_batch && a.shape.size() == 3) d.summed = static_cast<double>(a.shape.front());
  return d;
}

}  // namespace habitat::op_cost
