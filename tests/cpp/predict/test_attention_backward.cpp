// The backward of an SDPA call that ran its math path on the CPU: its pieces (bmm, softmax and
// dropout backwards) cost the fused backward CUDA runs, once per attention.
#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "habitat/predictor.h"
#include "predict/attention_backward.h"
#include "predict/cuda_paths.h"
#include "predict/test_fused_backward_ops.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::backward_us;
using test::op;
using test::T;
using test::tensor;

constexpr int64_t kB = 8, kH = 12, kL = 256, kE = 64;

// The forward: scaled_dot_product_attention over its math path (bf16 query, key, value).
std::vector<OpRecord> forward(uint64_t id) {
  const auto q = T({kB, kH, kL, kE}, "bfloat16");
  OpRecord sdpa = op(id, "aten::scaled_dot_product_attention",
                     {tensor("query", q), tensor("key", q), tensor("value", q),
                      test::real("dropout_p", 0.1), test::boolean("is_causal", false)},
                     Phase::Forward);
  sdpa.has_children = true;
  OpRecord math =
      op(id + 1, "aten::_scaled_dot_product_attention_math",
         {tensor("query", q), tensor("key", q), tensor("value", q)}, Phase::Forward, id);
  return {sdpa, math};
}

// Its backward as autograd records it: the dropout mask's mul, the softmax backward and the
// two matmuls' bmm backwards, in float32 (the math path's upcast).
std::vector<OpRecord> backward(uint64_t id) {
  const auto scores = T({kB, kH, kL, kL});
  const auto flat_scores = T({kB * kH, kL, kL});
  const auto flat_q = T({kB * kH, kL, kE});
  const auto flat_kt = T({kB * kH, kE, kL});
  return {
      op(id, "aten::bmm", {tensor("self", flat_scores), tensor("mat2", flat_q)}, Phase::Backward,
         std::nullopt, "BmmBackward0"),
      op(id + 1, "aten::mul", {tensor("self", scores), tensor("other", scores)}, Phase::Backward,
         std::nullopt, "MulBackward0"),
      op(id + 2, "aten::_softmax_backward_data",
         {tensor("grad_output", scores), tensor("output", scores), test::integer("dim", -1)},
         Phase::Backward, std::nullopt, "SafeSoftmaxBackward0"),
      op(id + 3, "aten::bmm", {tensor("self", flat_q), tensor("mat2", flat_kt)}, Phase::Backward,
         std::nullopt, "BmmBackward0"),
  };
}

TEST(AttentionBackward, MathPathPiecesCostTheFusedBackwardOncePerAttention) {
  Step step;
  for (uint64_t layer = 0; layer < 2; ++layer) {
    for (OpRecord& r : forward(100 * layer)) step.ops.push_back(std::move(r));
  }
  for (uint64_t layer = 0; layer < 2; ++layer) {
    for (OpRecord& r : backward(1000 + 100 * layer)) step.ops.push_back(std::move(r));
  }
  // The fused backward H100 runs for one of these attentions (cuDNN's, in bf16).
  OpRecord fused = step.ops[0];
  fused.has_children = false;
  fused.phase = Phase::Backward;
  fused.name = cuda_paths::cuda_attention_op("bfloat16", test::db().find("H100"), true);
  EXPECT_EQ(fused.name, "aten::_scaled_dot_product_cudnn_attention_backward");
  Step one;
  one.ops = {fused};
  const Predictor predictor(test::db());
  const double one_fused = predictor.predict(one, TraceOrigin{}, {"H100"}).totals[0].total_us;
  ASSERT_GT(one_fused, 0);
  const Forecast f = predictor.predict(step, TraceOrigin{}, {"H100"});
  EXPECT_NEAR(backward_us(f, step), 2 * one_fused, 1e-9 * one_fused);
  // The softmax backwards carry it; the other pieces launch nothing of their own.
  for (std::size_t i = 4; i < step.ops.size(); ++i) {
    const bool carrier = step.ops[i].name == "aten::_softmax_backward_data";
    EXPECT_EQ(f.ops[i].cost.op_class, carrier ? OpClass::Attention : OpClass::NoKernel) << i;
  }
}

TEST(AttentionBackward, OpsOfOtherShapesOrWithoutASoftmaxBackwardAreLeftAlone) {
  Step step;
  for (OpRecord& r : forward(0)) step.ops.push_back(std::move(r));
  // A bmm backward of the attention's shapes but no softmax backward: not the math path's.
  std::vector<OpRecord> pieces = backward(10);
  step.ops.push_back(pieces[0]);
  // A bmm backward of a model's own (other) shapes.
  step.ops.push_back(op(20, "aten::bmm",
                        {tensor("self", T({16, 128, 32})), tensor("mat2", T({16, 32, 128}))},
                        Phase::Backward, std::nullopt, "BmmBackward0"));
  const cuda_paths::FusedBackward got = cuda_paths::math_attention_backward(step, {0});
  EXPECT_EQ(got.pieces, std::vector<char>(step.ops.size(), 0));
  EXPECT_TRUE(got.carriers.empty());
  // With the softmax backward, the attention's pieces are found, the other bmm is not.
  step.ops.push_back(pieces[2]);
  const cuda_paths::FusedBackward with = cuda_paths::math_attention_backward(step, {0});
  EXPECT_EQ(with.pieces, (std::vector<char>{0, 0, 1, 0, 1}));
  ASSERT_EQ(with.carriers.size(), 1u);
  EXPECT_EQ(with.carriers[0], (std::pair<std::size_t, std::size_t>{4, 0}));
}

}  // namespace
}  // namespace habitat
