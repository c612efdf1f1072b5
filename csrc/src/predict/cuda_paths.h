// A step traced on the CPU is not the op list a CUDA GPU would run for the same program:
// torch picks other code paths by device. A shape-based forecast of a CUDA target has to cost
// what the target would run. These rules map the CPU paths to the CUDA ones, op by op, so the
// forecast keeps one entry per traced op:
//   - optimizers: on CUDA, torch.optim's default is the foreach implementation (one
//     multi-tensor kernel per update expression over all parameters); on the CPU it runs the
//     same expressions per tensor. The per-tensor ops of one expression form a group costed as
//     the _foreach_ op CUDA would launch. A _foreach_ op the CPU ran (clip_grad_norm_'s
//     _foreach_norm) is a loop of per-tensor children there: its own estimate counts.
//   - host bookkeeping: optimizer step counters and their reads live on the host on CUDA too
//     (capturable=False, the default), and .item() is a copy to the host, not a kernel.
//   - attention: scaled_dot_product_attention falls back to its unfused math path on the CPU
//     (dropout, masks); on CUDA a fused kernel runs, so its forward is costed as the fused op,
//     and its backward pieces as the fused backward op (attention_backward.h).
//   - RMS norm: the CPU runs _fused_rms_norm as its decomposition (its children), CUDA as
//     one kernel, which the op's own estimate describes; its backward pieces are costed as
//     _fused_rms_norm_backward (rms_norm_backward.h).
//   - recurrent layers: the CPU runs an LSTM/GRU layer as one oneDNN op (mkldnn_rnn_layer and
//     its backward); cuDNN runs it as one GEMM for the input projection of every time step,
//     then per time step a recurrent GEMM and an element-wise cell kernel (backward: the cell
//     gradient and a GEMM per step, then three GEMMs over the whole sequence for the input
//     gradient and both weight gradients). The layer is costed as those parts, with the
//     matrix precision cuDNN's switch allows (cuDNN RNNs use TF32 unless it is off).
//   - mean: the CPU runs it as sum and div_ (its children); CUDA as one reduce kernel.
//   - dropout in training: the CPU draws, scales and multiplies a noise tensor (three
//     kernels' worth of children); CUDA runs one fused native_dropout kernel.
//   - batch-norm wrappers (batch_norm, _batch_norm_impl_index): their leaf is what runs.
//   - autocast: the CPU's promotes cross_entropy_loss to fp32, CUDA's does not
//     (cpu_autocast.h).
//   - batch norm: the CPU records native_batch_norm(_backward); CUDA runs cuDNN's kernels
//     where PyTorch's backend choice picks them (float32, half with float weights) and its
//     own native kernels otherwise (bfloat16): see cudnn_batch_norm in cuda_paths.cpp.
//   - a first optimizer step's state creation (optimizer_state.h): left out, as no later
//     step runs it.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "habitat/device.h"
#include "habitat/trace.h"
#include "predict/attention_backward.h"
#include "predict/op_index.h"
#include "predict/optimizer_state.h"
#include "predict/rms_norm_backward.h"

namespace habitat::cuda_paths {

// Per-tensor ops that CUDA runs as one _foreach_ launch set.
struct ForeachGroup {
  OpRecord op;                       // the _foreach_ op, its lists the members' tensors
  std::vector<std::size_t> members;  // indices into the step's ops
};

// An op costed as the kernels CUDA runs for it: (part, how many times it runs), their summed
// forecast times a measured factor where the library's kernels keep the device busy longer
// than the engine's forecasts of the same shapes (cuDNN's RNN ops).
struct Expansion {
  std::size_t index = 0;
  std::vector<std::pair<OpRecord, double>> parts;
  double time_scale = 1.0;
};

struct Mapping {
  std::vector<char> host_only;  // per op: runs on the host on CUDA (no kernel)
  // Per op: its own estimate stands for its work and its children's on CUDA (an SDPA whose
  // CPU children are the unfused math path; a per-tensor optimizer op in a foreach group
  // whose CPU kernel called helpers).
  std::vector<char> parent_wins;
  // Per op: a wrapper whose children are what CUDA runs (its own estimate must not stand for
  // them, even when larger).
  std::vector<char> children_win;
  std::vector<ForeachGroup> foreach_groups;
  std::vector<Expansion> expansions;
  // Attention ops the CPU ran its own way (the CPU flash kernel and its backward; SDPA calls
  // that fell back to the math path): costed as the fused CUDA op the target would pick.
  std::vector<std::size_t> attention;
  // The math path's backward pieces and the ops that carry its fused backward.
  FusedBackward attention_backward;
  // Per op: a piece of a decomposition whose fused CUDA op another op carries (an attention's
  // or an RMS norm's backward): no kernel of its own.
  std::vector<char> absorbed;
  // The optimizer state a first step creates (optimizer_state.h): marked host_only too (no
  // kernel); the timeline gives its calls no host time.
  OptimizerStateInit state_init;
};

// The fused SDPA op torch picks on `target` for `dtype` (its default backend order, PyTorch
// 2.9+ sdp_utils.cpp: cuDNN first on compute capability 9.0 and 10.x, then flash, then
// memory-efficient; flash and cuDNN need fp16/bf16, flash sm80+ and no attn_mask, `masked`):
// "aten::_scaled_dot_product_{cudnn,flash,efficient}_attention[_backward]".
std::string cuda_attention_op(std::string_view dtype, const Device& target, bool backward,
                              bool masked = false);

// The mapping for a CPU-traced step (ops in start order; index_of maps ids to positions).
// `origin` gives the switches of ops that carry none of their own.
Mapping map_cpu_step(const Step& step, const OpIndex& index_of, const TraceOrigin& origin = {});

}  // namespace habitat::cuda_paths
