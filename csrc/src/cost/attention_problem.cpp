#include "cost/attention_problem.h"

#include <cstddef>

namespace habitat::op_cost {
namespace {

double elements(const TensorMeta& t) {
  double n = 1;
  for (const int64_t d : t.shape) n *= static_cast<double>(d);
  return n;
}

// Empty tensors have zero-sized dimensions: their work is 0, not NaN.
double safe_div(double a, double b) { return b > 0 ? a / b : 0.0; }

double dim_from_end(const TensorMeta& t, std::size_t i) {
  return t.shape.size() > i ? static_cast<double>(t.shape[t.shape.size() - 1 - i]) : 1.0;
}

}  // namespace

double causal_share(double l, double s, bool bottom_right) {
  if (!(l > 0 && s > 0)) return 0.5;
  const double top_left = l <= s ? l / (2.0 * s) : 1.0 - s / (2.0 * l);
  return bottom_right ? 1.0 - top_left : top_left;
}

double AttentionProblem::kept_share() const {
  return causal ? causal_share(l, s, bottom_right) : 1.0;
}

std::optional<AttentionProblem> attention_problem(std::string_view stem, op_args::Args inputs) {
  const TensorMeta* q = op_args::tensor(inputs, "query");
  const TensorMeta* k = op_args::tensor(inputs, "key");
  const TensorMeta* v = op_args::tensor(inputs, "value");
  if (q == nullptr || k == nullptr || v == nullptr) return std::nullopt;
  AttentionProblem p;
  p.e = dim_from_end(*q, 0);
  p.ev = dim_from_end(*v, 0);
  // _efficient_attention_*: custom_mask_type 1 = causal from top-left, 2 = from bottom-right.
  const double mask_type = op_args::number(inputs, "custom_mask_type").value_or(0);
  p.causal = op_args::boolean(inputs, "is_causal", false) || mask_type != 0;
  p.bottom_right = mask_type == 2;
  const TensorMeta* offsets = op_args::tensor(inputs, "cum_seq_q");
  if (offsets == nullptr) offsets = op_args::tensor(inputs, "cu_seqlens_q");
  if (offsets != nullptr && elements(*offsets) >= 2) {
    // Packed [tokens, heads, dim]: without the offsets' values, sequences of equal length
    // (exact for equal lengths, low otherwise).
    const double sequences = elements(*offsets) - 1;
    const double heads = dim_from_end(*q, 1);
    p.batch_heads = heads * sequences;
    p.l = safe_div(safe_div(elements(*q), heads * p.e), sequences);
    p.s = safe_div(safe_div(elements(*k), dim_from_end(*k, 1) * dim_from_end(*k, 0)), sequences);
    return p;
  }
  const bool seq_before_heads =
      stem.starts_with("_flash_attention_") || stem.starts_with("_efficient_attention_");
  const std::size_t seq_axis = seq_before_heads ? 2 : 1;  // counted from the end
  p.l = dim_from_end(*q, seq_axis);
  p.s = dim_from_end(*k, seq_axis);
  p.batch_heads = safe_div(elements(*q), p.l * p.e);
  return p;
}

}  // namespace habitat::op_cost
