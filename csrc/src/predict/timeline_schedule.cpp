// build_host_schedule: the step's host program on the origin, Habitat's own time removed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "habitat/timeline.h"
#include "predict/fixed_point_text.h"
#include "predict/op_index.h"
#include "predict/optimizer_state.h"
#include "predict/timeline_host_model.h"

namespace habitat {
namespace {

bool on_cuda(const TensorMeta* t) { return t != nullptr && t->device.rfind("cuda", 0) == 0; }
bool on_cpu(const TensorMeta* t) { return t != nullptr && t->device == "cpu"; }

// Ops that make the host wait for the device in eager PyTorch (a format-1 trace has no
// runtime-API records): reading a device scalar (.item()), a blocking device-to-host copy,
// and nonzero (its output size lives on the device).
bool waits_for_device(const OpRecord& op) {
  if (op.has_children) return false;  // the innermost op is the one that waits
  if (op.name == "aten::_local_scalar_dense" || op.name == "aten::nonzero") {
    return on_cuda(op.first_tensor());
  }
  if (op.name == "aten::copy_") {
    const ArgValue* nb = op.arg("non_blocking");
    const bool non_blocking = nb != nullptr && !nb->ints.empty() && nb->ints[0] != 0;
    return !non_blocking && on_cpu(op.tensor("self")) && on_cuda(op.tensor("src"));
  }
  return false;
}

uint32_t dominant_stream(const Step& step) {
  std::unordered_map<uint32_t, std::size_t> count;
  for (const auto& op : step.ops) {
    for (const auto& k : op.kernels) ++count[k.stream];
  }
  uint32_t best = 0;
  std::size_t best_n = 0;
  for (const auto& [stream, n] : count) {
    if (n > best_n || (n == best_n && stream < best)) {
      best = stream;
      best_n = n;
    }
  }
  return best;
}

// Host time taken out of the trace up to a moment: Habitat's recording of each op, and the
// time the origin's host spent blocked in a synchronisation (the target's own wait is
// simulated instead).
class Removals {
 public:
  void add(double at_us, double amount_us) {
    if (amount_us > 0) items_.emplace_back(at_us, amount_us);
  }
  void seal() {
    std::sort(items_.begin(), items_.end());
    prefix_.resize(items_.size());
    double sum = 0;
    for (std::size_t i = 0; i < items_.size(); ++i) prefix_[i] = sum += items_[i].second;
  }
  // Everything removed at or before t.
  double before(double t) const {
    const auto it = std::upper_bound(items_.begin(), items_.end(), std::make_pair(t, 1e300));
    const auto n = static_cast<std::size_t>(it - items_.begin());
    return n == 0 ? 0.0 : prefix_[n - 1];
  }

 private:
  std::vector<std::pair<double, double>> items_;
  std::vector<double> prefix_;
};

struct RawEvent {
  double raw_us;
  HostEvent event;
};

// The time before a step's first op beyond the median gap between its top-level ops.
double excess_lead_in(const Step& step) {
  std::vector<std::pair<double, double>> top;  // (start, end) of top-level ops
  for (const auto& op : step.ops) {
    if (op.depth == 0) top.emplace_back(op.start_us, op.start_us + op.wall_us);
  }
  if (top.size() < 3) return 0.0;
  std::sort(top.begin(), top.end());
  std::vector<double> gaps;
  double end = top.front().second;
  for (std::size_t i = 1; i < top.size(); ++i) {
    gaps.push_back(std::max(0.0, top[i].first - end));
    end = std::max(end, top[i].second);
  }
  const auto mid = gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2);
  std::nth_element(gaps.begin(), mid, gaps.end());
  return std::max(0.0, top.front().first - *mid);
}

}  // namespace

const char* to_string(LaunchSource s) {
  switch (s) {
    case LaunchSource::Cupti:
      return "cupti";
    case LaunchSource::OpTimes:
      return "op_times";
    case LaunchSource::Modelled:
      return "modelled";
  }
  return "op_times";
}

const char* to_string(OverheadSource s) {
  switch (s) {
    case OverheadSource::Measured:
      return "measured";
    case OverheadSource::MeasuredPlusWrapperOps:
      return "measured+wrapper_ops";
    case OverheadSource::WrapperOps:
      return "wrapper_ops";
    case OverheadSource::Default:
      return "default";
    case OverheadSource::Given:
      return "given";
    case OverheadSource::None:
      return "none";
  }
  return "none";
}

