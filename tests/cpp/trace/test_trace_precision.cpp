// The precision switches a trace records (format version 2), and version 1 traces without them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "habitat/trace.h"

namespace habitat {
namespace {

using nlohmann::json;

Trace trace_with_switches() {
  Trace trace;
  trace.origin.allow_tf32 = false;
  trace.origin.cudnn_allow_tf32 = false;
  trace.origin.float32_matmul_precision = "highest";
  Step step;
  OpRecord plain;
  plain.id = 0;
  plain.name = "aten::mm";
  OpRecord in_autocast;
  in_autocast.id = 1;
  in_autocast.name = "aten::linear";
  PrecisionFlags flags;
  flags.matmul_allow_tf32 = true;
  flags.float32_matmul_precision = "high";
  flags.autocast_dtype = "bfloat16";
  in_autocast.precision = flags;
  step.ops = {plain, in_autocast};
  trace.steps.push_back(step);
  return trace;
}

TEST(TracePrecision, OriginAndPerOpSwitchesRoundTrip) {
  const Trace original = trace_with_switches();
  const json doc = json::parse(trace_to_json(original));
  EXPECT_EQ(doc["version"], 2);
  EXPECT_EQ(doc["origin"]["cudnn_allow_tf32"], false);
  EXPECT_FALSE(doc["steps"][0]["ops"][0].contains("precision"));  // the origin's switches
  EXPECT_EQ(doc["steps"][0]["ops"][1]["precision"]["autocast_dtype"], "bfloat16");
  const Trace back = trace_from_json(doc.dump());
  EXPECT_EQ(back.origin.precision(), original.origin.precision());
  EXPECT_FALSE(back.steps[0].ops[0].precision.has_value());
  ASSERT_TRUE(back.steps[0].ops[1].precision.has_value());
  EXPECT_EQ(*back.steps[0].ops[1].precision, *original.steps[0].ops[1].precision);
  EXPECT_EQ(op_precision(back.steps[0].ops[0], back.origin).cudnn_allow_tf32, false);
  EXPECT_EQ(op_precision(back.steps[0].ops[1], back.origin).autocast_dtype, "bfloat16");
  EXPECT_EQ(trace_to_json(back), trace_to_json(original));
}

TEST(TracePrecision, VersionOneTracesLoadWithTorchDefaults) {
  const Trace t = trace_from_json(R"({"format": "habitat-trace", "version": 1,
    "origin": {"device": "cpu", "allow_tf32": false, "autocast": true},
    "steps": [{"index": 0, "wall_ms": 1.0, "ops": [{"id": 0, "name": "aten::mm"}]}]})");
  const PrecisionFlags flags = op_precision(t.steps[0].ops[0], t.origin);
  EXPECT_FALSE(flags.matmul_allow_tf32);
  EXPECT_TRUE(flags.cudnn_allow_tf32);  // torch's default, which every recorded run used
  EXPECT_EQ(flags.float32_matmul_precision, "highest");
  EXPECT_TRUE(t.origin.autocast);
  EXPECT_EQ(t.origin.autocast_dtype, "");  // not recorded by version 1
}

TEST(TracePrecision, BadSwitchValuesNameTheField) {
  auto error = [](const std::string& op_precision) {
    try {
      trace_from_json(R"({"format": "habitat-trace", "version": 2, "origin": {},
        "steps": [{"index": 0, "wall_ms": 1.0, "ops": [{"id": 0, "name": "aten::mm",
        "precision": )" +
                      op_precision + "}]}]}");
    } catch (const TraceFormatError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error(R"({"float32_matmul_precision": "fast"})").find("float32 matmul precision"),
            std::string::npos);
  EXPECT_NE(error(R"({"autocast_dtype": "bfloat17"})").find("autocast dtype"), std::string::npos);
  EXPECT_NE(error(R"({"cudnn_allow_tf32": 3})").find("cudnn_allow_tf32"), std::string::npos);
  EXPECT_EQ(error(R"({"autocast_dtype": "torch.float16"})"), "(no error)");
}

}  // namespace
}  // namespace habitat
