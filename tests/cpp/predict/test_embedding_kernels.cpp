#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "predict/embedding_kernels.h"
#include "predict/test_structure_models.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::db;
using test::integer;
using test::T;
using test::tensor;

OpRecord embedding(int64_t vocab, int64_t dim, int64_t tokens, const char* dtype = "float32") {
  OpRecord op;
  op.name = "aten::embedding";
  op.args = {tensor("weight", T({vocab, dim}, dtype)), tensor("indices", T({tokens}, "int64"))};
  op.outputs = {T({tokens, dim}, dtype)};
  return op;
}

OpRecord index_select(int64_t rows, int64_t width, int64_t indices, int64_t dim) {
  OpRecord op;
  op.name = "aten::index_select";
  op.args = {tensor("self", T({rows, width})), integer("dim", dim),
             tensor("index", T({indices}, "int64"))};
  op.outputs = {T({indices, width})};
  return op;
}

OpRecord embedding_backward(int64_t vocab, int64_t dim, int64_t tokens,
                            const char* dtype = "float32") {
  OpRecord op;
  op.name = "aten::embedding_dense_backward";
  op.args = {tensor("grad_output", T({tokens, dim}, dtype)),
             tensor("indices", T({tokens}, "int64")), integer("num_weights", vocab)};
  op.outputs = {T({vocab, dim}, dtype)};
  return op;
}

double us(const OpRecord& op, const char* gpu = "H100-SXM5-80GB") {
  return test::structure_us(embedding_kernels_us, op, gpu);
}

TEST(EmbeddingKernels, ANarrowTableIsBoundByItsBlocksNotItsBytes) {
  // T5's relative-position bias: 262144 lookups of 32-byte rows, one 32-thread block each.
  // CUPTI on an H100 measured 159 us (benchmarks/results/real-models-gpu, t5_small_bf16).
  const double t = us(embedding(32, 8, 262144));
  EXPECT_NEAR(t, 159.0, 0.1 * 159.0);
  // The same bytes in 16384 rows of 512 bytes stream at DRAM rate instead.
  EXPECT_LT(us(embedding(32, 128, 16384)), 0.2 * t);
}

TEST(EmbeddingKernels, PicksATenGatherByIndexCountAndRowAlignment) {
  // Up to 16 indices: one thread walks them in turn, so each index adds a round trip.
  EXPECT_GT(us(embedding(50000, 768, 16)), us(embedding(50000, 768, 8)) + 2.0);
  // Rows of 1772 bytes are not 16-byte vectors: the element-wise gather, slower to start.
  EXPECT_GT(us(embedding(1000, 443, 2000)), us(embedding(1000, 444, 2000)));
}

TEST(EmbeddingKernels, IndexSelectAlongRowsIsTheSameGather) {
  EXPECT_DOUBLE_EQ(us(index_select(32128, 512, 8192, 0)), us(embedding(32128, 512, 8192)));
  EXPECT_DOUBLE_EQ(us(index_select(32128, 512, 8192, -2)), us(embedding(32128, 512, 8192)));
  EXPECT_FALSE(
      embedding_kernels_us(index_select(32128, 512, 8192, 1), db().find("H100-SXM5-80GB")));
}

TEST(EmbeddingKernels, BackwardTakesTheFeatureKernelUpTo3072Indices) {
  // T5's decoder embedding gradient (2048 tokens, 32128 x 512 fp32): 108 us measured on an H100
  // (the feature kernel 87.8 us and the zero fill 20.4 us).
  EXPECT_NEAR(us(embedding_backward(32128, 512, 2048)), 108.0, 0.2 * 108.0);
  // Its steps of 32 indices are serial: three times the indices, about three times the time.
  const double third = us(embedding_backward(1000, 64, 1024));
  EXPECT_NEAR(us(embedding_backward(1000, 64, 3072)) - 2.17, 3 * (third - 2.17), 0.1 * third);
  // Above 3072 indices the sort path: ~66 us of sort and segment kernels even for a narrow
  // table (67.5 us measured for 3242 indices of 41 x 16).
  EXPECT_NEAR(us(embedding_backward(41, 16, 3242)), 67.5, 0.1 * 67.5);
}

TEST(EmbeddingKernels, SortPathGrowsWithDistinctRows) {
  // Same tokens and width, 512 against 32128 distinct rows: 100 us against 323 us measured.
  const double few = us(embedding_backward(512, 768, 16384));
  const double many = us(embedding_backward(32128, 768, 16384));
  EXPECT_NEAR(few, 100.0, 0.15 * 100.0);
  EXPECT_NEAR(many, 323.0, 0.15 * 323.0);
}

TEST(EmbeddingKernels, MoreBandwidthNeverSlowsAndSlowerGpusTakeLonger) {
  for (const OpRecord& op : {embedding(50257, 768, 8192), embedding_backward(50257, 768, 8192),
                             embedding_backward(32128, 512, 2048), embedding(32, 8, 262144)}) {
    EXPECT_LE(us(op, "H200-SXM-141GB"), us(op, "H100-SXM5-80GB")) << op.name;
    EXPECT_GT(us(op, "T4"), us(op, "H100-SXM5-80GB")) << op.name;
  }
}

TEST(EmbeddingKernels, OtherOpsAndMissingShapesAreLeftToTheRoofline) {
  OpRecord relu;
  relu.name = "aten::relu";
  EXPECT_FALSE(embedding_kernels_us(relu, db().find("H100-SXM5-80GB")));
  OpRecord bare = embedding_backward(100, 8, 10);
  bare.args.pop_back();  // no num_weights
  EXPECT_FALSE(embedding_kernels_us(bare, db().find("H100-SXM5-80GB")));
}

}  // namespace
}  // namespace habitat
