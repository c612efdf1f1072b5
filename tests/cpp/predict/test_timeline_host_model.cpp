// The inclusive eager-PyTorch host model for CPU-traced steps (timeline_host_model.cpp).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "habitat/timeline.h"
#include "habitat/trace.h"

namespace habitat {
namespace {

OpRecord op(uint64_t id, const std::string& name, Phase phase, int depth = 0,
            std::optional<uint64_t> parent = {}) {
  OpRecord o;
  o.id = id;
  o.name = name;
  o.phase = phase;
  o.depth = depth;
  o.parent = parent;
  o.start_us = 1000.0 * static_cast<double>(id);  // the CPU's own times: never used
  o.wall_us = 900;
  return o;
}

TensorMeta tensor(std::vector<int64_t> shape) {
  TensorMeta t;
  t.shape = std::move(shape);
  t.dtype = "float32";
  t.device = "cpu";
  int64_t stride = 1;
  t.strides.assign(t.shape.size(), 1);
  for (std::size_t i = t.shape.size(); i-- > 0;) {
    t.strides[i] = stride;
    stride *= t.shape[i];
  }
  return t;
}

Argument tensor_arg(const std::string& name, std::vector<int64_t> shape) {
  Argument a{name, {}};
  a.value.kind = ArgValue::Kind::Tensor;
  a.value.tensors.push_back(tensor(std::move(shape)));
  return a;
}

HostCostModel model() {
  HostCostModel m;
  m.calibration = "test";
  m.top_level_op_us = {{"aten::linear", 100}, {"aten::t", 2}};
  m.phase_gap_us = {{Phase::Forward, 10}, {Phase::Backward, 5}, {Phase::Optimizer, 4}};
  m.top_level_gap_us = 1;
  m.foreach_per_tensor_us = {{"aten::_foreach_add_", 3}, {"aten::_foreach_div_", 7}};
  m.default_top_level_us = 50;
  m.default_top_level_view_us = 1.5;
  return m;
}

TraceOrigin cpu() { return TraceOrigin{}; }

TEST(HostModel, TopLevelOpsCostTheirSubtreeOnce) {
  Step step;
  step.ops = {op(0, "aten::linear", Phase::Forward), op(1, "aten::addmm", Phase::Forward, 1, 0),
              op(2, "aten::t", Phase::Backward)};
  step.ops[0].has_children = true;
  const HostCostModel m = model();
  TimelineOptions o;
  o.host_model = &m;
  const HostSchedule s = build_host_schedule(step, cpu(), o);
  ASSERT_EQ(s.events.size(), 3u);
  EXPECT_EQ(s.launch_source, LaunchSource::Modelled);
  // linear: forward gap + its cost; its child addmm adds nothing and launches with it.
  EXPECT_NEAR(s.events[0].host_us, 10 + 100, 1e-9);
  EXPECT_NEAR(s.events[1].host_us, 110, 1e-9);
  EXPECT_NEAR(s.host_end_us, 110 + 5 + 2, 1e-9);  // t: backward gap + its cost
}

TEST(HostModel, OptimizerPerTensorOpsAreCudasForeachCalls) {
  // AdamW-like single-tensor loop over 3 parameters: add_ twice per tensor, div once.
  Step step;
  uint64_t id = 0;
  for (int p = 0; p < 3; ++p) {
    for (const char* name : {"aten::add_", "aten::div", "aten::add_"})
      step.ops.push_back(op(id++, name, Phase::Optimizer));
  }
  const HostCostModel m = model();
  TimelineOptions o;
  o.host_model = &m;
  const HostSchedule s = build_host_schedule(step, cpu(), o);
  // gcd(6, 3) = 3 tensors per foreach call: 2 _foreach_add_ and 1 _foreach_div_ calls, each
  // with one optimizer gap, and per tensor their cost.
  EXPECT_NEAR(s.host_end_us, 6 * 3.0 + 3 * 7.0 + 3 * 4.0, 1e-9);
  ASSERT_FALSE(s.notes.empty());
  EXPECT_NE(s.notes.back().find("foreach calls (3 tensors each)"), std::string::npos);
}

TEST(HostModel, UnseenNamesCostByTheKernelsCudaWouldLaunch) {
  Step step;
  step.ops = {op(0, "aten::tanh", Phase::Forward), op(1, "aten::unsqueeze", Phase::Forward)};
  step.ops[0].args = {tensor_arg("self", {64, 64})};
  step.ops[0].outputs = {tensor(std::vector<int64_t>{64, 64})};
  step.ops[1].args = {tensor_arg("self", {64, 64})};
  step.ops[1].outputs = {tensor(std::vector<int64_t>{1, 64, 64})};
  HostCostModel m = model();
  TimelineOptions o;
  o.host_model = &m;
  // Without a per-kernel line: the median op that launches work, or that launches none.
  EXPECT_NEAR(build_host_schedule(step, cpu(), o).host_end_us, 10 + 50 + 10 + 1.5, 1e-9);
  m.unseen_base_us = 20;
  m.unseen_per_kernel_us = 12;
  EXPECT_NEAR(build_host_schedule(step, cpu(), o).host_end_us, 10 + 20 + 12 * 1 + 10 + 1.5, 1e-9);
}

TEST(HostModel, AFirstStepsOptimizerStateCreationTakesNoHostTime) {
  // Adam's first step for one parameter: exp_avg = zeros_like(p) (a fill below it), then the
  // update every step runs (a per-tensor add_, modelled as a foreach call).
  Step first;
  first.ops = {op(0, "aten::zeros_like", Phase::Optimizer),
               op(1, "aten::zero_", Phase::Optimizer, 1, 0), op(2, "aten::add_", Phase::Optimizer)};
  first.ops[0].has_children = true;
  first.ops[0].args = {tensor_arg("self", {64, 64})};
  first.ops[0].outputs = {tensor(std::vector<int64_t>{64, 64})};
  first.ops[2].args = {tensor_arg("self", {64, 64}), tensor_arg("other", {64, 64})};
  Step later;
  later.ops = {first.ops[2]};
  const HostCostModel m = model();
  TimelineOptions o;
  o.host_model = &m;
  const HostSchedule s = build_host_schedule(first, cpu(), o);
  EXPECT_NEAR(s.host_end_us, build_host_schedule(later, cpu(), o).host_end_us, 1e-9);
  ASSERT_FALSE(s.notes.empty());
  EXPECT_NE(s.notes.back().find("the optimizer's state created in this step (1 call:"),
            std::string::npos);
}

TEST(HostModel, JsonCarriesTheInclusiveFields) {
  const HostCostModel m = host_cost_model_from_json(
      R"({"default_op_us": 3, "top_level_gap_us": 10, "top_level_op_us": {"aten::linear": 100},
          "default_top_level_us": 26, "default_top_level_view_us": 0.7,
          "phase_gap_us": {"forward": 16, "backward": 6}, "foreach_per_tensor_us": {"aten::_foreach_add_": 0.9},
          "unseen_op_us": {"base_us": 40, "per_kernel_us": 12}, "calibration": "c"})");
  EXPECT_TRUE(m.inclusive());
  EXPECT_EQ(m.phase_gap_us.at(Phase::Backward), 6);
  EXPECT_EQ(m.unseen_per_kernel_us, 12);
  EXPECT_EQ(m.default_top_level_view_us, 0.7);
  EXPECT_THROW(host_cost_model_from_json(
                   R"({"default_op_us": 3, "top_level_gap_us": 1, "phase_gap_us": {"fwd": 1}})"),
               std::invalid_argument);
  EXPECT_THROW(
      host_cost_model_from_json(
          R"({"default_op_us": 3, "top_level_gap_us": 1, "unseen_op_us": {"base_us": 1}})"),
      std::invalid_argument);
  EXPECT_FALSE(
      host_cost_model_from_json(R"({"default_op_us": 3, "top_level_gap_us": 1})").inclusive());
}

}  // namespace
}  // namespace habitat
