// Occupancy cases worked out by hand from the CUDA occupancy rules (the CUDA
// occupancy calculator / cuda_occupancy.h) and the per-SM limits of CUDAPG:
//   warps/block  = ceil(threads / 32)
//   by warps     = floor(max_warps / warps_per_block)
//   by registers = regs/warp = roundup(regs * 32, 256); warps per sub-partition =
//                  floor((65536 / P) / regs_per_warp) with P sub-partitions (2 on cc 6.0,
//                  else 4); blocks = floor(warps_per_partition * P / warps_per_block)
//   by smem      = floor(smem_per_SM / roundup(smem + reserved, unit)); reserved = 1 KB and
//                  unit = 128 B from cc 8.0, 0 and 256 B before
//   result       = min(by warps, max blocks, by registers, by smem)
#include <gtest/gtest.h>

#include <string>

#include "habitat/device.h"
#include "habitat/occupancy.h"
#include "test_devices.h"

namespace habitat {
namespace {

void expect_occupancy(const std::string& gpu, int threads, int regs, int smem, int blocks,
                      int warps, OccupancyLimit limit) {
  const Device& d = test::db().find(gpu);
  const Occupancy o = compute_occupancy(d, threads, regs, smem);
  SCOPED_TRACE(gpu + " threads=" + std::to_string(threads) + " regs=" + std::to_string(regs) +
               " smem=" + std::to_string(smem));
  EXPECT_EQ(o.active_blocks_per_sm, blocks);
  EXPECT_EQ(o.active_warps_per_sm, warps);
  EXPECT_EQ(o.limit, limit) << to_string(o.limit) << " vs " << to_string(limit);
  EXPECT_DOUBLE_EQ(o.fraction, static_cast<double>(warps) / d.limits.max_warps);
}

TEST(Occupancy, V100) {
  // 8 warps: by warps 64/8 = 8; regs 32*32 = 1024/warp, 16384/1024 = 16 per partition, 64
  // warps -> 8; smem none; max 32. Tie at 8 goes to warps: full occupancy.
  expect_occupancy("V100", 256, 32, 0, 8, 64, OccupancyLimit::Warps);
  // 4 warps: by warps 16; regs 2048/warp, 16384/2048 = 8 per partition, 32 warps -> 8.
  expect_occupancy("V100", 128, 64, 0, 8, 32, OccupancyLimit::Registers);
  // smem 49152 (multiple of 256): 98304 / 49152 = 2; warps 8, regs 8.
  expect_occupancy("V100", 256, 32, 49152, 2, 16, OccupancyLimit::SharedMemory);
  // 1 warp: by warps 64, regs 512/warp -> 32 per partition -> 128; max blocks 32 binds.
  expect_occupancy("V100", 32, 16, 0, 32, 32, OccupancyLimit::Blocks);
  // 3 warps, 40 regs: 1280/warp, 16384/1280 = 12.8 -> 12 per partition, 48 warps -> 16 blocks
  // (a whole-SM count 65536/1280 = 51 would give 17); by warps 64/3 = 21.
  expect_occupancy("V100", 96, 40, 0, 16, 48, OccupancyLimit::Registers);
  // 2 warps, 48 regs: 1536/warp, 16384/1536 = 10.67 -> 10 per partition, 40 warps -> 20.
  expect_occupancy("V100", 64, 48, 0, 20, 40, OccupancyLimit::Registers);
}

TEST(Occupancy, P100HasTwoSubPartitions) {
  // cc 6.0: 2 partitions of 32768 regs. 48 regs: 1536/warp, 32768/1536 = 21.3 -> 21, 42 warps
  // -> 21 blocks of 2 warps (the V100 case above gets 20).
  expect_occupancy("P100", 64, 48, 0, 21, 42, OccupancyLimit::Registers);
  // smem 40000 -> roundup 256 = 40192; 65536 / 40192 = 1 (P100 has 64 KB per SM).
  expect_occupancy("P100", 256, 32, 40000, 1, 8, OccupancyLimit::SharedMemory);
  // The P4 (cc 6.1) has 96 KB: 98304 / 40192 = 2.
  expect_occupancy("P4", 256, 32, 40000, 2, 16, OccupancyLimit::SharedMemory);
}

TEST(Occupancy, T4) {
  // cc 7.5: 32 warps, 16 blocks, 64 KB. 8 warps: by warps 32/8 = 4; regs 2048/warp -> 8 per
  // partition, 32 warps -> 4. Tie -> warps.
  expect_occupancy("T4", 256, 64, 0, 4, 32, OccupancyLimit::Warps);
  // smem 20000 -> roundup 256 = 20224; 65536 / 20224 = 3.24 -> 3; by warps 32/4 = 8.
  expect_occupancy("T4", 128, 32, 20000, 3, 12, OccupancyLimit::SharedMemory);
  // 255 regs: 8160 -> 8192/warp; 16384/8192 = 2 per partition, 8 warps -> 4 blocks of 2.
  expect_occupancy("T4", 64, 255, 0, 4, 8, OccupancyLimit::Registers);
  // 1 warp: by warps 32, max blocks 16.
  expect_occupancy("T4", 32, 32, 0, 16, 16, OccupancyLimit::Blocks);
}

TEST(Occupancy, A100) {
  // cc 8.0: 64 warps, 32 blocks, 164 KB, 1 KB reserved per block, 128 B unit.
  // 4 warps: by warps 16; regs 1024/warp -> 64 warps -> 16; smem 1024 -> 164.
  expect_occupancy("A100", 128, 32, 0, 16, 64, OccupancyLimit::Warps);
  // smem 49152 + 1024 = 50176 (= 392 * 128); 167936 / 50176 = 3.35 -> 3.
  expect_occupancy("A100", 256, 32, 49152, 3, 24, OccupancyLimit::SharedMemory);
  // smem 8192 + 1024 = 9216; 167936 / 9216 = 18.2 -> 18; max blocks 32; by warps 64.
  expect_occupancy("A100", 32, 16, 8192, 18, 18, OccupancyLimit::SharedMemory);
  // 128 regs: 4096/warp, 16384/4096 = 4 per partition, 16 warps -> 2 blocks of 8 warps.
  expect_occupancy("A100", 256, 128, 0, 2, 16, OccupancyLimit::Registers);
  // The opt-in maximum 166912 + 1024 = 167936 fills the SM: 1 block.
  expect_occupancy("A100-SXM4-40GB", 256, 32, 166912, 1, 8, OccupancyLimit::SharedMemory);
}

TEST(Occupancy, Rtx3090AndL4) {
  // cc 8.6: 48 warps, 16 blocks, 100 KB. 8 warps: by warps 48/8 = 6; regs 8; smem 1024 -> 100.
  expect_occupancy("RTX 3090", 256, 32, 0, 6, 48, OccupancyLimit::Warps);
  // 2 warps: by warps 24, max blocks 16 binds.
  expect_occupancy("RTX 3090", 64, 32, 0, 16, 32, OccupancyLimit::Blocks);
  // smem 32768 + 1024 = 33792; 102400 / 33792 = 3.03 -> 3.
  expect_occupancy("RTX 3090", 128, 32, 32768, 3, 12, OccupancyLimit::SharedMemory);
  // cc 8.9 allows 24 blocks: 2 warps: by warps 24, blocks 24 -> tie, warps (full occupancy).
  expect_occupancy("L4", 64, 32, 0, 24, 48, OccupancyLimit::Warps);
  // 1 warp: by warps 48, max blocks 24 binds.
  expect_occupancy("L4", 32, 32, 0, 24, 24, OccupancyLimit::Blocks);
  // 32 warps, 64 regs: 2048/warp, 32 * 2048 = 65536 fits; 8 per partition, 32 warps -> 1;
  // by warps 48/32 = 1. Tie -> warps; 32 of 48 warps.
  expect_occupancy("L4", 1024, 64, 0, 1, 32, OccupancyLimit::Warps);
}

TEST(Occupancy, H100) {
  // 168 regs: 5376/warp (= 21 * 256); 16384/5376 = 3.05 -> 3 per partition, 12 warps -> 3
  // blocks of 4 warps.
  expect_occupancy("H100", 128, 168, 0, 3, 12, OccupancyLimit::Registers);
  // 12 warps: regs 12 / 12 = 1; smem 100000 + 1024 -> 101120 (= 790 * 128), 233472 / 101120 = 2.
  expect_occupancy("H100", 384, 168, 100000, 1, 12, OccupancyLimit::Registers);
  // 227 KB opt-in + 1 KB reserved = 228 KB: one block.
  expect_occupancy("H100-SXM", 128, 32, 232448, 1, 4, OccupancyLimit::SharedMemory);
}

TEST(Occupancy, InvalidLaunchesGetZeroBlocks) {
  const auto expect_invalid = [](const std::string& gpu, int threads, int regs, int smem) {
    const Occupancy o = compute_occupancy(test::db().find(gpu), threads, regs, smem);
    EXPECT_EQ(o.active_blocks_per_sm, 0) << gpu << " " << threads << " " << regs << " " << smem;
    EXPECT_EQ(o.limit, OccupancyLimit::Invalid);
    EXPECT_EQ(o.fraction, 0.0);
  };
  expect_invalid("A100", 1025, 32, 0);      // more than 1024 threads per block
  expect_invalid("A100", 0, 32, 0);         // empty block
  expect_invalid("A100", 128, 256, 0);      // more than 255 registers per thread
  expect_invalid("A100", 128, 32, 166913);  // above the 163 KB opt-in maximum
  expect_invalid("V100", 128, 32, 98305);   // above 96 KB
  expect_invalid("T4", 128, 32, 65537);     // above 64 KB
  // 72 regs: 2304/warp x 32 warps = 73728 > 65536 registers: the launch fails.
  expect_invalid("T4", 1024, 72, 0);
  expect_invalid("H100", 1024, 65, 0);  // 65 regs -> 2304/warp, same overflow
  // GP100: 9 warps of 169 regs (5408 -> 5632/warp) fit its 2 partitions (32768/5632 = 5 each,
  // 10 warps), but not 4 partitions of the other Pascal chips (16384/5632 = 2 each, 8 < 9
  // warps); NVIDIA refuses such a block on every Pascal GPU.
  expect_invalid("P100", 288, 169, 0);
}

TEST(Occupancy, LimitNames) {
  EXPECT_STREQ(to_string(OccupancyLimit::SharedMemory), "shared_memory");
  EXPECT_STREQ(to_string(OccupancyLimit::Invalid), "invalid");
}

}  // namespace
}  // namespace habitat
