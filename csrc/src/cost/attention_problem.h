// The problem a fused attention call solves, read from its arguments: the one source for the
// attention cost rule (op_cost_attention.cpp) and the learned attention features
// (learned/learned_model.cpp), so the two cannot read different layouts or masks.
#pragma once

#include <optional>
#include <string_view>

#include "habitat/trace.h"
#include "trace/op_args.h"

namespace habitat::op_cost {

struct AttentionProblem {
  double batch_heads = 0;  // query heads over all batches (grouped-query: each attends once)
  double l = 0;            // query sequence length
  double s = 0;            // key sequence length
  double e = 0;            // query/key head dimension
  double ev = 0;           // value head dimension
  bool causal = false;
  // _efficient_attention_* with custom_mask_type 2: the diagonal ends in the bottom-right corner
  // (the last query sees every key); otherwise it starts in the top-left (SDPA's is_causal).
  bool bottom_right = false;
  // The share of the l x s score matrix the fused kernels compute.
  double kept_share() const;
  // (query, key) pairs over all batches and heads that the fused kernels compute.
  double pairs() const { return batch_heads * l * s * kept_share(); }
};

// The share of an l x s score matrix a causal mask keeps. From the top-left corner (query i
// sees keys 0..i, SDPA's is_causal): l / 2s when l <= s, 1 - s / 2l when l > s, one half when
// square; from the bottom-right corner, one less that. The collections' non-square causal rows
// track the top-left share on the memory-efficient and cuDNN backends (2026-11-27 H200, 232
// queries over 7224 keys: causal 0.04x the time of the unmasked call, share 0.02).
double causal_share(double l, double s, bool bottom_right = false);

// `stem` is the aten name without "aten::" and overload. nullopt without query, key and value.
// The kernels' own entry points (_flash_attention_*, _efficient_attention_*) take
// [batch, seq, heads, dim], which SDPA transposes to before calling them; everything else,
// SDPA included, [..., heads, seq, dim]. Variable-length batches (cumulative offsets) count as
// equal-length sequences.
std::optional<AttentionProblem> attention_problem(std::string_view stem, op_args::Args inputs);

}  // namespace habitat::op_cost