namespace {

// Calls fn(wrapper, child) for each wrapper op: an op with exactly one child and no kernels of
// its own, whose wall time beyond its child's is Habitat's capture of the wrapper.
template <typename Fn>
void for_each_wrapper_op(const Step& step, Fn&& fn) {
  const OpIndex index_of(step);
  std::vector<int> children(step.ops.size(), 0);
  std::vector<std::size_t> only_child(step.ops.size(), OpIndex::npos);
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (!op.parent) continue;
    const std::size_t p = index_of.find(*op.parent);
    if (p == OpIndex::npos) continue;
    ++children[p];
    only_child[p] = i;
  }
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (children[i] != 1 || !op.kernels.empty() || op.wall_us <= 0) continue;
    fn(op, step.ops[only_child[i]]);
  }
}

// The median of `values`, or -1 when there are fewer than `min_samples` (at least one).
double median_or_none(std::vector<double>& values, std::size_t min_samples) {
  if (values.size() < std::max<std::size_t>(min_samples, 1)) return -1.0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

// Scales the schedule's host times to the step's uninstrumented wall time, when it has one
// (timeline_calibrate.cpp), and says so.
void calibrate_to_uninstrumented_wall(HostSchedule& s, const Step& step,
                                      const TimelineOptions& options) {
  const double wall_us = options.uninstrumented_wall_us > 0 ? options.uninstrumented_wall_us
                                                            : uninstrumented_wall_us(step);
  if (wall_us <= 0) {
    s.notes.push_back(
        "host cadence as traced (Habitat's time removed): the trace has no uninstrumented "
        "step time to calibrate it to; a traced step's host runs slower than an untraced one");
    return;
  }
  s.calibration_wall_us = wall_us;
  const double traced_host_us = s.host_end_us;
  const double scale = calibrate_host_scale(s, step, wall_us);
  if (scale >= 1.0) {
    s.notes.push_back("host cadence as traced: an uninstrumented step took " +
                      fixed(wall_us / 1000.0, 2) +
                      " ms, no less than the traced host replayed on the origin");
    return;
  }
  for (auto& e : s.events) e.host_us *= scale;
  s.host_end_us *= scale;
  s.host_scale = scale;
  s.notes.push_back(
      "host cadence scaled by " + fixed(scale, 2) + " (" + fixed(traced_host_us / 1000.0, 2) +
      " -> " + fixed(s.host_end_us / 1000.0, 2) +
      " ms) so that the origin's host takes an uninstrumented step's wall time (" +
      fixed(wall_us / 1000.0, 2) +
      " ms, a steady-state step that recorded nothing): the traced step's host was slowed by "
      "the capture and CUPTI beyond Habitat's time removed per op");
}

}  // namespace

double estimate_overhead_per_op(const Step& step, std::size_t min_samples) {
  std::vector<double> outside;
  for_each_wrapper_op(step, [&](const OpRecord& op, const OpRecord& child) {
    outside.push_back(std::max(0.0, op.wall_us - child.wall_us));
  });
  return median_or_none(outside, min_samples);
}

double estimate_untimed_overhead_per_op(const Step& step, std::size_t min_samples) {
  std::vector<double> untimed;
  for_each_wrapper_op(step, [&](const OpRecord& op, const OpRecord& child) {
    if (!child.overhead_us) return;
    untimed.push_back(std::max(
        0.0, op.wall_us - child.wall_us - *child.overhead_us - child.own_before_us.value_or(0.0)));
  });
  return median_or_none(untimed, min_samples);
}

