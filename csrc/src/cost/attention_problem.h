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
  // (query, key) pairs over all batches and heads; a causal mask skips about half of them.
  double pairs() const { return batch_heads * l * s * (causal ? 0.5 : 1.0); }
};

// `stem` is the aten name without "aten::" and overload. nullopt without query, key and value.
// The kernels' own entry points (_flash_attention_*, _efficient_attention_*) take
// [batch, seq, heads, dim], which SDPA transposes to before calling them; everything else,
// SDPA included, [..., heads, seq, dim]. Variable-length batches (cumulative offsets) count as
// equal-length sequences.
std::optional<AttentionProblem> attention_problem(std::string_view stem, op_args::Args inputs);

}  // namespace habitat::op_cost
