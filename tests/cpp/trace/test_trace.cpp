#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>

#include "habitat/trace.h"

namespace habitat {
namespace {

using Kind = ArgValue::Kind;
using nlohmann::json;

// (gmock is not linked, so a small substring check stands in for HasSubstr.)
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\"\n  does not contain \"" << part << "\"";
}

// ---------------------------------------------------------------------------------------------
// Field-by-field equality, so a field dropped on write fails the round trip.

void expect_tensor_eq(const TensorMeta& a, const TensorMeta& b) {
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.strides, b.strides);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.contiguous, b.contiguous);
  EXPECT_EQ(a.defined, b.defined);
  EXPECT_EQ(a.storage, b.storage);
  EXPECT_EQ(a.storage_offset, b.storage_offset);
}

void expect_tensors_eq(const std::vector<TensorMeta>& a, const std::vector<TensorMeta>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) expect_tensor_eq(a[i], b[i]);
}

void expect_value_eq(const ArgValue& a, const ArgValue& b) {
  EXPECT_EQ(a.kind, b.kind);
  expect_tensors_eq(a.tensors, b.tensors);
  EXPECT_EQ(a.ints, b.ints);
  if (std::isnan(a.real)) {
    EXPECT_TRUE(std::isnan(b.real));
  } else {
    EXPECT_EQ(a.real, b.real);
  }
  EXPECT_EQ(a.text, b.text);
}

void expect_kernel_eq(const KernelLaunch& a, const KernelLaunch& b) {
  EXPECT_EQ(a.name, b.name);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.grid[i], b.grid[i]);
    EXPECT_EQ(a.block[i], b.block[i]);
  }
  EXPECT_EQ(a.registers_per_thread, b.registers_per_thread);
  EXPECT_EQ(a.static_shared_bytes, b.static_shared_bytes);
  EXPECT_EQ(a.dynamic_shared_bytes, b.dynamic_shared_bytes);
  EXPECT_EQ(a.duration_us, b.duration_us);
  EXPECT_EQ(a.stream, b.stream);
}

void expect_op_eq(const OpRecord& a, const OpRecord& b) {
  SCOPED_TRACE(a.name);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.parent, b.parent);
  EXPECT_EQ(a.depth, b.depth);
  EXPECT_EQ(a.has_children, b.has_children);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.overload, b.overload);
  ASSERT_EQ(a.args.size(), b.args.size());
  for (std::size_t i = 0; i < a.args.size(); ++i) {
    EXPECT_EQ(a.args[i].name, b.args[i].name);
    expect_value_eq(a.args[i].value, b.args[i].value);
  }
  expect_tensors_eq(a.outputs, b.outputs);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.module_path, b.module_path);
  EXPECT_EQ(a.autograd_node, b.autograd_node);
  EXPECT_EQ(a.thread, b.thread);
  EXPECT_EQ(a.start_us, b.start_us);
  EXPECT_EQ(a.wall_us, b.wall_us);
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (std::size_t i = 0; i < a.kernels.size(); ++i) expect_kernel_eq(a.kernels[i], b.kernels[i]);
}

