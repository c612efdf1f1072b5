#include "habitat/input_limits.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace habitat {
namespace {

// Shares of the available memory one trace may take, and what each part of it costs once
// read, parsed and forecast. Measured with benchmarks/hostile/peak_memory.py on the CPU
// traces of benchmarks/results/cpu-traces and a synthetic trace of one-op steps: the peak
// resident memory of `habitat predict` was 4-6x the trace's text for traces of large steps,
// ~2.4 KB per op, and ~16 KB per step for one-op steps (each step's forecast is kept).
constexpr uint64_t kBytesShare = 8;  // text: a 1/8 share, for a peak of up to 8x the text
constexpr uint64_t kRecordsShare = 2;
constexpr uint64_t kBytesPerOp = 4 * 1024;
constexpr uint64_t kBytesPerStep = 32 * 1024;
// Floors, so that a busy machine still reads every trace the benchmarks ship, and the
// default where the available memory cannot be read.
constexpr uint64_t kMinBytes = uint64_t{256} << 20;
constexpr uint64_t kUnknownMemory = uint64_t{8} << 30;

// A positive size: digits, optionally with a K, M, G or T suffix (powers of 1024).
bool parse_size(const char* text, uint64_t& out, bool suffixes) {
  errno = 0;
  char* end = nullptr;
  if (text == nullptr || *text == '\0' || *text == '-' || *text == '+') return false;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text) return false;
  uint64_t scale = 1;
  if (suffixes && *end != '\0') {
    switch (*end) {
      case 'k':
      case 'K':
        scale = uint64_t{1} << 10;
        break;
      case 'm':
      case 'M':
        scale = uint64_t{1} << 20;
        break;
      case 'g':
      case 'G':
        scale = uint64_t{1} << 30;
        break;
      case 't':
      case 'T':
        scale = uint64_t{1} << 40;
        break;
      default:
        return false;
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;
  }
  if (*end != '\0' || value == 0 || value > UINT64_MAX / scale) return false;
  out = static_cast<uint64_t>(value) * scale;
  return true;
}

// The value of `name` if set, else `fallback`; a value that is not a positive number throws.
uint64_t from_env(const char* name, uint64_t fallback, bool suffixes, std::string& basis) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  uint64_t value = 0;
  if (!parse_size(text, value, suffixes)) {
    throw InputLimitError(std::string(name) + "=" + std::string(text).substr(0, 40) +
                          " is not a positive whole number" +
                          (suffixes ? " (a size such as 4000000000, 512M or 4G)" : "") +
                          ": fix it or unset " + name);
  }
  basis = std::string("set by ") + name;
  return value;
}

}  // namespace

uint64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000 && unit < 4) {
    value /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

InputLimits input_limits() {
  const uint64_t available = available_memory_bytes();
  const uint64_t memory = available != 0 ? available : kUnknownMemory;
  const std::string share =
      available != 0 ? "a share of the " + format_bytes(available) + " of memory available"
                     : "the memory available could not be read";
  InputLimits limits;
  limits.bytes_basis = limits.ops_basis = limits.steps_basis = share;
  const uint64_t bytes = std::max(kMinBytes, memory / kBytesShare);
  limits.max_bytes = from_env("HABITAT_MAX_INPUT_BYTES", bytes, true, limits.bytes_basis);
  const uint64_t records = memory / kRecordsShare;
  limits.max_ops =
      from_env("HABITAT_MAX_TRACE_OPS", std::max<uint64_t>(records / kBytesPerOp, 100000), false,
               limits.ops_basis);
  limits.max_steps =
      from_env("HABITAT_MAX_TRACE_STEPS", std::max<uint64_t>(records / kBytesPerStep, 10000), false,
               limits.steps_basis);
  return limits;
}

}  // namespace habitat
