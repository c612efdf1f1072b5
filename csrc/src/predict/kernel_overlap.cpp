#include "predict/kernel_overlap.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace habitat {
namespace {

double summed_us(std::span<const KernelLaunch> kernels) {
  double sum = 0;
  for (const KernelLaunch& k : kernels) sum += std::max(k.duration_us, 0.0);
  return sum;
}

}  // namespace

double kernel_busy_us(std::span<const KernelLaunch> kernels) {
  std::vector<std::pair<double, double>> spans;
  spans.reserve(kernels.size());
  for (const KernelLaunch& k : kernels) {
    if (!k.device_start_us) return summed_us(kernels);
    spans.emplace_back(*k.device_start_us, *k.device_start_us + std::max(k.duration_us, 0.0));
  }
  if (spans.empty()) return 0.0;
  std::sort(spans.begin(), spans.end());
  double busy = 0;
  double begin = spans.front().first;
  double end = spans.front().second;
  for (const auto& [s, e] : spans) {
    if (s > end) {
      busy += end - begin;
      begin = s;
    }
    end = std::max(end, e);
  }
  return busy + (end - begin);
}

double kernel_busy_fraction(std::span<const KernelLaunch> kernels) {
  const double sum = summed_us(kernels);
  if (!(sum > 0)) return 1.0;
  return std::clamp(kernel_busy_us(kernels) / sum, 0.0, 1.0);
}

std::vector<double> op_busy_us(const Step& step) {
  std::vector<double> out;
  out.reserve(step.ops.size());
  for (const OpRecord& op : step.ops) out.push_back(kernel_busy_us(op.kernels));
  return out;
}

}  // namespace habitat
