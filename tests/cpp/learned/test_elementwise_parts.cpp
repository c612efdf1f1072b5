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

}  // namespace
}  // namespace habitat
