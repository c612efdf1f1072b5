// The backward of an attention that ran scaled_dot_product_attention's math path on the CPU.
// The CPU falls back to that path where its fused kernel does not apply (dropout, masks), and
// autograd then records the backward of each of its pieces: two bmm backwards, the softmax
// backward, the dropout and scale multiplications, the casts around them. On CUDA the fused
// attention's one backward op runs instead (its forward is already costed as the fused op,
// cuda_paths::Mapping::attention). Measured on BERT-base bf16 (H100, 2026-11-27): the pieces
// were forecast at 2.8 ms where cuDNN's fused backward took 0.55 ms
// (benchmarks/results/real-models-cpu-trace.md).
#pragma once

#include <cstddef>
#include <vector>

#include "habitat/trace.h"
#include "predict/fused_backward.h"

namespace habitat::cuda_paths {

// `forwards`: the step's math-path SDPA calls (indices of ops with query, key and value). A
// backward piece is a top-level backward op of one of the math path's autograd nodes whose
// tensors all have the shapes of one of those attentions ([B, H, x, y] or [B*H, x, y] with x, y
// among its L, S, E, Ev). Attentions of one geometry are matched to its softmax backwards in
// order; a geometry with none (not a math path's backward) keeps its ops as they are. A carrier
// is the piece that stands for its attention's fused backward (its softmax backward), costed as
// the fused backward op with the forward's arguments.
FusedBackward math_attention_backward(const Step& step, const std::vector<std::size_t>& forwards);

}  // namespace habitat::cuda_paths
