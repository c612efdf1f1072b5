// Device time of ATen's CUDA nll_loss kernels (the second half of cross-entropy) from their
// launch structure. With a reduction, both passes run one block whose threads walk the samples in
// turn, each step a dependent memory round trip (the target, then its class's input or gradient
// element): the time grows with the samples per thread, not with the bytes a roofline counts.
// A GPT-2 loss over 4096 tokens reads 16 KB of inputs and takes about 5 us.
#pragma once

#include <optional>

#include "habitat/device.h"
#include "habitat/trace.h"

namespace habitat {

// The forecast in microseconds of aten::nll_loss_forward or aten::nll_loss_backward over a 2-D
// input with a mean or sum reduction (the backward with its zero fill of the input gradient), or
// nullopt for any other op or shape. Constants fitted on the H100 families collection by
// benchmarks/accuracy/loss_kernels_fit.py, which also scores them.
std::optional<double> nll_loss_kernels_us(const OpRecord& op, const Device& device);

}  // namespace habitat
