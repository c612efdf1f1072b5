// The optimizer state a first step creates. torch.optim builds a parameter's state lazily, in
// the first optimizer.step() that sees its gradient (Adam's and AdamW's _init_group: a 0-dim
// step counter from torch.tensor(0.0) and exp_avg / exp_avg_sq from torch.zeros_like), so a
// step traced first holds ops no later step runs: each zeros_like a fill kernel and a launch
// (on a GPU origin, measured; on a CPU origin, on the modelled host). The forecast is of the
// steps a run repeats; these are left out of it (cuda_paths.cpp and timeline_host_model.cpp for
// a CPU origin, predictor.cpp and timeline_schedule.cpp for a GPU one), and it says so.
#pragma once

#include <cstddef>
#include <vector>

#include "habitat/trace.h"

namespace habitat {

struct OptimizerStateInit {
  std::vector<char> ops;  // per op: creates optimizer state (its subtree marked too)
  std::size_t calls = 0;  // top-level calls that do
};

// In a step whose optimizer creates state buffers (top-level zeros_like, ones_like, empty_like,
// full_like in the optimizer phase), those calls and the optimizer's top-level creations of
// 0-dim tensors (empty, zeros, full, scalar_tensor, lift_fresh, detach, to on 0-dim tensors
// only: the step counters). A step that creates no buffer has none marked: the foreach AdamW
// makes a 0-dim tensor every step. Arithmetic on a state (step += 1, exp_avg.lerp_) is the
// step's own work and is never marked.
OptimizerStateInit optimizer_state_init(const Step& step);

// Every tensor the call reads or writes is 0-dim, and it has one: an optimizer's step counters
// and their arithmetic, CPU tensors on CUDA too (capturable=False, the default).
bool only_scalars(const OpRecord& op);

}  // namespace habitat