void expect_trace_eq(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.origin.device, b.origin.device);
  EXPECT_EQ(a.origin.host, b.origin.host);
  EXPECT_EQ(a.origin.torch_version, b.origin.torch_version);
  EXPECT_EQ(a.origin.habitat_version, b.origin.habitat_version);
  EXPECT_EQ(a.origin.allow_tf32, b.origin.allow_tf32);
  EXPECT_EQ(a.origin.autocast, b.origin.autocast);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t s = 0; s < a.steps.size(); ++s) {
    EXPECT_EQ(a.steps[s].index, b.steps[s].index);
    EXPECT_EQ(a.steps[s].wall_ms, b.steps[s].wall_ms);
    EXPECT_EQ(a.steps[s].measured_peak_bytes, b.steps[s].measured_peak_bytes);
    EXPECT_EQ(a.steps[s].dropped_ops, b.steps[s].dropped_ops);
    ASSERT_EQ(a.steps[s].ops.size(), b.steps[s].ops.size());
    for (std::size_t i = 0; i < a.steps[s].ops.size(); ++i) {
      expect_op_eq(a.steps[s].ops[i], b.steps[s].ops[i]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// A trace that uses every field and every argument kind.

TensorMeta tensor(std::vector<int64_t> shape, std::string dtype = "float32") {
  TensorMeta t;
  t.shape = std::move(shape);
  t.strides.resize(t.shape.size());
  int64_t step = 1;
  for (std::size_t i = t.shape.size(); i-- > 0;) {
    t.strides[i] = step;
    step *= std::max<int64_t>(t.shape[i], 1);
  }
  t.dtype = std::move(dtype);
  t.device = "cuda:0";
  return t;
}

Argument arg(std::string name, ArgValue v) { return Argument{std::move(name), std::move(v)}; }

ArgValue value(Kind kind) {
  ArgValue v;
  v.kind = kind;
  return v;
}

Trace full_trace() {
  Trace trace;
  trace.origin.device = "A100-SXM4-80GB";
  trace.origin.host = "AMD EPYC 7763";
  trace.origin.torch_version = "2.13.0";
  trace.origin.habitat_version = "0.1.0";
  trace.origin.allow_tf32 = true;
  trace.origin.autocast = true;

  Step step;
  step.index = 3;
  step.wall_ms = 12.625;
  step.measured_peak_bytes = int64_t{40} << 30;
  step.dropped_ops = 17;

  OpRecord linear;
  linear.id = 1;
  linear.has_children = true;
  linear.name = "aten::linear";
  linear.phase = Phase::Forward;
  linear.module_path = "encoder.layers.3.attn";
  linear.start_us = 10.5;
  linear.wall_us = 41.25;
  ArgValue input = value(Kind::Tensor);
  input.tensors.push_back(tensor({8, 128, 512}, "bfloat16"));
  input.tensors[0].storage = 0xdeadbeefcafeULL;
  linear.args.push_back(arg("input", input));
  ArgValue bias = value(Kind::Tensor);
  TensorMeta undefined;
  undefined.defined = false;
  bias.tensors.push_back(undefined);
  linear.args.push_back(arg("bias", bias));
  linear.outputs.push_back(tensor({8, 128, 1024}, "bfloat16"));

  OpRecord addmm;
  addmm.id = 2;
  addmm.parent = 1;
  addmm.depth = 1;
  addmm.name = "aten::addmm";
  addmm.overload = "out";
  addmm.phase = Phase::Forward;
  addmm.thread = 2;
  addmm.start_us = 12.0;
  addmm.wall_us = 30.0;
  ArgValue transposed = value(Kind::Tensor);
  TensorMeta w = tensor({512, 1024}, "bfloat16");
  w.strides = {1, 512};  // a transposed view
  w.contiguous = false;
  w.storage = 7;
  w.storage_offset = 64;
  transposed.tensors.push_back(w);
  addmm.args.push_back(arg("mat2", transposed));
  ArgValue alpha = value(Kind::Double);
  alpha.real = 0.1;
  addmm.args.push_back(arg("alpha", alpha));
  ArgValue ninf = value(Kind::Double);
  ninf.real = -std::numeric_limits<double>::infinity();
  addmm.args.push_back(arg("min", ninf));
  ArgValue pinf = value(Kind::Double);
  pinf.real = std::numeric_limits<double>::infinity();
  addmm.args.push_back(arg("max", pinf));
  ArgValue nan = value(Kind::Double);
  nan.real = std::numeric_limits<double>::quiet_NaN();
  addmm.args.push_back(arg("eps", nan));
  KernelLaunch gemm;
  gemm.name = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32";
  gemm.grid[0] = 8;
  gemm.grid[1] = 16;
  gemm.grid[2] = 2;
  gemm.block[0] = 256;
  gemm.registers_per_thread = 232;
  gemm.static_shared_bytes = 1024;
  gemm.dynamic_shared_bytes = 98304;
  gemm.duration_us = 27.125;
  gemm.stream = 7;
  addmm.kernels.push_back(gemm);
  KernelLaunch tiny;
  tiny.name = "vectorized_elementwise_kernel";
  tiny.duration_us = 1.5;
  addmm.kernels.push_back(tiny);

  OpRecord misc;
  misc.id = 5;
  misc.name = "aten::misc";
  misc.phase = Phase::Backward;
  misc.autograd_node = "AddmmBackward0";
  ArgValue list = value(Kind::TensorList);
  list.tensors = {tensor({4}), undefined, tensor({})};
  misc.args.push_back(arg("tensors", list));
  ArgValue one = value(Kind::Int);
  one.ints = {-1};
  misc.args.push_back(arg("dim", one));
  ArgValue ints = value(Kind::IntList);
  ints.ints = {3, -3, 0, std::numeric_limits<int64_t>::max()};
  misc.args.push_back(arg("size", ints));
  ArgValue flag = value(Kind::Bool);
  flag.ints = {1};
  misc.args.push_back(arg("keepdim", flag));
  ArgValue mask = value(Kind::BoolList);
  mask.ints = {1, 0, 1};
  misc.args.push_back(arg("output_mask", mask));
  ArgValue text = value(Kind::String);
  text.text = "tanh";
  misc.args.push_back(arg("approximate", text));
  misc.args.push_back(arg("dtype", value(Kind::None)));
  ArgValue other = value(Kind::Other);
  other.text = "Generator";
  misc.args.push_back(arg("generator", other));
  ArgValue empty_list = value(Kind::IntList);
  misc.args.push_back(arg("empty", empty_list));

  OpRecord step_op;
  step_op.id = 9;
  step_op.name = "aten::_foreach_add_";
  step_op.overload = "List";
  step_op.phase = Phase::Optimizer;

  step.ops = {linear, addmm, misc, step_op};
  trace.steps.push_back(step);

  Step empty;
  empty.index = 4;
  empty.wall_ms = 0.5;
  trace.steps.push_back(empty);
  return trace;
}

// A minimal valid document, for corrupting one field at a time.
json minimal_doc() {
  return json::parse(R"({"format": "habitat-trace", "version": 1, "origin": {},
    "steps": [{"index": 0, "wall_ms": 1.0, "ops": [
      {"id": 1, "name": "aten::linear", "has_children": true},
      {"id": 2, "parent": 1, "depth": 1, "name": "aten::addmm",
       "args": [{"name": "self", "tensor": {"shape": [4, 8], "dtype": "float32"}}],
       "kernels": [{"name": "gemm", "grid": [4, 1, 1], "block": [128, 1, 1]}]}]}]})");
}

std::string error_of_text(const std::string& text) {
  try {
    trace_from_json(text);
  } catch (const TraceFormatError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string error_of(const json& doc) { return error_of_text(doc.dump()); }

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("habitat_trace_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// ---------------------------------------------------------------------------------------------

TEST(TraceJson, RoundTripKeepsEveryField) {
  const Trace original = full_trace();
  const Trace back = trace_from_json(trace_to_json(original));
  expect_trace_eq(original, back);
  // And the encoding is stable: writing what was read gives the same text.
  EXPECT_EQ(trace_to_json(back), trace_to_json(original));
}

TEST(TraceJson, DocumentHasFormatVersionAndOrigin) {
  const json doc = json::parse(trace_to_json(full_trace()));
  EXPECT_EQ(doc["format"], "habitat-trace");
  EXPECT_EQ(doc["version"], Trace::kFormatVersion);
  EXPECT_EQ(doc["origin"]["device"], "A100-SXM4-80GB");
  EXPECT_EQ(doc["origin"]["allow_tf32"], true);
  EXPECT_EQ(doc["steps"][0]["index"], 3);
  EXPECT_EQ(doc["steps"][0]["dropped_ops"], 17);
  EXPECT_FALSE(doc["steps"][1].contains("dropped_ops"));  // 0 is the default
  const json& addmm = doc["steps"][0]["ops"][1];
  EXPECT_EQ(addmm["parent"], 1);
  EXPECT_EQ(addmm["kernels"][0]["grid"], json::array({8, 16, 2}));
  EXPECT_EQ(addmm["kernels"][0]["block"], json::array({256, 1, 1}));
  EXPECT_EQ(addmm["args"][2]["float"], "-inf");
  EXPECT_EQ(addmm["args"][3]["float"], "inf");
  EXPECT_EQ(addmm["args"][4]["float"], "nan");
  EXPECT_EQ(doc["steps"][0]["ops"][2]["args"][4]["bools"], json::array({true, false, true}));
  EXPECT_EQ(doc["steps"][0]["ops"][2]["args"][6]["none"], true);
  EXPECT_EQ(doc["steps"][0]["ops"][2]["args"][7]["other"], "Generator");
}

TEST(TraceJson, DefaultFieldsAreOmitted) {
  Trace trace;
  Step step;
  OpRecord op;
  op.id = 4;
  op.name = "aten::relu";
  ArgValue self = value(Kind::Tensor);
  self.tensors.push_back(tensor({2, 0, 3}));
  self.tensors[0].device.clear();
  op.args.push_back(arg("self", self));
  KernelLaunch k;
  k.name = "relu_kernel";
  op.kernels.push_back(k);
  step.ops.push_back(op);
  trace.steps.push_back(step);

  const json doc = json::parse(trace_to_json(trace));
  const json& written = doc["steps"][0]["ops"][0];
  EXPECT_EQ(written, json::parse(R"({"id": 4, "name": "aten::relu",
      "args": [{"name": "self", "tensor": {"shape": [2, 0, 3], "dtype": "float32"}}],
      "kernels": [{"name": "relu_kernel"}]})"));
  // Reading restores the defaults, including row-major strides (size-0 dims count as 1).
  const OpRecord back = trace_from_json(doc.dump()).steps[0].ops[0];
  EXPECT_EQ(back.tensor("self")->strides, (std::vector<int64_t>{3, 3, 1}));
  EXPECT_TRUE(back.tensor("self")->contiguous);
  EXPECT_EQ(back.phase, Phase::Other);
  EXPECT_FALSE(back.parent.has_value());
  EXPECT_EQ(back.kernels[0].blocks(), 1);
}

TEST(TraceJson, UnknownKeysAreIgnoredSoReportsCanEmbedATrace) {
  json doc = minimal_doc();
  doc["forecast"] = {{"A100", {{"iteration_ms", 3.5}}}};
  doc["steps"][0]["ops"][0]["future_field"] = 1;
  const Trace t = trace_from_json(doc.dump());
  ASSERT_EQ(t.steps[0].ops.size(), 2u);
  EXPECT_EQ(t.steps[0].ops[1].parent, 1u);
}

TEST(TraceJson, NullParentMeansNone) {
  json doc = minimal_doc();
  doc["steps"][0]["ops"][0]["parent"] = nullptr;
  EXPECT_FALSE(trace_from_json(doc.dump()).steps[0].ops[0].parent.has_value());
}

TEST(TraceJsonErrors, NotJsonOrTruncated) {
  EXPECT_TRUE(Contains(error_of_text("{\"format\": \"habitat-trace\", \"vers"), "not valid JSON"));
  EXPECT_TRUE(Contains(error_of_text(""), "not valid JSON"));
  EXPECT_TRUE(Contains(error_of_text("[1, 2]"), "expected a JSON object, got array"));
}

TEST(TraceJsonErrors, WrongOrMissingFormat) {
  json doc = minimal_doc();
  doc["format"] = "chrome-trace";
  EXPECT_TRUE(
      Contains(error_of(doc), "\"format\" is \"chrome-trace\", expected \"habitat-trace\""));
  doc.erase("format");
  EXPECT_TRUE(Contains(error_of(doc), "missing \"format\""));
}

TEST(TraceJsonErrors, NewerVersionAsksForUpgrade) {
  json doc = minimal_doc();
  doc["version"] = 7;
  EXPECT_TRUE(Contains(error_of(doc),
                       "written by a newer Habitat (version 7); this build reads "
                       "up to version " +
                           std::to_string(Trace::kFormatVersion) + ": upgrade habitat"));
  doc["version"] = 0;
  EXPECT_TRUE(Contains(error_of(doc), "version: unsupported version 0"));
  doc["version"] = "1";
  EXPECT_TRUE(Contains(error_of(doc), "version: expected an integer, got string"));
  doc.erase("version");
  EXPECT_TRUE(Contains(error_of(doc), "version: missing required field"));
}

TEST(TraceJsonErrors, MissingFieldsNameTheirPlace) {
  json doc = minimal_doc();
  doc["steps"][0]["ops"][1].erase("name");
  EXPECT_TRUE(Contains(error_of(doc), "steps[0].ops[1].name: missing required field"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][0].erase("id");
  EXPECT_TRUE(Contains(error_of(doc), "steps[0].ops[0] (aten::linear).id: missing required field"));
  doc = minimal_doc();
  doc["steps"][0].erase("wall_ms");
  EXPECT_TRUE(Contains(error_of(doc), "steps[0].wall_ms: missing required field"));
  doc = minimal_doc();
  doc.erase("steps");
  EXPECT_TRUE(Contains(error_of(doc), "steps: missing required field"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["kernels"][0].erase("name");
  EXPECT_TRUE(Contains(error_of(doc), "ops[1] (aten::addmm).kernels[0].name: missing"));
}

TEST(TraceJsonErrors, ImpossibleTracesNameTheBadField) {
  json doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["shape"] = {1000000000000LL, 1000000000000LL};
  EXPECT_TRUE(Contains(error_of(doc),
                       "steps[0].ops[1] (aten::addmm).args[0].tensor.shape: is "
                       "[1000000000000,1000000000000]: more than 2^48 elements"));
  doc = minimal_doc();  // each dimension fine, the product past 2^48
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["shape"] = {1 << 20, 1 << 20, 1 << 9};
  EXPECT_TRUE(Contains(error_of(doc), "more than 2^48 elements"));
  doc = minimal_doc();  // exactly 2^48 is accepted, and a zero dimension is zero elements
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["shape"] = {1 << 24, 1 << 24};
  EXPECT_EQ(error_of(doc), "(no error)");
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["shape"] = {0, 1 << 24, 1 << 24};
  EXPECT_EQ(error_of(doc), "(no error)");
  // ... but its strides count it as 1: 2^80 overflowed int64 in contiguous_strides (UBSan,
  // .ci/sanitize.sh), and torch refuses the tensor ("Stride calculation overflowed").
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["shape"] = {0, 1LL << 40, 1LL << 40};
  EXPECT_TRUE(Contains(error_of(doc),
                       "args[0].tensor.shape: is [0,1099511627776,1099511627776]: "
                       "strides past 2^48"));
  // How far strides and storage_offset reach is bounded alike: strides [2^62, 1] overflowed
  // int64 in estimate_step_memory (UBSan). A broadcast's zero stride reaches nothing.
  doc = minimal_doc();
  json& tensor = doc["steps"][0]["ops"][1]["args"][0]["tensor"];
  tensor["shape"] = {3, 3};
  tensor["strides"] = {1LL << 62, 1};
  EXPECT_TRUE(Contains(error_of(doc),
                       "args[0].tensor: storage_offset + (size - 1) * stride "
                       "passes 2^48 elements"));
  tensor["strides"] = {0, 1};
  tensor["storage_offset"] = 1LL << 60;
  EXPECT_TRUE(Contains(error_of(doc), "passes 2^48 elements"));
  tensor["strides"] = {1LL << 23, 1LL << 23};  // reaches 2^24 + 2^24 + storage_offset
  tensor["storage_offset"] = (1LL << 48) - (1LL << 25);
  EXPECT_EQ(error_of(doc), "(no error)");
  tensor["storage_offset"] = (1LL << 48) - (1LL << 25) + 1;
  EXPECT_TRUE(Contains(error_of(doc), "passes 2^48 elements"));

  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["dtype"] = "float7";
  EXPECT_TRUE(Contains(error_of(doc),
                       "args[0].tensor.dtype: unknown dtype \"float7\" (expected a torch dtype"));
  for (const char* ok :
       {"torch.float32", "bfloat16", "float8_e4m3fn", "complex64", "qint8", "half"}) {
    doc["steps"][0]["ops"][1]["args"][0]["tensor"]["dtype"] = ok;
    EXPECT_EQ(error_of(doc), "(no error)") << ok;
  }

  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["device"] = "tpu:0";
  EXPECT_TRUE(Contains(error_of(doc), "args[0].tensor.device: unknown device \"tpu:0\""));
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "CUDA"}) {
    doc["steps"][0]["ops"][1]["args"][0]["tensor"]["device"] = bad;
    EXPECT_TRUE(Contains(error_of(doc), "unknown device")) << bad;
  }
  for (const char* ok : {"cpu", "cuda", "cuda:7", "meta", "mps", "xpu:1"}) {
    doc["steps"][0]["ops"][1]["args"][0]["tensor"]["device"] = ok;
    EXPECT_EQ(error_of(doc), "(no error)") << ok;
  }

  doc = minimal_doc();  // 1 -> 2 -> 1
  doc["steps"][0]["ops"][0]["parent"] = 2;
  EXPECT_TRUE(Contains(error_of(doc), ").parent: parent chain loops back to op id"));
  doc = minimal_doc();  // a longer loop among later ops, with a child listed before its parent
  doc["steps"][0]["ops"].push_back({{"id", 3}, {"name", "aten::a"}, {"parent", 4}});
  doc["steps"][0]["ops"].push_back({{"id", 4}, {"name", "aten::b"}, {"parent", 5}});
  doc["steps"][0]["ops"].push_back({{"id", 5}, {"name", "aten::c"}, {"parent", 3}});
  EXPECT_TRUE(Contains(error_of(doc), "parent chain loops back"));
  doc = minimal_doc();
  doc["steps"][0]["ops"].push_back({{"id", 3}, {"name", "aten::a"}, {"parent", 4}});
  doc["steps"][0]["ops"].push_back({{"id", 4}, {"name", "aten::b"}, {"parent", 2}});
  EXPECT_EQ(error_of(doc), "(no error)");
}

TEST(TraceJsonErrors, IllTypedFields) {
  json doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["shape"] = "4x8";
  EXPECT_TRUE(Contains(error_of(doc),
                       "steps[0].ops[1] (aten::addmm).args[0].tensor.shape: "
                       "expected an array, got string"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["dtype"] = 4;
  EXPECT_TRUE(Contains(error_of(doc), "args[0].tensor.dtype: expected a string, got number"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][0]["wall_us"] = "fast";
  EXPECT_TRUE(Contains(error_of(doc), "ops[0] (aten::linear).wall_us: expected a number"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][0]["has_children"] = 1;
  EXPECT_TRUE(Contains(error_of(doc), "has_children: expected true or false, got number"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["kernels"][0]["grid"] = {4, 1};
  EXPECT_TRUE(Contains(error_of(doc), "kernels[0].grid: expected 3 dimensions, got 2"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][0]["phase"] = "sideways";
  EXPECT_TRUE(Contains(error_of(doc), "phase: unknown phase \"sideways\""));
  doc = minimal_doc();
  doc["origin"] = "A100";
  EXPECT_TRUE(Contains(error_of(doc), "origin: expected an object, got string"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0]["int"] = 3;
  EXPECT_TRUE(Contains(error_of(doc), "args[0]: needs exactly one value field"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0] = {{"name", "self"}};
  EXPECT_TRUE(Contains(error_of(doc), "found 0"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0] = {{"name", "x"}, {"none", false}};
  EXPECT_TRUE(Contains(error_of(doc), "args[0].none: must be true"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0] = {{"name", "x"}, {"int", 1.5}};
  EXPECT_TRUE(Contains(error_of(doc), "args[0].int: expected an integer, got number"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0] = {{"name", "x"}, {"float", "big"}};
  EXPECT_TRUE(Contains(error_of(doc), "args[0].float: expected a number or \"inf\""));
}

TEST(TraceJsonErrors, NegativeSizes) {
  json doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["shape"] = {4, -8};
  EXPECT_TRUE(Contains(error_of(doc),
                       "ops[1] (aten::addmm).args[0].tensor.shape[1]: must be >= 0, got -8"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["kernels"][0]["block"] = {0, 1, 1};
  EXPECT_TRUE(Contains(error_of(doc), "kernels[0].block[0]: must be >= 1, got 0"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["kernels"][0]["duration_us"] = -2.0;
  EXPECT_TRUE(Contains(error_of(doc), "kernels[0].duration_us: must be >= 0"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["kernels"][0]["registers_per_thread"] = -1;
  EXPECT_TRUE(Contains(error_of(doc), "registers_per_thread: must be >= 0, got -1"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["args"][0]["tensor"]["strides"] = {8};
  EXPECT_TRUE(Contains(error_of(doc), "tensor.strides: has 1 entries but shape has 2"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][0]["id"] = -1;
  EXPECT_TRUE(Contains(error_of(doc), "ops[0] (aten::linear).id: must be >= 0, got -1"));
  doc = minimal_doc();
  doc["steps"][0]["wall_ms"] = -1;
  EXPECT_TRUE(Contains(error_of(doc), "steps[0].wall_ms: must be >= 0"));
  doc = minimal_doc();
  doc["steps"][0]["dropped_ops"] = -5;
  EXPECT_TRUE(Contains(error_of(doc), "steps[0].dropped_ops: must be >= 0, got -5"));
  doc = minimal_doc();
  doc["steps"][0]["measured_peak_bytes"] = -1;
  EXPECT_TRUE(Contains(error_of(doc), "steps[0].measured_peak_bytes: must be >= 0"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["kernels"][0]["grid"] = {1, 1, 4294967296};
  EXPECT_TRUE(Contains(error_of(doc), "grid[2]: integer 4294967296 is out of range"));
}

TEST(TraceJsonErrors, BrokenParentLinks) {
  json doc = minimal_doc();
  doc["steps"][0]["ops"][1]["parent"] = 42;
  EXPECT_TRUE(Contains(error_of(doc),
                       "steps[0].ops[1] (aten::addmm).parent: op id 42 not found in this step"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["parent"] = 2;
  EXPECT_TRUE(Contains(error_of(doc), "parent: op id 2 is the op itself"));
  doc = minimal_doc();
  doc["steps"][0]["ops"][1]["id"] = 1;
  EXPECT_TRUE(Contains(error_of(doc),
                       "ops[1] (aten::addmm).id: duplicate op id 1 (also used by "
                       "ops[0])"));
  // A parent in another step does not count.
  doc = minimal_doc();
  json second = doc["steps"][0];
  second["index"] = 1;
  second["ops"].erase(0);
  doc["steps"].push_back(second);
  EXPECT_TRUE(Contains(error_of(doc), "steps[1].ops[0] (aten::addmm).parent: op id 1 not found"));
}

TEST(TraceFile, SaveThenLoad) {
  const std::string path = temp_path("roundtrip.json");
  const Trace original = full_trace();
  save_trace(original, path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  expect_trace_eq(original, load_trace(path));
  std::filesystem::remove(path);
}

TEST(TraceFile, LoadErrorsNameThePath) {
  const std::string missing = temp_path("does_not_exist.json");
  try {
    load_trace(missing);
    FAIL() << "expected an error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_TRUE(Contains(e.what(), "cannot read habitat trace '" + missing + "'"));
  }
  EXPECT_THROW(load_trace(std::filesystem::temp_directory_path().string()), std::system_error);

  const std::string corrupt = temp_path("corrupt.json");
  std::ofstream(corrupt) << trace_to_json(full_trace()).substr(0, 100);
  try {
    load_trace(corrupt);
    FAIL() << "expected an error";
  } catch (const TraceFormatError& e) {
    EXPECT_TRUE(Contains(e.what(), "invalid habitat trace '" + corrupt + "': not valid JSON"));
  }
  std::filesystem::remove(corrupt);
}

TEST(TraceFile, SaveToMissingDirectoryFails) {
  const std::string path = temp_path("no_such_dir") + "/trace.json";
  try {
    save_trace(full_trace(), path);
    FAIL() << "expected an error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_TRUE(Contains(e.what(), "cannot write habitat trace '" + path + "'"));
  }
}

TEST(TraceStructs, NumelAndBytes) {
  EXPECT_EQ(tensor({8, 128, 512}).numel(), 8 * 128 * 512);
  EXPECT_EQ(tensor({8, 128, 512}, "bfloat16").nbytes(), 8 * 128 * 512 * 2);
  EXPECT_EQ(tensor({}).numel(), 1);  // a scalar
  EXPECT_EQ(tensor({3, 0}).nbytes(), 0);
  EXPECT_EQ(tensor({3}, "quint4x2").nbytes(), 0);  // unknown dtype
  TensorMeta undefined;
  undefined.defined = false;
  EXPECT_EQ(undefined.numel(), 0);
}

TEST(TraceStructs, ArgumentLookups) {
  const Trace trace = full_trace();
  const OpRecord& linear = trace.steps[0].ops[0];
  ASSERT_NE(linear.tensor("input"), nullptr);
  EXPECT_EQ(linear.tensor("input")->dtype, "bfloat16");
  EXPECT_EQ(linear.tensor("bias"), nullptr);    // undefined
  EXPECT_EQ(linear.tensor("weight"), nullptr);  // absent
  EXPECT_EQ(linear.first_tensor(), linear.tensor("input"));
  const OpRecord& misc = trace.steps[0].ops[2];
  ASSERT_NE(misc.arg("dim"), nullptr);
  EXPECT_EQ(misc.arg("dim")->ints, std::vector<int64_t>{-1});
  EXPECT_EQ(misc.tensor("tensors"), nullptr);  // a list, not a tensor
  ASSERT_NE(misc.first_tensor(), nullptr);     // but the list's first defined element counts
  EXPECT_EQ(misc.first_tensor()->shape, std::vector<int64_t>{4});
  EXPECT_EQ(trace.steps[0].ops[3].first_tensor(), nullptr);
  EXPECT_EQ(misc.arg("nope"), nullptr);
}

TEST(TraceStructs, PhaseNames) {
  for (Phase p : {Phase::Forward, Phase::Backward, Phase::Optimizer, Phase::Other}) {
    EXPECT_EQ(phase_from_string(to_string(p)), p);
  }
  EXPECT_STREQ(to_string(Phase::Backward), "backward");
  EXPECT_FALSE(phase_from_string("Forward").has_value());
}

}  // namespace
}  // namespace habitat
