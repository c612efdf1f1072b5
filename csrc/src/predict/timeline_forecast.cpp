// add_timelines and the timelines' JSON: the timeline model fed from a forecast.
#include <stdexcept>
#include <string>
#include <vector>

#include "habitat/predictor.h"
#include "habitat/timeline.h"
#include "predict/timeline_json.h"

namespace habitat {

void add_timelines(Forecast& f, const Step& step, const TraceOrigin& origin,
                   const TimelineOptions& options) {
  f.timelines.clear();
  if (f.ops.size() != step.ops.size()) return;
  const HostSchedule schedule = build_host_schedule(step, origin, options);
  std::vector<double> share(step.ops.size(), 0.0);
  f.timelines.reserve(f.targets.size());
  for (std::size_t t = 0; t < f.targets.size(); ++t) {
    for (std::size_t i = 0; i < step.ops.size(); ++i) {
      share[i] = t < f.ops[i].share.size() ? f.ops[i].share[t].time_us : 0.0;
    }
    f.timelines.push_back(simulate_timeline(schedule, launch_durations(schedule, step, share), options));
  }
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
                   {"phases", phases},
                   {"launch_source", to_string(r.launch_source)},
                   {"overhead_source", to_string(r.overhead_source)},
                   {"overhead_per_op_us", r.overhead_per_op_us},
                   {"overhead_removed_ms", r.overhead_removed_us / 1000.0},
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
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("host model: not JSON (") + e.what() + ")");
  }
  auto number = [&](const json& j, const std::string& where) {
    if (!j.is_number() || !(j.get<double>() >= 0)) {
      throw std::invalid_argument("host model: " + where + " must be a number >= 0 (microseconds)");
    }
    return j.get<double>();
  };
  if (!doc.is_object()) throw std::invalid_argument("host model: expected a JSON object");
  HostCostModel m;
  for (const char* key : {"default_op_us", "top_level_gap_us"}) {
    if (!doc.contains(key)) throw std::invalid_argument(std::string("host model: missing \"") + key + "\"");
  }
  m.default_op_us = number(doc["default_op_us"], "default_op_us");
  m.top_level_gap_us = number(doc["top_level_gap_us"], "top_level_gap_us");
  if (doc.contains("op_us")) {
    if (!doc["op_us"].is_object()) throw std::invalid_argument("host model: op_us must map op names to us");
    for (const auto& [name, us] : doc["op_us"].items()) m.op_us[name] = number(us, "op_us[\"" + name + "\"]");
  }
  if (doc.contains("calibration") && doc["calibration"].is_string()) {
    m.calibration = doc["calibration"].get<std::string>();
  }
  return m;
}

}  // namespace habitat
