// _foreach_* and fused optimizer costs, including multi_tensor_apply's kernel packing.
#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "habitat/op_cost.h"

namespace habitat {
namespace {

using namespace habitat::test;

std::vector<TensorMeta> metas(std::vector<int64_t> sizes) {
  std::vector<TensorMeta> out;
  for (int64_t n : sizes) out.push_back(T({n}));
  return out;
}

TEST(OpCostForeach, InPlaceAddOverAList) {
  // self and other hold [1000], [200000], [0]: 201,000 adds; reads both lists
  // (2 * 201,000 * 4 B), writes self (804,000 B). Blocks: 1 + ceil(200000 / 65536) = 5, far
  // below one launch's 320 blocks and 64 tensors: one kernel.
  const auto rec = op("aten::_foreach_add_", "List",
                      {tensors("self", metas({1000, 200000, 0})),
                       tensors("other", metas({1000, 200000, 0})), integer("alpha", 1)});
  const OpCost c = estimate_cost(rec);
  EXPECT_EQ(c.op_class, OpClass::Optimizer);
  EXPECT_DOUBLE_EQ(c.flops, 201000);
  EXPECT_DOUBLE_EQ(c.bytes_read, 1608000);
  EXPECT_DOUBLE_EQ(c.bytes_written, 804000);
  EXPECT_EQ(c.kernels, 1);
}

TEST(OpCostForeach, KernelsFollowMultiTensorApplyLimits) {
  // _foreach_zero_ (one list): 1,000 small tensors fill the 110-tensor table 9 times: 10
  // launches.
  std::vector<int64_t> small(1000, 10);
  const OpCost zero =
      estimate_cost(op("aten::_foreach_zero_", "", {tensors("self", metas(small))}));
  EXPECT_EQ(zero.kernels, 10);
  EXPECT_DOUBLE_EQ(zero.bytes_read, 0);  // zero_ does not read what it overwrites
  EXPECT_DOUBLE_EQ(zero.bytes_written, 40000);

  // Three tensors of 1,000 chunks each: 3,000 blocks fill the 320-block table 9 times: 10
  // launches.
  const int64_t big = 1000 * 65536;
  const OpCost mul =
      estimate_cost(op("aten::_foreach_mul_", "Scalar",
                       {tensors("self", metas({big, big, big})), real("scalar", 0.9)}));
  EXPECT_EQ(mul.kernels, 10);
  EXPECT_DOUBLE_EQ(mul.flops, 3.0 * big);

  // Out-of-place sqrt adds an output list (depth 2: 64 tensors per launch): 1,000 tensors
  // -> 16 launches.
  const OpCost sqrt_op =
      estimate_cost(op("aten::_foreach_sqrt", "", {tensors("self", metas(small))}, metas(small)));
  EXPECT_EQ(sqrt_op.kernels, 16);
  EXPECT_DOUBLE_EQ(sqrt_op.bytes_written, 40000);
}

TEST(OpCostForeach, LaunchesAsTheRecordedHopperStepsRanThem) {
  // AdamW's update expressions over MobileNetV3-Large's 174 parameter tensors (torch 2.11,
  // CUDA 13, H100 and H200: benchmarks/results/real-models-gpu): mul_ (one list) 2 launches,
  // lerp_ and sqrt (two lists) 3, addcmul_ (three) 4, div_ by a scalar list 2. Small tensors
  // here, so the tensor tables (110 / 64 / 48 / 96) decide, as they did there.
  const auto params = metas(std::vector<int64_t>(174, 960));
  const auto kernels = [](const OpRecord& o) { return estimate_cost(o).kernels; };
  EXPECT_EQ(
      kernels(op("aten::_foreach_mul_", "Scalar", {tensors("self", params), real("scalar", 0.9)})),
      2);
  EXPECT_EQ(
      kernels(op("aten::_foreach_lerp_", "Scalar",
                 {tensors("self", params), tensors("tensors1", params), real("weight", 0.1)})),
      3);
  EXPECT_EQ(kernels(op("aten::_foreach_sqrt", "", {tensors("self", params)}, params)), 3);
  EXPECT_EQ(kernels(op("aten::_foreach_addcmul_", "Scalar",
                       {tensors("self", params), tensors("tensor1", params),
                        tensors("tensor2", params), real("value", 0.001)})),
            4);
  // GPT-2 small's 148 tensors (124M parameters, 1,995 chunks) over 320-block tables: 7
  // launches of mul_, as recorded.
  std::vector<int64_t> gpt2{38597376, 786432};  // token and position embeddings
  for (int layer = 0; layer < 12; ++layer) {
    for (int64_t n :
         {768, 768, 1769472, 2304, 589824, 768, 768, 768, 2359296, 3072, 2359296, 768}) {
      gpt2.push_back(n);
    }
  }
  gpt2.insert(gpt2.end(), {768, 768});  // the final layer norm
  ASSERT_EQ(gpt2.size(), 148u);
  EXPECT_EQ(kernels(op("aten::_foreach_mul_", "Scalar",
                       {tensors("self", metas(gpt2)), real("scalar", 0.9)})),
            7);
}

TEST(OpCostForeach, NormIsAReductionPerTensorPlusCleanup) {
  const auto rec =
      op("aten::_foreach_norm", "Scalar",
         {tensors("self", metas({100, 300})), integer("ord", 2), none("dtype")}, {T({}), T({})});
  const OpCost c = estimate_cost(rec);
  EXPECT_DOUBLE_EQ(c.flops, 800);  // square + add per element
  EXPECT_DOUBLE_EQ(c.bytes_written, 8);
  EXPECT_EQ(c.kernels, 2);
}

OpRecord fused_adamw(bool amsgrad, double weight_decay) {
  const auto lists = metas({1000, 24});
  return op("aten::_fused_adamw_", "",
            {tensors("self", lists), tensors("grads", lists), tensors("exp_avgs", lists),
             tensors("exp_avg_sqs", lists),
             tensors("max_exp_avg_sqs", amsgrad ? lists : std::vector<TensorMeta>{}),
             tensors("state_steps", {T({}), T({})}), real("lr", 1e-3), real("beta1", 0.9),
             real("beta2", 0.999), real("weight_decay", weight_decay), real("eps", 1e-8),
             boolean("amsgrad", amsgrad), boolean("maximize", false), none("grad_scale"),
             none("found_inf")});
}

TEST(OpCostFused, AdamWStep) {
  // 1,024 parameters: 13 FLOPs of Adam + 1 of decoupled weight decay each = 14,336.
  // Reads params, grads, exp_avg, exp_avg_sq (4 * 4,096 B) and two float32 steps (8 B);
  // writes params, exp_avg, exp_avg_sq (3 * 4,096 B). One launch (depth 4).
  const OpCost c = estimate_cost(fused_adamw(false, 0.01));
  EXPECT_EQ(c.op_class, OpClass::Optimizer);
  EXPECT_DOUBLE_EQ(c.flops, 14336);
  EXPECT_DOUBLE_EQ(c.bytes_read, 16392);
  EXPECT_DOUBLE_EQ(c.bytes_written, 12288);
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.precision, Precision::Fp32Simt);

