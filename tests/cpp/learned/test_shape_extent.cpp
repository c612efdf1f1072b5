// A shape past a model's data extent: its time is the model's inside the extent, extended along
// each oversized dimension by the slope between half the extent and the extent.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "learned/shape_extent.h"

namespace habitat {
namespace {

LearnedShape gemm(double m, double n, double k, double elem_bytes = 2) {
  return {{"b", 1}, {"m", m}, {"n", n}, {"k", k}, {"elem_bytes", elem_bytes}};
}

const ShapeExtent& gemm_extent() { return *shape_extent(LearnedFamily::Gemm); }

// A model whose time is affine in m (which the extension reproduces exactly) and stops rising in
// n at 6000.
double stub_us(const LearnedShape& s) {
  return 5.0 + 0.01 * s.at("m") + 2.0 * std::min(s.at("n"), 6000.0) / 1000.0;
}

TEST(ShapeExtent, InsideTheExtentNothingChanges) {
  EXPECT_FALSE(beyond_extent(gemm_extent(), gemm(8192, 8192, 8192), true));
  EXPECT_DOUBLE_EQ(extended_us(gemm_extent(), gemm(4096, 768, 3072), true, stub_us),
                   stub_us(gemm(4096, 768, 3072)));
  EXPECT_EQ(shape_extent(LearnedFamily::Conv), nullptr);
}

TEST(ShapeExtent, AnAlignedGemmDimensionIsExtendedFromTheModelsSlope) {
  ASSERT_TRUE(beyond_extent(gemm_extent(), gemm(32768, 768, 768), true));
  EXPECT_NEAR(extended_us(gemm_extent(), gemm(32768, 768, 768), true, stub_us),
              stub_us(gemm(32768, 768, 768)), 1e-9);
  // In n the stub rises up to 6000 and is flat after: the slope from 4096 to 8192 is its mean
  // rise over that span, and past 8192 the time keeps rising at that rate.
  const double at_extent = stub_us(gemm(1024, 8192, 768));
  const double slope = (at_extent - stub_us(gemm(1024, 4096, 768))) / 4096.0;
  EXPECT_NEAR(extended_us(gemm_extent(), gemm(1024, 16384, 768), true, stub_us),
              at_extent + slope * 8192, 1e-9);
}

TEST(ShapeExtent, UnalignedOrSimtGemmsKeepTheWholeShape) {
  // 30522 bf16 elements are 61044 bytes, not a multiple of 16; 50257 is odd.
  EXPECT_FALSE(beyond_extent(gemm_extent(), gemm(4096, 30522, 768), true));
  EXPECT_FALSE(beyond_extent(gemm_extent(), gemm(50257, 768, 4096), true));
  EXPECT_TRUE(beyond_extent(gemm_extent(), gemm(4096, 30528, 768), true));
  // fp32: 4 bytes an element, so a multiple of 4 elements is aligned; off tensor cores, never.
  EXPECT_TRUE(beyond_extent(gemm_extent(), gemm(12604, 768, 768, 4), true));
  EXPECT_FALSE(beyond_extent(gemm_extent(), gemm(12604, 768, 768, 4), false));
}

TEST(ShapeExtent, SeveralDimensionsAreExtendedInTurn) {
  const auto bilinear = [](const LearnedShape& s) { return 1.0 + s.at("m") * s.at("n") * 1e-6; };
  EXPECT_NEAR(extended_us(gemm_extent(), gemm(16384, 16384, 64), true, bilinear),
              bilinear(gemm(16384, 16384, 64)), 1e-9);
}

TEST(ShapeExtent, ElementwiseOpsPastTwoToTheTwentySixth) {
  const ShapeExtent& e = *shape_extent(LearnedFamily::Elementwise);
  const auto op = [](double n) {
    return LearnedShape{{"n", n}, {"inputs", 2}, {"transcendental", 0}, {"elem_bytes", 2}};
  };
  EXPECT_FALSE(beyond_extent(e, op(67108864.0), false));
  ASSERT_TRUE(beyond_extent(e, op(1e9), false));
  // Saturating bandwidth: 3 us of launch, then 1 us per million elements from 2^25 on.
  const auto stream = [](const LearnedShape& s) {
    return 3.0 + std::max(s.at("n"), 33554432.0) * 1e-6;
  };
  EXPECT_NEAR(extended_us(e, op(1e9), false, stream), stream(op(1e9)), 1e-6);
}

TEST(ShapeExtent, LayerNormRowsPastTwoToTheTwentyFifthElements) {
  const ShapeExtent& e = *shape_extent(LearnedFamily::LayerNorm);
  const auto norm = [](double rows, double cols) {
    return LearnedShape{{"rows", rows}, {"cols", cols}, {"elem_bytes", 2}, {"backward", 0}};
  };
  // The limit is on the elements: 32768 rows of 1024, 4096 rows of 8192.
  EXPECT_FALSE(beyond_extent(e, norm(32768, 1024), false));
  EXPECT_TRUE(beyond_extent(e, norm(32769, 1024), false));
  EXPECT_FALSE(beyond_extent(e, norm(4096, 8192), false));
  EXPECT_TRUE(beyond_extent(e, norm(65536, 8192), false));
  // A row longer than the limit's half is not extended (no whole rows to take a slope over).
  EXPECT_FALSE(beyond_extent(e, norm(1e6, 33554432.0), false));
  // A model whose rate falls past its data: the rows past the extent keep the slope inside it.
  const auto falling = [](const LearnedShape& s) {
    const double n = s.at("rows") * s.at("cols");
    return 4.0 + n * 1e-6 * (n > 33554432.0 ? 2.0 : 1.0);
  };
  const double at = falling(norm(32768, 1024)), half = falling(norm(16384, 1024));
  EXPECT_NEAR(extended_us(e, norm(131072, 1024), false, falling),
              at + (at - half) / 16384.0 * (131072 - 32768), 1e-9);
}

TEST(ShapeExtent, SoftmaxRowsPastTheirDataLogSoftmaxRowsFurther) {
  const ShapeExtent& e = *shape_extent(LearnedFamily::Softmax);
  const auto softmax = [](double rows, double cols, std::optional<double> log) {
    LearnedShape s{{"rows", rows}, {"cols", cols}, {"elem_bytes", 2}, {"backward", 1}};
    if (log) s["log"] = *log;
    return s;
  };
  // Softmax rows stop at 2^25 elements (an absent log column is a softmax), log-softmax at 2^29.
  EXPECT_TRUE(beyond_extent(e, softmax(65536, 1024, 0.0), false));
  EXPECT_TRUE(beyond_extent(e, softmax(65536, 1024, std::nullopt), false));
  EXPECT_FALSE(beyond_extent(e, softmax(65536, 1024, 1.0), false));
  EXPECT_FALSE(beyond_extent(e, softmax(16384, 32768, 1.0), false));  // 2^29
  EXPECT_TRUE(beyond_extent(e, softmax(32768, 32768, 1.0), false));
  EXPECT_DOUBLE_EQ(e.limit_of(softmax(1, 32768, 1.0)), 16384.0);
  EXPECT_DOUBLE_EQ(e.limit_of(softmax(1, 1024, 0.0)), 32768.0);
}

}  // namespace
}  // namespace habitat
