#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>

#include "habitat/wave_scaling.h"

namespace habitat {
namespace {

// Compute capability 7.0-like per-SM limits (CUDA Programming Guide, compute capabilities table).
SmLimits volta_like_limits() {
  SmLimits l;
  l.max_threads = 2048;
  l.max_warps = 64;
  l.max_blocks = 32;
  l.registers = 65536;
  l.max_registers_per_thread = 255;
  l.register_alloc_unit = 256;
  l.warp_alloc_granularity = 4;
  l.shared_memory = 98304;
  l.shared_memory_per_block = 98304;
  l.shared_alloc_unit = 256;
  return l;
}

// Ratios origin/target: bandwidth 800/1200 = 2/3, clock 1500/1000 = 1.5, SMs 80/100 = 0.8.
// Both ridge points are 20 FLOP/byte in FP32; the target's BF16 ridge is 120e12/1.2e12 = 100.
Device origin_gpu() {
  Device d;
  d.name = "origin-gpu";
  d.sms = 80;
  d.boost_clock_mhz = 1500;
  d.memory_bandwidth_gbs = 800;
  d.peak_tflops = {{Precision::Fp32Simt, 16.0}};
  d.limits = volta_like_limits();
  return d;
}

Device target_gpu() {
  Device d;
  d.name = "target-gpu";
  d.sms = 100;
  d.boost_clock_mhz = 1000;
  d.memory_bandwidth_gbs = 1200;
  d.peak_tflops = {{Precision::Fp32Simt, 24.0}, {Precision::Bf16Tensor, 120.0}};
  d.limits = volta_like_limits();
  return d;
}

// 256 threads x 32 registers, no shared memory: 8 blocks per SM on both devices (warps:
// 64/8 = 8; registers: 65536/(256 x 32) = 8), so wave sizes are 640 (origin) and 800 (target).
KernelLaunch kernel(int blocks) {
  KernelLaunch k;
  k.name = "elementwise";
  k.grid[0] = blocks;
  k.block[0] = 256;
  k.registers_per_thread = 32;
  k.duration_us = 100.0;
  return k;
}

constexpr double kTol = 1e-9;

TEST(WaveGamma, PiecewiseAroundTheRidge) {
  EXPECT_DOUBLE_EQ(wave_gamma(0.0, 20.0), 1.0);     // no arithmetic: memory bound
  EXPECT_DOUBLE_EQ(wave_gamma(5.0, 20.0), 0.875);   // 1 - 0.5 x 5/20
  EXPECT_DOUBLE_EQ(wave_gamma(20.0, 20.0), 0.5);    // both pieces meet at the ridge
  EXPECT_DOUBLE_EQ(wave_gamma(80.0, 20.0), 0.125);  // 0.5 x 20/80
  EXPECT_DOUBLE_EQ(wave_gamma(std::numeric_limits<double>::infinity(), 20.0), 0.0);
  EXPECT_DOUBLE_EQ(wave_gamma(-1.0, 20.0), 1.0);  // unknown
  EXPECT_THROW(wave_gamma(5.0, 0.0), std::invalid_argument);
}

TEST(WaveScaling, MemoryBoundKernel) {
  const Device o = origin_gpu(), t = target_gpu();
  const WaveScaleResult r = WaveScaler(o, t).scale(kernel(8000), 5.0, Precision::Fp32Simt);
  EXPECT_DOUBLE_EQ(r.gamma, 0.875);
  EXPECT_EQ(r.origin_waves, 13);  // ceil(8000 / 640)
  EXPECT_EQ(r.target_waves, 10);  // ceil(8000 / 800)
  EXPECT_FALSE(r.under_one_wave);
  EXPECT_FALSE(r.bandwidth_fallback);
  EXPECT_TRUE(r.fits_origin && r.fits_target);
  // 100 x (2/3)^0.875 x 1.5^0.125 x 0.8^0.125
  EXPECT_NEAR(r.time_us, 71.7493224215244, kTol);
}

TEST(WaveScaling, ComputeBoundKernel) {
  const Device o = origin_gpu(), t = target_gpu();
  const WaveScaleResult r = WaveScaler(o, t).scale(kernel(8000), 80.0, Precision::Fp32Simt);
  EXPECT_DOUBLE_EQ(r.gamma, 0.125);
  // 100 x (2/3)^0.125 x (1.5 x 0.8)^0.875: slower, the target has less clock x SMs.
  EXPECT_NEAR(r.time_us, 111.49931079488557, kTol);
}

TEST(WaveScaling, KernelAtTheRidge) {
  const Device o = origin_gpu(), t = target_gpu();
  const WaveScaleResult r = WaveScaler(o, t).scale(kernel(8000), 20.0, Precision::Fp32Simt);
  EXPECT_DOUBLE_EQ(r.gamma, 0.5);
  // 100 x sqrt(2/3 x 1.5 x 0.8) = 100 x sqrt(0.8)
  EXPECT_NEAR(r.time_us, 89.44271909999158, kTol);
}

TEST(WaveScaling, RidgeComesFromTargetAtThePrecision) {
  const Device o = origin_gpu(), t = target_gpu();
  const WaveScaleResult r = WaveScaler(o, t).scale(kernel(8000), 80.0, Precision::Bf16Tensor);
  EXPECT_DOUBLE_EQ(r.gamma, 0.6);  // 1 - 0.5 x 80/100
  // 100 x (2/3)^0.6 x (1.5 x 0.8)^0.4
  EXPECT_NEAR(r.time_us, 84.33692126854999, kTol);
}

TEST(WaveScaling, UnderOneWaveOnBothDevices) {
  const Device o = origin_gpu(), t = target_gpu();
  const WaveScaleResult r = WaveScaler(o, t).scale(kernel(100), 5.0, Precision::Fp32Simt);
  EXPECT_TRUE(r.under_one_wave);
  EXPECT_EQ(r.origin_waves, 1);
  EXPECT_EQ(r.target_waves, 1);
  // Busiest SM: ceil(100/80) = 2 blocks on the origin, ceil(100/100) = 1 on the target.
  // 100 x (1.5 x 1/2)^0.125
  EXPECT_NEAR(r.time_us, 96.46786299603095, kTol);
}

TEST(WaveScaling, FullWaveOnOneDeviceUsesTheMainFormula) {
  // 700 blocks: 2 waves of 640 on the origin, under one wave of 800 on the target.
  const Device o = origin_gpu(), t = target_gpu();
  const WaveScaleResult r = WaveScaler(o, t).scale(kernel(700), 5.0, Precision::Fp32Simt);
  EXPECT_FALSE(r.under_one_wave);
  EXPECT_EQ(r.origin_waves, 2);
  EXPECT_EQ(r.target_waves, 1);
  EXPECT_NEAR(r.time_us, 71.7493224215244, kTol);
  // Exactly one full wave is not "under one wave" (Habitat's test is blocks / W == 0).
  EXPECT_FALSE(WaveScaler(o, o).scale(kernel(640), 5.0, Precision::Fp32Simt).under_one_wave);
}

TEST(WaveScaling, NoIntensityFallsBackToBandwidth) {
  const Device o = origin_gpu(), t = target_gpu();
  const WaveScaleResult r = WaveScaler(o, t).scale(kernel(8000), -1.0, Precision::Fp32Simt);
  EXPECT_TRUE(r.bandwidth_fallback);
  EXPECT_DOUBLE_EQ(r.gamma, 1.0);
  EXPECT_NEAR(r.time_us, 100.0 * 800.0 / 1200.0, kTol);

  const WaveScaleResult small = WaveScaler(o, t).scale(kernel(100), -1.0, Precision::Fp32Simt);
  EXPECT_TRUE(small.bandwidth_fallback);
  EXPECT_TRUE(small.under_one_wave);
  EXPECT_DOUBLE_EQ(small.time_us, 100.0);  // unchanged under one wave
}

TEST(WaveScaling, CopiesAndMemsetsScaleByBandwidth) {
  // CUPTI's memcpy and memset records carry no launch configuration: one block of one thread
  // would read as under one wave (unchanged) where bandwidth bounds them.
  const Device o = origin_gpu(), t = target_gpu();
  for (const std::string_view name : {kDeviceCopyName, kDeviceMemsetName}) {
    KernelLaunch k;
    k.name = name;
    k.duration_us = 100.0;
    const WaveScaleResult r = WaveScaler(o, t).scale(k, 0.0, Precision::Fp32Simt);
    EXPECT_TRUE(r.bandwidth_fallback);
    EXPECT_NEAR(r.time_us, 100.0 * 800.0 / 1200.0, kTol);
  }
}

TEST(WaveScaling, LaunchThatCannotRunOnTargetUsesBandwidthRatio) {
  // 64 KB of shared memory per block fits the origin (1 block/SM) but not a target whose
  // blocks may use at most 48 KB.
  const Device o = origin_gpu();
  Device t = target_gpu();
  t.limits.shared_memory = 65536;
  t.limits.shared_memory_per_block = 49152;
  KernelLaunch k = kernel(8000);
  k.dynamic_shared_bytes = 65536;
  const WaveScaleResult r = WaveScaler(o, t).scale(k, 5.0, Precision::Fp32Simt);
  EXPECT_TRUE(r.fits_origin);
  EXPECT_FALSE(r.fits_target);
  EXPECT_TRUE(r.bandwidth_fallback);
  EXPECT_FALSE(r.under_one_wave);
  EXPECT_EQ(r.origin_waves, 100);  // ceil(8000 / (80 x 1))
  EXPECT_EQ(r.target_waves, 0);
  EXPECT_NEAR(r.time_us, 100.0 * 800.0 / 1200.0, kTol);
}

TEST(WaveScaling, SameDeviceIsIdentity) {
  const Device o = origin_gpu();
  for (double x : {-1.0, 0.0, 5.0, 20.0, 80.0}) {
    for (int blocks : {1, 100, 640, 8000}) {
      EXPECT_NEAR(WaveScaler(o, o).scale(kernel(blocks), x, Precision::Fp32Simt).time_us, 100.0,
                  kTol);
    }
  }
}

TEST(WaveScaling, RejectsIncompleteDevices) {
  const Device o = origin_gpu();
  Device t = target_gpu();
  t.sms = 0;
  EXPECT_THROW(WaveScaler(o, t).scale(kernel(8000), 5.0, Precision::Fp32Simt),
               std::invalid_argument);
}

}  // namespace
}  // namespace habitat
