// A first optimizer step creates the optimizer's state (torch.optim's lazy _init_group); a
// CPU-traced first step is forecast as the steps a run repeats, without it.
#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "habitat/predictor.h"
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
    if (m.state_init.ops[i]) EXPECT_TRUE(m.host_only[i]) << first.ops[i].name;
  }
  TraceOrigin cpu;
  cpu.device = "cpu";
  const Predictor predictor(test::db());
  EXPECT_DOUBLE_EQ(predictor.predict(first, cpu, {"H100"}).totals[0].total_us,
                   predictor.predict(later, cpu, {"H100"}).totals[0].total_us);
}

}  // namespace
}  // namespace habitat
