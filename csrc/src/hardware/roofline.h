// The roofline bound: time no kernel can beat for its FLOPs and bytes on a device.
#pragma once

#include "habitat/device.h"

namespace habitat {

// Ridge point: FLOPs per byte at which `p` work turns from memory- to compute-bound.
double ridge_point(const Device& device, Precision p);
// min(peak, intensity * bandwidth), in FLOP/s.
double attainable_flops(const Device& device, Precision p, double arithmetic_intensity);
// max(flops / peak, bytes / bandwidth), in microseconds.
double roofline_time_us(const Device& device, Precision p, double flops, double bytes);

// Bytes per SM and clock of the SM-side bound below. Any constant serves (a measured entry's
// efficiency absorbs it); 32 keeps the rate above every database GPU's DRAM bandwidth. Must
// equal python/habitat/learned/roofline_sample.py SM_BYTES_PER_CLOCK.
inline constexpr double kSmBytesPerClock = 32.0;
// max(flops / peak, bytes / (SMs * clock * kSmBytesPerClock)), in microseconds: the bound of an
// op whose memory traffic is limited on the SM side (issue rate, bytes in flight), not by DRAM
// (weights/roofline.json entries with "bound": "sm").
double sm_side_time_us(const Device& device, Precision p, double flops, double bytes);

}  // namespace habitat
