#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "predict/loss_kernels.h"
#include "predict/test_structure_models.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::db;
using test::integer;
using test::T;
using test::tensor;

OpRecord nll_loss(bool forward, int64_t samples, int64_t classes, int64_t reduction = 1,
                  const char* dtype = "float32") {
  OpRecord op;
  op.name = forward ? "aten::nll_loss_forward" : "aten::nll_loss_backward";
  if (!forward) op.args.push_back(tensor("grad_output", T({}, dtype)));
  op.args.push_back(tensor("self", T({samples, classes}, dtype)));
  op.args.push_back(tensor("target", T({samples}, "int64")));
  op.args.push_back(integer("reduction", reduction));
  op.outputs = {forward ? T({}, dtype) : T({samples, classes}, dtype)};
  return op;
}

double us(const OpRecord& op, const char* gpu = "H100-SXM5-80GB") {
  return test::structure_us(nll_loss_kernels_us, op, gpu);
}

TEST(LossKernels, TheForwardIsOneBlockWalkingTheSamples) {
  // 64042 samples over 1024 threads: 63 dependent steps; CUPTI on an H100 measured 36.9 us
  // (families collection, fp32, 28 classes), whatever the bytes.
  EXPECT_NEAR(us(nll_loss(true, 64042, 28)), 36.9, 0.25 * 36.9);
  EXPECT_NEAR(us(nll_loss(true, 64042, 28)), us(nll_loss(true, 64042, 50000)), 1e-9);
  // Up to 16384 samples the block grows with them (N / 16 threads): about 16 steps each.
  EXPECT_NEAR(us(nll_loss(true, 4096, 50257)), us(nll_loss(true, 16384, 50257)), 1.0);
  EXPECT_LT(us(nll_loss(true, 16, 10)), us(nll_loss(true, 512, 10)));
}

TEST(LossKernels, TheBackwardAddsItsZeroFillOfTheInputGradient) {
  // 35136 x 4132 fp32: a 581 MB fill; 221 us measured on an H100.
  EXPECT_NEAR(us(nll_loss(false, 35136, 4132)), 221.0, 0.15 * 221.0);
  EXPECT_LT(us(nll_loss(false, 35136, 4132, 1, "bfloat16")), us(nll_loss(false, 35136, 4132)));
  // A narrow input: the block's steps, as forward.
  EXPECT_NEAR(us(nll_loss(false, 22755, 4)), 11.0, 0.25 * 11.0);
}

TEST(LossKernels, OtherShapesAndReductionsAreNotThisModels) {
  const Device& h100 = db().find("H100-SXM5-80GB");
  EXPECT_FALSE(nll_loss_kernels_us(nll_loss(true, 4096, 1000, 0), h100));  // reduction none
  OpRecord one_d = nll_loss(true, 4096, 1000);
  one_d.args[0] = tensor("self", T({1000}));
  EXPECT_FALSE(nll_loss_kernels_us(one_d, h100));
  OpRecord other = nll_loss(true, 4096, 1000);
  other.name = "aten::nll_loss2d_forward";
  EXPECT_FALSE(nll_loss_kernels_us(other, h100));
}

}  // namespace
}  // namespace habitat
