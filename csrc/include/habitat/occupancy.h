// Theoretical occupancy, per NVIDIA's CUDA occupancy calculator rules.
#pragma once

#include "habitat/device.h"

namespace habitat {

enum class OccupancyLimit { Warps, Blocks, Registers, SharedMemory, Invalid };
const char* to_string(OccupancyLimit l);

struct Occupancy {
  int active_blocks_per_sm = 0;  // 0 when the launch cannot run on the device
  int active_warps_per_sm = 0;
  double fraction = 0;  // active warps / max warps
  OccupancyLimit limit = OccupancyLimit::Invalid;
};

Occupancy compute_occupancy(const Device& device, int threads_per_block, int registers_per_thread,
                            int shared_bytes_per_block);

}  // namespace habitat
