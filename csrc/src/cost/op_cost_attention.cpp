// Fused scaled-dot-product attention. Per (query, key) pair the forward does two matrix
// products (scores = Q K^T over E, out = P V over Ev): 2 * pairs * (E + Ev) FLOPs. The
// backward recomputes the scores and does four more products (dV, dP, dQ, dK):
// 2 * pairs * (3E + 2Ev). Both match torch.utils.flop_counter, which ignores masks; here a
// causal mask halves the pairs (the masked half of the score tiles is skipped by flash and
// memory-efficient kernels). Softmax exponentials are not counted: they run on the special
// function units, next to the tensor-core work.
#include "cost/attention_problem.h"
#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

OpCost attention(const OpContext& c, bool backward) {
  const std::optional<AttentionProblem> p = attention_problem(c.stem, c.inputs());
  if (!p) return OpCost{};
  const double per_pair = backward ? 3 * p->e + 2 * p->ev : p->e + p->ev;
  // Flash-attention backward runs a dO.O pre-pass, the main kernel and a dQ conversion.
  const bool flash = c.stem.find("flash") != std::string_view::npos;
  const int kernels = backward && flash ? 3 : 1;
  return make_cost(OpClass::Attention, 2.0 * p->pairs() * per_pair, input_bytes(c), output_bytes(c),
                   matrix_precision(c, tensor_arg(c, "query")), kernels);
}

OpCost forward(const OpContext& c, double) { return attention(c, false); }
OpCost backward(const OpContext& c, double) { return attention(c, true); }

}  // namespace

void add_attention_rules(RuleTable& t) {
  add_rules(t,
            "scaled_dot_product_attention _scaled_dot_product_attention_math "
            "_scaled_dot_product_flash_attention _scaled_dot_product_flash_attention_for_cpu "
            "_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention "
            "_scaled_dot_product_fused_attention_overrideable",
            {forward});
  add_rules(t,
            "_scaled_dot_product_flash_attention_backward "
            "_scaled_dot_product_flash_attention_for_cpu_backward "
            "_scaled_dot_product_efficient_attention_backward "
            "_scaled_dot_product_cudnn_attention_backward "
            "_scaled_dot_product_fused_attention_overrideable_backward",
            {backward});
  // cuDNN's kernels under _scaled_dot_product_cudnn_attention (torch 2.9+), [B, H, S, D]; the
  // flash and memory-efficient kernels' entry points, [B, S, H, D] (attention_problem.h).
  t["_cudnn_attention_forward"] = {forward};
  t["_cudnn_attention_backward"] = {backward};
  t["_flash_attention_forward"] = {forward};
  t["_efficient_attention_forward"] = {forward};
  t["_flash_attention_backward"] = {backward};
  t["_efficient_attention_backward"] = {backward};
}

}  // namespace habitat::op_cost
