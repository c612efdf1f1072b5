// A step traced on the CPU is not the op list a CUDA GPU would run for the same program:
// torch picks other code paths by device. A shape-based forecast of a CUDA target has to cost
// what the target would run. These rules map the CPU paths to the CUDA ones, op by op, so the
// forecast keeps one entry per traced op:
//   - optimizers: on CUDA, torch.optim's default is the foreach implementation (one
//     multi-tensor kernel per update expression over all parameters); on the CPU it runs the
//     same expressions per tensor. The per-tensor ops of one expression form a group costed as
//     the _foreach_ op CUDA would launch; clip_grad_norm_'s per-tensor norms likewise.
//   - host bookkeeping: optimizer step counters and their reads live on the host on CUDA too
//     (capturable=False, the default), and .item() is a copy to the host, not a kernel.
//   - attention: scaled_dot_product_attention falls back to its unfused math path on the CPU
//     (dropout, masks); on CUDA a fused kernel runs, so its forward is costed as the fused op.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "habitat/trace.h"

namespace habitat::cuda_paths {

// Per-tensor ops that CUDA runs as one _foreach_ launch set.
struct ForeachGroup {
  OpRecord op;                       // the _foreach_ op, its lists the members' tensors
  std::vector<std::size_t> members;  // indices into the step's ops
};

struct Mapping {
  std::vector<char> host_only;         // per op: runs on the host on CUDA (no kernel)
  // Per op: its own estimate stands for its work and its children's on CUDA (an SDPA whose
  // CPU children are the unfused math path; a per-tensor optimizer op in a foreach group
  // whose CPU kernel called helpers).
  std::vector<char> parent_wins;
  std::vector<ForeachGroup> foreach_groups;
};

// The mapping for a CPU-traced step (ops in start order; index_of maps ids to positions).
Mapping map_cpu_step(const Step& step, const std::unordered_map<uint64_t, std::size_t>& index_of);

}  // namespace habitat::cuda_paths