double launch_clock_shift_us(const Step& step, std::size_t min_launches) {
  // Per launch, the shifts that put it inside its op: at least `after_start`, at most
  // `before_end`.
  std::vector<double> after_start;
  std::vector<double> before_end;
  for (const auto& op : step.ops) {
    for (const auto& k : op.kernels) {
      if (!k.launch_us) continue;
      after_start.push_back(op.start_us - *k.launch_us);
      before_end.push_back(op.start_us + op.wall_us - *k.launch_us);
    }
  }
  if (after_start.size() < std::max<std::size_t>(min_launches, 1)) return 0.0;
  // All but 1% of the launches: a kernel attributed to an op it did not come from (a compiled
  // graph's kernels go to its graph op) must not move the clock.
  const auto quantile = [](std::vector<double>& v, double q) {
    const auto at = v.begin() + static_cast<std::ptrdiff_t>(q * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), at, v.end());
    return *at;
  };
  const double lo = quantile(after_start, 0.99);
  const double hi = quantile(before_end, 0.01);
  if (lo > hi) return 0.0;  // no shift fits: the clocks are left as recorded
  if (lo > 0) return lo;
  if (hi < 0) return hi;
  return 0.0;
}

namespace {

// A GPU origin's schedule and the host time it took out of the traced clock.
struct TracedSchedule {
  HostSchedule schedule;
  Removals removals;
};

// What the trace recorded beyond the ops' times, which decides how Habitat's time is found.
struct TraceRecords {
  bool launch_times = false;  // CUPTI's launch records
  bool overhead = false;      // the recorder's own time per op
  bool own_before = false;    // module hooks recorded where they ran
};

TraceRecords records_in(const Step& step) {
  TraceRecords r;
  for (const auto& op : step.ops) {
    r.overhead = r.overhead || op.overhead_us.has_value();
    r.own_before = r.own_before || op.own_before_us.has_value();
    for (const auto& k : op.kernels) r.launch_times = r.launch_times || k.launch_us.has_value();
  }
  return r;
}

// Where Habitat's recording time per op comes from, set on `s`; returns the time to remove per
// op when the ops do not record their own (0 when they do).
double choose_overhead_source(HostSchedule& s, const Step& step, const TimelineOptions& options,
                              bool recorded_per_op) {
  double per_op = 0;
  if (options.overhead_per_op_us >= 0) {
    s.overhead_source = OverheadSource::Given;
    per_op = options.overhead_per_op_us;
  } else if (recorded_per_op) {
    const double untimed = estimate_untimed_overhead_per_op(step);
    s.overhead_source =
        untimed >= 0 ? OverheadSource::MeasuredPlusWrapperOps : OverheadSource::Measured;
    s.untimed_per_op_us = std::max(0.0, untimed);
  } else {
    per_op = estimate_overhead_per_op(step);
    s.overhead_source = per_op >= 0 ? OverheadSource::WrapperOps : OverheadSource::Default;
    if (per_op < 0) per_op = kDefaultOverheadPerOpUs;
  }
  return per_op;
}

// How each op's host moments are placed and what is taken out of them, fixed for the step.
struct OpCorrections {
  uint32_t stream = 0;       // the dominant stream: kernel-less ops and inferred syncs go on it
  double clock_shift = 0;    // CUPTI's clock onto the ops'
  double per_launch = 0;     // CUPTI's own time in each launch call
  double per_op = 0;         // Habitat's time per op when the ops do not record it
  bool measured = false;     // the ops record Habitat's time themselves
  double hook_share = 0;     // module hooks' time per top-level op, where not recorded
  bool infer_syncs = false;  // no sync records: syncs come from the ops that wait
};

OpCorrections op_corrections(const Step& step, const HostSchedule& s, const TraceRecords& records,
                             double per_op) {
  OpCorrections r;
  r.stream = dominant_stream(step);
  r.clock_shift = s.launch_clock_shift_us;
  r.per_launch = s.launch_overhead_us;
  r.per_op = per_op;
  std::size_t top_level = 0;
  for (const auto& op : step.ops) top_level += op.depth == 0 ? 1 : 0;
  // Module hooks: where they ran when the ops record it (own_before_us), else the step's
  // total spread over its top-level ops.
  r.hook_share = !records.own_before && step.hook_overhead_us && top_level > 0
                     ? *step.hook_overhead_us / static_cast<double>(top_level)
                     : 0.0;
  r.measured = s.overhead_source == OverheadSource::Measured ||
               s.overhead_source == OverheadSource::MeasuredPlusWrapperOps;
  // No sync records (format 1, or a CUPTI without SYNCHRONIZATION records): infer them from ops.
  r.infer_syncs = step.syncs.empty();
  return r;
}

// The host's moments as traced, before Habitat's time is taken out, and the last of them.
struct RawHost {
  std::vector<RawEvent> events;
  double end_us = 0;
};

void take_out_recording_time(const OpRecord& op, const OpCorrections& how, TracedSchedule& built) {
  HostSchedule& s = built.schedule;
  const double overhead = how.measured ? op.overhead_us.value_or(0.0) +
                                             op.own_before_us.value_or(0.0) + s.untimed_per_op_us
                                       : how.per_op;
  built.removals.add(op.start_us, overhead);
  s.overhead_removed_us += overhead;
  if (op.depth == 0 && how.hook_share > 0) {
    built.removals.add(op.start_us, how.hook_share);
    s.overhead_removed_us += how.hook_share;
  }
}

void add_kernel_launches(const OpRecord& op, const HostEvent& base, const OpCorrections& how,
                         TracedSchedule& built, RawHost& raw) {
  const double n = static_cast<double>(op.kernels.size());
  for (std::size_t k = 0; k < op.kernels.size(); ++k) {
    const KernelLaunch& kl = op.kernels[k];
    HostEvent e = base;
    e.kernel = k;
    e.stream = kl.stream;
    // Without launch records, an op's kernels are spread over its window, the last at its
    // end (an op returns once it has launched its work).
    const double at = kl.launch_us ? *kl.launch_us + how.clock_shift
                                   : op.start_us + op.wall_us * (static_cast<double>(k) + 1.0) / n;
    raw.events.push_back({at, e});
    if (how.per_launch > 0 && kl.launch_us) {
      built.removals.add(std::nextafter(at, std::numeric_limits<double>::infinity()),
                         how.per_launch);
      built.schedule.launch_overhead_removed_us += how.per_launch;
    }
  }
}

// One op's moments on the host: its launches (or its end, when it launches nothing) and the
// wait for the device it implies when the trace has no sync records.
void add_op(std::size_t i, const OpRecord& op, const OpCorrections& how, TracedSchedule& built,
            RawHost& raw) {
  const double end = op.start_us + op.wall_us;
  raw.end_us = std::max(raw.end_us, end);
  take_out_recording_time(op, how, built);
  HostEvent base;
  base.op = i;
  base.phase = op.phase;
  if (op.kernels.empty()) {
    HostEvent e = base;
    e.stream = how.stream;
    raw.events.push_back({end, e});
  }
  add_kernel_launches(op, base, how, built, raw);
  if (how.infer_syncs && waits_for_device(op)) {
    HostEvent e = base;
    e.kind = HostEvent::Kind::Sync;
    e.sync = SyncRecord::Kind::Memcpy;
    e.stream = how.stream;
    raw.events.push_back({end, e});
    built.removals.add(end, op.wall_us);  // the origin's wait: the simulation adds the target's
    ++built.schedule.syncs;
  }
}

// The op a sync happened in, for its phase: the last op started before it.
void attribute_to_op(HostEvent& e, const Step& step, double sync_start_us) {
  for (std::size_t i = step.ops.size(); i-- > 0;) {
    if (step.ops[i].start_us <= sync_start_us) {
      e.op = i;
      e.phase = step.ops[i].phase;
      return;
    }
  }
}

void add_recorded_syncs(const Step& step, double clock_shift, TracedSchedule& built, RawHost& raw) {
  HostSchedule& s = built.schedule;
  // Habitat synchronises at its window's edges (CUPTI's start, the flush before the window
  // closes): a sync wholly before the first op or after the last one is not the step's.
  double ops_begin = std::numeric_limits<double>::infinity();
  double ops_end = 0;
  for (const auto& op : step.ops) {
    ops_begin = std::min(ops_begin, op.start_us);
    ops_end = std::max(ops_end, op.start_us + op.wall_us);
  }
  for (SyncRecord sync : step.syncs) {
    sync.start_us += clock_shift;
    if (!step.ops.empty() &&
        (sync.start_us + sync.wall_us <= ops_begin || sync.start_us >= ops_end)) {
      ++s.habitat_syncs;
      continue;
    }
    HostEvent e;
    e.kind = HostEvent::Kind::Sync;
    e.sync = sync.kind;
    e.stream = sync.stream;
    e.wait_stream = sync.wait_stream;
    attribute_to_op(e, step, sync.start_us);
    const double end = sync.start_us + sync.wall_us;
    raw.events.push_back({end, e});
    raw.end_us = std::max(raw.end_us, end);
    if (sync.kind != SyncRecord::Kind::StreamWait) {
      built.removals.add(end, sync.wall_us);
      ++s.syncs;
    }
  }
}

// Before its first op a traced step spends time in Habitat's window setup (the recorder,
// CUPTI, module hooks: 0.2-1 ms on the recorded GPU runs) besides the user's Python: the
// lead-in counts as one typical gap between top-level ops of the step. Returns the time removed.
double take_out_lead_in(const Step& step, TracedSchedule& built) {
  const double lead_in_removed = excess_lead_in(step);
  if (lead_in_removed > 0) {
    double first = step.ops.front().start_us;
    for (const auto& op : step.ops) first = std::min(first, op.start_us);
    built.removals.add(first, lead_in_removed);
    built.schedule.overhead_removed_us += lead_in_removed;
  }
  return lead_in_removed;
}

// The host's moments in order on the origin's clock with Habitat's time taken out.
void place_events(HostSchedule& s, RawHost& raw, const Removals& removals) {
  std::stable_sort(raw.events.begin(), raw.events.end(),
                   [](const RawEvent& a, const RawEvent& b) { return a.raw_us < b.raw_us; });
  // Removing a cost at an op's start can pull a later moment before an earlier one when the
  // cost was in fact spent after it: host times stay in order.
  double last = 0;
  s.events.reserve(raw.events.size());
  for (auto& r : raw.events) {
    r.event.host_us = last = std::max(last, r.raw_us - removals.before(r.raw_us));
    s.events.push_back(r.event);
  }
  s.traced_host_us = raw.end_us;
  s.host_end_us = std::max(last, raw.end_us - removals.before(raw.end_us));
}

void note_recording_time_removed(HostSchedule& s, double lead_in_removed, bool hooks_where_ran) {
  const std::string removed =
      "Habitat's own recording time removed from the host cadence: " +
      fixed(s.overhead_removed_us / 1000.0, 2) + " ms (" +
      (lead_in_removed > 0
           ? fixed(lead_in_removed / 1000.0, 2) + " ms of capture setup before the first op, "
           : std::string()) +
      fixed(s.overhead_per_op_us, 2) + " us per op, ";
  const std::string hooks = hooks_where_ran ? ", module hooks where they ran" : "";
  switch (s.overhead_source) {
    case OverheadSource::Measured:
      s.notes.push_back(removed + "measured by the recorder" + hooks + ")");
      break;
    case OverheadSource::MeasuredPlusWrapperOps:
      s.notes.push_back(
          removed + "measured by the recorder" + hooks + ", and " + fixed(s.untimed_per_op_us, 2) +
          " us per op it cannot time itself, estimated from this step's wrapper ops)");
      break;
    case OverheadSource::WrapperOps:
      s.notes.push_back(removed + "estimated from this step's wrapper ops, which launch nothing)");
      break;
    case OverheadSource::Default:
      s.notes.push_back(
          removed +
          "the cost measured for a CUDA op with CUPTI; too few wrapper ops to estimate it)");
      break;
    case OverheadSource::Given:
      s.notes.push_back(removed + "as given)");
      break;
    case OverheadSource::None:
      break;
  }
}

void note_cupti_corrections(HostSchedule& s, const Step& step) {
  if (step.launch_overhead_us) {
    s.notes.push_back("CUPTI's own host time removed: " + fixed(s.launch_overhead_us, 2) +
                      " us per kernel launch (measured on this host when tracing started), " +
                      fixed(s.launch_overhead_removed_us / 1000.0, 2) + " ms in all");
  } else {
    s.notes.push_back(
        "CUPTI's own host time inside the launch calls is not removed: the trace does not "
        "record it (an older capture, or its measurement failed), so the traced cadence is "
        "slower by it");
  }
  if (std::abs(s.launch_clock_shift_us) >= 1.0) {
    s.notes.push_back("CUPTI's launch and sync times moved by " +
                      fixed(s.launch_clock_shift_us, 1) +
                      " us onto the ops' clock (measured: each launch lies inside its op)");
  }
}

TracedSchedule traced_schedule(const Step& step, const TimelineOptions& options) {
  const TraceRecords records = records_in(step);
  TracedSchedule built;
  HostSchedule& s = built.schedule;
  s.launch_source = records.launch_times ? LaunchSource::Cupti : LaunchSource::OpTimes;
  s.launch_clock_shift_us = records.launch_times ? launch_clock_shift_us(step) : 0.0;
  // CUPTI's own time inside each launch call, measured on the origin host when tracing began:
  // taken out right after the call starts (the launch itself keeps its time).
  s.launch_overhead_us = records.launch_times ? step.launch_overhead_us.value_or(0.0) : 0.0;
  const double per_op = choose_overhead_source(s, step, options, records.overhead);
  const OpCorrections how = op_corrections(step, s, records, per_op);

  RawHost raw;
  raw.events.reserve(step.ops.size() * 2);
  // A first step's optimizer state creation runs in no later step (optimizer_state.h): its
  // calls launch nothing in the schedule and their host time is taken out.
  const OptimizerStateInit init = optimizer_state_init(step);
  double state_init_us = 0;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (!init.ops[i]) {
      add_op(i, op, how, built, raw);
    } else if (op.depth == 0) {
      built.removals.add(op.start_us, op.wall_us);
      state_init_us += op.wall_us;
      raw.end_us = std::max(raw.end_us, op.start_us + op.wall_us);
    }
  }
  add_recorded_syncs(step, how.clock_shift, built, raw);
  const double lead_in_removed = take_out_lead_in(step, built);
  s.overhead_removed_us += s.launch_overhead_removed_us;
  built.removals.seal();
  place_events(s, raw, built.removals);
  s.overhead_per_op_us =
      step.ops.empty() ? 0.0
                       : (s.overhead_removed_us - lead_in_removed - s.launch_overhead_removed_us) /
                             static_cast<double>(step.ops.size());

