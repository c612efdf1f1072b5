// A trace built as a TraceTree reads exactly as the same document parsed from JSON text: the
// same structs, and for a bad document the same TraceFormatError.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "habitat/trace.h"
#include "habitat/trace_tree.h"

namespace habitat {
namespace {

using nlohmann::json;

// The document as a caller holding it as objects would hand it over.
void fill(TraceTree::Node node, const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      node.set_null();
      break;
    case json::value_t::boolean:
      node.set_bool(j.get<bool>());
      break;
    case json::value_t::number_integer:
      node.set_int(j.get<int64_t>());
      break;
    case json::value_t::number_unsigned:
      node.set_uint(j.get<uint64_t>());
      break;
    case json::value_t::number_float:
      node.set_real(j.get<double>());
      break;
    case json::value_t::string:
      node.set_string(j.get_ref<const std::string&>());
      break;
    case json::value_t::array: {
      node.set_array(j.size());
      for (std::size_t i = 0; i < j.size(); ++i) fill(node.element(i), j[i]);
      break;
    }
    case json::value_t::object: {
      node.set_object(j.size());
      std::size_t i = 0;
      for (const auto& [key, value] : j.items()) fill(node.member(i++, key), value);
      break;
    }
    default:
      FAIL() << "unexpected JSON value";
  }
}

TraceTree tree_of(const std::string& text) {
  TraceTree tree;
  fill(tree.root(), json::parse(text));
  return tree;
}

std::string error_of(const std::string& text, bool as_tree) {
  try {
    if (as_tree) {
      trace_from_tree(tree_of(text));
    } else {
      trace_from_json(text);
    }
  } catch (const TraceFormatError& e) {
    return e.what();
  }
  return "(accepted)";
}

const char* const kDocument = R"({"format": "habitat-trace", "version": 2,
  "origin": {"device": "H100", "allow_tf32": true, "float32_matmul_precision": "high"},
  "steps": [{"index": 3, "wall_ms": 12.5, "measured_peak_bytes": 1024,
    "syncs": [{"kind": "stream", "start_us": 4.5, "stream": 7}],
    "ops": [{"id": 1, "name": "aten::linear", "has_children": true, "phase": "forward",
             "module_path": "fc", "start_us": 0.25, "wall_us": 9.5},
            {"id": 2, "parent": 1, "depth": 1, "name": "aten::addmm",
             "args": [{"name": "self", "tensor": {"shape": [16], "dtype": "float32", "device": "cuda:0"}},
                      {"name": "mat1", "tensor": {"shape": [8, 32], "strides": [1, 8], "contiguous": false}},
                      {"name": "beta", "float": "-inf"}, {"name": "alpha", "int": -3},
                      {"name": "dims", "ints": [1, -2]}, {"name": "flags", "bools": [true, false]},
                      {"name": "mode", "str": "caf\u00e9"}, {"name": "out", "none": true}],
             "outputs": [{"shape": [8, 16], "dtype": "float32", "storage": 18446744073709551615}],
             "kernels": [{"name": "gemm", "grid": [4, 2, 1], "block": [128, 1, 1],
                          "registers_per_thread": 64, "duration_us": 3.75, "launch_us": 1.0}],
             "precision": {"matmul_allow_tf32": false, "autocast_dtype": "torch.bfloat16"}}]}],
  "forecast": {"ignored": [1, 2.5, null]}})";

TEST(TraceTree, ReadsAsTheSameText) {
  const Trace by_text = trace_from_json(kDocument);
  const Trace by_tree = trace_from_tree(tree_of(kDocument));
  EXPECT_EQ(trace_to_json(by_tree), trace_to_json(by_text));
  ASSERT_EQ(by_tree.steps.size(), 1u);
  EXPECT_EQ(by_tree.steps[0].ops[1].args[2].value.real, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(by_tree.steps[0].ops[1].outputs[0].storage, UINT64_MAX);
}

TEST(TraceTree, FailsAsTheSameText) {
  const std::string bad[] = {
      R"([1])",
      R"({"format": "habitat-trace"})",
      R"({"format": "other", "version": 1})",
      R"({"format": "habitat-trace", "version": 9, "origin": {}, "steps": []})",
      R"({"format": "habitat-trace", "version": 2, "origin": {}, "steps": [{"index": 0,
          "wall_ms": 1, "ops": [{"id": 1, "name": "aten::mm", "args": [{"name": "self",
          "tensor": {"shape": [2, -1]}}]}]}]})",
      R"({"format": "habitat-trace", "version": 2, "origin": {}, "steps": [{"index": 0,
          "wall_ms": 1, "ops": [{"id": 1, "name": "a", "parent": 2}, {"id": 2, "name": "b",
          "parent": 1}]}]})",
      R"({"format": "habitat-trace", "version": 2, "origin": {"float32_matmul_precision": "low"},
          "steps": []})",
  };
  for (const auto& text : bad) {
    const std::string expected = error_of(text, false);
    EXPECT_NE(expected, "(accepted)") << text;
    EXPECT_EQ(error_of(text, true), expected) << text;
  }
}

TEST(TraceTree, AnEmptyTreeIsNoTrace) {
  TraceTree tree;
  EXPECT_THROW(trace_from_tree(tree), TraceFormatError);
}

}  // namespace
}  // namespace habitat
