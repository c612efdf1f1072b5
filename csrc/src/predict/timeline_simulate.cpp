// simulate_timeline: a host issuing the schedule, a device running it stream by stream.
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "habitat/timeline.h"
#include "predict/kernel_overlap.h"

namespace habitat {
namespace {

// Length of the union of [start, end) intervals: time at least one stream is busy.
double union_length(std::vector<std::pair<double, double>> spans) {
  // One stream's kernels come in start order already: most steps need no sort.
  if (!std::is_sorted(spans.begin(), spans.end())) std::sort(spans.begin(), spans.end());
  double total = 0;
  double open_start = 0;
  double open_end = -1;
  for (const auto& [start, end] : spans) {
    if (start > open_end) {
      if (open_end > open_start) total += open_end - open_start;
      open_start = start;
      open_end = end;
    } else {
      open_end = std::max(open_end, end);
    }
  }
  if (open_end > open_start) total += open_end - open_start;
  return total;
}

// When each stream is next free. A step uses a few streams: a short list searched in order
// is faster than a hash map for every launch of every repeat on every target.
class Device {
 public:
  double& free_at(uint32_t stream) {
    if (stream == last_stream_ && last_ < free_.size()) return free_[last_].second;
    std::size_t i = 0;
    while (i < free_.size() && free_[i].first != stream) ++i;
    if (i == free_.size()) free_.emplace_back(stream, 0.0);
    last_stream_ = stream;
    last_ = i;
    return free_[i].second;
  }
  double all_done() const {
    double t = 0;
    for (const auto& [stream, at] : free_) t = std::max(t, at);
    return t;
  }

