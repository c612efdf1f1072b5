// GPU descriptions and the database that finds them by forgiving names.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "habitat/precision.h"

namespace habitat {

// Per-SM resource limits that bound how many blocks of a kernel can be resident
// (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability").
struct SmLimits {
  int max_threads = 0;
  int max_warps = 0;
  int max_blocks = 0;
  int registers = 0;  // 32-bit registers per SM
  int max_registers_per_thread = 255;
  int register_alloc_unit = 256;      // registers are allocated per warp in units of this many
  int warp_alloc_granularity = 4;     // warps per scheduler allocation (informational)
  int shared_memory = 0;              // bytes usable by blocks on one SM (max carve-out)
  int shared_memory_per_block = 0;    // bytes, opt-in maximum for one block
  int shared_alloc_unit = 256;        // bytes
  int reserved_shared_per_block = 0;  // bytes the system reserves per block (1 KB from cc 8.0)
};

struct Device {
  std::string name;                  // canonical id, e.g. "A100-SXM4-80GB"
  std::string display_name;          // e.g. "NVIDIA A100 SXM4 80GB"
  std::vector<std::string> aliases;  // other names it is known by (torch device names too)
  int cc_major = 0;
  int cc_minor = 0;
  int sms = 0;
  double boost_clock_mhz = 0;
  double memory_gb = 0;
  double memory_bandwidth_gbs = 0;  // GB/s (1e9 bytes)
  double l2_mb = 0;
  double tdp_w = 0;
  std::map<Precision, double> peak_tflops;  // dense peaks; missing = not supported
  SmLimits limits;
  std::map<std::string, std::string> sources;  // field -> citation tags (devices.json source_tags)
  std::string notes;                           // disputes and caveats about the figures

  int compute_capability() const { return cc_major * 10 + cc_minor; }
  // Dense peak FLOP/s for `p`; falls back to the FP32 SIMT peak when the device has no
  // units for that precision (e.g. BF16 on a V100 runs on SIMT cores).
  double peak_flops(Precision p) const;
  double bandwidth_bytes_per_s() const { return memory_bandwidth_gbs * 1e9; }
  // Microseconds that `cycles` of SM work take spread over every SM at the boost clock.
  double sm_cycles_us(double cycles) const { return cycles / (sms * boost_clock_mhz); }
};

// True when `a` is at least as good as `b` on every figure that bounds an op of precision `p`
// (and of the FP32 SIMT work around it): the dense peak for `p`, the FP32 peak, memory
// bandwidth, SM count, L2 size and boost clock. Memory capacity does not enter (it decides
// whether a step fits, not how fast it runs). Used for the physical-sanity envelope of the
// learned forecasts (learned_envelope.h): such an `a` is never forecast slower than `b`.
bool at_least_as_good(const Device& a, const Device& b, Precision p);

class DeviceDatabase {
 public:
  // Parses the JSON document format of python/habitat/data/devices.json.
  // Throws std::runtime_error naming the offending entry on malformed input.
  static DeviceDatabase from_json(std::string_view json_text);
  static DeviceDatabase load_file(const std::string& path);

  // Adds or replaces devices from another document (user overrides). Partial entries
  // for an existing name update only the fields they give.
  void merge_json(std::string_view json_text);

  // Forgiving lookup: case, spaces, dashes, "NVIDIA"/"Tesla" prefixes and torch's
  // get_device_name() forms all resolve. Throws UnknownDeviceError listing the closest names.
  const Device& find(std::string_view name) const;
  const Device* try_find(std::string_view name) const;
  std::vector<std::string> closest_names(std::string_view name, std::size_t n = 5) const;

  const std::vector<Device>& all() const { return devices_; }

 private:
  std::vector<Device> devices_;
  std::map<std::string, SmLimits> sm_limit_tables_;  // by compute capability, e.g. "8.0"
  // device_name_key of every name, display name and alias -> its device in devices_.
  std::unordered_map<std::string, std::size_t> by_name_;
};

// The form under which DeviceDatabase::find matches a name, alias or display name: lower case,
// separators removed, vendor words dropped ("NVIDIA Tesla T4" and "t4" are both "t4"). Empty
// when nothing is left; an empty key matches no device. For tools that index device files of
// their own (habitat.learned.devices) and must mean by a name what the engine means.
std::string device_name_key(std::string_view name);

class UnknownDeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace habitat
