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

}  // namespace habitat
