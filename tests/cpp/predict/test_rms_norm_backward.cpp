// An RMS norm the CPU ran as its decomposition (torch's composite _fused_rms_norm): CUDA runs
// the fused forward and the fused backward, once per norm.
#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "habitat/predictor.h"
#include "predict/cuda_paths.h"
#include "predict/rms_norm_backward.h"
#include "predict/test_fused_backward_ops.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::backward_us;
using test::on_storage;
using test::op;
using test::T;
using test::tensor;

constexpr int64_t kB = 4, kL = 512, kC = 1024;

// Storages of one norm (numbered from `s`): input 0, weight 1, square 2, mean 3, eps add 4,
// rstd 5, normalised input 6, result 7.
TensorMeta x(uint64_t s, int k) { return on_storage(T({kB, kL, kC}), s + k); }
TensorMeta row(uint64_t s, int k) { return on_storage(T({kB, kL, 1}), s + k); }
TensorMeta weight(uint64_t s) { return on_storage(T({kC}), s + 1); }

std::vector<OpRecord> forward(uint64_t id, uint64_t s) {
  OpRecord norm = op(id, "aten::_fused_rms_norm",
                     {tensor("input", x(s, 0)), test::ints("normalized_shape", {kC}),
                      tensor("weight", weight(s)), test::real("eps", 1e-6)},
                     Phase::Forward, std::nullopt, "", {x(s, 7), row(s, 5)});
  norm.has_children = true;
  return {
      norm,
      op(id + 1, "aten::pow", {tensor("self", x(s, 0))}, Phase::Forward, id, "", {x(s, 2)}),
      op(id + 2, "aten::mean", {tensor("self", x(s, 2))}, Phase::Forward, id, "", {row(s, 3)}),
      op(id + 3, "aten::add_", {tensor("self", row(s, 3))}, Phase::Forward, id, "", {row(s, 3)}),
      op(id + 4, "aten::rsqrt", {tensor("self", row(s, 3))}, Phase::Forward, id, "", {row(s, 5)}),
      op(id + 5, "aten::mul", {tensor("self", x(s, 0)), tensor("other", row(s, 5))}, Phase::Forward,
         id, "", {x(s, 6)}),
      op(id + 6, "aten::mul", {tensor("self", x(s, 6)), tensor("other", weight(s))}, Phase::Forward,
         id, "", {x(s, 7)}),
  };
}

// Its backward as autograd records it on the CPU (the ops of Llama-style layers traced with
// torch 2.13): the incoming gradient g lives on storage `grad`.
std::vector<OpRecord> backward(uint64_t id, uint64_t s, uint64_t grad) {
  const TensorMeta g = on_storage(T({kB, kL, kC}), grad);
  const TensorMeta t = T({kB, kL, kC});
  const TensorMeta r = T({kB, kL, 1});
  const auto b = [&](uint64_t i, std::string name, std::vector<Argument> args, std::string node) {
    return op(id + i, std::move(name), std::move(args), Phase::Backward, std::nullopt,
              std::move(node));
  };
  return {
      b(0, "aten::mul", {tensor("self", g), tensor("other", x(s, 6))}, "MulBackward0"),
      b(1, "aten::mul", {tensor("self", g), tensor("other", weight(s))}, "MulBackward0"),
      b(2, "aten::sum", {tensor("self", t)}, "MulBackward0"),
      b(3, "aten::detach", {tensor("self", T({kC}))}, "torch::autograd::AccumulateGrad"),
      b(4, "aten::mul", {tensor("self", t), tensor("other", x(s, 0))}, "MulBackward0"),
      b(5, "aten::mul", {tensor("self", t), tensor("other", row(s, 5))}, "MulBackward0"),
      b(6, "aten::sum", {tensor("self", t)}, "MulBackward0"),
      b(7, "aten::pow", {tensor("self", row(s, 5))}, "RsqrtBackward0"),
      b(8, "aten::mul", {tensor("self", r), tensor("other", r)}, "RsqrtBackward0"),
      b(9, "aten::div", {tensor("self", t)}, "MeanBackward1"),
      b(10, "aten::pow", {tensor("self", x(s, 0))}, "PowBackward0"),
      b(11, "aten::mul", {tensor("self", t), tensor("other", t)}, "PowBackward0"),
      b(12, "aten::add_", {tensor("self", t), tensor("other", t)}, "PowBackward0"),
  };
}

