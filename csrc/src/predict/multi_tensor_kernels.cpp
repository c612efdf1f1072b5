#include "predict/multi_tensor_kernels.h"

#include <cmath>

#include "cost/multi_tensor_apply.h"

namespace habitat {
namespace {

// A launch takes fixed + its bytes / (bandwidth x share) + its longest block's steps x
// cycles / clock. Fitted by benchmarks/accuracy/multi_tensor_fit.py on the H100's AdamW rows
// (2026-11-26 families collection, outside its held-out fifth; benchmarks/results/
// multi-tensor-fit.txt): mean |error| of a whole AdamW step, 32-bit foreach 3.3 % held out and
// 6.1 % on the H200's rows (not fitted), fused 6.5 / 6.4 %; 16-bit foreach 9.1 / 13.7 %, fused
// 8.7 / 11.7 %. Cycles are SM clock cycles, so they carry to other GPUs through the clock;
// 64-bit lists take the 32-bit constants (no rows). The fused SGD step and GradScaler's unscale
// take the foreach ones (no rows; one light expression each, as a foreach functor).
struct LaunchConstants {
  double fixed_us;
  double bandwidth_share;
  double cycles_per_step;
};
constexpr LaunchConstants kForeach32{1.13, 0.95, 593};
constexpr LaunchConstants kFused32{2.62, 0.985, 1436};
constexpr LaunchConstants kForeach16{1.12, 0.89, 588};
constexpr LaunchConstants kFused16{2.71, 0.89, 1462};

constexpr double kElementsPerStep = 512 * 4;  // a block's threads x ILP (MultiTensorApply.cuh)

const LaunchConstants& constants_for(const op_cost::MultiTensorWork& work) {
  const bool fused = work.kernel == op_cost::MultiTensorKernel::FusedAdam;
  if (work.element_bytes == 2) return fused ? kFused16 : kForeach16;
  return fused ? kFused32 : kForeach32;
}

}  // namespace

std::optional<double> multi_tensor_kernels_us(const OpRecord& op, const OpCost& cost,
                                              const Device& device) {
  // Every multi-tensor op is costed as an optimizer op (cost/op_cost_optimizer.cpp): the others
  // skip the name parsing below.
  if (cost.op_class != OpClass::Optimizer) return std::nullopt;
  if (device.boost_clock_mhz <= 0 || device.memory_bandwidth_gbs <= 0) return std::nullopt;
  const std::optional<op_cost::MultiTensorWork> work = op_cost::multi_tensor_work(op);
  if (!work || work->launches.empty()) return std::nullopt;
  double elements = 0;
  for (const auto& launch : work->launches) elements += launch.elements;
  if (elements <= 0) return std::nullopt;
  const LaunchConstants& c = constants_for(*work);
  const double bytes_per_element = cost.bytes() / elements;
  const double bytes_per_us = device.memory_bandwidth_gbs * 1e3 * c.bandwidth_share;
  double us = c.fixed_us * work->other_kernels;
  for (const auto& launch : work->launches) {
    const double steps = std::ceil(launch.longest_block / kElementsPerStep);
    us += c.fixed_us + launch.elements * bytes_per_element / bytes_per_us +
          steps * c.cycles_per_step / device.boost_clock_mhz;
  }
  return us;
}

}  // namespace habitat
