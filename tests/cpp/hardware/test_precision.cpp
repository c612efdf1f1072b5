#include <gtest/gtest.h>

#include "habitat/precision.h"

namespace habitat {
namespace {

TEST(Precision, DtypeSizes) {
  EXPECT_EQ(dtype_size("float32"), 4);
  EXPECT_EQ(dtype_size("torch.bfloat16"), 2);
  EXPECT_EQ(dtype_size("int64"), 8);
  EXPECT_EQ(dtype_size("float8_e4m3fn"), 1);
  EXPECT_FALSE(dtype_size("quint4x2").has_value());
}

TEST(Precision, MatmulPrecisionFollowsDtypeAndTf32Flag) {
  EXPECT_EQ(matmul_precision("float32", false), Precision::Fp32Simt);
  EXPECT_EQ(matmul_precision("float32", true), Precision::Tf32Tensor);
  EXPECT_EQ(matmul_precision("bfloat16", false), Precision::Bf16Tensor);
  EXPECT_EQ(matmul_precision("float16", true), Precision::Fp16Tensor);
}

TEST(Precision, NamesRoundTrip) {
  for (auto p : {Precision::Fp32Simt, Precision::Tf32Tensor, Precision::Fp16Tensor,
                 Precision::Bf16Tensor, Precision::Fp8Tensor, Precision::Fp64}) {
    EXPECT_EQ(precision_from_string(to_string(p)), p);
  }
  EXPECT_FALSE(precision_from_string("int4").has_value());
}

}  // namespace
}  // namespace habitat
