// A tensor-core GEMM past the GEMM model's data extent: its time is the model's inside the
// extent, extended along each oversized, 16-byte-aligned dimension by the slope between half the
// extent and the extent.
#include <gtest/gtest.h>

#include <algorithm>

#include "learned/gemm_extent.h"

namespace habitat {
namespace {

LearnedShape gemm(double m, double n, double k, double elem_bytes = 2) {
  return {{"b", 1}, {"m", m}, {"n", n}, {"k", k}, {"elem_bytes", elem_bytes}};
}

// A model whose time is affine in m (which the extension reproduces exactly) and stops rising in
// n at 6000.
double stub_us(const LearnedShape& s) {
  return 5.0 + 0.01 * s.at("m") + 2.0 * std::min(s.at("n"), 6000.0) / 1000.0;
}

TEST(GemmExtent, InsideTheExtentNothingChanges) {
  EXPECT_FALSE(gemm_beyond_data(gemm(8192, 8192, 8192)));
  EXPECT_DOUBLE_EQ(extended_gemm_us(gemm(4096, 768, 3072), stub_us),
                   stub_us(gemm(4096, 768, 3072)));
}

TEST(GemmExtent, AnAlignedDimensionIsExtendedFromTheModelsSlope) {
  ASSERT_TRUE(gemm_beyond_data(gemm(32768, 768, 768)));
  // Affine in m: the extension is the same line.
  EXPECT_NEAR(extended_gemm_us(gemm(32768, 768, 768), stub_us), stub_us(gemm(32768, 768, 768)),
              1e-9);
  // In n the stub rises up to 6000 and is flat after: the slope from 4096 to 8192 is its mean
  // rise over that span, and past 8192 the time keeps rising at that rate.
  const double at_extent = stub_us(gemm(1024, 8192, 768));
  const double slope = (at_extent - stub_us(gemm(1024, 4096, 768))) / 4096.0;
  EXPECT_NEAR(extended_gemm_us(gemm(1024, 16384, 768), stub_us), at_extent + slope * 8192, 1e-9);
}

TEST(GemmExtent, UnalignedDimensionsKeepTheWholeShape) {
  // 30522 bf16 elements are 61044 bytes, not a multiple of 16; 50257 is odd.
  EXPECT_FALSE(gemm_beyond_data(gemm(4096, 30522, 768)));
  EXPECT_FALSE(gemm_beyond_data(gemm(50257, 768, 4096)));
  EXPECT_TRUE(gemm_beyond_data(gemm(4096, 30528, 768)));
  // fp32: 4 bytes an element, so a multiple of 4 elements is aligned.
  EXPECT_TRUE(gemm_beyond_data(gemm(12604, 768, 768, 4)));
}

TEST(GemmExtent, SeveralDimensionsAreExtendedInTurn) {
  const auto bilinear = [](const LearnedShape& s) { return 1.0 + s.at("m") * s.at("n") * 1e-6; };
  EXPECT_NEAR(extended_gemm_us(gemm(16384, 16384, 64), bilinear), bilinear(gemm(16384, 16384, 64)),
              1e-9);
}

}  // namespace
}  // namespace habitat
