// add_timelines and the timelines' JSON: the timeline model fed from a forecast.
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "habitat/predictor.h"
#include "habitat/timeline.h"
#include "predict/kernel_overlap.h"
#include "predict/timeline_json.h"
#include "trace/json_reader.h"

namespace habitat {

namespace {

// launch_durations for every target at once: what each event's duration is made of is read
// from the step once, then each target only multiplies its op shares (the same arithmetic,
// in the same order, as launch_durations).
class LaunchScaling {
 public:
  LaunchScaling(const HostSchedule& schedule, const Step& step) : events_(schedule.events.size()) {
    const std::vector<double> measured = op_busy_us(step);
    for (std::size_t e = 0; e < schedule.events.size(); ++e) {
      const HostEvent& ev = schedule.events[e];
      Part& p = events_[e];
      if (ev.kind != HostEvent::Kind::Launch || ev.op >= step.ops.size()) continue;
      p.op = ev.op;
      if (ev.kernel == HostEvent::kModelled) {
        p.kind = Part::Kind::Whole;
        continue;
      }
      const OpRecord& op = step.ops[ev.op];
      if (ev.kernel >= op.kernels.size()) continue;
      if (measured[ev.op] > 0) {
        p.kind = Part::Kind::Measured;
        p.numerator = op.kernels[ev.kernel].duration_us;
        p.denominator = measured[ev.op];
      } else {
        p.kind = Part::Kind::Even;
        p.denominator = static_cast<double>(op.kernels.size());
      }
    }
  }

  // Each event's device time on a target whose op shares are `share` (one per op).
  void durations(const double* share, std::vector<double>& out) const {
    out.assign(events_.size(), 0.0);
    for (std::size_t e = 0; e < events_.size(); ++e) {
      const Part& p = events_[e];
      if (p.kind == Part::Kind::None) continue;
      const double s = std::max(0.0, share[p.op]);
      switch (p.kind) {
        case Part::Kind::Whole:
          out[e] = s;
          break;
        case Part::Kind::Measured:
          out[e] = p.numerator * s / p.denominator;
          break;
        case Part::Kind::Even:
          out[e] = s / p.denominator;
          break;
        case Part::Kind::None:
          break;
      }
    }
  }

 private:
  struct Part {
    enum class Kind : unsigned char { None, Whole, Measured, Even };
    Kind kind = Kind::None;
    std::size_t op = 0;
    double numerator = 0;
    double denominator = 1;
  };
  std::vector<Part> events_;
};

}  // namespace

void add_timelines(Forecast& f, const Step& step, const TraceOrigin& origin,
                   const TimelineOptions& options) {
  f.timelines.clear();
  if (f.ops.size() != step.ops.size()) return;
  f.timelines = step_timelines(shares_by_target(f.ops, f.targets.size()), f.targets.size(), step,
                               origin, options);
}

std::vector<double> shares_by_target(const std::vector<OpForecast>& ops, std::size_t n_targets) {
  const std::size_t n_ops = ops.size();
  std::vector<double> share(n_targets * n_ops, 0.0);
  for (std::size_t i = 0; i < n_ops; ++i) {
    const std::vector<OpPrediction>& op_share = ops[i].share;
    const std::size_t known = std::min(n_targets, op_share.size());
    for (std::size_t t = 0; t < known; ++t) share[t * n_ops + i] = op_share[t].time_us;
  }
  return share;
}

std::vector<TimelineResult> step_timelines(const std::vector<double>& shares, std::size_t n_targets,
                                           const Step& step, const TraceOrigin& origin,
                                           const TimelineOptions& options) {
  const std::size_t n_ops = step.ops.size();
  if (shares.size() != n_targets * n_ops) {
    throw std::invalid_argument("step_timelines: one share per op and target is needed");
  }
  const HostSchedule schedule = build_host_schedule(step, origin, options);
  const LaunchScaling scaling(schedule, step);
  // The calibration scaled every host time by host_scale: the same schedule unscaled is the
  // host as the traced step alone gives it (the size of the calibration, reported).
  HostSchedule uncalibrated;
  if (schedule.host_scale < 1.0 && schedule.host_scale > 0.0) {
    uncalibrated = schedule;
    for (auto& e : uncalibrated.events) e.host_us /= schedule.host_scale;
    uncalibrated.host_end_us /= schedule.host_scale;
    uncalibrated.host_scale = 1.0;
  }
  std::vector<double> launch_us;
  std::vector<TimelineResult> out;
  out.reserve(n_targets);
  for (std::size_t t = 0; t < n_targets; ++t) {
    scaling.durations(shares.data() + t * n_ops, launch_us);
    out.push_back(simulate_timeline(schedule, launch_us, options));
    if (!uncalibrated.events.empty()) {
      out.back().uncalibrated_step_us = simulate_timeline(uncalibrated, launch_us, options).step_us;
    }
  }
  return out;
}

nlohmann::json timelines_json(const Forecast& f) {
  using nlohmann::json;
  json out = json::array();
  for (std::size_t t = 0; t < f.timelines.size() && t < f.targets.size(); ++t) {
    const TimelineResult& r = f.timelines[t];
    json phases = json::object();
    for (const auto& [phase, p] : r.phases) {
      phases[to_string(phase)] = {{"host_ms", p.host_us / 1000.0},
                                  {"device_ms", p.device_us / 1000.0},
                                  {"host_bound", p.host_bound}};
    }
    out.push_back({{"target", f.targets[t]},
                   {"valid", r.valid},
                   {"step_ms", r.step_us / 1000.0},
                   {"host_ms", r.host_us / 1000.0},
                   {"kernel_sum_ms", r.kernel_sum_us / 1000.0},
                   {"device_busy_ms", r.device_busy_us / 1000.0},
                   {"gpu_busy_fraction", r.gpu_busy_fraction},
                   {"host_bound", r.host_bound},
                   {"host_speed", r.host_speed},
                   {"host_scale", r.host_scale},
                   {"calibration_wall_ms", r.calibration_wall_us / 1000.0},
                   {"uncalibrated_step_ms", r.uncalibrated_step_us / 1000.0},
                   {"phases", phases},
                   {"launch_source", to_string(r.launch_source)},
                   {"overhead_source", to_string(r.overhead_source)},
                   {"overhead_per_op_us", r.overhead_per_op_us},
                   {"overhead_removed_ms", r.overhead_removed_us / 1000.0},
                   {"launch_overhead_us", r.launch_overhead_us},
                   {"syncs", r.syncs},
                   {"notes", r.notes}});
  }
  return out;
}

}  // namespace habitat