TEST(RmsNormBackward, DecomposedNormCostsTheFusedForwardAndBackwardOncePerNorm) {
  Step step;
  for (uint64_t layer = 0; layer < 2; ++layer) {
    for (OpRecord& r : forward(100 * layer, 1000 * (layer + 1))) step.ops.push_back(std::move(r));
  }
  const std::size_t forwards = step.ops.size();
  // Autograd runs the later norm's backward first.
  for (uint64_t layer = 2; layer-- > 0;) {
    for (OpRecord& r : backward(500 + 100 * layer, 1000 * (layer + 1), 9000 + layer)) {
      step.ops.push_back(std::move(r));
    }
  }
  const Predictor predictor(test::db());
  Step fused;
  fused.ops = {step.ops[0]};
  fused.ops[0].has_children = false;
  fused.ops.push_back(cuda_paths::fused_backward_op(step.ops[0]));
  const Forecast one = predictor.predict(fused, TraceOrigin{}, {"H100"});
  const double fwd = one.ops[0].share[0].time_us, bwd = one.ops[1].share[0].time_us;
  ASSERT_GT(fwd, 0);
  ASSERT_GT(bwd, 0);
  EXPECT_EQ(one.ops[1].cost.kernels, 2);  // input and weight gradients

  const Forecast f = predictor.predict(step, TraceOrigin{}, {"H100"});
  EXPECT_NEAR(f.ops[0].share[0].time_us, fwd, 1e-9 * fwd);  // not its decomposition's
  EXPECT_NEAR(backward_us(f, step), 2 * bwd, 1e-9 * bwd);
  // The first op of each run carries the fused backward; the rest launch nothing.
  for (std::size_t i = forwards; i < step.ops.size(); ++i) {
    const bool carrier = (i - forwards) % 13 == 0;
    const bool accumulate = (i - forwards) % 13 == 3;
    EXPECT_EQ(f.ops[i].cost.op_class, carrier ? OpClass::Norm : OpClass::NoKernel) << i;
    EXPECT_EQ(f.ops[i].share[0].time_us > 0, carrier) << i << (accumulate ? " (accumulate)" : "");
  }
}

TEST(RmsNormBackward, OpsAroundTheRunAndOfOtherShapesAreLeftAlone) {
  Step step;
  for (OpRecord& r : forward(0, 1000)) step.ops.push_back(std::move(r));
  const uint64_t grad = 9000;
  const TensorMeta g = on_storage(T({kB, kL, kC}), grad);
  // Before the run: the next layer's multiplication reads the norm's result (not its own).
  step.ops.push_back(op(50, "aten::mul", {tensor("self", g), tensor("other", x(1000, 7))},
                        Phase::Backward, std::nullopt, "MulBackward0"));
  const std::size_t first = step.ops.size();
  for (OpRecord& r : backward(100, 1000, grad)) step.ops.push_back(std::move(r));
  const std::size_t end = step.ops.size();
  // After it: a multiplication of the same node, of the norm's shape and of another shape.
  step.ops.push_back(op(200, "aten::mul", {tensor("self", T({kB, kL, kC})), tensor("other", g)},
                        Phase::Backward, std::nullopt, "MulBackward0"));
  step.ops.push_back(op(201, "aten::mul", {tensor("self", T({kB, kL, 4 * kC}))}, Phase::Backward,
                        std::nullopt, "MulBackward0"));
  const cuda_paths::FusedBackward got = cuda_paths::decomposed_rms_norm_backward(step, {0});
  ASSERT_EQ(got.carriers.size(), 1u);
  EXPECT_EQ(got.carriers[0], (std::pair<std::size_t, std::size_t>{first, 0}));
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const bool accumulate = step.ops[i].autograd_node == "torch::autograd::AccumulateGrad";
    EXPECT_EQ(got.pieces[i] != 0, i >= first && i < end && !accumulate) << i;
  }
  // Without its decomposition's storages (a norm traced before they were recorded), nothing.
  Step bare = step;
  for (OpRecord& r : bare.ops) {
    for (Argument& a : r.args) {
      for (TensorMeta& t : a.value.tensors) t.storage = 0;
    }
    for (TensorMeta& t : r.outputs) t.storage = 0;
  }
  const cuda_paths::FusedBackward none = cuda_paths::decomposed_rms_norm_backward(bare, {0});
  EXPECT_TRUE(none.carriers.empty());
  EXPECT_EQ(none.pieces, std::vector<char>(bare.ops.size(), 0));
}

