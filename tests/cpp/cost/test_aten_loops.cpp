// Which of ATen's CUDA element-wise loops a copy runs, and the bound of the non-vectorized ones.
#include <gtest/gtest.h>

#include "cost/aten_loops.h"
#include "cost/test_op_cost_builders.h"
#include "habitat/predictor.h"
#include "test_devices.h"

namespace habitat {
namespace {

using namespace habitat::test;

TensorMeta transposed(int64_t rows, int64_t cols, const std::string& dtype = "bfloat16") {
  TensorMeta t = T({rows, cols}, dtype);
  t.strides = {1, rows};
  t.contiguous = false;
  return t;
}

TEST(AtenLoops, DenseIsAnyDimensionOrderWithoutGaps) {
  EXPECT_TRUE(aten_loops::dense(T({8, 16, 4})));
  EXPECT_TRUE(aten_loops::dense(transposed(64, 32)));  // a transpose of a whole tensor
  TensorMeta slice = T({8, 16});
  slice.strides = {32, 1};  // the first half of every row of an [8, 32]
  slice.contiguous = false;
  EXPECT_FALSE(aten_loops::dense(slice));
  TensorMeta broadcast = T({8, 16});
  broadcast.strides = {0, 1};
  EXPECT_FALSE(aten_loops::dense(broadcast));
}

TEST(AtenLoops, ACopyOfAStridedSourceRunsTheOffsetLoop) {
  const TensorMeta out = T({4096, 1024}, "bfloat16");
  const OpRecord gather =
      op("aten::contiguous", "", {tensor("self", transposed(4096, 1024))}, {out});
  EXPECT_EQ(aten_loops::copy_runs_vectorized(gather), false);
  const OpRecord cast = op("aten::_to_copy", "", {tensor("self", T({4096, 1024}))}, {out});
  EXPECT_EQ(aten_loops::copy_runs_vectorized(cast), true);
  const OpRecord relu = op("aten::relu", "", {tensor("self", out)}, {out});
  EXPECT_EQ(aten_loops::copy_runs_vectorized(relu), std::nullopt);
  // The shape-based forecast of the strided copy is at least its elements' bound.
  auto forecast_us = [](const OpRecord& o) {
    Step step;
    step.ops = {o};
    return Predictor(db()).predict(step, TraceOrigin{}, {"H100-SXM5-80GB"}).totals[0].total_us;
  };
  const double t = forecast_us(gather);
  EXPECT_GE(t, aten_loops::non_vectorized_us(4096.0 * 1024, db().find("H100-SXM5-80GB")));
  EXPECT_GT(t, forecast_us(cast));
}

TEST(AtenLoops, ACatOfStridedInputsIsBoundByItsElements) {
  // BERT-base's attention backward stacks the q, k, v gradients, each a [32, 12, 128, 64] view
  // of a [32, 128, 768] tensor (heads and positions swapped).
  TensorMeta grad = T({32, 12, 128, 64}, "bfloat16");
  grad.strides = {98304, 64, 768, 1};
  grad.contiguous = false;
  const TensorMeta out = T({96, 12, 128, 64}, "bfloat16");
  const OpRecord strided = op("aten::cat", "", {tensors("tensors", {grad, grad, grad})}, {out});
  EXPECT_EQ(aten_loops::cat_inputs_contiguous(strided), false);
  const TensorMeta dense_grad = T({32, 12, 128, 64}, "bfloat16");
  const OpRecord contiguous =
      op("aten::cat", "", {tensors("tensors", {dense_grad, dense_grad, dense_grad})}, {out});
  EXPECT_EQ(aten_loops::cat_inputs_contiguous(contiguous), true);
  EXPECT_EQ(aten_loops::cat_inputs_contiguous(op("aten::relu", "", {tensor("self", out)}, {out})),
            std::nullopt);
  auto forecast_us = [](const OpRecord& o) {
    Step step;
    step.ops = {o};
    return Predictor(db()).predict(step, TraceOrigin{}, {"H100-SXM5-80GB"}).totals[0].total_us;
  };
  const double elements = 96.0 * 12 * 128 * 64;
  EXPECT_GE(forecast_us(strided),
            aten_loops::non_vectorized_us(elements, db().find("H100-SXM5-80GB")));
  EXPECT_GT(forecast_us(strided), forecast_us(contiguous));
}

}  // namespace
}  // namespace habitat
