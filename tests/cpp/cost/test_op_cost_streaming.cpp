// Memory-bound op families: element-wise, reductions, norms, softmax, losses, copies,
// embeddings, views and unknown ops. Expected numbers are worked out in the comments.
#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "habitat/op_cost.h"

namespace habitat {
namespace {

using namespace habitat::test;

TEST(OpCostElementwise, BroadcastBinaryReadsEachInputAtItsOwnSize) {
  // [64,1] + [1,128] -> [64,128]: 8,192 adds; reads (64 + 128) * 4; writes 8,192 * 4.
  const auto rec =
      op("aten::add", "Tensor",
         {tensor("self", T({64, 1})), tensor("other", T({1, 128})), integer("alpha", 1)},
         {T({64, 128})});
  const OpCost c = estimate_cost(rec);
  EXPECT_EQ(c.op_class, OpClass::Elementwise);
  EXPECT_DOUBLE_EQ(c.flops, 8192);
  EXPECT_DOUBLE_EQ(c.bytes_read, 768);
  EXPECT_DOUBLE_EQ(c.bytes_written, 32768);
  EXPECT_EQ(c.precision, Precision::Fp32Simt);
  EXPECT_EQ(c.kernels, 1);
}

TEST(OpCostElementwise, ExpandedInputAndRepeatedInputAreReadOnce) {
  // other is a [128] bias expanded to [64,128] (stride 0 on dim 0): 128 elements in memory.
  TensorMeta expanded = T({64, 128});
  expanded.strides = {0, 1};
  const auto rec = op("aten::mul", "Tensor",
                      {tensor("self", T({64, 128})), tensor("other", expanded)}, {T({64, 128})});
  EXPECT_DOUBLE_EQ(estimate_cost(rec).bytes_read, (8192 + 128) * 4.0);

  // x * x: the same storage view is read once.
  const TensorMeta x = on_storage(T({1000}), 7);
  const auto square =
      op("aten::mul", "Tensor", {tensor("self", x), tensor("other", x)}, {T({1000})});
  EXPECT_DOUBLE_EQ(estimate_cost(square).bytes_read, 4000);
}

TEST(OpCostElementwise, InPlaceAndOutVariants) {
  // add_ returns self: reads self and other, writes self.
  const auto in_place =
      op("aten::add_", "Tensor",
         {tensor("self", T({256})), tensor("other", T({256})), integer("alpha", 1)});
  const OpCost a = estimate_cost(in_place);
  EXPECT_DOUBLE_EQ(a.flops, 256);
  EXPECT_DOUBLE_EQ(a.bytes_read, 2048);
  EXPECT_DOUBLE_EQ(a.bytes_written, 1024);
  // gelu.out: the out= tensor is only written.
  const auto out = op(
      "aten::gelu", "out",
      {tensor("self", T({256})), text("approximate", "none"), tensor("out", T({256}))}, {T({256})});
  const OpCost g = estimate_cost(out);
  EXPECT_DOUBLE_EQ(g.flops, 256 * 5.0);
  EXPECT_DOUBLE_EQ(g.bytes_read, 1024);
  EXPECT_DOUBLE_EQ(g.bytes_written, 1024);
}

TEST(OpCostElementwise, Float64RunsOnFp64Units) {
  const auto rec = op("aten::mul", "Tensor",
                      {tensor("self", T({10}, "float64")), tensor("other", T({10}, "float64"))},
                      {T({10}, "float64")});
  EXPECT_EQ(estimate_cost(rec).precision, Precision::Fp64);
}

TEST(OpCostElementwise, MaxOfTwoTensorsIsElementwiseButMaxOverDimIsAReduction) {
  const auto binary =
      op("aten::max", "other", {tensor("self", T({100})), tensor("other", T({100}))}, {T({100})});
  EXPECT_EQ(estimate_cost(binary).op_class, OpClass::Elementwise);
  const auto reduce =
      op("aten::max", "dim",
         {tensor("self", T({100, 10})), integer("dim", 1), boolean("keepdim", false)},
         {T({100}), T({100}, "int64")});
  const OpCost r = estimate_cost(reduce);
  EXPECT_EQ(r.op_class, OpClass::Reduction);
  EXPECT_DOUBLE_EQ(r.bytes_written, 100 * 4.0 + 100 * 8.0);  // values and indices
}

TEST(OpCostElementwise, DropoutAndFactories) {
  // native_dropout over 1,000 floats: 3 FLOPs each; writes the output and a bool mask.
  const auto drop = op("aten::native_dropout", "",
                       {tensor("input", T({1000})), real("p", 0.1), boolean("train", true)},
                       {T({1000}), T({1000}, "bool")});
  const OpCost d = estimate_cost(drop);
  EXPECT_DOUBLE_EQ(d.flops, 3000);
  EXPECT_DOUBLE_EQ(d.bytes_read, 4000);
  EXPECT_DOUBLE_EQ(d.bytes_written, 5000);
  // aten::dropout in eval mode returns its input.
  const auto eval =
      op("aten::dropout", "", {tensor("input", T({1000})), real("p", 0.1), boolean("train", false)},
         {T({1000})});
  EXPECT_EQ(estimate_cost(eval).op_class, OpClass::NoKernel);

  // zeros_like reads nothing (its argument gives the shape) and writes 100 floats.
  const auto zeros = op("aten::zeros_like", "", {tensor("self", T({10, 10}))}, {T({10, 10})});
  const OpCost z = estimate_cost(zeros);
  EXPECT_EQ(z.op_class, OpClass::Elementwise);
  EXPECT_DOUBLE_EQ(z.flops, 0);
  EXPECT_DOUBLE_EQ(z.bytes_read, 0);
  EXPECT_DOUBLE_EQ(z.bytes_written, 400);
  EXPECT_EQ(z.kernels, 1);
  // normal_ overwrites self without reading it.
  const auto normal =
      op("aten::normal_", "",
         {tensor("self", T({10})), real("mean", 0), real("std", 1), none("generator")});
  const OpCost n = estimate_cost(normal);
  EXPECT_DOUBLE_EQ(n.bytes_read, 0);
  EXPECT_DOUBLE_EQ(n.bytes_written, 40);
}

TEST(OpCostElementwise, EmptyTensorsLaunchNothing) {
  const auto rec = op("aten::relu", "", {tensor("self", T({0, 16}))}, {T({0, 16})});
  const OpCost c = estimate_cost(rec);
  EXPECT_EQ(c.op_class, OpClass::Elementwise);
  EXPECT_EQ(c.kernels, 0);
}

TEST(OpCostReduction, SumOverDimsWithKeepdim) {
  // sum([32,64,128], dim=[1,2], keepdim) -> [32,1,1]: 262,144 adds; reads 1 MiB; writes 128 B.
  std::vector<Argument> args = {tensor("self", T({32, 64, 128})), ints("dim", {1, -1}),
                                boolean("keepdim", true), none("dtype")};
  const OpCost c = estimate_cost(op("aten::sum", "dim_IntList", args, {T({32, 1, 1})}));
  EXPECT_EQ(c.op_class, OpClass::Reduction);
  EXPECT_DOUBLE_EQ(c.flops, 262144);
  EXPECT_DOUBLE_EQ(c.bytes_read, 1048576);
  EXPECT_DOUBLE_EQ(c.bytes_written, 128);
  // Without an output the kept size follows from dim (-1 is dim 2).
  EXPECT_DOUBLE_EQ(estimate_cost(op("aten::sum", "dim_IntList", args)).bytes_written, 128);
  // mean adds one divide per output: 262,144 + 32.
  EXPECT_DOUBLE_EQ(estimate_cost(op("aten::mean", "dim", args, {T({32, 1, 1})})).flops, 262176);
  // No dim: everything reduces to one element.
  const OpCost all = estimate_cost(op("aten::sum", "", {tensor("self", T({32, 64, 128}))}));
  EXPECT_DOUBLE_EQ(all.bytes_written, 4);
}

TEST(OpCostReduction, VectorNormDependsOnOrder) {
  // L2 over 1,000 elements: square + add each (2,000) and one sqrt.
  auto norm = [](double ord) {
    return op("aten::linalg_vector_norm", "",
              {tensor("self", T({1000})), real("ord", ord), none("dim"), boolean("keepdim", false),
               none("dtype")},
              {T({})});
  };
  EXPECT_DOUBLE_EQ(estimate_cost(norm(2)).flops, 2001);
  EXPECT_DOUBLE_EQ(estimate_cost(norm(1)).flops, 2000);
  EXPECT_DOUBLE_EQ(estimate_cost(norm(3)).flops, 3001);
}

TEST(OpCostReduction, TopkReadsItsInputOncePerRadixDigitAndOnceToGather) {
  // A router's top-2 of 8 expert scores for 1024 tokens: fp32 keys take 4 digit passes and a
  // gather over 32 KiB; it writes 2 values and 2 int64 indices per token.
  const auto topk = [](const std::string& dtype) {
    return op("aten::topk", "",
              {tensor("self", T({1024, 8}, dtype)), integer("k", 2), integer("dim", -1)},
              {T({1024, 2}, dtype), T({1024, 2}, "int64")});
  };
  const OpCost f = estimate_cost(topk("float32"));
  EXPECT_EQ(f.op_class, OpClass::Reduction);
  EXPECT_DOUBLE_EQ(f.bytes_read, 5 * 1024 * 8 * 4);
  EXPECT_DOUBLE_EQ(f.bytes_written, 1024 * 2 * (4 + 8));
  EXPECT_EQ(f.kernels, 1);
  // bf16 keys: two digit passes.
  EXPECT_DOUBLE_EQ(estimate_cost(topk("bfloat16")).bytes_read, 3 * 1024 * 8 * 2);
}

TEST(OpCostPool, MaxPoolForwardAndBackward) {
  // [4,8,8,8] -> [4,8,4,4] with 2x2 windows: 512 outputs * 4 compares = 2,048 FLOPs.
  const auto fwd =
      op("aten::max_pool2d_with_indices", "",
         {tensor("self", T({4, 8, 8, 8})), ints("kernel_size", {2}), ints("stride", {2}),
          ints("padding", {0}), ints("dilation", {1}), boolean("ceil_mode", false)},
         {T({4, 8, 4, 4}), T({4, 8, 4, 4}, "int64")});
  const OpCost f = estimate_cost(fwd);
  EXPECT_EQ(f.op_class, OpClass::Reduction);
  EXPECT_DOUBLE_EQ(f.flops, 2048);
  EXPECT_DOUBLE_EQ(f.bytes_written, 512 * 4.0 + 512 * 8.0);  // values and int64 indices
  // Backward reads grad_output and the indices; self only gives the shape.
  const auto bwd = op(
      "aten::max_pool2d_with_indices_backward", "",
      {tensor("grad_output", T({4, 8, 4, 4})), tensor("self", T({4, 8, 8, 8})),
       ints("kernel_size", {2}), ints("stride", {2}), ints("padding", {0}), ints("dilation", {1}),
       boolean("ceil_mode", false), tensor("indices", T({4, 8, 4, 4}, "int64"))},
      {T({4, 8, 8, 8})});
  const OpCost b = estimate_cost(bwd);
  EXPECT_DOUBLE_EQ(b.bytes_read, 2048 + 4096);
  // CUDA zero-fills the input gradient, then the kernel writes it: two writes, two kernels.
  EXPECT_DOUBLE_EQ(b.bytes_written, 2 * 2048 * 4.0);
  EXPECT_EQ(b.kernels, 2);
  // Average pooling's backward writes each input gradient once (no fill).
  const auto avg = op(
      "aten::avg_pool2d_backward", "",
      {tensor("grad_output", T({4, 8, 4, 4})), tensor("self", T({4, 8, 8, 8})),
       ints("kernel_size", {2}), ints("stride", {2}), ints("padding", {0}),
       boolean("ceil_mode", false), boolean("count_include_pad", true), none("divisor_override")},
      {T({4, 8, 8, 8})});
  EXPECT_DOUBLE_EQ(estimate_cost(avg).bytes_written, 2048 * 4.0);
}

TEST(OpCostPool, AWindowLargerThanItsInputReadsTheInputOnce) {
  // Hugging Face's EfficientNet head: AvgPool2d(1280, ceil_mode=True) over a 7x7 map. The CUDA
  // kernels clip each window to the input: 49 additions per output, not 1280 x 1280.
  const auto fwd =
      op("aten::avg_pool2d", "",
         {tensor("self", T({16, 1280, 7, 7})), ints("kernel_size", {1280, 1280}),
          ints("stride", {1280, 1280}), ints("padding", {0}), boolean("ceil_mode", true),
          boolean("count_include_pad", true), none("divisor_override")},
         {T({16, 1280, 1, 1})});
  EXPECT_DOUBLE_EQ(estimate_cost(fwd).flops, 16 * 1280 * 49.0);
  const auto bwd =
      op("aten::avg_pool2d_backward", "",
         {tensor("grad_output", T({16, 1280, 1, 1})), tensor("self", T({16, 1280, 7, 7})),
          ints("kernel_size", {1280}), ints("stride", {1280}), ints("padding", {0}),
          boolean("ceil_mode", true), boolean("count_include_pad", true), none("divisor_override")},
         {T({16, 1280, 7, 7})});
  EXPECT_DOUBLE_EQ(estimate_cost(bwd).flops, 16 * 1280 * 49.0);
  // A window inside its input keeps its size: 3x3 on 8x8.
  const auto small = op("aten::avg_pool2d", "",
                        {tensor("self", T({1, 2, 8, 8})), ints("kernel_size", {3}),
                         ints("stride", {1}), ints("padding", {1})},
                        {T({1, 2, 8, 8})});
  EXPECT_DOUBLE_EQ(estimate_cost(small).flops, 128 * 9.0);
}

OpRecord layer_norm_backward(std::vector<int64_t> mask) {
  const TensorMeta x = T({8, 512, 768});
  return op("aten::native_layer_norm_backward", "",
            {tensor("grad_out", x), tensor("input", x), ints("normalized_shape", {768}),
             tensor("mean", T({8, 512, 1})), tensor("rstd", T({8, 512, 1})),
             tensor("weight", T({768})), tensor("bias", T({768})), bools("output_mask", mask)},
            {x, T({768}), T({768})});
}

TEST(OpCostNorm, LayerNormForwardAndBackward) {
  // [8,512,768] = 3,145,728 elements with weight and bias: (6 + 2) FLOPs each.
  const TensorMeta x = T({8, 512, 768});
  const auto fwd = op("aten::native_layer_norm", "",
                      {tensor("input", x), ints("normalized_shape", {768}),
                       tensor("weight", T({768})), tensor("bias", T({768})), real("eps", 1e-5)},
                      {x, T({8, 512, 1}), T({8, 512, 1})});
  const OpCost f = estimate_cost(fwd);
  EXPECT_EQ(f.op_class, OpClass::Norm);
  EXPECT_DOUBLE_EQ(f.flops, 25165824);
  EXPECT_DOUBLE_EQ(f.bytes_read, 12582912 + 2 * 3072);      // x, weight, bias
  EXPECT_DOUBLE_EQ(f.bytes_written, 12582912 + 2 * 16384);  // y, mean, rstd
  EXPECT_EQ(f.kernels, 1);

  // All three gradients: (10 + 2 + 1) per element, two kernels (input; weight and bias).
  const OpCost all = estimate_cost(layer_norm_backward({1, 1, 1}));
  EXPECT_DOUBLE_EQ(all.flops, 13 * 3145728.0);
  EXPECT_EQ(all.kernels, 2);
  const OpCost input_only = estimate_cost(layer_norm_backward({1, 0, 0}));
  EXPECT_DOUBLE_EQ(input_only.flops, 10 * 3145728.0);
  EXPECT_EQ(input_only.kernels, 1);
}

TEST(OpCostNorm, BatchNormTrainingComputesStatisticsInferenceDoesNot) {
  const TensorMeta x = T({16, 64, 8, 8});  // 65,536 elements
  auto bn = [&](bool training) {
    return op("aten::native_batch_norm", "",
              {tensor("input", x), tensor("weight", T({64})), tensor("bias", T({64})),
               tensor("running_mean", T({64})), tensor("running_var", T({64})),
               boolean("training", training), real("momentum", 0.1), real("eps", 1e-5)},
              {x, T({64}), T({64})});
  };
  EXPECT_DOUBLE_EQ(estimate_cost(bn(true)).flops, 65536 * 8.0);
  EXPECT_EQ(estimate_cost(bn(true)).kernels, 3);  // statistics, their finalisation, normalise
  EXPECT_DOUBLE_EQ(estimate_cost(bn(false)).flops, 65536 * 4.0);
  EXPECT_EQ(estimate_cost(bn(false)).kernels, 1);
}

TEST(OpCostNorm, NativeBatchNormReadsItsInputTwiceCudnnOnce) {
  // PyTorch's native CUDA kernels make a statistics pass and a normalisation pass over x;
  // cuDNN's training kernel reads it once.
  const TensorMeta x = T({16, 64, 8, 8}, "bfloat16");  // 65,536 elements, 128 KiB
  const std::vector<Argument> args{tensor("input", x),
                                   tensor("weight", T({64})),
                                   tensor("bias", T({64})),
                                   tensor("running_mean", T({64})),
                                   tensor("running_var", T({64})),
                                   boolean("training", true),
                                   real("momentum", 0.1),
                                   real("eps", 1e-5)};
  const std::vector<TensorMeta> outs{x, T({64}), T({64})};
  const OpCost native = estimate_cost(op("aten::native_batch_norm", "", args, outs));
  const OpCost cudnn = estimate_cost(op("aten::cudnn_batch_norm", "", args, outs));
  const double params = 4 * 64 * 4.0;
  EXPECT_DOUBLE_EQ(native.bytes_read, 2 * 131072 + params);
  EXPECT_DOUBLE_EQ(cudnn.bytes_read, 131072 + params);
  EXPECT_EQ(cudnn.kernels, 1);
  // The dispatching wrappers never cost more than the cheapest backend, so the backend op
  // under them decides.
  const OpCost wrapper = estimate_cost(op("aten::_batch_norm_impl_index", "", args, outs));
  EXPECT_DOUBLE_EQ(wrapper.bytes_read, cudnn.bytes_read);
}

TEST(OpCostNorm, NativeBatchNormBackwardReadsXAndDyTwiceInTraining) {
  const TensorMeta x = T({16, 64, 8, 8}, "bfloat16");  // 128 KiB
  auto bwd = [&](bool train, std::vector<int64_t> mask) {
    return op("aten::native_batch_norm_backward", "",
              {tensor("grad_out", x), tensor("input", x), tensor("weight", T({64})),
               tensor("running_mean", T({64})), tensor("running_var", T({64})),
               tensor("save_mean", T({64})), tensor("save_invstd", T({64})),
               boolean("train", train), real("eps", 1e-5), bools("output_mask", std::move(mask))},
              {x, T({64}), T({64})});
  };
  const double params = 5 * 64 * 4.0;
  // Reduce pass (x, dy), then the element-wise input gradient (x, dy again).
  EXPECT_DOUBLE_EQ(estimate_cost(bwd(true, {1, 1, 1})).bytes_read, 4 * 131072 + params);
  // Inference statistics: no batch-statistics gradient, one pass.
  EXPECT_DOUBLE_EQ(estimate_cost(bwd(false, {1, 1, 1})).bytes_read, 2 * 131072 + params);
  // Weight and bias gradients only: the reduce pass alone.
  EXPECT_DOUBLE_EQ(estimate_cost(bwd(true, {0, 1, 1})).bytes_read, 2 * 131072 + params);
}

TEST(OpCostSoftmax, ForwardAndBackward) {
  const auto fwd =
      op("aten::_softmax", "",
         {tensor("self", T({16, 1024})), integer("dim", -1), boolean("half_to_float", false)},
         {T({16, 1024})});
  const OpCost f = estimate_cost(fwd);
  EXPECT_EQ(f.op_class, OpClass::Softmax);
  EXPECT_DOUBLE_EQ(f.flops, 5 * 16384.0);
  const auto bwd = op("aten::_softmax_backward_data", "",
                      {tensor("grad_output", T({16, 1024})), tensor("output", T({16, 1024})),
                       integer("dim", -1), text("input_dtype", "float32")},
                      {T({16, 1024})});
  const OpCost b = estimate_cost(bwd);
  EXPECT_DOUBLE_EQ(b.flops, 4 * 16384.0);
  // CUDA's mul of g and y first (written, then read back with y): two kernels, six passes.
  EXPECT_DOUBLE_EQ(b.bytes_read, 4 * 65536.0);
  EXPECT_DOUBLE_EQ(b.bytes_written, 2 * 65536.0);
  EXPECT_EQ(b.kernels, 2);
  auto log_bwd = bwd;
  log_bwd.name = "aten::_log_softmax_backward_data";
  const OpCost l = estimate_cost(log_bwd);
  EXPECT_DOUBLE_EQ(l.bytes_read + l.bytes_written, 3 * 65536.0);
  EXPECT_EQ(l.kernels, 1);
}

TEST(OpCostEmbedding, GathersRowsNotTheTable) {
  // 50,000 x 512 table, [8,128] int64 indices -> [8,128,512]: reads 1,024 rows of 2 KiB and
  // 8 KiB of indices, not the 100 MB table.
  const auto fwd = op(
      "aten::embedding", "",
      {tensor("weight", T({50000, 512})), tensor("indices", T({8, 128}, "int64")),
       integer("padding_idx", -1), boolean("scale_grad_by_freq", false), boolean("sparse", false)},
      {T({8, 128, 512})});
  const OpCost f = estimate_cost(fwd);
  EXPECT_EQ(f.op_class, OpClass::Embedding);
  EXPECT_DOUBLE_EQ(f.bytes_read, 2097152 + 8192);
  EXPECT_DOUBLE_EQ(f.bytes_written, 2097152);
  EXPECT_DOUBLE_EQ(f.flops, 0);

  auto bwd = [](int64_t tokens) {
    return op("aten::embedding_dense_backward", "",
              {tensor("grad_output", T({tokens, 512})), tensor("indices", T({tokens}, "int64")),
               integer("num_weights", 50000), integer("padding_idx", -1),
               boolean("scale_grad_by_freq", false)},
              {T({50000, 512})});
  };
  const OpCost small = estimate_cost(bwd(1024));
  EXPECT_DOUBLE_EQ(small.flops, 1024 * 512.0);
  EXPECT_DOUBLE_EQ(small.bytes_written, 50000 * 512 * 4.0);
  EXPECT_EQ(small.kernels, 2);                      // zero-fill + atomic accumulation
  EXPECT_EQ(estimate_cost(bwd(4096)).kernels, 14);  // sort-and-segment path
}

TEST(OpCostLoss, NllLossGathersOneElementPerTarget) {
  // [32,1000] log-probabilities, 32 int64 targets: reads 32*4 + 32*8 bytes, 2 FLOPs per target.
  const auto fwd = op("aten::nll_loss_forward", "",
                      {tensor("self", T({32, 1000})), tensor("target", T({32}, "int64")),
                       none("weight"), integer("reduction", 1), integer("ignore_index", -100)},
                      {T({}), T({})});
  const OpCost f = estimate_cost(fwd);
  EXPECT_EQ(f.op_class, OpClass::Loss);
  EXPECT_DOUBLE_EQ(f.flops, 64);
  EXPECT_DOUBLE_EQ(f.bytes_read, 384);
  EXPECT_DOUBLE_EQ(f.bytes_written, 8);

  // mse_loss with mean: 3 FLOPs per element, point-wise + reduction kernels.
  const auto mse =
      op("aten::mse_loss", "",
         {tensor("self", T({100})), tensor("target", T({100})), integer("reduction", 1)}, {T({})});
  const OpCost m = estimate_cost(mse);
  EXPECT_DOUBLE_EQ(m.flops, 300);
  EXPECT_DOUBLE_EQ(m.bytes_read, 800);
  EXPECT_EQ(m.kernels, 2);
}

TEST(OpCostCopy, CastCopyAndItem) {
  // copy_ of 100 float32 into a bfloat16 tensor: reads 400 B, writes 200 B.
  const auto cast = op("aten::copy_", "",
                       {tensor("self", T({100}, "bfloat16")), tensor("src", T({100})),
                        boolean("non_blocking", false)},
                       {T({100}, "bfloat16")});
  const OpCost c = estimate_cost(cast);
  EXPECT_EQ(c.op_class, OpClass::Copy);
  EXPECT_DOUBLE_EQ(c.bytes_read, 400);
  EXPECT_DOUBLE_EQ(c.bytes_written, 200);

  const auto item = op("aten::_local_scalar_dense", "", {tensor("self", T({}))});
  const OpCost i = estimate_cost(item);
  EXPECT_EQ(i.op_class, OpClass::Copy);
  EXPECT_DOUBLE_EQ(i.bytes(), 8);
  EXPECT_EQ(i.kernels, 1);
}

TEST(OpCostCopy, IndexSelectReadsTheSelectedRows) {
  // 10 rows of [1000,64] float32 via an int64 index: 10*64*4 + 10*8 bytes read.
  const auto rec =
      op("aten::index_select", "",
         {tensor("self", T({1000, 64})), integer("dim", 0), tensor("index", T({10}, "int64"))},
         {T({10, 64})});
  const OpCost c = estimate_cost(rec);
  EXPECT_DOUBLE_EQ(c.bytes_read, 2560 + 80);
  EXPECT_DOUBLE_EQ(c.bytes_written, 2560);
}

TEST(OpCostViews, ViewsMoveNothing) {
  const auto view =
      op("aten::view", "", {tensor("self", T({4, 8})), ints("size", {32})}, {T({32})});
  const OpCost v = estimate_cost(view);
  EXPECT_EQ(v.op_class, OpClass::NoKernel);
  EXPECT_DOUBLE_EQ(v.bytes(), 0);
  EXPECT_DOUBLE_EQ(v.flops, 0);
  EXPECT_EQ(v.kernels, 0);
  for (const char* name : {"aten::transpose", "aten::expand", "aten::detach", "aten::empty_strided",
                           "aten::split", "aten::resize_"}) {
    EXPECT_EQ(estimate_cost(op(name, "", {tensor("self", T({4, 8}))}, {T({4, 8})})).op_class,
              OpClass::NoKernel)
        << name;
  }
}

TEST(OpCostViews, BackendQueriesLaunchNothing) {
  // aten::lstm asks cudnn_is_acceptable(input) before choosing a path: a bool from the
  // tensor's metadata, which used to be costed as an unknown op from its input's bytes.
  for (const char* name :
       {"aten::cudnn_is_acceptable", "aten::is_pinned", "aten::_fused_sdp_choice"}) {
    const OpCost c = estimate_cost(op(name, "", {tensor("self", T({32, 128, 512}))}, {}));
    EXPECT_EQ(c.op_class, OpClass::NoKernel) << name;
    EXPECT_EQ(c.kernels, 0) << name;
  }
}

TEST(OpCostViews, ReshapeCopiesWhenTheRecordShowsNewStorage) {
  TensorMeta transposed = on_storage(T({8, 4}), 1);
  transposed.strides = {1, 8};
  transposed.contiguous = false;
  // Output on the same storage: a view.
  const auto view = op("aten::_unsafe_view", "", {tensor("self", on_storage(T({4, 8}), 1))},
                       {on_storage(T({32}), 1)});
  EXPECT_EQ(estimate_cost(view).op_class, OpClass::NoKernel);
  // Output on new storage: the data was copied.
  const auto copy = op("aten::reshape", "", {tensor("self", transposed), ints("shape", {32})},
                       {on_storage(T({32}), 2)});
  const OpCost c = estimate_cost(copy);
  EXPECT_EQ(c.op_class, OpClass::Copy);
  EXPECT_DOUBLE_EQ(c.bytes(), 256);
  // No storage ids: a non-contiguous input to contiguous() is copied, a contiguous one is not.
  transposed.storage = 0;
  EXPECT_EQ(
      estimate_cost(op("aten::contiguous", "", {tensor("self", transposed)}, {T({8, 4})})).op_class,
      OpClass::Copy);
  EXPECT_EQ(
      estimate_cost(op("aten::contiguous", "", {tensor("self", T({8, 4}))}, {T({8, 4})})).op_class,
      OpClass::NoKernel);
}

TEST(OpCostUnknown, UnmodelledOpsAreFlaggedNotFree) {
  const OpCost c =
      estimate_cost(op("aten::_some_future_op", "", {tensor("self", T({10}))}, {T({10})}));
  EXPECT_EQ(c.op_class, OpClass::Unknown);
  EXPECT_FALSE(c.known());
  EXPECT_FALSE(estimate_cost(op("mylib::custom_kernel", "", {})).known());
  EXPECT_STREQ(to_string(OpClass::Unknown), "unknown");
  EXPECT_STREQ(to_string(OpClass::NoKernel), "no_kernel");
}

TEST(OpCost, ArithmeticIntensity) {
  OpCost c;
  c.flops = 100;
  c.bytes_read = 30;
  c.bytes_written = 20;
  EXPECT_DOUBLE_EQ(c.arithmetic_intensity(), 2.0);
  c.bytes_read = c.bytes_written = 0;
  EXPECT_DOUBLE_EQ(c.arithmetic_intensity(), 0.0);
}

}  // namespace
}  // namespace habitat
