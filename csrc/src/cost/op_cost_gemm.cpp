// Matrix products. FLOPs count the multiply-adds only (2 per MAC), as
// torch.utils.flop_counter does: the bias/beta*C epilogue (one add per output element) runs
// inside the GEMM kernel and is under 1/(2K) of the work. Bytes are compulsory traffic:
// operands and bias read once, the product written once. The operands and dimensions come
// from gemm_operands.h, which the learned GEMM features read too.
#include "cost/gemm_operands.h"
#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

// addbmm sums the batch of products into one matrix: the batch multiplies the work but not
// the output (GemmDims::summed).
OpCost gemm_rule(const OpContext& c, double) {
  const GemmOperands* ops = find_gemm(c.stem);
  if (ops == nullptr) return OpCost{};
  const TensorMeta* a = tensor_arg(c, ops->a);
  const TensorMeta* b = tensor_arg(c, ops->b);
  if (a == nullptr || b == nullptr) return OpCost{};
  const double flops = gemm_dims(*ops, *a, *b, main_output(c)).flops();
  double read = input_bytes(c);
  // beta == 0 tells the GEMM not to read C at all.
  if (ops->bias != nullptr && number_arg(c, "beta").value_or(1.0) == 0.0) {
    if (const auto* bias = tensor_arg(c, ops->bias)) read -= footprint_bytes(*bias);
  }
  return make_cost(OpClass::Gemm, flops, read, output_bytes(c), matrix_precision(c, a), 1);
}

}  // namespace

void add_gemm_rules(RuleTable& t) {
  for (const auto& spec : kGemmOperands) t[std::string(spec.stem)] = {gemm_rule};
}

}  // namespace habitat::op_cost
