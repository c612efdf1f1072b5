#include "predict/shape_efficiency.h"

#include <algorithm>

#include "hardware/roofline.h"

namespace habitat {

double roofline_efficiency(OpClass c) {
  switch (c) {
    case OpClass::Gemm:
      return 0.70;
    case OpClass::Conv:
      return 0.55;
    case OpClass::Attention:
      return 0.50;
    case OpClass::Elementwise:
    case OpClass::Copy:
    case OpClass::Optimizer:
      return 0.75;
    case OpClass::Reduction:
    case OpClass::Norm:
    case OpClass::Softmax:
      return 0.60;
    case OpClass::Embedding:
    case OpClass::Loss:
    case OpClass::Unknown:
      return 0.50;
    case OpClass::NoKernel:
      return 1.0;
  }
  return 0.5;
}

double roofline_estimate_us(const OpCost& cost, const Device& device,
                            const std::optional<MeasuredRoofline>& measured) {
  if (cost.op_class == OpClass::NoKernel) return 0.0;
  const double bound = roofline_time_us(device, cost.precision, cost.flops, cost.bytes());
  const double floor = kMinKernelUs * std::max(cost.kernels, 1);
  if (measured && measured->sm_bound) {
    const double sm = sm_side_time_us(device, cost.precision, cost.flops, cost.bytes());
    return std::max({measured->fixed_us + sm / measured->efficiency, bound, floor});
  }
  if (measured) return std::max(measured->fixed_us + bound / measured->efficiency, floor);
  return std::max(bound / roofline_efficiency(cost.op_class), floor);
}

}  // namespace habitat
