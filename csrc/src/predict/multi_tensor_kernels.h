// Device time of ATen's multi-tensor kernels (_foreach_* ops, the fused optimizer steps,
// GradScaler's unscale) from their launches (cost/multi_tensor_apply.h): each launch streams its
// bytes and waits on its longest block, which walks its chunk in dependent steps of 2048
// elements. A roofline over bytes sees only the stream: MobileNetV3-Large's AdamW step, two to
// four launches of mostly small tensors per expression, ran twice its forecast.
#pragma once

#include <optional>

#include "habitat/device.h"
#include "habitat/op_cost.h"
#include "habitat/trace.h"

namespace habitat {

// The forecast in microseconds, or nullopt for an op that does not run on multi_tensor_apply.
// Constants fitted on the H100 families collection's AdamW rows by
// benchmarks/accuracy/multi_tensor_fit.py, which also scores them there and on the H200's.
std::optional<double> multi_tensor_kernels_us(const OpRecord& op, const OpCost& cost,
                                              const Device& device);

}  // namespace habitat
