// An op whose kernels ran side by side on several streams (cuDNN's multi-layer RNNs) takes the
// device for the time they covered, not their sum.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "cost/test_op_cost_builders.h"
#include "habitat/predictor.h"
#include "habitat/timeline.h"
#include "habitat/trace.h"
#include "habitat/wave_scaling.h"
#include "predict/kernel_overlap.h"
#include "test_devices.h"

namespace habitat {
namespace {

KernelLaunch kernel(double duration_us, std::optional<double> start_us, uint32_t stream = 7) {
  KernelLaunch k;
  k.name = "elemWiseRNNcell";
  k.grid[0] = 512;
  k.block[0] = 256;
  k.registers_per_thread = 32;
  k.duration_us = duration_us;
  k.device_start_us = start_us;
  k.stream = stream;
  return k;
}

TEST(KernelOverlap, TheBusyShareOfKernelsOnTwoStreams) {
  // Side by side: 10 us of the device for 20 us of kernels.
  const std::vector<KernelLaunch> same{kernel(10, 0.0, 1), kernel(10, 0.0, 2)};
  EXPECT_DOUBLE_EQ(kernel_busy_fraction(same), 0.5);
  // Half overlapping, then a gap, then one more: 15 + 5 of 25.
  const std::vector<KernelLaunch> staggered{kernel(10, 0.0, 1), kernel(10, 5.0, 2),
                                            kernel(5, 40.0, 1)};
  EXPECT_DOUBLE_EQ(kernel_busy_fraction(staggered), 20.0 / 25.0);
  // One after another, in any recorded order.
  const std::vector<KernelLaunch> serial{kernel(4, 10.0), kernel(6, 0.0)};
  EXPECT_DOUBLE_EQ(kernel_busy_fraction(serial), 1.0);
}

TEST(KernelOverlap, WithoutDeviceStartsTheSumStands) {
  EXPECT_DOUBLE_EQ(kernel_busy_fraction(std::vector<KernelLaunch>{}), 1.0);
  EXPECT_DOUBLE_EQ(kernel_busy_fraction(std::vector{kernel(10, 0.0)}), 1.0);
  // A trace before format 2: no device clock.
  EXPECT_DOUBLE_EQ(kernel_busy_fraction(std::vector{kernel(10, 0.0), kernel(10, std::nullopt)}),
                   1.0);
  EXPECT_DOUBLE_EQ(kernel_busy_fraction(std::vector{kernel(0, 0.0), kernel(0, 0.0)}), 1.0);
}

TEST(KernelOverlap, AGpuOriginsForecastScalesTheBusyTime) {
  OpRecord op;
  op.name = "aten::relu";
  op.args = {test::tensor("self", test::T({1 << 20}))};
  op.outputs = {test::T({1 << 20})};
  op.kernels = {kernel(30, 0.0, 1), kernel(30, 10.0, 2)};  // 40 us busy of 60 summed
  Step step;
  step.ops = {op};
  TraceOrigin origin;
  origin.device = "NVIDIA H100 80GB HBM3";
  const Forecast f = Predictor(test::db()).predict(step, origin, {"H100", "A100"});
  EXPECT_EQ(f.ops[0].per_target[0].method, Method::WaveScaling);
  EXPECT_NEAR(f.ops[0].per_target[0].time_us, 40.0, 1e-9);  // the origin forecasts itself
  const OpCost cost = estimate_cost(op);
  const WaveScaler scaler(test::db().find("H100"), test::db().find("A100"));
  double summed = 0;
  for (const auto& k : op.kernels) {
    summed += scaler.scale(k, cost.arithmetic_intensity(), cost.precision).time_us;
  }
  EXPECT_NEAR(f.ops[0].per_target[1].time_us, summed * 40.0 / 60.0, 1e-9);
}

TEST(KernelOverlap, TheTimelineRunsTheKernelsAtTheirOwnLengthsSideBySide) {
  // Two 30 us kernels on two streams, launched and run 10 us apart: the op's forecast on its
  // own GPU is 40 us, and the timeline gives each kernel back its 30 us on its own stream (40
  // us busy: not 60, nor the 30 of two 20 us kernels).
  OpRecord op;
  op.name = "aten::_cudnn_rnn";
  op.wall_us = 12;
  op.kernels = {kernel(30, 0.0, 1), kernel(30, 10.0, 2)};
  op.kernels[0].launch_us = 0.0;
  op.kernels[1].launch_us = 10.0;
  Step step;
  step.ops = {op};
  TraceOrigin origin;
  origin.device = "H100-SXM5-80GB";
  TimelineOptions options;
  options.overhead_per_op_us = 0;
  const HostSchedule schedule = build_host_schedule(step, origin, options);
  const std::vector<double> share{kernel_busy_us(op.kernels)};
  EXPECT_DOUBLE_EQ(share[0], 40.0);
  const std::vector<double> launches = launch_durations(schedule, step, share);
  std::vector<double> kernels;
  for (std::size_t e = 0; e < schedule.events.size(); ++e) {
    if (schedule.events[e].kind == HostEvent::Kind::Launch) kernels.push_back(launches[e]);
  }
  EXPECT_EQ(kernels, (std::vector<double>{30.0, 30.0}));
  const TimelineResult r = simulate_timeline(schedule, launches, options);
  EXPECT_NEAR(r.device_busy_us, 40.0, 1e-9);
}

}  // namespace
}  // namespace habitat
