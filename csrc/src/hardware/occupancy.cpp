#include "habitat/occupancy.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

namespace habitat {
namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxThreadsPerBlock = 1024;  // every compute capability from 2.0 on (CUDAPG)
constexpr int kUnlimited = std::numeric_limits<int>::max();

int ceil_div(int x, int y) { return (x + y - 1) / y; }
int round_up(int x, int y) { return ceil_div(x, y) * y; }

// Blocks per SM allowed by the register file. Registers are allocated per warp in
// units of register_alloc_unit, and each of the SM's warp_alloc_granularity
// sub-partitions (schedulers) owns an equal share of the file, so the warps that fit
// are counted per sub-partition (cuda_occupancy.h, cudaOccMaxBlocksPerSMRegsLimit).
// Returns -1 for a block the hardware refuses: its registers, counted for warps
// rounded up to whole sub-partitions, exceed the file.
int blocks_by_registers(const SmLimits& l, int warps_per_block, int registers_per_thread,
                        int partitions) {
  if (registers_per_thread == 0) return kUnlimited;
  const int regs_per_warp = round_up(registers_per_thread * kWarpSize, l.register_alloc_unit);
  if (regs_per_warp * round_up(warps_per_block, partitions) > l.registers) return -1;
  const int warps_per_partition = (l.registers / partitions) / regs_per_warp;
  return warps_per_partition * partitions / warps_per_block;
}

// Blocks per SM allowed by shared memory at the largest carve-out; from cc 8.0 the
// driver reserves reserved_shared_per_block bytes in every block.
int blocks_by_shared_memory(const SmLimits& l, int shared_bytes) {
  const int per_block = round_up(shared_bytes + l.reserved_shared_per_block, l.shared_alloc_unit);
  return per_block == 0 ? kUnlimited : l.shared_memory / per_block;
}

}  // namespace

const char* to_string(OccupancyLimit l) {
  switch (l) {
    case OccupancyLimit::Warps:
      return "warps";
    case OccupancyLimit::Blocks:
      return "blocks";
    case OccupancyLimit::Registers:
      return "registers";
    case OccupancyLimit::SharedMemory:
      return "shared_memory";
    case OccupancyLimit::Invalid:
      return "invalid";
  }
  return "invalid";
}

Occupancy compute_occupancy(const Device& device, int threads_per_block, int registers_per_thread,
                            int shared_bytes_per_block) {
  const SmLimits& l = device.limits;
  Occupancy invalid;  // zero blocks, limit Invalid: the launch cannot run on this device
  if (threads_per_block <= 0 || threads_per_block > kMaxThreadsPerBlock ||
      threads_per_block > l.max_threads || registers_per_thread < 0 ||
      registers_per_thread > l.max_registers_per_thread || shared_bytes_per_block < 0 ||
      shared_bytes_per_block > l.shared_memory_per_block || l.max_warps <= 0) {
    return invalid;
  }
  const int warps_per_block = ceil_div(threads_per_block, kWarpSize);
  const int by_registers = blocks_by_registers(l, warps_per_block, registers_per_thread,
                                               std::max(1, l.warp_alloc_granularity));
  if (by_registers <= 0) return invalid;
  // GP100 (cc 6.0, 2 sub-partitions) refuses a block that the other Pascal chips (4
  // sub-partitions) could not run, for compatibility within the family (cuda_occupancy.h).
  if (device.cc_major == 6 && device.cc_minor == 0 &&
      blocks_by_registers(l, warps_per_block, registers_per_thread, 4) <= 0) {
    return invalid;
  }

  // Ties go to the first entry: a kernel held only by the warp limit runs at full occupancy.
  const std::array<std::pair<int, OccupancyLimit>, 4> limits{{
      {l.max_warps / warps_per_block, OccupancyLimit::Warps},
      {l.max_blocks, OccupancyLimit::Blocks},
      {by_registers, OccupancyLimit::Registers},
      {blocks_by_shared_memory(l, shared_bytes_per_block), OccupancyLimit::SharedMemory},
  }};
  const auto binding = std::min_element(
      limits.begin(), limits.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (binding->first <= 0) return invalid;

  Occupancy result;
  result.active_blocks_per_sm = binding->first;
  result.active_warps_per_sm = binding->first * warps_per_block;
  result.fraction = static_cast<double>(result.active_warps_per_sm) / l.max_warps;
  result.limit = binding->second;
  return result;
}

}  // namespace habitat
