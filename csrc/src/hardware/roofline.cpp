// Williams, Waterman & Patterson, "Roofline" (CACM 2009): attainable throughput is the lesser
// of the compute peak and arithmetic intensity times memory bandwidth.
#include "hardware/roofline.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace habitat {
namespace {

// A device without a peak or a bandwidth would turn every bound into 0 or infinity
// silently; that is a database error, so name it.
double checked_peak(const Device& device, Precision p) {
  const double peak = device.peak_flops(p);
  if (!(peak > 0)) {
    throw std::invalid_argument("device '" + device.name + "' has no positive " +
                                std::string(to_string(p)) +
                                " peak FLOP/s: fix peak_tflops in the device database");
  }
  return peak;
}

double checked_bandwidth(const Device& device) {
  const double bw = device.bandwidth_bytes_per_s();
  if (!(bw > 0)) {
    throw std::invalid_argument("device '" + device.name +
                                "' has no positive memory bandwidth: fix memory_bandwidth_gbs "
                                "in the device database");
  }
  return bw;
}

double checked_sm_rate(const Device& device) {
  const double rate = device.sms * device.boost_clock_mhz * 1e6 * kSmBytesPerClock;
  if (!(rate > 0)) {
    throw std::invalid_argument("device '" + device.name +
                                "' has no positive SM count and boost clock: fix sms and "
                                "boost_clock_mhz in the device database");
  }
  return rate;
}

void check_non_negative(double value, const char* what) {
  if (!(value >= 0)) {
    throw std::invalid_argument(std::string("roofline: ") + what + " must be >= 0, got " +
                                std::to_string(value));
  }
}

}  // namespace

double ridge_point(const Device& device, Precision p) {
  return checked_peak(device, p) / checked_bandwidth(device);
}

double attainable_flops(const Device& device, Precision p, double arithmetic_intensity) {
  check_non_negative(arithmetic_intensity, "arithmetic intensity");
  return std::min(checked_peak(device, p), arithmetic_intensity * checked_bandwidth(device));
}

double roofline_time_us(const Device& device, Precision p, double flops, double bytes) {
  check_non_negative(flops, "FLOPs");
  check_non_negative(bytes, "bytes");
  const double compute_s = flops / checked_peak(device, p);
  const double memory_s = bytes / checked_bandwidth(device);
  return std::max(compute_s, memory_s) * 1e6;
}

double sm_side_time_us(const Device& device, Precision p, double flops, double bytes) {
  check_non_negative(flops, "FLOPs");
  check_non_negative(bytes, "bytes");
  return std::max(flops / checked_peak(device, p), bytes / checked_sm_rate(device)) * 1e6;
}

}  // namespace habitat
