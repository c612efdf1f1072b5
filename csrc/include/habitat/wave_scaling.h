// Habitat's wave scaling (Yu et al., ATC'21 §3.2): scale a kernel measured on one GPU
// to another from its launch configuration, occupancy and arithmetic intensity.
#pragma once

#include "habitat/device.h"
#include "habitat/trace.h"

namespace habitat {

// gamma in [0, 1]: 1 = memory bound (scales with bandwidth), 0 = compute bound (scales
// with clock x SMs). From the intensity against the target's ridge point.
double wave_gamma(double arithmetic_intensity, double ridge_point);

struct WaveScaleResult {
  double time_us = 0;
  double gamma = 0;
  double origin_waves = 0;
  double target_waves = 0;
  bool under_one_wave = false;  // the small-kernel branch was used
  // Habitat's no-counter path: gamma = 1 (memory bound), so the time scales by the bandwidth
  // ratio, or stays unchanged under one wave. Taken when no intensity was given, or when the
  // launch cannot run on a device (see fits_origin / fits_target).
  bool bandwidth_fallback = false;
  bool fits_origin = true;  // false: occupancy 0 on the origin (launch exceeds its SM limits)
  bool fits_target = true;  // false: occupancy 0 on the target; waves there are unknown (0)
};

class WaveScaler {
 public:
  WaveScaler(const Device& origin, const Device& target) : origin_(origin), target_(target) {}
  // `intensity` is the op's arithmetic intensity (FLOPs/byte); pass a negative value when
  // unknown, which falls back to the bandwidth ratio (Habitat's no-counter path).
  WaveScaleResult scale(const KernelLaunch& kernel, double intensity, Precision p) const;

 private:
  const Device& origin_;
  const Device& target_;
};

}  // namespace habitat