TEST(RmsNormBackward, ARecomputedNormHasOneBackwardOnlyItsOwn) {
  // Activation checkpointing: the forward (storages from 1000), then its recomputation in the
  // backward (from 2000, the same weight), whose tensors the backward reads.
  Step step;
  for (OpRecord& r : forward(0, 1000)) step.ops.push_back(std::move(r));
  for (OpRecord& r : forward(100, 2000)) {
    r.phase = Phase::Backward;
    for (Argument& a : r.args) {
      for (TensorMeta& t : a.value.tensors) t.storage = t.storage == 2001 ? 1001 : t.storage;
    }
    step.ops.push_back(std::move(r));
  }
  const std::size_t first = step.ops.size();
  for (OpRecord& r : backward(500, 2000, 9000)) {
    for (Argument& a : r.args) {
      for (TensorMeta& t : a.value.tensors) t.storage = t.storage == 2001 ? 1001 : t.storage;
    }
    step.ops.push_back(std::move(r));
  }
  const cuda_paths::FusedBackward got = cuda_paths::decomposed_rms_norm_backward(step, {0, 7});
  ASSERT_EQ(got.carriers.size(), 1u);
  EXPECT_EQ(got.carriers[0], (std::pair<std::size_t, std::size_t>{first, 7}));
  for (std::size_t i = first; i < step.ops.size(); ++i) {
    const bool accumulate = step.ops[i].autograd_node == "torch::autograd::AccumulateGrad";
    EXPECT_EQ(got.pieces[i] != 0, !accumulate) << i;
  }
}

TEST(RmsNormBackward, WithoutAWeightTheRunBeginsWithTheInputsProduct) {
  // y = x * rstd: its backward multiplies the incoming gradient by x (for rstd's gradient) and
  // then by rstd; only the second reads a tensor of the norm's own, the first reads its input.
  const uint64_t s = 1000, grad = 9000;
  Step step;
  OpRecord norm = op(0, "aten::_fused_rms_norm",
                     {tensor("input", x(s, 0)), test::ints("normalized_shape", {kC}),
                      test::none("weight"), test::real("eps", 1e-6)},
                     Phase::Forward, std::nullopt, "", {x(s, 7), row(s, 5)});
  norm.has_children = true;
  step.ops = {norm, op(1, "aten::pow", {tensor("self", x(s, 0))}, Phase::Forward, 0, "", {x(s, 2)}),
              op(2, "aten::mean", {tensor("self", x(s, 2))}, Phase::Forward, 0, "", {row(s, 3)}),
              op(3, "aten::rsqrt", {tensor("self", row(s, 3))}, Phase::Forward, 0, "", {row(s, 5)}),
              op(4, "aten::mul", {tensor("self", x(s, 0)), tensor("other", row(s, 5))},
                 Phase::Forward, 0, "", {x(s, 7)})};
  const TensorMeta g = on_storage(T({kB, kL, kC}), grad);
  const auto b = [&](uint64_t id, std::vector<Argument> args, std::string node) {
    return op(id, "aten::mul", std::move(args), Phase::Backward, std::nullopt, std::move(node));
  };
  // The loss's own multiplication, then the norm's.
  step.ops.push_back(b(10, {tensor("self", on_storage(T({kB, kL, kC}), 8000))}, "MulBackward0"));
  step.ops.push_back(b(11, {tensor("self", g), tensor("other", x(s, 0))}, "MulBackward0"));
  step.ops.push_back(b(12, {tensor("self", g), tensor("other", row(s, 5))}, "MulBackward0"));
  step.ops.push_back(b(13, {tensor("self", row(s, 5))}, "RsqrtBackward0"));
  step.ops.push_back(b(14, {tensor("self", x(s, 0))}, "PowBackward0"));
  const cuda_paths::FusedBackward got = cuda_paths::decomposed_rms_norm_backward(step, {0});
  ASSERT_EQ(got.carriers.size(), 1u);
  EXPECT_EQ(got.carriers[0].first, 6u);
  EXPECT_EQ(got.pieces, (std::vector<char>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace habitat
