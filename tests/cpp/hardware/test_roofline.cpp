#include <gtest/gtest.h>

#include <stdexcept>

#include "hardware/roofline.h"

namespace habitat {
namespace {

// 20 TFLOP/s FP32 and 100 TFLOP/s BF16 over 1000 GB/s: ridges at 20 and 100 FLOP/byte.
Device test_gpu() {
  Device d;
  d.name = "test-gpu";
  d.sms = 100;
  d.boost_clock_mhz = 1000;
  d.memory_bandwidth_gbs = 1000;
  d.peak_tflops = {{Precision::Fp32Simt, 20.0}, {Precision::Bf16Tensor, 100.0}};
  return d;
}

TEST(Roofline, RidgePointIsPeakOverBandwidth) {
  const Device d = test_gpu();
  EXPECT_DOUBLE_EQ(ridge_point(d, Precision::Fp32Simt), 20.0);
  EXPECT_DOUBLE_EQ(ridge_point(d, Precision::Bf16Tensor), 100.0);
}

TEST(Roofline, AttainableBelowAtAndAboveRidge) {
  const Device d = test_gpu();
  EXPECT_DOUBLE_EQ(attainable_flops(d, Precision::Fp32Simt, 5.0), 5e12);    // 5 x 1e12 B/s
  EXPECT_DOUBLE_EQ(attainable_flops(d, Precision::Fp32Simt, 20.0), 20e12);  // at the ridge
  EXPECT_DOUBLE_EQ(attainable_flops(d, Precision::Fp32Simt, 40.0), 20e12);  // capped at peak
  EXPECT_DOUBLE_EQ(attainable_flops(d, Precision::Bf16Tensor, 40.0), 40e12);
  EXPECT_DOUBLE_EQ(attainable_flops(d, Precision::Fp32Simt, 0.0), 0.0);
}

TEST(Roofline, TimeOnMemorySide) {
  // 2 GFLOP in 100 us at peak; 1 GB in 1000 us at 1 TB/s: memory bound.
  EXPECT_DOUBLE_EQ(roofline_time_us(test_gpu(), Precision::Fp32Simt, 2e9, 1e9), 1000.0);
}

TEST(Roofline, TimeOnComputeSide) {
  // 40 GFLOP in 2000 us at 20 TFLOP/s; 0.1 GB in 100 us: compute bound. BF16 peak: 400 us.
  EXPECT_DOUBLE_EQ(roofline_time_us(test_gpu(), Precision::Fp32Simt, 4e10, 1e8), 2000.0);
  EXPECT_DOUBLE_EQ(roofline_time_us(test_gpu(), Precision::Bf16Tensor, 4e10, 1e8), 400.0);
}

TEST(Roofline, NoWorkTakesNoTime) {
  EXPECT_DOUBLE_EQ(roofline_time_us(test_gpu(), Precision::Fp32Simt, 0, 0), 0.0);
}

TEST(Roofline, RejectsNegativeWorkAndEmptyDevices) {
  const Device d = test_gpu();
  EXPECT_THROW(roofline_time_us(d, Precision::Fp32Simt, -1, 0), std::invalid_argument);
  EXPECT_THROW(roofline_time_us(d, Precision::Fp32Simt, 0, -1), std::invalid_argument);
  EXPECT_THROW(attainable_flops(d, Precision::Fp32Simt, -1), std::invalid_argument);
  Device no_bandwidth = d;
  no_bandwidth.memory_bandwidth_gbs = 0;
  EXPECT_THROW(ridge_point(no_bandwidth, Precision::Fp32Simt), std::invalid_argument);
  Device no_peak = d;
  no_peak.peak_tflops.clear();
  try {
    roofline_time_us(no_peak, Precision::Fp32Simt, 1, 1);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("test-gpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace habitat
