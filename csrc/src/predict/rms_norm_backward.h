// The backward of an RMS norm the CPU ran as its decomposition. torch's rms_norm calls
// _fused_rms_norm, which has a CUDA kernel (the layer-norm kernels of
// aten/src/ATen/native/cuda/layer_norm_kernel.cu with the mean left out) and a fused backward,
// _fused_rms_norm_backward; on the CPU it is composite: its children square, average, add eps,
// take rsqrt and multiply (its forward is costed as the fused op, cuda_paths.cpp), and
// autograd records the backward of each of them: about a dozen point-wise and reduction ops
// over the input's size where CUDA runs the input- and weight-gradient kernels once.
#pragma once

#include <cstddef>
#include <vector>

#include "habitat/trace.h"
#include "predict/fused_backward.h"

namespace habitat::cuda_paths {

// `forwards`: the step's _fused_rms_norm calls that the CPU decomposed (ops with children).
// A norm's backward is the run of top-level backward ops around the first one reading its
// weight or an intermediate tensor of its decomposition (by storage; the input and the result
// are read by other ops too, and a storage of two norms' says neither: a module applied twice,
// or recomputed under activation checkpointing, shares its weight): from the ops of that op's
// autograd node just before it that read the same gradient (and an upcast's cast back before them),
// on while the ops belong to the decomposition's autograd nodes and touch only tensors of the
// norm's shapes, through its square's backward (PowBackward0, the first op applied to the input)
// and, for an input the decomposition upcast, the cast's. Autograd runs those nodes back to back:
// their sequence numbers are consecutive, and only AccumulateGrad (the weight's) runs between them.
// The carrier is the run's first op, costed as fused_backward_op(forward).
FusedBackward decomposed_rms_norm_backward(const Step& step,
                                           const std::vector<std::size_t>& forwards);

// The _fused_rms_norm_backward op CUDA runs for `forward` (its input, normalized_shape,
// weight and rstd; the weight's gradient when it has a weight).
OpRecord fused_backward_op(const OpRecord& forward);

}  // namespace habitat::cuda_paths