  // amsgrad reads and writes max_exp_avg_sq too and adds a max per element.
  const OpCost ams = estimate_cost(fused_adamw(true, 0.0));
  EXPECT_DOUBLE_EQ(ams.flops, 14 * 1024.0);
  EXPECT_DOUBLE_EQ(ams.bytes_read, 16392 + 4096);
  EXPECT_DOUBLE_EQ(ams.bytes_written, 4 * 4096.0);
}

TEST(OpCostFused, SgdWithMomentum) {
  // p -= lr * buf (2) + buf = m * buf + (1 - d) * g (3) per element; reads p, g, buf; writes
  // p, buf.
  const auto lists = metas({500});
  const auto rec =
      op("aten::_fused_sgd_", "",
         {tensors("self", lists), tensors("grads", lists), tensors("momentum_buffer_list", lists),
          real("weight_decay", 0), real("momentum", 0.9), real("lr", 0.1), real("dampening", 0),
          boolean("nesterov", false), boolean("maximize", false), boolean("is_first_step", false),
          none("grad_scale"), none("found_inf")});
  const OpCost c = estimate_cost(rec);
  EXPECT_DOUBLE_EQ(c.flops, 2500);
  EXPECT_DOUBLE_EQ(c.bytes_read, 6000);
  EXPECT_DOUBLE_EQ(c.bytes_written, 4000);
}

}  // namespace
}  // namespace habitat
