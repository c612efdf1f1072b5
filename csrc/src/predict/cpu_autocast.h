// Ops the CPU's autocast runs in fp32 and CUDA's leaves alone. CPU autocast promotes
// cross_entropy_loss (autocast_mode.cpp, its CPU fp32 list): the trace holds the op on the
// low-precision logits, a cast of them, and the op again in fp32 with its fp32 log_softmax and
// nll_loss below it, and their fp32 backward ops. CUDA's autocast has no policy for it, so the
// loss runs in the logits' dtype: transformers' T5 computes its loss so (F.cross_entropy of bf16
// logits), which ran bf16 log-softmax kernels on the H100 (141 us forward, 181 backward on
// [2048, 32128]) where the CPU trace holds fp32 ones and their cast.
#pragma once

#include <vector>

#include "predict/cuda_paths.h"

namespace habitat::cuda_paths {

// The wrappers' and the backward ops' expansions: the ops CUDA runs, in the logits' dtype (each
// expanded op's own estimate stands for its children).
std::vector<Expansion> cpu_autocast_float_ops(const Step& step, const OpIndex& index_of);

}  // namespace habitat::cuda_paths
