// Measured rooflines (learned/roofline_table.h): roofline.json beside the learned models gives the
// ops no learned family covers a fixed part and an efficiency, the most specific entry first
// (op, element width and layout; op and width; op; class), and the predictor uses them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cost/test_op_cost_builders.h"
#include "habitat/learned_models.h"
#include "hardware/roofline.h"
#include "learned/roofline_table.h"
#include "predict/shape_efficiency.h"
#include "test_devices.h"

namespace habitat {
namespace {

using namespace habitat::test;
namespace fs = std::filesystem;

fs::path table_dir(const std::string& name, const std::string& body) {
  const fs::path dir = fs::temp_directory_path() / ("habitat_roofline_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "roofline.json") << body;
  return dir;
}

const char* kTable = R"({"format": "habitat-roofline-efficiency", "version": 1,
  "ops": {"cudnn_batch_norm|2|cl": {"fixed_us": 7.0, "efficiency": 0.5},
          "cudnn_batch_norm|2": {"fixed_us": 3.0, "efficiency": 0.25},
          "cudnn_batch_norm": {"fixed_us": 1.0, "efficiency": 0.8}},
  "classes": {"norm": {"fixed_us": 0.0, "efficiency": 0.1}}})";

OpRecord bn(const std::string& name, const std::string& dtype, bool channels_last) {
  TensorMeta x = T({32, 64, 56, 56}, dtype);
  if (channels_last) {
    x.strides = {56 * 56 * 64, 1, 56 * 64, 64};
    x.contiguous = false;
  }
  return op(name, "", {tensor("input", x)}, {x});
}

TEST(RooflineTable, TheMostSpecificEntryWins) {
  const RooflineTable t = RooflineTable::load(table_dir("specific", kTable).string());
  OpCost cost;
  cost.op_class = OpClass::Norm;
  EXPECT_EQ(t.find(bn("aten::cudnn_batch_norm", "bfloat16", true), cost)->fixed_us, 7.0);
  EXPECT_EQ(t.find(bn("aten::cudnn_batch_norm", "bfloat16", false), cost)->fixed_us, 3.0);
  EXPECT_EQ(t.find(bn("aten::cudnn_batch_norm", "float32", false), cost)->fixed_us, 1.0);
  EXPECT_EQ(t.find(bn("aten::native_batch_norm", "float32", false), cost)->efficiency, 0.1);
  cost.op_class = OpClass::Loss;
  EXPECT_FALSE(t.find(bn("aten::nll_loss_forward", "float32", false), cost).has_value());
  EXPECT_TRUE(
      RooflineTable::load(fs::temp_directory_path().string() + "/habitat_no_such_dir").empty());
}

TEST(RooflineTable, ADepthwiseConvolutionIsLookedUpByOneNameWhateverItIsCalled) {
  const RooflineTable t = RooflineTable::load(
      table_dir("depthwise", R"({"ops": {"depthwise_conv2d|4": {"fixed_us": 0, "efficiency": 0.2},
      "depthwise_conv2d_backward": {"fixed_us": 0, "efficiency": 0.1}}, "classes": {}})")
          .string());
  OpCost cost;
  cost.op_class = OpClass::Conv;
  auto conv = [](const std::string& name, int64_t groups) {
    return op(name, "",
              {tensor("input", T({8, 96, 56, 56})), tensor("weight", T({96, 96 / groups, 3, 3})),
               integer("groups", groups)},
              {T({8, 96, 56, 56})});
  };
  EXPECT_EQ(t.find(conv("aten::mkldnn_convolution", 96), cost)->efficiency, 0.2);  // a CPU trace
  EXPECT_EQ(t.find(conv("aten::cudnn_convolution", 96), cost)->efficiency, 0.2);
  EXPECT_EQ(t.find(conv("aten::convolution_backward", 96), cost)->efficiency, 0.1);
  EXPECT_FALSE(t.find(conv("aten::cudnn_convolution", 4), cost).has_value());  // grouped
}

TEST(RooflineTable, ADepthwiseConvolutionsFilterSizeAndStrideComeFirst) {
  const RooflineTable t = RooflineTable::load(
      table_dir("depthwise_variant", R"({"ops": {"depthwise_conv2d|4": {"fixed_us": 0,
      "efficiency": 0.2}, "depthwise_conv2d:k7s1": {"fixed_us": 0, "efficiency": 0.05}},
      "classes": {}})")
          .string());
  OpCost cost;
  cost.op_class = OpClass::Conv;
  auto conv = [](int64_t kernel, int64_t stride) {
    return op("aten::cudnn_convolution", "",
              {tensor("input", T({8, 96, 56, 56})), tensor("weight", T({96, 1, kernel, kernel})),
               ints("stride", {stride, stride}), integer("groups", 96)},
              {T({8, 96, 56 / stride, 56 / stride})});
  };
  EXPECT_EQ(t.find(conv(7, 1), cost)->efficiency, 0.05);
  EXPECT_EQ(t.find(conv(7, 2), cost)->efficiency, 0.2);  // no k7s2 entry: the op's own
  EXPECT_EQ(t.find(conv(3, 1), cost)->efficiency, 0.2);
}

