// The element-wise family's `inputs` column counts the tensors of the output's size an op reads.
// A fill (fill_, zero_, the factories) reads none: its self or shape argument is only written
// or sized from, so it moves n elements, not 2n (before, fill_ counted its self as an input and
// a factory got the floor of one input: both forecast twice the traffic).
#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "habitat/learned_models.h"
#include "habitat/op_cost.h"
#include "test_devices.h"

namespace habitat {
namespace {

using namespace habitat::test;

const TensorMeta kX = T({64, 1024});

LearnedShape only_part(const OpRecord& o) {
  const auto parts = learned_parts(o, estimate_cost(o));
  EXPECT_EQ(parts.size(), 1u);
  if (parts.empty()) return {};
  EXPECT_EQ(parts[0].family, LearnedFamily::Elementwise);
  return parts[0].shape;
}

TEST(ElementwiseParts, FillsReadNothing) {
  const OpRecord fill = op("aten::fill_", "Scalar", {tensor("self", kX), real("value", 1.0)}, {kX});
  const OpRecord zero = op("aten::zero_", "", {tensor("self", kX)}, {kX});
  const OpRecord zeros_like = op("aten::zeros_like", "", {tensor("self", kX)}, {kX});
  const OpRecord zeros = op("aten::zeros", "", {ints("size", {64, 1024})}, {kX});
  const OpRecord full =
      op("aten::full", "", {ints("size", {64, 1024}), real("fill_value", 2.0)}, {kX});
  for (const OpRecord* o : {&fill, &zero, &zeros_like, &zeros, &full}) {
    SCOPED_TRACE(o->name);
    const LearnedShape s = only_part(*o);
    EXPECT_EQ(s.at("n"), 64 * 1024);
    EXPECT_EQ(s.at("inputs"), 0);
    EXPECT_EQ(s.at("elem_bytes"), 4);
  }
}

TEST(ElementwiseParts, ReadersCountTheirSameSizeOperands) {
  const OpRecord add_ = op("aten::add_", "Tensor",
                           {tensor("self", kX), tensor("other", kX), integer("alpha", 1)}, {kX});
  EXPECT_EQ(only_part(add_).at("inputs"), 2);  // reads self and other, writes self
  const OpRecord relu = op("aten::relu", "", {tensor("self", kX)}, {kX});
  EXPECT_EQ(only_part(relu).at("inputs"), 1);
  const OpRecord bias =
      op("aten::add", "Tensor", {tensor("self", kX), tensor("other", T({1024}))}, {kX});
  EXPECT_EQ(only_part(bias).at("inputs"), 1);  // a broadcast operand is not counted (at least one)
  // relu6 -> hardtanh -> clamp.out: the result it writes is not an operand it reads
  const OpRecord clamp =
      op("aten::clamp", "out",
         {tensor("self", kX), real("min", 0.0), real("max", 6.0), tensor("out", kX)}, {kX});
  EXPECT_EQ(only_part(clamp).at("inputs"), 1);
}

// Fewer bytes moved, never more time: a fill forecasts no slower than a copy of the same size.
TEST(ElementwiseParts, FillFeaturesCountOneTensorOfTraffic) {
  const OpRecord fill = op("aten::fill_", "Scalar", {tensor("self", kX), real("value", 1.0)}, {kX});
  const Device& dev = db().find("H100-SXM5-80GB");
  const LearnedFeatures f = compute_learned_features(LearnedFamily::Elementwise, only_part(fill),
                                                     dev, Precision::Fp32Simt);
  const double bytes = 4.0 * 64 * 1024;  // written once, read never
  EXPECT_DOUBLE_EQ(f.roofline_us, bytes / (dev.memory_bandwidth_gbs * 1e9) * 1e6);
}

TensorMeta channels_last(std::vector<int64_t> nchw, const std::string& dtype = "float32") {
  TensorMeta t = T(nchw, dtype);
  const int64_t c = nchw[1], h = nchw[2], w = nchw[3];
  t.strides = {h * w * c, 1, w * c, c};
  t.contiguous = false;  // torch's is_contiguous() of a channels-last tensor
  return t;
}

// ATen's vectorized kernel needs dense operands of one layout and one floating dtype; the
// recorded GPU steps' kernels agree with this call on every element-wise op
// (benchmarks/accuracy/elementwise_paths_fit.py).
TEST(ElementwiseParts, TellTheVectorizedKernelFromTheUnrolledAndStridedOnes) {
  const TensorMeta x = T({32, 256, 768});
  const TensorMeta x16 = T({32, 256, 768}, "bfloat16");
  auto add = [](const TensorMeta& a, const TensorMeta& b, const TensorMeta& out) {
    return op("aten::add", "Tensor", {tensor("self", a), tensor("other", b)}, {out});
  };
  EXPECT_EQ(only_part(add(x, x, x)).at("vectorized"), 1);
  EXPECT_EQ(only_part(add(x, x16, x)).at("vectorized"), 0);       // autocast's residual add: a cast
  EXPECT_EQ(only_part(add(x, T({768}), x)).at("vectorized"), 0);  // a broadcast operand
  TensorMeta transposed = T({32, 768, 256});
  transposed.shape = {32, 256, 768};
  transposed.strides = {768 * 256, 1, 256};
  transposed.contiguous = false;
  EXPECT_EQ(only_part(add(x, transposed, x)).at("vectorized"), 0);
  // Channels-last operands are dense: TensorIterator walks them in memory order.
  const TensorMeta cl = channels_last({64, 256, 56, 56}, "bfloat16");
  EXPECT_EQ(only_part(op("aten::relu", "", {tensor("self", cl)}, {cl})).at("vectorized"), 1);
  EXPECT_EQ(only_part(add(cl, T({64, 256, 56, 56}, "bfloat16"), cl)).at("vectorized"), 0);
  // A boolean mask is the functor's own type, not a cast.
  const OpRecord fill =
      op("aten::masked_fill", "Scalar",
         {tensor("self", x), tensor("mask", T({32, 256, 768}, "bool")), real("value", 0.0)}, {x});
  EXPECT_EQ(only_part(fill).at("vectorized"), 1);
}

}  // namespace
}  // namespace habitat