namespace habitat {

HostCostModel host_cost_model_from_json(const std::string& text) {
  using nlohmann::json;
  json doc;
  try {
    doc = json_reader::parse(text);  // nesting capped, as in every JSON reader
  } catch (const json_reader::DecodeError& e) {
    throw std::invalid_argument("host model: " + e.message);
  }
  // Host times past a second per op are damage, and would make the timeline overflow.
  auto number = [&](const json& j, const std::string& where) {
    if (!j.is_number() || !(j.get<double>() >= 0) || j.get<double>() > 1e6) {
      throw std::invalid_argument("host model: " + where +
                                  " must be a number from 0 to 1e6 (microseconds)");
    }
    return j.get<double>();
  };
  if (!doc.is_object()) throw std::invalid_argument("host model: expected a JSON object");
  HostCostModel m;
  for (const char* key : {"default_op_us", "top_level_gap_us"}) {
    if (!doc.contains(key))
      throw std::invalid_argument(std::string("host model: missing \"") + key + "\"");
  }
  m.default_op_us = number(doc["default_op_us"], "default_op_us");
  m.top_level_gap_us = number(doc["top_level_gap_us"], "top_level_gap_us");
  if (doc.contains("op_us")) {
    if (!doc["op_us"].is_object())
      throw std::invalid_argument("host model: op_us must map op names to us");
    for (const auto& [name, us] : doc["op_us"].items())
      m.op_us[name] = number(us, "op_us[\"" + name + "\"]");
  }
  auto table = [&](const char* key, auto&& put) {
    if (!doc.contains(key)) return;
    if (!doc[key].is_object())
      throw std::invalid_argument(std::string("host model: ") + key + " must be an object");
    for (const auto& [name, us] : doc[key].items())
      put(name, number(us, std::string(key) + "[\"" + name + "\"]"));
  };
  table("top_level_op_us",
        [&](const std::string& name, double us) { m.top_level_op_us[name] = us; });
  table("foreach_per_tensor_us",
        [&](const std::string& name, double us) { m.foreach_per_tensor_us[name] = us; });
  table("phase_gap_us", [&](const std::string& name, double us) {
    const std::optional<Phase> phase = phase_from_string(name);
    if (!phase)
      throw std::invalid_argument("host model: phase_gap_us[\"" + name +
                                  "\"] is not a phase (forward, backward, optimizer, other)");
    m.phase_gap_us[*phase] = us;
  });
  if (doc.contains("default_top_level_us"))
    m.default_top_level_us = number(doc["default_top_level_us"], "default_top_level_us");
  if (doc.contains("unseen_op_us")) {
    const json& u = doc["unseen_op_us"];
    if (!u.is_object() || !u.contains("base_us") || !u.contains("per_kernel_us")) {
      throw std::invalid_argument(
          "host model: unseen_op_us must be {\"base_us\": us, \"per_kernel_us\": us}");
    }
    m.unseen_base_us = number(u["base_us"], "unseen_op_us.base_us");
    m.unseen_per_kernel_us = number(u["per_kernel_us"], "unseen_op_us.per_kernel_us");
  }
  m.default_top_level_view_us =
      doc.contains("default_top_level_view_us")
          ? number(doc["default_top_level_view_us"], "default_top_level_view_us")
          : m.default_top_level_us;
  if (doc.contains("calibration") && doc["calibration"].is_string()) {
    m.calibration = doc["calibration"].get<std::string>();
  }
  return m;
}

}  // namespace habitat
