// Fused scaled-dot-product attention. Per (query, key) pair the forward does two matrix
// products (scores = Q K^T over E, out = P V over Ev): 2 * pairs * (E + Ev) FLOPs. The
// backward recomputes the scores and does four more products (dV, dP, dQ, dK):
// 2 * pairs * (3E + 2Ev). Both match torch.utils.flop_counter, which ignores masks; here a
// causal mask halves the pairs (the masked half of the score tiles is skipped by flash and
// memory-efficient kernels). Softmax exponentials are not counted: they run on the special
// function units, next to the tensor-core work.
#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

enum class Layout {
  Bhsd,  // [..., heads, seq, dim]: scaled_dot_product_attention and _scaled_dot_product_*
  Bshd,  // [batch, seq, heads, dim]: _flash_attention_* and _efficient_attention_*
};

struct AttentionShape {
  double pairs = 0;  // (query, key) pairs over all batches and heads
  double e = 0;      // query/key head dimension
  double ev = 0;     // value head dimension
};

// Empty tensors have zero-sized dimensions: their work is 0, not NaN.
double safe_div(double a, double b) { return b > 0 ? a / b : 0.0; }

double dim_from_end(const TensorMeta& t, std::size_t i) {
  return t.shape.size() > i ? static_cast<double>(t.shape[t.shape.size() - 1 - i]) : 1.0;
}

// Variable-length batches pack all sequences along one dimension and pass cumulative
// offsets; without the offsets' values, sequences are taken as equal in length, so
// pairs = heads * total_q * total_k / sequences (exact for equal lengths, low otherwise).
std::optional<AttentionShape> varlen_shape(const OpContext& c, const TensorMeta& q,
                                           const TensorMeta& k, const TensorMeta& v) {
  const TensorMeta* offsets = tensor_arg(c, "cum_seq_q");
  if (offsets == nullptr) offsets = tensor_arg(c, "cu_seqlens_q");
  if (offsets == nullptr || numel(*offsets) < 2) return std::nullopt;
  const double sequences = numel(*offsets) - 1;
  const double heads = dim_from_end(q, 1);
  const double total_q = safe_div(numel(q), heads * dim_from_end(q, 0));
  const double total_k = safe_div(numel(k), dim_from_end(k, 1) * dim_from_end(k, 0));
  return AttentionShape{heads * total_q * total_k / sequences, dim_from_end(q, 0),
                        dim_from_end(v, 0)};
}

AttentionShape dense_shape(Layout layout, const TensorMeta& q, const TensorMeta& k,
                           const TensorMeta& v) {
  const std::size_t seq_axis = layout == Layout::Bhsd ? 1 : 2;  // counted from the end
  const double e = dim_from_end(q, 0);
  const double l = dim_from_end(q, seq_axis);
  const double s = dim_from_end(k, seq_axis);
  // Query heads: with grouped-query attention each query head attends once.
  const double batch_heads = safe_div(numel(q), l * e);
  return {batch_heads * l * s, e, dim_from_end(v, 0)};
}

bool is_causal(const OpContext& c) {
  // _efficient_attention_*: custom_mask_type 1 = causal from top-left, 2 = from bottom-right.
  return bool_arg(c, "is_causal", false) || number_arg(c, "custom_mask_type").value_or(0) != 0;
}

OpCost attention(const OpContext& c, Layout layout, bool backward) {
  const TensorMeta* q = tensor_arg(c, "query");
  const TensorMeta* k = tensor_arg(c, "key");
  const TensorMeta* v = tensor_arg(c, "value");
  if (q == nullptr || k == nullptr || v == nullptr) return OpCost{};
  AttentionShape shape;
  if (auto packed = varlen_shape(c, *q, *k, *v)) {
    shape = *packed;
  } else {
    shape = dense_shape(layout, *q, *k, *v);
  }
  if (is_causal(c)) shape.pairs *= 0.5;
  const double per_pair = backward ? 3 * shape.e + 2 * shape.ev : shape.e + shape.ev;
  // Flash-attention backward runs a dO.O pre-pass, the main kernel and a dQ conversion.
  const bool flash = c.stem.find("flash") != std::string_view::npos;
  const int kernels = backward && flash ? 3 : 1;
  return make_cost(OpClass::Attention, 2.0 * shape.pairs * per_pair, input_bytes(c),
                   output_bytes(c), matrix_precision(c, q), kernels);
}

OpCost bhsd_forward(const OpContext& c, double) { return attention(c, Layout::Bhsd, false); }
OpCost bhsd_backward(const OpContext& c, double) { return attention(c, Layout::Bhsd, true); }
OpCost bshd_forward(const OpContext& c, double) { return attention(c, Layout::Bshd, false); }
OpCost bshd_backward(const OpContext& c, double) { return attention(c, Layout::Bshd, true); }

}  // namespace

void add_attention_rules(RuleTable& t) {
  add_rules(t,
            "scaled_dot_product_attention _scaled_dot_product_attention_math "
            "_scaled_dot_product_flash_attention _scaled_dot_product_flash_attention_for_cpu "
            "_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention "
            "_scaled_dot_product_fused_attention_overrideable",
            {bhsd_forward});
  add_rules(t,
            "_scaled_dot_product_flash_attention_backward "
            "_scaled_dot_product_flash_attention_for_cpu_backward "
            "_scaled_dot_product_efficient_attention_backward "
            "_scaled_dot_product_cudnn_attention_backward "
            "_scaled_dot_product_fused_attention_overrideable_backward",
            {bhsd_backward});
  // cuDNN's kernels under _scaled_dot_product_cudnn_attention (torch 2.9+), [B, H, S, D].
  t["_cudnn_attention_forward"] = {bhsd_forward};
  t["_cudnn_attention_backward"] = {bhsd_backward};
  t["_flash_attention_forward"] = {bshd_forward};
  t["_efficient_attention_forward"] = {bshd_forward};
  t["_flash_attention_backward"] = {bshd_backward};
  t["_efficient_attention_backward"] = {bshd_backward};
}

}  // namespace habitat::op_cost
