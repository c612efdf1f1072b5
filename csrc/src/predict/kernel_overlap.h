// How long an op's kernels kept the device busy. cuDNN runs a multi-layer RNN's layers on
// several streams at once: the recorded LSTM's kernels sum to 1.4-2.0x the time they covered
// (benchmarks/results/stream-overlap-h100.md), so their sum overstates the op's device time.
// The predictor forecasts an op's covered time; the timeline, which runs each stream's kernels
// on a queue of its own, spreads it back over the kernels at their own lengths.
#pragma once

#include <span>
#include <vector>

#include "habitat/trace.h"

namespace habitat {

// The length of the union of the kernels' [device start, + duration) intervals; their summed
// durations when any kernel lacks its device start (traces before format 2).
double kernel_busy_us(std::span<const KernelLaunch> kernels);

// kernel_busy_us over the summed durations, in (0, 1]; 1 for kernels that take no time.
double kernel_busy_fraction(std::span<const KernelLaunch> kernels);

// kernel_busy_us of each op of the step, in step order: what the timeline spreads an op's
// forecast over (launch_durations and its all-targets form in timeline_forecast.cpp).
std::vector<double> op_busy_us(const Step& step);

}  // namespace habitat