 private:
  std::vector<std::pair<uint32_t, double>> free_;
  uint32_t last_stream_ = 0;
  std::size_t last_ = static_cast<std::size_t>(-1);
};

// The host's clock after sync event `e`: a wait for a stream or the whole device holds it
// until the device catches up; a stream-waits-for-stream sync holds the waiting stream instead.
double after_sync(const HostEvent& e, Device& device, double host) {
  switch (e.sync) {
    case SyncRecord::Kind::Stream:
    case SyncRecord::Kind::Event:
    case SyncRecord::Kind::Memcpy:
      return std::max(host, device.free_at(e.stream));
    case SyncRecord::Kind::Device:
      return std::max(host, device.all_done());
    case SyncRecord::Kind::StreamWait: {
      const double ready = device.free_at(e.wait_stream);
      double& waiting = device.free_at(e.stream);
      waiting = std::max(waiting, ready);
      return host;
    }
  }
  return host;
}

// The per-phase sums of the last repeat, by phase value, and which phases were seen (the
// result lists only those, as a map filled on first use would).
struct PhaseSums {
  static constexpr std::size_t kPhases = static_cast<std::size_t>(Phase::Other) + 1;
  PhaseTimeline& operator[](Phase p) {
    const auto i = static_cast<std::size_t>(p);
    seen[i] = true;
    return sums[i];
  }
  void move_to(std::map<Phase, PhaseTimeline>& out) const {
    for (std::size_t i = 0; i < kPhases; ++i) {
      if (seen[i]) out[static_cast<Phase>(i)] = sums[i];
    }
  }
  PhaseTimeline sums[kPhases];
  bool seen[kPhases] = {};
};

}  // namespace

std::vector<double> launch_durations(const HostSchedule& schedule, const Step& step,
                                     const std::vector<double>& op_share_us) {
  if (op_share_us.size() != step.ops.size()) {
    throw std::invalid_argument("launch_durations: one op share per op of the step is needed (" +
                                std::to_string(op_share_us.size()) + " for " +
                                std::to_string(step.ops.size()) + " ops)");
  }
  const std::vector<double> measured = op_busy_us(step);
  std::vector<double> out(schedule.events.size(), 0.0);
  for (std::size_t e = 0; e < schedule.events.size(); ++e) {
    const HostEvent& ev = schedule.events[e];
    if (ev.kind != HostEvent::Kind::Launch || ev.op >= step.ops.size()) continue;
    const double share = std::max(0.0, op_share_us[ev.op]);
    if (ev.kernel == HostEvent::kModelled) {
      out[e] = share;
      continue;
    }
    const OpRecord& op = step.ops[ev.op];
    if (ev.kernel >= op.kernels.size()) continue;
    out[e] = measured[ev.op] > 0 ? op.kernels[ev.kernel].duration_us * share / measured[ev.op]
                                 : share / static_cast<double>(op.kernels.size());
  }
  return out;
}

double origin_host_wall_us(const HostSchedule& schedule,
                           const std::vector<double>& origin_launch_us, double scale) {
  if (origin_launch_us.size() != schedule.events.size()) {
    throw std::invalid_argument("origin_host_wall_us: one duration per schedule event is needed");
  }
  Device device;
  double host = 0;
  double prev = 0;
  for (std::size_t i = 0; i < schedule.events.size(); ++i) {
    const HostEvent& e = schedule.events[i];
    host += (e.host_us - prev) * scale;
    prev = e.host_us;
    if (e.kind == HostEvent::Kind::Launch) {
      const double d = origin_launch_us[i];
      if (!(d > 0)) continue;
      double& free = device.free_at(e.stream);
      free = std::max(host, free) + d;
      continue;
    }
    host = after_sync(e, device, host);
  }
  return host + std::max(0.0, schedule.host_end_us - prev) * scale;
}

TimelineResult simulate_timeline(const HostSchedule& schedule, const std::vector<double>& launch_us,
                                 const TimelineOptions& options) {
  if (!(options.host_speed > 0) || !std::isfinite(options.host_speed)) {
    throw std::invalid_argument(
        "host_speed must be a finite number > 0 (1.0 = the origin's host), got " +
        std::to_string(options.host_speed));
  }
  if (launch_us.size() != schedule.events.size()) {
    throw std::invalid_argument("simulate_timeline: one duration per schedule event is needed");
  }
  TimelineResult r;
  r.host_speed = options.host_speed;
  r.host_scale = schedule.host_scale;
  r.calibration_wall_us = schedule.calibration_wall_us;
  r.launch_source = schedule.launch_source;
  r.overhead_source = schedule.overhead_source;
  r.overhead_per_op_us = schedule.overhead_per_op_us;
  r.overhead_removed_us = schedule.overhead_removed_us;
  r.launch_overhead_us = schedule.launch_overhead_us;
  r.syncs = schedule.syncs;
  r.notes = schedule.notes;
  if (schedule.empty()) return r;
  r.valid = true;

  const double speed = options.host_speed;
  const int repeats = std::max(2, options.repeats);
  Device device;
  PhaseSums phases;
  double host = 0;
  std::vector<double> ends;
  std::vector<std::pair<double, double>> busy;  // the last step's kernels
  busy.reserve(schedule.events.size());
  for (int rep = 0; rep < repeats; ++rep) {
    const bool last = rep == repeats - 1;
    double prev = 0;
    for (std::size_t i = 0; i < schedule.events.size(); ++i) {
      const HostEvent& e = schedule.events[i];
      const double gap = (e.host_us - prev) / speed;
      host += gap;
      prev = e.host_us;
      if (last) phases[e.phase].host_us += gap;
      if (e.kind == HostEvent::Kind::Launch) {
        const double d = launch_us[i];
        if (!(d > 0)) continue;
        double& free = device.free_at(e.stream);
        const double start = std::max(host, free);
        free = start + d;
        if (last) {
          busy.emplace_back(start, free);
          phases[e.phase].device_us += d;
          r.kernel_sum_us += d;
        }
        continue;
      }
      host = after_sync(e, device, host);
    }
    const double tail = (schedule.host_end_us - prev) / speed;
    host += tail;
    if (last && !schedule.events.empty()) phases[schedule.events.back().phase].host_us += tail;
    ends.push_back(std::max(host, device.all_done()));
  }
  phases.move_to(r.phases);
  r.step_us = ends[ends.size() - 1] - ends[ends.size() - 2];
  r.uncalibrated_step_us = r.step_us;  // step_timelines replays an uncalibrated schedule too
  r.host_us = schedule.host_end_us / speed;
  r.device_busy_us = union_length(std::move(busy));
  r.gpu_busy_fraction = r.step_us > 0 ? std::min(1.0, r.device_busy_us / r.step_us) : 0.0;
  r.host_bound = r.device_busy_us < 0.9 * r.step_us;
  for (auto& [phase, p] : r.phases) p.host_bound = p.host_us > p.device_us;
  if (speed != 1.0) {
    r.notes.push_back("host issue times divided by host_speed " + std::to_string(speed) +
                      " (given: this host's speed relative to the origin's; not measured)");
  }
  return r;
}

}  // namespace habitat
