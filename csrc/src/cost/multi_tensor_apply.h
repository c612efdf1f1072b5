// The kernels of ATen's multi_tensor_apply (ATen/native/cuda/MultiTensorApply.cuh), which runs
// the _foreach_* ops, the fused Adam/AdamW/SGD steps and GradScaler's unscale: tensors are cut
// into 65536-element chunks, one block per chunk, and a kernel is launched whenever a launch's
// block table (320 blocks) or tensor table fills up. The tensor table holds 110/64/48/36/30
// tensors for 1/2/3/4/5 lists (96 for one list with a scalar list). These are its limits for
// 4 KB kernel arguments, which every recorded run used: no foreach or fused-optimizer launch of
// torch 2.11 (CUDA 13) on the H100 and H200 had more than 320 blocks (the 2026-11 kernel
// collections' 352 AdamW rows, the recorded steps: MobileNetV3's 174 tensors took 2-4 launches
// per update expression), where ATen's 32 KB tables (2240 blocks, 770 tensors) would have taken
// one. Mixed devices or dtypes make ATen fall back to one kernel per tensor; the fast path is
// assumed.
#pragma once

#include <optional>
#include <vector>

#include "habitat/trace.h"

namespace habitat::op_cost {

constexpr double kMultiTensorChunk = 65536;  // elements per block

struct MultiTensorLaunch {
  double elements = 0;       // elements of the first list this launch covers
  double longest_block = 0;  // elements of its largest chunk: its longest block's walk
};

// The launches of multi_tensor_apply over tensors of these sizes with `depth` lists.
std::vector<MultiTensorLaunch> multi_tensor_launches(const std::vector<const TensorMeta*>& tensors,
                                                     int depth, bool scalar_list);

// Which kernel a multi-tensor op runs: the one-expression functors of the _foreach_ ops (and
// GradScaler's unscale, and the light fused SGD update), or the fused Adam/AdamW update.
enum class MultiTensorKernel { Foreach, FusedAdam };

struct MultiTensorWork {
  MultiTensorKernel kernel = MultiTensorKernel::Foreach;
  std::vector<MultiTensorLaunch> launches;
  int other_kernels = 0;  // kernels besides the launches (_foreach_norm's clean-up)
  int element_bytes = 4;  // of the first list's dtype
};

// The multi_tensor_apply launches of an op; nullopt for ops that do not run on it.
std::optional<MultiTensorWork> multi_tensor_work(const OpRecord& op);

}  // namespace habitat::op_cost
