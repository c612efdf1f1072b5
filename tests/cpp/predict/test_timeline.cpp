#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "habitat/predictor.h"
#include "habitat/timeline.h"
#include "habitat/trace.h"

namespace habitat {
namespace {

KernelLaunch kernel(double us, uint32_t stream = 7) {
  KernelLaunch k;
  k.name = "k";
  k.duration_us = us;
  k.stream = stream;
  return k;
}

// A leaf op at [start, start + wall) launching kernels of the given durations.
OpRecord op_at(uint64_t id, double start, double wall, std::vector<double> kernels,
               Phase phase = Phase::Forward) {
  OpRecord op;
  op.id = id;
  op.name = "aten::relu";
  op.start_us = start;
  op.wall_us = wall;
  op.phase = phase;
  for (double k : kernels) op.kernels.push_back(kernel(k));
  return op;
}

TraceOrigin gpu() {
  TraceOrigin o;
  o.device = "H100-SXM5-80GB";
  return o;
}

TimelineOptions no_overhead() {
  TimelineOptions o;
  o.overhead_per_op_us = 0;
  return o;
}

TimelineResult play(const Step& step, const TimelineOptions& options, double kernel_scale = 1.0) {
  const HostSchedule s = build_host_schedule(step, gpu(), options);
  std::vector<double> share;
  for (const auto& op : step.ops) {
    double sum = 0;
    for (const auto& k : op.kernels) sum += k.duration_us;
    share.push_back(sum * kernel_scale);
  }
  return simulate_timeline(s, launch_durations(s, step, share), options);
}

TEST(Timeline, DeviceBoundStepIsTheKernelSum) {
  // Ten ops launched 1 us apart, each running 100 us: the GPU never waits.
  Step step;
  for (uint64_t i = 0; i < 10; ++i)
    step.ops.push_back(op_at(i, static_cast<double>(i), 1.0, {100.0}));
  const TimelineResult r = play(step, no_overhead());
  ASSERT_TRUE(r.valid);
  EXPECT_NEAR(r.step_us, 1000.0, 1e-6);
  EXPECT_NEAR(r.kernel_sum_us, 1000.0, 1e-6);
  EXPECT_NEAR(r.gpu_busy_fraction, 1.0, 1e-9);
  EXPECT_FALSE(r.host_bound);
}

TEST(Timeline, HostBoundStepIsTheHostCadence) {
  // Ops every 50 us, each with a 5 us kernel: the step takes as long as the host.
  Step step;
  for (uint64_t i = 0; i < 10; ++i)
    step.ops.push_back(op_at(i, 50.0 * static_cast<double>(i), 10.0, {5.0}));
  const TimelineResult r = play(step, no_overhead());
  EXPECT_NEAR(r.host_us, 460.0, 1e-6);
  EXPECT_NEAR(r.step_us, 460.0, 1e-6);  // steady state: one host period per step
  EXPECT_NEAR(r.kernel_sum_us, 50.0, 1e-6);
  EXPECT_TRUE(r.host_bound);
  EXPECT_NEAR(r.gpu_busy_fraction, 50.0 / 460.0, 1e-9);
  // A faster GPU changes nothing; a faster host does.
  EXPECT_NEAR(play(step, no_overhead(), 0.5).step_us, 460.0, 1e-6);
  TimelineOptions fast = no_overhead();
  fast.host_speed = 2.0;
  EXPECT_NEAR(play(step, fast).step_us, 230.0, 1e-6);
}

TEST(Timeline, KernelsNeverStartBeforeTheirLaunch) {
  // One long op, then a late launch: the device idles until the host gets there.
  Step step;
  step.ops = {op_at(0, 0, 10, {20.0}), op_at(1, 300, 10, {20.0})};
  const HostSchedule s = build_host_schedule(step, gpu(), no_overhead());
  ASSERT_EQ(s.events.size(), 2u);
  EXPECT_DOUBLE_EQ(s.events[0].host_us, 10.0);  // launched at the end of its op's window
  EXPECT_DOUBLE_EQ(s.events[1].host_us, 310.0);
  const TimelineResult r = simulate_timeline(s, {20.0, 20.0}, no_overhead());
  EXPECT_NEAR(r.device_busy_us, 40.0, 1e-9);
  EXPECT_NEAR(r.step_us, 310.0, 1e-6);  // host period; the last kernel ends 20 us after the host
}

TEST(Timeline, StreamsOverlapAndStreamWaitsOrderThem) {
  Step step;
  OpRecord a = op_at(0, 0, 1, {});
  a.kernels = {kernel(100, 7), kernel(100, 13)};
  step.ops = {a};
  EXPECT_NEAR(play(step, no_overhead()).device_busy_us, 100.5, 1e-6);  // two streams overlap
  // The same kernels with stream 13 made to wait for stream 7 run one after the other.
  step.syncs.push_back({SyncRecord::Kind::StreamWait, 0.6, 0, 13, 7});
  step.ops[0].kernels[0].launch_us = 0.5;
  step.ops[0].kernels[1].launch_us = 0.7;
  const TimelineResult r = play(step, no_overhead());
  EXPECT_EQ(r.launch_source, LaunchSource::Cupti);
  EXPECT_NEAR(r.device_busy_us, 200.0, 1e-6);
}

TEST(Timeline, HostSyncBlocksUntilTheDeviceCatchesUp) {
  // A 1 ms kernel, then an .item() (blocking copy) and a second op: the host waits.
  Step step;
  step.ops = {op_at(0, 0, 10, {1000.0}), op_at(1, 20, 1010, {})};
  step.ops[1].name = "aten::_local_scalar_dense";
  TensorMeta t;
  t.device = "cuda:0";
  t.dtype = "float32";
  step.ops[1].args.push_back({"self", ArgValue{ArgValue::Kind::Tensor, {t}, {}, 0, ""}});
  step.ops.push_back(op_at(2, 1040, 10, {5.0}));
  const HostSchedule s = build_host_schedule(step, gpu(), no_overhead());
  EXPECT_EQ(s.syncs, 1);
  // The origin's wait (the sync op's 1010 us) is taken out of the cadence...
  EXPECT_NEAR(s.host_end_us, 1050.0 - 1010.0, 1e-9);
  // ...and the target's wait is simulated: with a 10x faster GPU the step is much shorter.
  const TimelineResult same = play(step, no_overhead());
  const TimelineResult fast = play(step, no_overhead(), 0.1);
  EXPECT_GT(same.step_us, 1000.0);
  EXPECT_LT(fast.step_us, 200.0);
}

TEST(Timeline, MeasuredOverheadIsRemovedFromTheCadence) {
  Step step;
  for (uint64_t i = 0; i < 4; ++i) {
    step.ops.push_back(op_at(i, 100.0 * static_cast<double>(i), 10.0, {1.0}));
    step.ops.back().overhead_us = 40.0;
  }
  const HostSchedule s = build_host_schedule(step, gpu(), TimelineOptions{});
  EXPECT_EQ(s.overhead_source, OverheadSource::Measured);
  EXPECT_NEAR(s.overhead_removed_us, 160.0, 1e-9);
  EXPECT_NEAR(s.host_end_us, 310.0 - 160.0, 1e-9);
  // Times stay in host order even when a removal exceeds the gap before an event.
  for (std::size_t i = 1; i < s.events.size(); ++i)
    EXPECT_GE(s.events[i].host_us, s.events[i - 1].host_us);
}

TEST(Timeline, HabitatTimeBeforeAnOpIsRemovedWhereItWasSpent) {
  // Module hooks before op 2 (own_before_us): the cadence loses them from op 2 on, and the
  // step's hook total is not spread over its top-level ops a second time.
  Step step;
  for (uint64_t i = 0; i < 4; ++i) {
    step.ops.push_back(op_at(i, 100.0 * static_cast<double>(i), 10.0, {1.0}));
    step.ops.back().overhead_us = 0.0;
    step.ops.back().own_before_us = i == 2 ? 50.0 : 0.0;
  }
  step.hook_overhead_us = 50.0;
  const HostSchedule s = build_host_schedule(step, gpu(), TimelineOptions{});
  EXPECT_EQ(s.overhead_source, OverheadSource::Measured);
  EXPECT_NEAR(s.overhead_removed_us, 50.0, 1e-9);
  ASSERT_EQ(s.events.size(), 4u);
  EXPECT_NEAR(s.events[1].host_us, 110.0, 1e-9);         // before the hooks: as traced
  EXPECT_NEAR(s.events[2].host_us, 210.0 - 50.0, 1e-9);  // after them: 50 us earlier
  EXPECT_NEAR(s.host_end_us, 310.0 - 50.0, 1e-9);
}

TEST(Timeline, OpWindowsAreOnTheScheduleClock) {
  // The same step as above: an op's window loses the hooks spent before it, its end also
  // what was removed inside it (op 1's own recording, 5 us at its start); a CPU origin has none.
  Step step;
  for (uint64_t i = 0; i < 4; ++i) {
    step.ops.push_back(op_at(i, 100.0 * static_cast<double>(i), 10.0, {1.0}));
    step.ops.back().overhead_us = i == 1 ? 5.0 : 0.0;
    step.ops.back().own_before_us = i == 2 ? 50.0 : 0.0;
  }
  const OriginHostWindows w = origin_op_windows(step, gpu(), TimelineOptions{});
  ASSERT_EQ(w.ops.size(), 4u);
  EXPECT_EQ(w.host_scale, 1.0);
  EXPECT_NEAR(w.ops[0].start_us, 0.0, 1e-9);
  EXPECT_NEAR(w.ops[1].start_us, 95.0, 1e-9);
  EXPECT_NEAR(w.ops[1].end_us, 105.0, 1e-9);
  EXPECT_NEAR(w.ops[2].start_us, 200.0 - 55.0, 1e-9);
  EXPECT_NEAR(w.ops[3].end_us, 310.0 - 55.0, 1e-9);
  const HostSchedule s = build_host_schedule(step, gpu(), TimelineOptions{});
  EXPECT_NEAR(w.ops[3].end_us, s.host_end_us, 1e-9);
  TraceOrigin cpu;
  cpu.device = "cpu";
  EXPECT_TRUE(origin_op_windows(step, cpu, TimelineOptions{}).ops.empty());
}

TEST(Timeline, UntimedCaptureCostIsEstimatedFromWrapperOpsOfAFormatTwoStep) {
  // Ten wrappers 9 us around a 4 us child that recorded 2 us of its own and 1 us of
  // Habitat's time before it: 2 us per op the capture did not time.
  Step step;
  uint64_t id = 0;
  for (int i = 0; i < 10; ++i) {
    OpRecord w = op_at(id++, 20.0 * i, 9.0, {});
    w.has_children = true;
    w.overhead_us = 0.0;
    OpRecord c = op_at(id, 20.0 * i + 4, 4.0, {1.0});
    c.parent = w.id;
    c.depth = 1;
    c.overhead_us = 2.0;
    c.own_before_us = 1.0;
    ++id;
    step.ops.push_back(w);
    step.ops.push_back(c);
  }
  EXPECT_NEAR(estimate_untimed_overhead_per_op(step), 2.0, 1e-9);
  const HostSchedule s = build_host_schedule(step, gpu(), TimelineOptions{});
  EXPECT_EQ(s.overhead_source, OverheadSource::MeasuredPlusWrapperOps);
  EXPECT_NEAR(s.untimed_per_op_us, 2.0, 1e-9);
  // Per op: its own 0 or 2 us, 0 or 1 us before it, and 2 us untimed.
  EXPECT_NEAR(s.overhead_removed_us, 10 * (2.0 + 1.0) + 20 * 2.0, 1e-9);
  // A format-1 step (no overhead_us) has nothing to subtract from: no estimate.
  for (auto& op : step.ops) op.overhead_us.reset();
  EXPECT_LT(estimate_untimed_overhead_per_op(step), 0);
}

TEST(Timeline, SyncsOutsideTheOpsAreHabitatsWindowEdges) {
  // CUPTI's start and the flush before the window closes synchronise the device outside the
  // step's ops: left out, so the host runs ahead into the next step as it does untraced.
  Step step;
  step.ops = {op_at(0, 100, 10, {500.0}), op_at(1, 120, 10, {500.0})};
  step.syncs = {{SyncRecord::Kind::Device, 0, 20, 0, 0},
                {SyncRecord::Kind::Device, 140, 870, 0, 0},
                {SyncRecord::Kind::Stream, 125, 0, 7, 0}};
  const HostSchedule s = build_host_schedule(step, gpu(), no_overhead());
  EXPECT_EQ(s.habitat_syncs, 2);
  EXPECT_EQ(s.syncs, 1);
  // Device-bound steady state: the kernels back to back, no host wait between steps.
  step.syncs.pop_back();
  EXPECT_NEAR(play(step, no_overhead()).step_us, 1000.0, 1e-6);
}

TEST(Timeline, CaptureSetupBeforeTheFirstOpCountsAsOneTypicalGap) {
  // Top-level ops 10 us apart (5 us gaps), the first at 800 us: 795 us of setup removed.
  Step step;
  for (uint64_t i = 0; i < 5; ++i)
    step.ops.push_back(op_at(i, 800.0 + 10.0 * static_cast<double>(i), 5.0, {1.0}));
  const HostSchedule s = build_host_schedule(step, gpu(), no_overhead());
  EXPECT_NEAR(s.overhead_removed_us, 795.0, 1e-9);
  EXPECT_NEAR(s.host_end_us, 845.0 - 795.0, 1e-9);
  EXPECT_NEAR(s.overhead_per_op_us, 0.0, 1e-9);
}

TEST(Timeline, FormatOneOverheadIsEstimatedFromWrapperOps) {
  // Ten wrappers, each 6 us around a 4 us child: 2 us outside the child per wrapper.
  Step step;
  uint64_t id = 0;
  for (int i = 0; i < 10; ++i) {
    OpRecord w = op_at(id++, 20.0 * i, 6.0, {});
    w.name = "aten::conv2d";
    w.has_children = true;
    OpRecord c = op_at(id, 20.0 * i + 1, 4.0, {1.0});
    c.parent = w.id;
    c.depth = 1;
    ++id;
    step.ops.push_back(w);
    step.ops.push_back(c);
  }
  EXPECT_NEAR(estimate_overhead_per_op(step), 2.0, 1e-9);
  const HostSchedule s = build_host_schedule(step, gpu(), TimelineOptions{});
  EXPECT_EQ(s.overhead_source, OverheadSource::WrapperOps);
  EXPECT_NEAR(s.overhead_removed_us, 40.0, 1e-9);
  EXPECT_EQ(s.launch_source, LaunchSource::OpTimes);
  // Too few wrappers: the default measured per-op cost.
  step.ops.resize(4);
  EXPECT_LT(estimate_overhead_per_op(step), 0);
  EXPECT_EQ(build_host_schedule(step, gpu(), TimelineOptions{}).overhead_source,
            OverheadSource::Default);
}

TEST(Timeline, CpuOriginNeedsAHostModel) {
  Step step;
  step.ops = {op_at(0, 0, 500, {}), op_at(1, 600, 500, {})};
  step.ops[1].depth = 1;
  step.ops[1].parent = 0;
  step.ops[0].has_children = true;
  TraceOrigin cpu;
  EXPECT_TRUE(build_host_schedule(step, cpu, TimelineOptions{}).empty());
  HostCostModel model;
  model.default_op_us = 7;
  model.op_us["aten::relu"] = 3;
  model.top_level_gap_us = 10;
  step.ops[1].name = "aten::clamp_min";
  TimelineOptions o;
  o.host_model = &model;
  const HostSchedule s = build_host_schedule(step, cpu, o);
  EXPECT_EQ(s.launch_source, LaunchSource::Modelled);
  EXPECT_NEAR(s.host_end_us, 10 + 3 + 7, 1e-9);  // the CPU's 500 us op times are not used
  const TimelineResult r = simulate_timeline(s, {0.0, 100.0}, o);
  EXPECT_NEAR(r.step_us, 100.0, 1e-6);
}

TEST(Timeline, PhasesSplitHostAndDeviceTime) {
  Step step;
  step.ops = {op_at(0, 0, 10, {100.0}, Phase::Forward), op_at(1, 10, 200, {5.0}, Phase::Optimizer)};
  const TimelineResult r = play(step, no_overhead());
  EXPECT_FALSE(r.phases.at(Phase::Forward).host_bound);
  EXPECT_TRUE(r.phases.at(Phase::Optimizer).host_bound);
  EXPECT_NEAR(r.phases.at(Phase::Forward).device_us, 100.0, 1e-9);
}

TEST(Timeline, BadHostSpeedIsRejected) {
  Step step;
  step.ops = {op_at(0, 0, 10, {1.0})};
  TimelineOptions o;
  o.host_speed = 0;
  EXPECT_THROW(play(step, o), std::invalid_argument);
}

TEST(Timeline, ForecastCarriesOneTimelinePerTarget) {
  Step step;
  for (uint64_t i = 0; i < 10; ++i)
    step.ops.push_back(op_at(i, 50.0 * static_cast<double>(i), 10.0, {5.0}));
  const DeviceDatabase db =
      DeviceDatabase::load_file(HABITAT_SOURCE_DIR "/python/habitat/data/devices.json");
  Predictor p(db);
  const Forecast f = p.predict(step, gpu(), {"H100-SXM5-80GB", "A100-SXM4-80GB"});
  ASSERT_EQ(f.timelines.size(), 2u);
  EXPECT_TRUE(f.timelines[0].host_bound);
  EXPECT_GT(f.timelines[0].step_us, f.totals[0].total_us);
  EXPECT_NE(forecast_summary_to_json(f).find("\"timelines\""), std::string::npos);
  p.set_timeline(false);
  EXPECT_TRUE(p.predict(step, gpu(), {"H100"}).timelines.empty());
}

TEST(TimelineCalibration, AStepTimedWithoutRecordingScalesTheHostCadence) {
  // Host-bound: ops every 50 us, 5 us kernels; the traced host takes 460 us.
  Step step;
  for (uint64_t i = 0; i < 10; ++i)
    step.ops.push_back(op_at(i, 50.0 * static_cast<double>(i), 10.0, {5.0}));
  // A detailed step's own wall time (its ops end at 460 us) says nothing about the untraced host.
  step.wall_ms = 0.5;
  EXPECT_LT(uninstrumented_wall_us(step), 0);
  EXPECT_NEAR(play(step, no_overhead()).step_us, 460.0, 1e-6);
  EXPECT_DOUBLE_EQ(play(step, no_overhead()).host_scale, 1.0);
  EXPECT_EQ(play(step, no_overhead()).calibration_wall_us, 0.0);
  // A wall time that ends before the step's last op is a later, untraced step's: the host
  // cadence is scaled so that the origin's host takes that long.
  step.wall_ms = 0.23;
  EXPECT_DOUBLE_EQ(uninstrumented_wall_us(step), 230.0);
  const HostSchedule s = build_host_schedule(step, gpu(), no_overhead());
  EXPECT_NEAR(s.host_scale, 0.5, 1e-9);
  EXPECT_NEAR(s.host_end_us, 230.0, 1e-6);
  const TimelineResult r = play(step, no_overhead());
  EXPECT_NEAR(r.step_us, 230.0, 1e-6);
  EXPECT_NEAR(r.host_scale, 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(r.calibration_wall_us, 230.0);  // the wall it calibrated to, reported
  EXPECT_TRUE(r.host_bound);
  // host_speed applies on top of the calibrated host; the calibration can be turned off.
  TimelineOptions fast = no_overhead();
  fast.host_speed = 2.0;
  EXPECT_NEAR(play(step, fast).step_us, 115.0, 1e-6);
  TimelineOptions off = no_overhead();
  off.calibrate_host = false;
  EXPECT_NEAR(play(step, off).step_us, 460.0, 1e-6);
  // A wall time given by the caller (predict_on's steady-state steps) is used even when the
  // step's own is instrumented.
  step.wall_ms = 0.5;
  TimelineOptions given = no_overhead();
  given.uninstrumented_wall_us = 115.0;
  const TimelineResult g = play(step, given);
  EXPECT_NEAR(g.host_scale, 0.25, 1e-9);
  EXPECT_NEAR(g.step_us, 115.0, 1e-6);
  EXPECT_DOUBLE_EQ(g.calibration_wall_us, 115.0);
}

TEST(TimelineCalibration, TheOriginsDeviceWaitsAreNotScaled) {
  // 100 us of host launching a 1 ms kernel, an .item() that waits for it, 100 us more host:
  // 1200 us as traced. Timed untraced at 1150 us, only the 200 us of host shrink (to 150 us),
  // not every part by 1150/1200: the wait lasts until the origin's kernel is done.
  Step step;
  step.ops = {op_at(0, 0, 100, {1000.0}), op_at(1, 100, 1000, {}), op_at(2, 1100, 100, {5.0})};
  step.ops[1].name = "aten::_local_scalar_dense";
  TensorMeta t;
  t.device = "cuda:0";
  t.dtype = "float32";
  step.ops[1].args.push_back({"self", ArgValue{ArgValue::Kind::Tensor, {t}, {}, 0, ""}});
  step.wall_ms = 1.15;
  const HostSchedule s = build_host_schedule(step, gpu(), no_overhead());
  EXPECT_EQ(s.syncs, 1);
  EXPECT_NEAR(s.host_scale, 0.75, 1e-6);
  EXPECT_NEAR(s.host_end_us, 150.0, 1e-3);  // the host's own time; the wait is simulated
  std::vector<double> origin(s.events.size(), 0.0);
  for (std::size_t e = 0; e < s.events.size(); ++e) {
    if (s.events[e].kind == HostEvent::Kind::Launch && s.events[e].kernel == 0) {
      origin[e] = step.ops[s.events[e].op].kernels[0].duration_us;
    }
  }
  EXPECT_NEAR(origin_host_wall_us(s, origin, 1.0), 1150.0, 1e-3);  // already scaled
  // Device waits alone longer than the wall time: no factor fits, the cadence stays as traced.
  step.wall_ms = 0.9;
  EXPECT_DOUBLE_EQ(build_host_schedule(step, gpu(), no_overhead()).host_scale, 1.0);
}

// Host-bound, with CUPTI launch records: ops every 50 us, each launching a 5 us kernel 20 us
// after its start.
Step launch_recorded_step(int ops = 20) {
  Step step;
  for (int i = 0; i < ops; ++i) {
    step.ops.push_back(op_at(static_cast<uint64_t>(i), 50.0 * i, 30.0, {5.0}));
    step.ops.back().overhead_us = 0.0;
    step.ops.back().kernels[0].launch_us = 50.0 * i + 20.0;
  }
  return step;
}

TEST(Timeline, CuptisMeasuredCostPerLaunchIsRemovedAfterEachLaunch) {
  Step step = launch_recorded_step();
  const HostSchedule as_traced = build_host_schedule(step, gpu(), TimelineOptions{});
  EXPECT_DOUBLE_EQ(as_traced.launch_overhead_removed_us, 0.0);
  step.launch_overhead_us = 8.0;
  const HostSchedule s = build_host_schedule(step, gpu(), TimelineOptions{});
  EXPECT_DOUBLE_EQ(s.launch_overhead_us, 8.0);
  EXPECT_NEAR(s.launch_overhead_removed_us, 20 * 8.0, 1e-9);
  EXPECT_NEAR(s.overhead_removed_us, 20 * 8.0, 1e-9);
  EXPECT_NEAR(s.overhead_per_op_us, 0.0, 1e-9);  // the per-op figure is the capture's alone
  ASSERT_EQ(s.events.size(), 20u);
  EXPECT_NEAR(s.events[0].host_us, 20.0, 1e-9);  // the first launch keeps its time
  EXPECT_NEAR(s.events[1].host_us, 62.0, 1e-9);  // the next one lost the first call's cost
  EXPECT_NEAR(s.host_end_us, 980.0 - 160.0, 1e-6);
  const TimelineResult r = play(step, TimelineOptions{});
  EXPECT_NEAR(r.step_us, 820.0, 1e-6);
  EXPECT_DOUBLE_EQ(r.launch_overhead_us, 8.0);
}

TEST(Timeline, LaunchTimesAreMovedOntoTheOpsClockWhenTheyDisagree) {
  // CUPTI's clock read 100 us late at the step's start: every launch appears 100 us early,
  // before its own op began. The shift is measured back and the schedule is the one of the
  // agreeing clocks.
  const Step right = launch_recorded_step();
  EXPECT_DOUBLE_EQ(launch_clock_shift_us(right), 0.0);
  Step early = right;
  for (auto& op : early.ops) *op.kernels[0].launch_us -= 100.0;
  early.syncs = {{SyncRecord::Kind::Stream, 400.0 - 100.0, 2.0, 7, 0}};
  Step with_sync = right;
  with_sync.syncs = {{SyncRecord::Kind::Stream, 400.0, 2.0, 7, 0}};
  // Each launch may sit anywhere from its op's start to its end: the smallest move that puts
  // them inside (here 80 us: 20 us after the start).
  EXPECT_NEAR(launch_clock_shift_us(early), 80.0, 1e-9);
  const HostSchedule a = build_host_schedule(with_sync, gpu(), TimelineOptions{});
  const HostSchedule b = build_host_schedule(early, gpu(), TimelineOptions{});
  EXPECT_NEAR(b.launch_clock_shift_us, 80.0, 1e-9);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(a.events[i].kind, b.events[i].kind);
    EXPECT_NEAR(a.events[i].host_us, b.events[i].host_us + 20.0, 1e-6);  // at their op's start
  }
  EXPECT_NEAR(a.host_end_us, b.host_end_us, 1e-6);
  EXPECT_EQ(b.syncs, 1);  // still inside the ops' span, not taken for Habitat's window edge
  // Too few launches to measure, or none that fits: the clocks are left as recorded.
  Step few = early;
  few.ops.resize(5);
  EXPECT_DOUBLE_EQ(launch_clock_shift_us(few), 0.0);
}

TEST(TimelineCalibration, TheUncalibratedStepAndASavedWallAreKept) {
  // The wall time a live run calibrated to, kept in the step (uninstrumented_wall_ms), gives
  // the same forecast when the step is read back; the step as traced is reported beside it.
  Step step;
  for (uint64_t i = 0; i < 10; ++i) {
    step.ops.push_back(op_at(i, 50.0 * static_cast<double>(i), 10.0, {5.0}));
    step.ops.back().overhead_us = 0.0;
  }
  step.wall_ms = 0.5;  // the detailed step's own, instrumented
  TimelineOptions live = no_overhead();
  live.uninstrumented_wall_us = 230.0;
  const TimelineResult given = play(step, live);
  step.uninstrumented_wall_ms = 0.23;
  EXPECT_DOUBLE_EQ(uninstrumented_wall_us(step), 230.0);
  const TimelineResult saved = play(step, no_overhead());
  EXPECT_NEAR(saved.step_us, given.step_us, 1e-9);
  EXPECT_NEAR(saved.host_scale, 0.5, 1e-9);
  const DeviceDatabase db =
      DeviceDatabase::load_file(HABITAT_SOURCE_DIR "/python/habitat/data/devices.json");
  Predictor p(db);
  const Forecast f = p.predict(step, gpu(), {"H100-SXM5-80GB"});
  ASSERT_EQ(f.timelines.size(), 1u);
  EXPECT_NEAR(f.timelines[0].step_us, 230.0, 1e-6);
  EXPECT_NEAR(f.timelines[0].uncalibrated_step_us, 460.0, 1e-6);
  step.uninstrumented_wall_ms.reset();
  const Forecast plain = p.predict(step, gpu(), {"H100-SXM5-80GB"});
  EXPECT_DOUBLE_EQ(plain.timelines[0].uncalibrated_step_us, plain.timelines[0].step_us);
}

TEST(Timeline, AnotherHostsSpeedIsSaidToBeGiven) {
  Step step;
  for (uint64_t i = 0; i < 4; ++i)
    step.ops.push_back(op_at(i, 50.0 * static_cast<double>(i), 10.0, {5.0}));
  TimelineOptions slow = no_overhead();
  slow.host_speed = 0.5;
  const TimelineResult r = play(step, slow);
  bool said = false;
  for (const auto& n : r.notes) said = said || n.find("host_speed 0.5") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Timeline, TraceFormatTwoFieldsRoundTrip) {
  Trace trace;
  trace.origin = gpu();
  Step step;
  step.wall_ms = 1;
  step.ops = {op_at(0, 1, 2, {3.0})};
  step.ops[0].overhead_us = 1.5;
  step.ops[0].own_before_us = 0.75;
  step.ops[0].kernels[0].launch_us = 1.25;
  step.ops[0].kernels[0].device_start_us = 4.0;
  step.syncs = {{SyncRecord::Kind::Stream, 5, 2, 7, 0},
                {SyncRecord::Kind::StreamWait, 6, 0, 13, 7}};
  step.hook_overhead_us = 12.0;
  step.launch_overhead_us = 6.5;
  step.uninstrumented_wall_ms = 0.8;
  step.ops[0].kernels[0].launch_wall_us = 9.25;
  trace.steps = {step};
  const Trace back = trace_from_json(trace_to_json(trace));
  const Step& s = back.steps.at(0);
  EXPECT_EQ(s.launch_overhead_us, 6.5);
  EXPECT_EQ(s.uninstrumented_wall_ms, 0.8);
  EXPECT_EQ(s.ops[0].kernels[0].launch_wall_us, 9.25);
  EXPECT_EQ(s.ops[0].overhead_us, 1.5);
  EXPECT_EQ(s.ops[0].own_before_us, 0.75);
  EXPECT_EQ(s.ops[0].kernels[0].launch_us, 1.25);
  EXPECT_EQ(s.ops[0].kernels[0].device_start_us, 4.0);
  ASSERT_EQ(s.syncs.size(), 2u);
  EXPECT_EQ(s.syncs[1].kind, SyncRecord::Kind::StreamWait);
  EXPECT_EQ(s.syncs[1].wait_stream, 7u);
  EXPECT_EQ(s.syncs[0].wall_us, 2.0);
  EXPECT_EQ(s.hook_overhead_us, 12.0);
  // A format-1 document (no timeline fields) still loads, the fields absent.
  const std::string v1 = R"({"format": "habitat-trace", "version": 1, "origin": {"device": "cpu"},
    "steps": [{"index": 0, "wall_ms": 1, "ops": [{"id": 0, "name": "aten::relu",
    "kernels": [{"name": "k", "duration_us": 2}]}]}]})";
  const Trace old = trace_from_json(v1);
  EXPECT_FALSE(old.steps[0].ops[0].overhead_us.has_value());
  EXPECT_FALSE(old.steps[0].ops[0].own_before_us.has_value());
  EXPECT_FALSE(old.steps[0].ops[0].kernels[0].launch_us.has_value());
  EXPECT_FALSE(old.steps[0].launch_overhead_us.has_value());
  EXPECT_FALSE(old.steps[0].uninstrumented_wall_ms.has_value());
  EXPECT_TRUE(old.steps[0].syncs.empty());
  EXPECT_THROW(trace_from_json(R"({"format": "habitat-trace", "version": 2, "origin": {},
    "steps": [{"index": 0, "wall_ms": 1, "ops": [], "syncs": [{"kind": "nap", "start_us": 1}]}]})"),
               TraceFormatError);
}

}  // namespace
}  // namespace habitat
