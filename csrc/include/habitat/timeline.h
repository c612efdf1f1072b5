// The step time a user sees: a host that issues the step's ops at the cadence measured on
// the origin, and a device that runs each kernel for its forecast duration on the target,
// in stream order and never before the host launched it. A step whose GPU waits for its
// host (launch-bound, typical of mixed-precision training of small and mid-size models) is
// forecast as the host's time, not the sum of its kernels.
//
// Two parts: build_host_schedule reads the trace once (per origin host), simulate_timeline
// plays it on one target from that target's kernel durations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "habitat/trace.h"

namespace habitat {

// Where the host times of kernel launches come from.
enum class LaunchSource {
  Cupti,     // format 2: CUPTI's runtime-API launch records
  OpTimes,   // format 1 (or no CUPTI): each op's start_us/wall_us stand in for its launches
  Modelled,  // a CPU origin: per-op host cost of eager PyTorch on a GPU machine (HostCostModel)
};
const char* to_string(LaunchSource s);

// How Habitat's own recording time was taken out of the traced host times.
enum class OverheadSource {
  Measured,  // format 2: the plugin recorded its bookkeeping per op (OpRecord::overhead_us)
  // Measured, plus the part of each op's capture the plugin cannot time itself (the boxed
  // call into its fallback, its checks before its clock starts), estimated from the step's
  // wrapper ops (estimate_untimed_overhead_per_op).
  MeasuredPlusWrapperOps,
  WrapperOps,  // format 1: estimated from the trace itself (see estimate_overhead_per_op)
  Default,  // format 1, too few wrapper ops: the per-op cost measured by benchmarks (kDefault...)
  Given,    // TimelineOptions::overhead_per_op_us
  None,     // a modelled (CPU-origin) schedule: nothing to remove
};
const char* to_string(OverheadSource s);

// Per-op host cost of eager PyTorch on a GPU machine: the time the host spends in an op of
// that name outside its children (dispatch, launch), and the Python between top-level ops.
// Calibrated from recorded GPU traces (python/habitat/analysis/host_model.py says how).
struct HostCostModel {
  std::map<std::string, double> op_us;  // by op name ("aten::add_")
  double default_op_us = 0;             // an op name the calibration never saw
  double top_level_gap_us = 0;          // Python between consecutive top-level ops
  std::string calibration;              // what it was calibrated on, for the forecast's notes
  // Per top-level op (inclusive): when top_level_op_us is not empty, a top-level op costs its
  // whole subtree's host time on the GPU machine, whatever the CPU decomposed it into (the
  // CPU's children differ from CUDA's: mkldnn vs cuDNN, CPU-only kernels), and its children
  // cost nothing more.
  std::map<std::string, double> top_level_op_us;  // by top-level op name
  // A top-level name the calibration never saw: unseen_base_us + unseen_per_kernel_us x the
  // kernels CUDA would launch for its subtree (estimate_cost, cuda_paths' expansions), when
  // the model has a per-kernel cost; else by whether it launches any:
  // default_top_level_us, or default_top_level_view_us when it launches none.
  double default_top_level_us = 0;
  double default_top_level_view_us = 0;
  double unseen_base_us = 0;
  double unseen_per_kernel_us = 0;
  std::map<Phase, double> phase_gap_us;  // Python between top-level ops, by phase
  // Optimizer phase: PyTorch's optimizers run their foreach implementation when every
  // parameter is on a CUDA device (their default), one _foreach_ call where the CPU's
  // single-tensor loop calls the op once per parameter. Host time per tensor of a foreach
  // op, by foreach name ("aten::_foreach_add_").
  std::map<std::string, double> foreach_per_tensor_us;
  bool inclusive() const { return !top_level_op_us.empty(); }
};

// A host model from its JSON document ({"op_us": {name: us}, "default_op_us": us,
// "top_level_gap_us": us, "calibration": text}, optionally "top_level_op_us": {name: us},
// "default_top_level_us": us, "phase_gap_us": {phase: us}, "foreach_per_tensor_us":
// {name: us}); throws std::invalid_argument naming the problem.
HostCostModel host_cost_model_from_json(const std::string& text);

struct TimelineOptions {
  // Host speed relative to the origin's host (2.0: a host twice as fast issues ops in half
  // the time). Device work is unaffected.
  double host_speed = 1.0;
  // Steps played back to back; the step time is the last step's period (steady state, the
  // host running ahead of the device as it does in a training loop without syncs).
  int repeats = 3;
  // Habitat's per-op recording cost to remove from a format-1 trace; < 0: estimate it.
  double overhead_per_op_us = -1;
  // Used for steps without a GPU origin; without it such steps get no timeline.
  const HostCostModel* host_model = nullptr;
  // Scale the origin's host cadence to the step's uninstrumented wall time when the step
  // carries one (see uninstrumented_wall_us): the traced step's host is slowed by the
  // capture and CUPTI beyond what Habitat can remove op by op.
  bool calibrate_host = true;
  // > 0: the wall time of an uninstrumented step of the same program, given by the caller
  // (predict_on's steady-state steps), used instead of uninstrumented_wall_us(step).
  double uninstrumented_wall_us = -1;
};

// Habitat's per-op capture cost with CUPTI compiled in, measured on the H100 machine of the
// recorded runs (benchmarks/results/prof2_cupti.json: a CUDA op +2.86 us inside record_step):
// the fallback when a format-1 trace has too few wrapper ops to estimate it itself.
inline constexpr double kDefaultOverheadPerOpUs = 2.86;

// One thing the host does that the device sees: a kernel launch or a synchronisation.
struct HostEvent {
  enum class Kind { Launch, Sync };
  static constexpr std::size_t kModelled = std::numeric_limits<std::size_t>::max();
  Kind kind = Kind::Launch;
  double host_us = 0;  // on the origin host, Habitat's own time removed
  std::size_t op = 0;  // index into Step::ops of the op it belongs to
  // Launch: index into the op's kernels, or kModelled for the op's forecast work as a whole
  // (no measured kernels: shape-based ops, CPU origins).
  std::size_t kernel = kModelled;
  uint32_t stream = 0;
  SyncRecord::Kind sync = SyncRecord::Kind::Device;  // Sync only
  uint32_t wait_stream = 0;                          // Sync StreamWait only
  Phase phase = Phase::Other;
};

struct HostSchedule {
  std::vector<HostEvent> events;  // in host order
  double host_end_us = 0;         // when the host finished issuing the step (origin, corrected)
  double traced_host_us = 0;      // the same before correction, as traced
  LaunchSource launch_source = LaunchSource::OpTimes;
  OverheadSource overhead_source = OverheadSource::None;
  double overhead_per_op_us = 0;   // the per-op cost removed (mean, for Measured)
  double untimed_per_op_us = 0;    // of which estimated from wrapper ops (MeasuredPlusWrapperOps)
  double overhead_removed_us = 0;  // Habitat's time taken out of the step in all
  int habitat_syncs = 0;           // syncs outside the ops' span: Habitat's window edges, dropped
  int syncs = 0;
  // CUPTI's cost per kernel launch taken out (Step::launch_overhead_us; 0 when the trace does
  // not record it) and in all, included in overhead_removed_us.
  double launch_overhead_us = 0;
  double launch_overhead_removed_us = 0;
  // Added to the trace's CUPTI times (launches, syncs) to put them on the ops' clock, measured
  // from the launches' own ops (launch_clock_shift_us()); 0 when they agreed.
  double launch_clock_shift_us = 0;
  // Host calibration (calibrate_host_scale): the factor applied to every host time above, and
  // the uninstrumented wall time it calibrated to (0: the step has none).
  double host_scale = 1.0;
  double calibration_wall_us = 0;
  std::vector<std::string> notes;  // what the forecast should tell the user about its inputs
  bool empty() const { return events.empty() && host_end_us == 0; }
};

// Habitat's per-op recording cost estimated from a format-1 step alone: the median time an
// op that launches nothing and calls exactly one other op spends outside that call (an
// `aten::conv2d` around its `aten::convolution`, `aten::to` around `aten::_to_copy`). That is
// the recorder's bookkeeping around the inner op plus the wrapper's own dispatch (a slight
// overestimate). Returns a negative value when the step has fewer than `min_samples` such ops.
double estimate_overhead_per_op(const Step& step, std::size_t min_samples = 8);

// The per-op capture cost a format-2 step's own timings miss: the same wrapper ops, the
// time outside their only child less what the child recorded as Habitat's (overhead_us,
// own_before_us). That leaves the boxed call into the capture and its checks before its
// clock starts (plus the wrapper's own dispatch: a slight overestimate). Negative when the
// step has fewer than `min_samples` such ops or records no overhead_us.
double estimate_untimed_overhead_per_op(const Step& step, std::size_t min_samples = 8);

// The offset to add to a format-2 step's CUPTI times (launch_us, sync start_us) so that its
// launches fall inside the ops that made them, as they must: the smallest shift that puts all
// but 1% of the launches inside their op's window. 0 when the recorded clocks already agree,
// when fewer than `min_launches` launches carry a time, or when no shift fits.
double launch_clock_shift_us(const Step& step, std::size_t min_launches = 16);

// The step's host program on the origin host. GPU origins: launches at CUPTI's launch times
// (format 2) or spread over each op's wall window (format 1), with Habitat's time removed.
// CPU origins: from options.host_model; an empty schedule when there is none.
HostSchedule build_host_schedule(const Step& step, const TraceOrigin& origin,
                                 const TimelineOptions& options);

// An op's host window on the origin host, on the clock build_host_schedule places its events
// on: Habitat's own recording time and the origin's waits in synchronisations removed, the
// host calibration (HostSchedule::host_scale) applied.
struct OpHostWindow {
  double start_us = 0;
  double end_us = 0;
};

// Every op's window, in Step::ops order (none for a CPU origin, whose schedule is modelled):
// what a host cost model is calibrated from (python/habitat/analysis/host_model.py).
struct OriginHostWindows {
  std::vector<OpHostWindow> ops;
  double host_scale = 1.0;
};
OriginHostWindows origin_op_windows(const Step& step, const TraceOrigin& origin,
                                    const TimelineOptions& options);

// The step's wall time when it was measured on a step that recorded nothing, else a negative
// value: the step's uninstrumented_wall_ms when it carries one (the wall a live run calibrated
// it to), else its wall_ms under the rule below. A step's wall time that ends before its own last
// op did cannot be the wall time of the step that recorded those ops: it is that of a later,
// uninstrumented step of the same program (predict_on's steady-state steps reuse a detailed step's
// ops with their own wall time; format-2 traces written from them carry it). The wall of a detailed
// step itself is instrumented and never used.
double uninstrumented_wall_us(const Step& step);

// The origin host's wall time for one step played from an idle device: the host cadence times
// `scale`, each sync waiting for the origin's measured kernels (`origin_launch_us`, one per
// schedule event, as simulate_timeline takes them).
double origin_host_wall_us(const HostSchedule& schedule,
                           const std::vector<double>& origin_launch_us, double scale);

// The factor on the origin's host cadence that makes one step's host wall time on the origin
// (origin_host_wall_us, with the trace's own kernel durations) equal `wall_us`, an
// uninstrumented step's wall time. 1 when the traced cadence is already no slower (the
// uninstrumented step was bounded by something the trace does not show), or when no factor
// fits (the device waits alone exceed `wall_us`). Found by bisection on [0, 1].
double calibrate_host_scale(const HostSchedule& schedule, const Step& step, double wall_us);

struct PhaseTimeline {
  double host_us = 0;    // host time spent issuing the phase's work
  double device_us = 0;  // the phase's kernels on the target
  bool host_bound = false;
};

struct TimelineResult {
  bool valid = false;            // false: no schedule (CPU origin without a host model)
  double step_us = 0;            // steady-state step time on the target
  double host_us = 0;            // the host's issue time per step (after host_speed)
  double kernel_sum_us = 0;      // every kernel's forecast duration added up
  double device_busy_us = 0;     // time at least one stream is running (<= kernel_sum_us)
  double gpu_busy_fraction = 0;  // device_busy_us / step_us
  bool host_bound = false;       // the GPU idles more than 10% of the step waiting for the host
  double host_speed = 1.0;
  double host_scale = 1.0;         // the schedule's host calibration (HostSchedule::host_scale)
  double calibration_wall_us = 0;  // and the wall it calibrated to (HostSchedule)
  std::map<Phase, PhaseTimeline> phases;
  LaunchSource launch_source = LaunchSource::OpTimes;
  OverheadSource overhead_source = OverheadSource::None;
  double overhead_per_op_us = 0;
  double overhead_removed_us = 0;
  double launch_overhead_us = 0;  // CUPTI's per-launch cost taken out (HostSchedule)
  int syncs = 0;
  // The step without the host calibration (host_scale 1): what the traced step alone says.
  double uncalibrated_step_us = 0;
  std::vector<std::string> notes;
};

// Plays `repeats` copies of the schedule back to back on one target. `launch_us[i]` is the
// device time of schedule.events[i] on the target (ignored for syncs; 0 skips a launch).
TimelineResult simulate_timeline(const HostSchedule& schedule, const std::vector<double>& launch_us,
                                 const TimelineOptions& options);

// The device time of each schedule event on one target, from the op forecasts of that target
// (`op_share_us[i]`: what op i adds to the total, see OpForecast::share): an op's measured
// kernels keep their proportions, scaled by the op's forecast over the time they kept the
// origin busy (their sum unless they ran side by side on several streams, which the forecast
// counts once); a modelled launch is the op's whole forecast.
std::vector<double> launch_durations(const HostSchedule& schedule, const Step& step,
                                     const std::vector<double>& op_share_us);

}  // namespace habitat
