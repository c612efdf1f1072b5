// A first optimizer step creates the optimizer's state (torch.optim's lazy _init_group); a
// CPU-traced first step is forecast as the steps a run repeats, without it.
#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "habitat/predictor.h"
#include "habitat/timeline.h"
#include "predict/cuda_paths.h"
#include "predict/optimizer_state.h"
#include "test_devices.h"

namespace habitat {
namespace {

using test::T;
using test::tensor;

// An optimizer-phase call (test::op) at `depth`, below the call before it when nested.
OpRecord call(uint64_t id, std::string name, std::vector<Argument> args,
              std::vector<TensorMeta> outputs, Phase phase = Phase::Optimizer, int depth = 0) {
  OpRecord op = test::op(std::move(name), "", std::move(args), std::move(outputs));
  op.id = id;
  op.phase = phase;
  op.depth = depth;
  if (depth > 0) op.parent = id - 1;
  return op;
}

// Adam's step for one [64, 64] parameter: `first` adds what its first step runs before the
// update (the step counter from torch.tensor(0.0), exp_avg and exp_avg_sq from zeros_like, each
// a fill below it), then step += 1 and exp_avg.lerp_ as every step.
Step adam_step(bool first) {
  const TensorMeta p = T({64, 64});
  Step step;
  uint64_t id = 0;
  if (first) {
    step.ops.push_back(call(id++, "aten::lift_fresh", {tensor("self", T({}))}, {T({})}));
    step.ops.push_back(call(id++, "aten::detach_", {tensor("self", T({}))}, {T({})}));
    for (int buffer = 0; buffer < 2; ++buffer) {
      OpRecord zeros = call(id++, "aten::zeros_like", {tensor("self", p)}, {p});
      zeros.has_children = true;
      step.ops.push_back(zeros);
      step.ops.push_back(call(id++, "aten::zero_", {tensor("self", p)}, {p}, Phase::Optimizer, 1));
    }
  }
  step.ops.push_back(
      call(id++, "aten::add_", {tensor("self", T({})), tensor("other", T({}))}, {T({})}));
  OpRecord lerp = call(id++, "aten::lerp_",
                       {tensor("self", p), tensor("end", p), test::real("weight", 0.1)}, {p});
  lerp.overload = "Scalar";
  step.ops.push_back(lerp);
  return step;
}

TEST(OptimizerState, AFirstStepsStateCreationIsFoundAndNothingElse) {
  const Step step = adam_step(true);
  const OptimizerStateInit init = optimizer_state_init(step);
  EXPECT_EQ(init.calls, 4u);  // lift_fresh, detach_, two zeros_like
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const bool update = step.ops[i].name == "aten::add_" || step.ops[i].name == "aten::lerp_";
    EXPECT_EQ(init.ops[i] != 0, !update) << step.ops[i].name;  // the fills below zeros_like too
  }
  EXPECT_EQ(optimizer_state_init(adam_step(false)).calls, 0u);
  // The foreach AdamW's later steps make a 0-dim torch.tensor(1.0) for the step increment:
  // without state buffers created, it is the step's own.
  Step steady = adam_step(false);
  steady.ops.insert(steady.ops.begin(),
                    call(9, "aten::lift_fresh", {tensor("self", T({}))}, {T({})}));
  EXPECT_EQ(optimizer_state_init(steady).calls, 0u);
  // Outside the optimizer, or on more than 0-dim tensors, the same names are the step's work.
  Step forward = adam_step(true);
  for (OpRecord& op : forward.ops) op.phase = Phase::Forward;
  EXPECT_EQ(optimizer_state_init(forward).calls, 0u);
  Step cast;
  cast.ops = {call(0, "aten::to", {tensor("self", T({64, 64}))}, {T({64, 64}, "bfloat16")})};
  EXPECT_EQ(optimizer_state_init(cast).calls, 0u);
}

TEST(OptimizerState, AFirstStepIsForecastAsTheStepsThatFollowIt) {
  const Step first = adam_step(true), later = adam_step(false);
  const cuda_paths::Mapping m = cuda_paths::map_cpu_step(first, OpIndex(first));
  for (std::size_t i = 0; i < first.ops.size(); ++i) {
    if (m.state_init.ops[i]) {
      EXPECT_TRUE(m.host_only[i]) << first.ops[i].name;
    }
  }
  TraceOrigin cpu;
  cpu.device = "cpu";
  const Predictor predictor(test::db());
  EXPECT_DOUBLE_EQ(predictor.predict(first, cpu, {"H100"}).totals[0].total_us,
                   predictor.predict(later, cpu, {"H100"}).totals[0].total_us);
}

// The same steps traced on a GPU: top-level calls 50 us apart, each taking 40 us of host time
// (a nested call 10 us inside it); a call writing a tensor launches a 3 us kernel (the step
// counter's, on 0-dim tensors, launch none).
Step timed(Step step) {
  double at = 0;
  for (OpRecord& op : step.ops) {
    op.start_us = op.depth == 0 ? at : at - 45;
    op.wall_us = op.depth == 0 ? 40 : 10;
    if (op.depth == 0) at += 50;
    if (!op.outputs.empty() && !op.outputs[0].shape.empty() && !op.has_children) {
      KernelLaunch k;
      k.name = "k";
      k.duration_us = 3;
      op.kernels.push_back(k);
    }
  }
  return step;
}

TEST(OptimizerState, AFirstStepTracedOnAGpuIsForecastAsTheStepsThatFollowIt) {
  const Step first = timed(adam_step(true)), later = timed(adam_step(false));
  TraceOrigin gpu;
  gpu.device = "H100-SXM5-80GB";
  const Predictor predictor(test::db());
  EXPECT_DOUBLE_EQ(predictor.predict(first, gpu, {"A100"}).totals[0].total_us,
                   predictor.predict(later, gpu, {"A100"}).totals[0].total_us);
  TimelineOptions o;
  o.overhead_per_op_us = 0;
  const HostSchedule a = build_host_schedule(first, gpu, o), b = build_host_schedule(later, gpu, o);
  // The four state calls' 40 us each come out of the host's time (the 10 us the host spent
  // between them stays), and they launch nothing.
  EXPECT_NEAR(a.host_end_us, b.host_end_us + 4 * 10, 1e-9);
  EXPECT_EQ(a.events.size(), b.events.size());
  bool said = false;
  for (const std::string& note : a.notes) {
    said = said || note.find("the optimizer's state created in this step (4 calls, 0.16 ms") !=
                       std::string::npos;
  }
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace habitat
