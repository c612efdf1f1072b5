// The shape-based fallback when no learned model covers an op: the roofline time divided
// by a per-class efficiency, plus a floor per kernel launch.
#pragma once

#include <optional>

#include "habitat/device.h"
#include "habitat/op_cost.h"
#include "habitat/predictor.h"

namespace habitat {

// Fraction of the roofline an op class typically reaches. Starting points, not fits:
// best-shape BF16 GEMMs reach ~80% of peak ("MAMF", stas00/ml-engineering), and streaming kernels
// reach 62-85% of datasheet bandwidth (Habitat's measured devices.yml; docs/references.md).
// Classes with irregular access (norms, softmax, gathers) are set lower.
double roofline_efficiency(OpClass c);

// Smallest device time of one kernel: launch and tail effects dominate tiny kernels.
inline constexpr double kMinKernelUs = 2.0;

// Roofline-bounded estimate of an op's device time on `device`, in microseconds: the measured
// form when one is given (fixed part plus roofline over its efficiency), else the roofline over
// the class's efficiency; at least kMinKernelUs per kernel.
double roofline_estimate_us(const OpCost& cost, const Device& device,
                            const std::optional<MeasuredRoofline>& measured = std::nullopt);

}  // namespace habitat
