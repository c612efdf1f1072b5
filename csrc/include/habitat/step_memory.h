// Peak device memory of one training step, estimated from its trace alone: the C++ twin of
// python/habitat/analysis/memory.py's estimate_step_memory (same method, same numbers; its
// docstring explains the method). It exists so a large saved step (a 200k-op trace in
// `habitat compare`) is estimated from the engine's structs, without decoding every op into
// Python objects first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "habitat/trace.h"

namespace habitat {

struct StepMemory {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t inputs = 0;
  int64_t activations = 0;  // peak of live activations and temporaries
  int64_t live_peak = 0;    // largest live total over the step (no workspace)
  std::string peak_op;      // full name of the leaf op at which the live total peaks
  std::string peak_phase;
  bool uses_matmul = false;
  int64_t measured_peak_bytes = 0;  // from the step (0 = not measured)
  std::vector<std::string> notes;
};

StepMemory estimate_step_memory(const Step& step);

}  // namespace habitat