TEST(RooflineTable, TheEstimateIsTheFixedPartPlusTheRooflineOverTheEfficiency) {
  const Device& d = db().find("H100-SXM5-80GB");
  OpCost cost;
  cost.op_class = OpClass::Norm;
  cost.precision = Precision::Fp32Simt;
  cost.bytes_read = 4e8;
  cost.kernels = 1;
  const double roof = cost.bytes() / d.bandwidth_bytes_per_s() * 1e6;
  EXPECT_NEAR(roofline_estimate_us(cost, d, MeasuredRoofline{5.0, 0.5}), 5.0 + roof / 0.5, 1e-9);
  EXPECT_NEAR(roofline_estimate_us(cost, d), roof / roofline_efficiency(OpClass::Norm), 1e-9);
  cost.bytes_read = 1;  // a tiny op: the per-kernel floor
  EXPECT_EQ(roofline_estimate_us(cost, d, MeasuredRoofline{0.0, 1.0}), kMinKernelUs);
}

// An "sm"-bound entry (depthwise convolutions measured the same on an H100 and an H200, whose
// DRAM bandwidth is 1.43x): its time follows SMs and clock, not bandwidth, and never beats the
// DRAM roofline.
TEST(RooflineTable, AnSmBoundEntryFollowsSmsAndClockNotBandwidth) {
  const RooflineTable t = RooflineTable::load(
      table_dir("sm", R"({"ops": {"cudnn_batch_norm": {"fixed_us": 2, "efficiency": 0.25,
      "bound": "sm"}}, "classes": {"norm": {"fixed_us": 0, "efficiency": 0.5, "bound": "dram"}}})")
          .string());
  OpCost cost;
  cost.op_class = OpClass::Norm;
  cost.precision = Precision::Fp32Simt;
  cost.bytes_read = 4e8;
  cost.kernels = 1;
  const auto sm = t.find(bn("aten::cudnn_batch_norm", "float32", false), cost);
  ASSERT_TRUE(sm && sm->sm_bound);
  EXPECT_FALSE(t.find(bn("aten::native_batch_norm", "float32", false), cost)->sm_bound);
  const Device& h100 = db().find("H100-SXM5-80GB");
  const Device& h200 = db().find("H200-SXM-141GB");
  ASSERT_EQ(h100.sms, h200.sms);
  ASSERT_GT(h200.memory_bandwidth_gbs, h100.memory_bandwidth_gbs);
  const double rate = h100.sms * h100.boost_clock_mhz * 1e6 * kSmBytesPerClock;
  EXPECT_NEAR(roofline_estimate_us(cost, h100, sm), 2.0 + cost.bytes() / rate * 1e6 / 0.25, 1e-9);
  EXPECT_EQ(roofline_estimate_us(cost, h200, sm), roofline_estimate_us(cost, h100, sm));
  // a GPU whose DRAM is slower than the SM-side forecast: the DRAM roofline bounds it
  const Device& t4 = db().find("T4");
  const MeasuredRoofline fast{0.0, 1.0, true};
  EXPECT_NEAR(roofline_estimate_us(cost, t4, fast), cost.bytes() / t4.bandwidth_bytes_per_s() * 1e6,
              1e-9);
}

// kSmBytesPerClock only rescales an entry's efficiency, which must stay in (0, 1]: its rate is
// above every database GPU's DRAM bandwidth.
TEST(RooflineTable, TheSmSideRateIsAboveEveryGpusDramBandwidth) {
  for (const Device& d : db().all()) {
    EXPECT_GT(d.sms * d.boost_clock_mhz * 1e6 * kSmBytesPerClock, d.bandwidth_bytes_per_s())
        << d.name;
  }
}

TEST(RooflineTable, ABadEntryNamesTheFileAndTheField) {
  const fs::path dir =
      table_dir("bad", R"({"ops": {"x": {"fixed_us": 1, "efficiency": 1.5}}, "classes": {}})");
  try {
    RooflineTable::load(dir.string());
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("roofline.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("efficiency"), std::string::npos);
  }
  const fs::path bound = table_dir(
      "bad_bound",
      R"({"ops": {"x": {"fixed_us": 1, "efficiency": 1, "bound": "l2"}}, "classes": {}})");
  EXPECT_THROW(RooflineTable::load(bound.string()), std::runtime_error);
}

TEST(RooflineTable, LearnedModelsLoadItBesideTheWeights) {
  const LearnedModels m = LearnedModels::load(table_dir("models", kTable).string());
  OpCost cost;
  cost.op_class = OpClass::Norm;
  EXPECT_EQ(m.measured_roofline(bn("aten::cudnn_batch_norm", "float32", false), cost)->fixed_us,
            1.0);
}

}  // namespace
}  // namespace habitat
