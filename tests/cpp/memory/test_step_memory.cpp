// The engine's step memory estimate on a hand-computed step (the same step and figures as
// tests/python/analysis/test_memory.py::sgd_step; the Python tests also check both
// implementations agree on every committed trace).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "habitat/step_memory.h"
#include "habitat/trace.h"

namespace habitat {
namespace {

using nlohmann::json;

json tensor(uint64_t sid, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
  json t = {{"shape", shape}, {"dtype", "float32"}, {"device", "cpu"}, {"storage", sid}};
  if (!strides.empty()) t["strides"] = strides;
  return t;
}

json op(int id, const std::string& name, const std::string& phase,
        std::vector<std::pair<std::string, json>> args, std::vector<json> outputs) {
  json a = json::array();
  for (auto& [n, v] : args) a.push_back({{"name", n}, {"tensor", v}});
  return {{"id", id},           {"name", name},   {"phase", phase}, {"args", a},
          {"outputs", outputs}, {"start_us", id}, {"wall_us", 1.0}};
}

// Linear(4 -> 3) + ReLU + sum on a batch of 2, then plain SGD (float32). W = storage 1
// (48 B), b = 2 (12 B), x = 3 (32 B).
Step sgd_step() {
  json ops = json::array({
      op(0, "aten::t", "forward", {{"self", tensor(1, {3, 4})}}, {tensor(1, {4, 3}, {1, 4})}),
      op(1, "aten::addmm", "forward",
         {{"self", tensor(2, {3})},
          {"mat1", tensor(3, {2, 4})},
          {"mat2", tensor(1, {4, 3}, {1, 4})}},
         {tensor(4, {2, 3})}),
      op(2, "aten::relu", "forward", {{"self", tensor(4, {2, 3})}}, {tensor(5, {2, 3})}),
      op(3, "aten::sum", "forward", {{"self", tensor(5, {2, 3})}}, {tensor(6, {})}),
      op(4, "aten::ones_like", "backward", {{"self", tensor(6, {})}}, {tensor(7, {})}),
      op(5, "aten::expand", "backward", {{"self", tensor(7, {})}}, {tensor(7, {2, 3}, {0, 0})}),
      op(6, "aten::threshold_backward", "backward",
         {{"grad_output", tensor(7, {2, 3}, {0, 0})}, {"self", tensor(5, {2, 3})}},
         {tensor(8, {2, 3})}),
      op(7, "aten::mm", "backward",
         {{"self", tensor(8, {3, 2}, {1, 3})}, {"mat2", tensor(3, {2, 4})}}, {tensor(9, {3, 4})}),
      op(8, "aten::sum", "backward", {{"self", tensor(8, {2, 3})}}, {tensor(10, {3})}),
      op(9, "aten::add_", "optimizer", {{"self", tensor(1, {3, 4})}, {"other", tensor(9, {3, 4})}},
         {tensor(1, {3, 4})}),
      op(10, "aten::add_", "optimizer", {{"self", tensor(2, {3})}, {"other", tensor(10, {3})}},
         {tensor(2, {3})}),
  });
  json doc = {{"format", "habitat-trace"},
              {"version", 2},
              {"origin", {{"device", "cpu"}}},
              {"steps", json::array({{{"index", 0}, {"wall_ms", 1.0}, {"ops", ops}}})}};
  return trace_from_json(doc.dump()).steps.front();
}

TEST(StepMemory, CategoriesAndPeakOfAHandComputedStep) {
  const StepMemory m = estimate_step_memory(sgd_step());
  EXPECT_EQ(m.parameters, 48 + 12);
  EXPECT_EQ(m.gradients, 48 + 12);
  EXPECT_EQ(m.optimizer_state, 0);
  EXPECT_EQ(m.inputs, 32);
  EXPECT_EQ(m.activations, 52);
  EXPECT_EQ(m.live_peak, 176);  // op 8: persistent 92 + relu out 24 + dW 48 + db 12
  EXPECT_EQ(m.peak_op, "aten::sum");
  EXPECT_EQ(m.peak_phase, "backward");
  EXPECT_TRUE(m.uses_matmul);
  EXPECT_TRUE(m.notes.empty());
}

TEST(StepMemory, NotesDroppedOpsAndAMissingOptimizer) {
  Step step = sgd_step();
  step.ops.resize(9);  // forward and backward only
  step.dropped_ops = 3;
  const StepMemory m = estimate_step_memory(step);
  ASSERT_EQ(m.notes.size(), 2u);
  EXPECT_EQ(m.notes[0], "no optimizer step in this step: parameters are counted with inputs");
  EXPECT_EQ(m.notes[1],
            "3 op(s) were not recorded (capture cap): the estimate misses their tensors");
  EXPECT_EQ(m.parameters, 0);
}

TEST(StepMemory, EmptyStep) {
  const StepMemory m = estimate_step_memory(Step{});
  EXPECT_EQ(m.live_peak, 0);
  EXPECT_EQ(m.peak_op, "");
  EXPECT_TRUE(m.notes.empty());
}

}  // namespace
}  // namespace habitat
