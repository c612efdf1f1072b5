// The host schedule of a CPU-traced step: a model of eager PyTorch's host on a GPU machine.
#pragma once

#include <cstdint>

#include "habitat/timeline.h"

namespace habitat {

// The host cadence of a step traced on a CPU, from `model` (the CPU's own op times are its
// compute, not a GPU machine's launch cadence, and are not used). Each op's forecast device
// work is launched when the host is done with the op (inclusive models: with its top-level op).
// `origin` gives the switches of ops that carry none of their own (the CUDA paths' costs).
HostSchedule modelled_schedule(const Step& step, const TraceOrigin& origin,
                               const HostCostModel& model, uint32_t stream);

}  // namespace habitat
