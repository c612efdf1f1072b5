// Which of ATen's CUDA element-wise loops (ATen/native/cuda/CUDALoops.cuh gpu_kernel_impl) runs a
// point-wise op or a copy, and the bound of the two that are not vectorized. The vectorized
// kernel streams at DRAM rate; unrolled_elementwise_kernel (operands of mixed floating dtypes:
// autocast's bf16 results added to an fp32 residual, a bf16 -> fp32 cast) and elementwise_kernel
// with an offset calculator (a strided, differently laid out or broadcast operand) are bound by
// their per-element work (index arithmetic, casts): about 0.95 SM cycles per output element on
// both the H100 and the H200 (same SMs and clock, 1.43x the bandwidth). Measured on the recorded
// training steps by benchmarks/accuracy/elementwise_paths_fit.py.
#pragma once

#include <optional>

#include "habitat/device.h"
#include "habitat/trace.h"

namespace habitat::aten_loops {

inline constexpr double kNonVectorizedCyclesPerElement = 0.95;

// The elements fill their memory without gaps or overlaps, in any dimension order (a
// channels-last tensor does; a transposed view of a slice does not).
bool dense(const TensorMeta& t);

// A point-wise op writing `n` elements runs the vectorized kernel: every operand dense in one
// layout (TensorIterator walks channels-last ones in memory order) and of one floating dtype.
// One-element operands count as scalars; masks and indices are the functor's own types.
bool runs_vectorized(const OpRecord& op, double n);

// A copy (copy_, _to_copy, clone, contiguous, to, reshape, flatten, ...) runs a contiguous
// kernel: source and result dense in one layout; false: a strided gather (a transposed
// gradient made contiguous), the offset-calculator loop. nullopt: not such a copy. A widening
// cast (bf16/fp16 -> fp32) also runs the element-bound unrolled loop on CUDA (0.88 cycles per
// element on the H100), but is left to the measured-roofline table, which fits the recorded
// casts: bounding them too put the real models' bf16 copies at +16 % of their measured time
// (+5 % without; benchmarks/results/real-models-cpu-trace.md).
std::optional<bool> copy_runs_vectorized(const OpRecord& op);

// aten::cat of contiguous inputs runs CatArrayBatchedCopy's contiguous or vectorized kernel at
// DRAM rate; with a strided input (the transposed q/k/v gradients BERT-base and ViT-B/16 stack
// in their attention backward, a broadcast class token) it runs the strided CatArrayBatchedCopy
// or, for what that kernel does not take, a copy per input with the offset calculator: both
// bound by their elements (1.15x the non-vectorized floor on the recorded H100 and H200 steps,
// where GPT-2's contiguous ones ran at 1.0-1.2x DRAM time). nullopt: not a cat.
std::optional<bool> cat_inputs_contiguous(const OpRecord& op);

// The time a non-vectorized loop over `elements` outputs takes at least on `device`, in us.
double non_vectorized_us(double elements, const Device& device);

}  // namespace habitat::aten_loops
