#include "predict/loss_kernels.h"

#include <algorithm>
#include <cmath>

#include "trace/op_args.h"

namespace habitat {
namespace {

// Fitted by benchmarks/accuracy/loss_kernels_fit.py on the H100's nll_loss rows (2026-11-26
// families collection, outside its held-out fifth); cycles are SM clock cycles. The script
// prints these and their errors.
constexpr double kFixedForwardUs = 1.34;
constexpr double kCyclesPerForwardStep = 999;  // the target, then input[i][target]: two loads
constexpr double kFixedBackwardUs = 1.96;      // the zero fill's launch and the scatter's
constexpr double kCyclesPerBackwardStep = 663;
constexpr double kFillBandwidthShare = 0.945;

// LossNLL.cu nll_loss_threads: one block of clamp(2^round(log2(N / 16)), 32, 1024) threads.
double threads(double samples) {
  const double per16 = std::floor(samples / 16);
  if (per16 < 1) return 32;
  return std::clamp(std::exp2(std::round(std::log2(per16))), 32.0, 1024.0);
}

double steps(double samples) { return std::ceil(samples / threads(samples)); }

}  // namespace

std::optional<double> nll_loss_kernels_us(const OpRecord& op, const Device& device) {
  const bool forward = op.name == "aten::nll_loss_forward";
  if ((!forward && op.name != "aten::nll_loss_backward") || device.boost_clock_mhz <= 0 ||
      device.memory_bandwidth_gbs <= 0) {
    return std::nullopt;
  }
  const TensorMeta* input = op_args::tensor(op.args, "self");
  // reduction 0 ("none") runs a grid-wide kernel per sample instead.
  if (input == nullptr || input->shape.size() != 2 ||
      op_args::number(op.args, "reduction") == 0.0) {
    return std::nullopt;
  }
  const auto samples = static_cast<double>(input->shape[0]);
  const double clock = device.boost_clock_mhz;  // cycles per microsecond
  if (forward) return kFixedForwardUs + steps(samples) * kCyclesPerForwardStep / clock;
  const double fill_bytes =
      static_cast<double>(input->numel() * dtype_size(input->dtype).value_or(4));
  const double fill_us = fill_bytes / (device.memory_bandwidth_gbs * 1e3 * kFillBandwidthShare);
  return kFixedBackwardUs + fill_us + steps(samples) * kCyclesPerBackwardStep / clock;
}

}  // namespace habitat
