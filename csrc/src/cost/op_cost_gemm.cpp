// Matrix products. FLOPs count the multiply-adds only (2 per MAC), as
// torch.utils.flop_counter does: the bias/beta*C epilogue (one add per output element) runs
// inside the GEMM kernel and is under 1/(2K) of the work. Bytes are compulsory traffic:
// operands and bias read once, the product written once.
#include <array>

#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

struct GemmOperands {
  std::string_view stem;
  const char* a;     // left operand: its last dimension is the contraction K
  const char* b;     // right operand
  const char* bias;  // added input scaled by beta, or nullptr
};

// Operand names from the aten schemas.
constexpr std::array<GemmOperands, 12> kGemms{{
    {"mm", "self", "mat2", nullptr},
    {"bmm", "self", "mat2", nullptr},
    {"_scaled_mm", "self", "mat2", nullptr},
    {"addmm", "mat1", "mat2", "self"},
    {"_addmm_activation", "mat1", "mat2", "self"},
    {"baddbmm", "batch1", "batch2", "self"},
    {"matmul", "self", "other", nullptr},
    {"linear", "input", "weight", nullptr},
    {"mv", "self", "vec", nullptr},
    {"addmv", "mat", "vec", "self"},
    {"dot", "self", "tensor", nullptr},
    {"vdot", "self", "tensor", nullptr},
}};

// Contraction length of the left operand (a 1-D vector contracts over its only dimension).
double contraction(const TensorMeta& a) {
  return a.shape.empty() ? 1.0 : static_cast<double>(a.shape.back());
}

// Elements of the product; from the operands when the record has no output.
double product_elements(const OpContext& c, const TensorMeta& a, const TensorMeta& b) {
  if (const auto* out = main_output(c)) return numel(*out);
  const double k = contraction(a);
  const double n = b.shape.size() >= 2 ? static_cast<double>(b.shape.back()) : 1.0;
  return k > 0 ? numel(a) / k * n : 0.0;
}

OpCost gemm(const OpContext& c, const GemmOperands& ops, double batch_reduced) {
  const TensorMeta* a = tensor_arg(c, ops.a);
  const TensorMeta* b = tensor_arg(c, ops.b);
  if (a == nullptr || b == nullptr) return OpCost{};
  const double flops = 2.0 * product_elements(c, *a, *b) * contraction(*a) * batch_reduced;
  double read = input_bytes(c);
  // beta == 0 tells the GEMM not to read C at all.
  if (ops.bias != nullptr && number_arg(c, "beta").value_or(1.0) == 0.0) {
    if (const auto* bias = tensor_arg(c, ops.bias)) read -= footprint_bytes(*bias);
  }
  return make_cost(OpClass::Gemm, flops, read, output_bytes(c), matrix_precision(c, a), 1);
}

OpCost gemm_rule(const OpContext& c, double) {
  for (const auto& spec : kGemms) {
    if (spec.stem == c.stem) return gemm(c, spec, 1.0);
  }
  return OpCost{};
}

// addbmm sums the batch of products into one matrix: the batch multiplies the work but not
// the output.
OpCost addbmm(const OpContext& c, double) {
  const TensorMeta* batch1 = tensor_arg(c, "batch1");
  const double batch = batch1 != nullptr && batch1->shape.size() == 3
                           ? static_cast<double>(batch1->shape.front())
                           : 1.0;
  return gemm(c, {"addbmm", "batch1", "batch2", "self"}, batch);
}

}  // namespace

void add_gemm_rules(RuleTable& t) {
  for (const auto& spec : kGemms) t[std::string(spec.stem)] = {gemm_rule};
  t["addbmm"] = {addbmm};
}

}  // namespace habitat::op_cost
