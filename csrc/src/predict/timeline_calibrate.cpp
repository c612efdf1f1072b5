// The origin's host cadence calibrated to an uninstrumented step's wall time.
//
// A traced step runs slower on the host than the same step untraced: Habitat's capture of
// each op (removed op by op where measured or estimated, timeline_schedule.cpp) but also
// CUPTI's activity records inside every launch call and stalls while Habitat's worker holds
// the GIL, which no per-op record shows. When the step carries the wall time of a step that
// recorded nothing (predict_on's steady-state steps), the host cadence is scaled so that the
// origin, replayed with its own measured kernels, takes that wall time on the host: the
// slowdown is taken as spread over the step in proportion to its host time.
#include <algorithm>
#include <vector>

#include "habitat/timeline.h"

namespace habitat {

double uninstrumented_wall_us(const Step& step) {
  if (step.uninstrumented_wall_ms && *step.uninstrumented_wall_ms > 0) {
    return *step.uninstrumented_wall_ms * 1000.0;
  }
  if (!(step.wall_ms > 0) || step.ops.empty()) return -1.0;
  double last_end = 0;
  for (const auto& op : step.ops) last_end = std::max(last_end, op.start_us + op.wall_us);
  const double wall_us = step.wall_ms * 1000.0;
  return wall_us < last_end ? wall_us : -1.0;
}

double calibrate_host_scale(const HostSchedule& schedule, const Step& step, double wall_us) {
  if (!(wall_us > 0) || schedule.events.empty()) return 1.0;
  // The origin's device: each launch runs for its measured kernel (modelled launches, ops
  // without measured kernels, take no device time).
  std::vector<double> origin(schedule.events.size(), 0.0);
  for (std::size_t e = 0; e < schedule.events.size(); ++e) {
    const HostEvent& ev = schedule.events[e];
    if (ev.kind != HostEvent::Kind::Launch || ev.op >= step.ops.size()) continue;
    const OpRecord& op = step.ops[ev.op];
    if (ev.kernel < op.kernels.size()) origin[e] = op.kernels[ev.kernel].duration_us;
  }
  if (origin_host_wall_us(schedule, origin, 1.0) <= wall_us) return 1.0;
  if (origin_host_wall_us(schedule, origin, 0.0) >= wall_us) return 1.0;
  // The host wall grows with the scale (each host gap does; a sync waits until the same
  // device moment or later): bisection.
  double lo = 0.0;
  double hi = 1.0;
  for (int i = 0; i < 50; ++i) {
    const double mid = 0.5 * (lo + hi);
    (origin_host_wall_us(schedule, origin, mid) < wall_us ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace habitat
