// Habitat's wave scaling: Yu, Gao, Golikov, Pekhimenko, "Habitat: A Runtime-Based
// Computational Performance Predictor for Deep Neural Network Training", USENIX ATC'21
// (arXiv 2102.00527) §3.2, in the form of its released code (geoffxy/habitat,
// analyzer/habitat/analysis/wave_scaling/roofline.py and resimplified.py), as summarised in
// docs/references.md (Habitat). With T_o the kernel's time on the origin, B its
// thread blocks, x its arithmetic intensity (FLOPs/byte) and R the target's ridge point:
//
//   gamma = 1 - 0.5 x/R   if x <= R,   0.5 R/x   otherwise        (1 = memory bound)
//   W     = SMs x active blocks per SM (occupancy calculator)     on each device
//   waves = ceil(B / W)
//
//   B >= W on either device (at least one full wave somewhere):
//     T_t = T_o (BW_o/BW_t)^gamma (clock_o/clock_t)^(1-gamma) (SMs_o/SMs_t)^(1-gamma)
//   B < W on both devices (under one wave): only the busiest SM's share of blocks and the
//   clock matter:
//     T_t = T_o [(clock_o/clock_t) ceil(B/SMs_t) / ceil(B/SMs_o)]^(1-gamma)
//   no intensity (Habitat without hardware counters): gamma = 1, which reduces the two
//   branches to T_t = T_o BW_o/BW_t, and T_t = T_o under one wave.
//
// Habitat's code compares the wave count against the full-wave size as the integer test
// B / W == 0; we keep that test (B < W). Where a launch cannot run on a device at all
// (occupancy 0) there are no waves to compare, so the bandwidth ratio is the only scaling left.
// Copies and memsets CUPTI records (trace.h, is_memory_operation) scale by bandwidth alone.
// Clocks are the database's boost clocks; registers per thread are taken from the origin's
// kernel on both devices (the target's compiler may allocate differently).
#include "habitat/wave_scaling.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "habitat/occupancy.h"
#include "hardware/roofline.h"

namespace habitat {
namespace {

void check_device(const Device& d) {
  const auto missing = [&](const char* field) {
    return std::invalid_argument("wave scaling needs a positive " + std::string(field) +
                                 " for device '" + d.name + "': fix the device database");
  };
  if (!(d.sms > 0)) throw missing("sms");
  if (!(d.boost_clock_mhz > 0)) throw missing("boost_clock_mhz");
  if (!(d.memory_bandwidth_gbs > 0)) throw missing("memory_bandwidth_gbs");
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

double wave_gamma(double arithmetic_intensity, double ridge_point) {
  if (!(ridge_point > 0)) {
    throw std::invalid_argument("wave_gamma: ridge point must be > 0, got " +
                                std::to_string(ridge_point));
  }
  // Unknown (negative or NaN) intensity: treat as memory bound, Habitat's no-counter choice.
  if (!(arithmetic_intensity >= 0)) return 1.0;
  if (arithmetic_intensity <= ridge_point) return 1.0 - 0.5 * arithmetic_intensity / ridge_point;
  return 0.5 * ridge_point / arithmetic_intensity;
}

WaveScaleResult WaveScaler::scale(const KernelLaunch& kernel, double intensity, Precision p) const {
  check_device(origin_);
  check_device(target_);
  WaveScaleResult r;
  const double t_origin = kernel.duration_us;
  const double bandwidth_ratio = origin_.memory_bandwidth_gbs / target_.memory_bandwidth_gbs;

  // A copy or memset has no launch configuration to count waves by: memory bandwidth bounds it
  // on both devices.
  if (is_memory_operation(kernel.name)) {
    r.gamma = 1.0;
    r.bandwidth_fallback = true;
    r.time_us = t_origin * bandwidth_ratio;
    return r;
  }

  const int threads = kernel.threads_per_block();
  const int shared = kernel.shared_bytes();
  const Occupancy occ_o = compute_occupancy(origin_, threads, kernel.registers_per_thread, shared);
  const Occupancy occ_t = compute_occupancy(target_, threads, kernel.registers_per_thread, shared);
  // CUPTI never reports an empty grid; a hand-built one counts as a single block.
  const int64_t blocks = std::max<int64_t>(kernel.blocks(), 1);
  const int64_t wave_o = int64_t{origin_.sms} * occ_o.active_blocks_per_sm;
  const int64_t wave_t = int64_t{target_.sms} * occ_t.active_blocks_per_sm;
  r.fits_origin = wave_o > 0;
  r.fits_target = wave_t > 0;
  if (r.fits_origin) r.origin_waves = static_cast<double>(ceil_div(blocks, wave_o));
  if (r.fits_target) r.target_waves = static_cast<double>(ceil_div(blocks, wave_t));

  if (!r.fits_origin || !r.fits_target) {
    r.gamma = 1.0;
    r.bandwidth_fallback = true;
    r.time_us = t_origin * bandwidth_ratio;
    return r;
  }

  r.under_one_wave = blocks < wave_o && blocks < wave_t;
  r.bandwidth_fallback = !(intensity >= 0);
  r.gamma = r.bandwidth_fallback ? 1.0 : wave_gamma(intensity, ridge_point(target_, p));
  const double compute_share = 1.0 - r.gamma;
  const double clock_ratio = origin_.boost_clock_mhz / target_.boost_clock_mhz;

  if (r.under_one_wave) {
    const double busiest_sm_ratio = static_cast<double>(ceil_div(blocks, target_.sms)) /
                                    static_cast<double>(ceil_div(blocks, origin_.sms));
    r.time_us = t_origin * std::pow(clock_ratio * busiest_sm_ratio, compute_share);
  } else {
    const double sm_ratio = static_cast<double>(origin_.sms) / target_.sms;
    r.time_us = t_origin * std::pow(bandwidth_ratio, r.gamma) *
                std::pow(clock_ratio, compute_share) * std::pow(sm_ratio, compute_share);
  }
  return r;
}

}  // namespace habitat