  note_recording_time_removed(s, lead_in_removed, records.own_before);
  if (init.calls > 0) {
    s.notes.push_back("the optimizer's state created in this step (" + std::to_string(init.calls) +
                      (init.calls == 1 ? " call" : " calls") + ", " +
                      fixed(state_init_us / 1000.0, 2) +
                      " ms of host time: its first step) left out, as no later step runs them");
  }
  if (s.launch_source == LaunchSource::Cupti) note_cupti_corrections(s, step);
  if (s.habitat_syncs > 0) {
    s.notes.push_back(
        std::to_string(s.habitat_syncs) +
        " synchronisation(s) outside the step's ops (Habitat's window start and flush) left out");
  }
  if (s.launch_source == LaunchSource::OpTimes) {
    s.notes.push_back(
        "no CUPTI launch records (trace format 1 or CUPTI off): each op's host start/wall stand in "
        "for its kernel launch times" +
        std::string(s.syncs > 0 ? "; syncs inferred from ops that read device data on the host"
                                : ""));
  }
  if (options.calibrate_host) calibrate_to_uninstrumented_wall(s, step, options);
  return built;
}

}  // namespace

HostSchedule build_host_schedule(const Step& step, const TraceOrigin& origin,
                                 const TimelineOptions& options) {
  if (origin.device == "cpu") {
    if (options.host_model == nullptr) {
      HostSchedule none;
      none.notes.push_back("CPU origin and no host model: no timeline");
      return none;
    }
    return modelled_schedule(step, origin, *options.host_model, dominant_stream(step));
  }
  return traced_schedule(step, options).schedule;
}

OriginHostWindows origin_op_windows(const Step& step, const TraceOrigin& origin,
                                    const TimelineOptions& options) {
  OriginHostWindows out;
  if (origin.device == "cpu") return out;
  const TracedSchedule built = traced_schedule(step, options);
  out.host_scale = built.schedule.host_scale;
  const auto corrected = [&](double t) { return (t - built.removals.before(t)) * out.host_scale; };
  out.ops.reserve(step.ops.size());
  for (const auto& op : step.ops) {
    const double start = corrected(op.start_us);
    out.ops.push_back({start, std::max(start, corrected(op.start_us + op.wall_us))});
  }
  return out;
}

}  // namespace habitat
