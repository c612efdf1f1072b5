// The predictor for Python: saved traces arrive as JSON documents, steps captured by
// habitat._C as C++ structs (trace_capsule.h), so a live step is never encoded to forecast it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bindings.h"
#include "bindings/trace_capsule.h"
#include "device_registry.h"
#include "habitat/engine.h"
#include "habitat/forecast_rows.h"
#include "habitat/learned_models.h"
#include "habitat/op_cost.h"
#include "habitat/predictor.h"
#include "habitat/timeline.h"
#include "habitat/trace.h"
#include "habitat/trace_tree.h"
#include "habitat/wave_scaling.h"
#include "trace_tree_of.h"

namespace habitat::python {

namespace py = pybind11;

namespace {

// The engine of a weights directory and a host model (JSON), built once per process: a step
// is forecast every training step. Its memos start afresh when the device database changed.
const ForecastEngine& engine_for(const std::string& weights_dir,
                                 const std::string& host_model_json) {
  struct Kept {
    std::unique_ptr<ForecastEngine> engine;
    uint64_t generation;
  };
  static std::mutex mutex;
  static std::map<std::string, Kept> engines;
  const std::string key = weights_dir + '\0' + host_model_json;
  const DeviceDatabase& db = device_database();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = engines.find(key);
  if (it == engines.end()) {
    auto engine = std::make_unique<ForecastEngine>(db, EngineConfig{weights_dir, host_model_json});
    it = engines.emplace(key, Kept{std::move(engine), device_database_generation()}).first;
  } else if (it->second.generation != device_database_generation()) {
    it->second.engine->forget_predictions();
    it->second.generation = device_database_generation();
  }
  return *it->second.engine;
}

// How the step's timeline is played as Python passes it: the host's speed relative to the
// origin's, the eager-PyTorch host model for CPU origins (JSON; empty: none), Habitat's
// per-op recording cost (< 0: estimated), an uninstrumented step's wall time (> 0: the host
// is calibrated to it).
struct TimelineSettings {
  double host_speed = 1.0;
  std::string host_model_json;
  double overhead_per_op_us = -1;
  double steady_wall_ms = 0;
};

StepTimeline step_timeline(const TimelineSettings& timeline) {
  StepTimeline out;
  out.host_speed = timeline.host_speed;
  out.overhead_per_op_us = timeline.overhead_per_op_us;
  if (timeline.steady_wall_ms > 0) out.uninstrumented_wall_us = timeline.steady_wall_ms * 1000.0;
  return out;
}

// The whole forecast, per-op part included. Call without the GIL.
Forecast forecast_for(const Step& step, const TraceOrigin& origin,
                      const std::vector<std::string>& targets, const std::string& weights_dir,
                      const TimelineSettings& timeline = {}) {
  return engine_for(weights_dir, timeline.host_model_json)
      .forecast(step, origin, targets, step_timeline(timeline));
}

// The forecast as totals and per-op rows (what Python reads). Call without the GIL.
ForecastParts forecast_parts(const Step& step, const TraceOrigin& origin,
                             const std::vector<std::string>& targets,
                             const std::string& weights_dir,
                             const TimelineSettings& timeline = {}) {
  return engine_for(weights_dir, timeline.host_model_json)
      .forecast_parts(step, origin, targets, step_timeline(timeline));
}

// A number of the summary as its JSON document gave it: a non-finite one is null.
py::object number(double v) {
  return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none());
}

// A dict with its keys in sorted order, as the summary's JSON objects (std::map) list them.
py::dict sorted_dict(std::vector<std::pair<std::string, py::object>> items) {
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  py::dict d;
  for (auto& [key, value] : items) d[py::str(key)] = std::move(value);
  return d;
}

py::list str_list(const std::vector<std::string>& v) {
  py::list l;
  for (const auto& s : v) l.append(py::str(s));
  return l;
}

py::dict timeline_dict(const std::string& target, const TimelineResult& r) {
  std::vector<std::pair<std::string, py::object>> phases;
  for (const auto& [phase, p] : r.phases) {
    phases.emplace_back(to_string(phase), sorted_dict({{"host_ms", number(p.host_us / 1000.0)},
                                                       {"device_ms", number(p.device_us / 1000.0)},
                                                       {"host_bound", py::bool_(p.host_bound)}}));
  }
  return sorted_dict({{"target", py::str(target)},
                      {"valid", py::bool_(r.valid)},
                      {"step_ms", number(r.step_us / 1000.0)},
                      {"host_ms", number(r.host_us / 1000.0)},
                      {"kernel_sum_ms", number(r.kernel_sum_us / 1000.0)},
                      {"device_busy_ms", number(r.device_busy_us / 1000.0)},
                      {"gpu_busy_fraction", number(r.gpu_busy_fraction)},
                      {"host_bound", py::bool_(r.host_bound)},
                      {"host_speed", number(r.host_speed)},
                      {"host_scale", number(r.host_scale)},
                      {"calibration_wall_ms", number(r.calibration_wall_us / 1000.0)},
                      {"uncalibrated_step_ms", number(r.uncalibrated_step_us / 1000.0)},
                      {"phases", sorted_dict(std::move(phases))},
                      {"launch_source", py::str(to_string(r.launch_source))},
                      {"overhead_source", py::str(to_string(r.overhead_source))},
                      {"overhead_per_op_us", number(r.overhead_per_op_us)},
                      {"overhead_removed_ms", number(r.overhead_removed_us / 1000.0)},
                      {"launch_overhead_us", number(r.launch_overhead_us)},
                      {"syncs", py::int_(r.syncs)},
                      {"notes", str_list(r.notes)}});
}

// A forecast's summary (the forecast document without its ops: totals per target and phase,
// timelines) as Python objects, built from the forecast directly: the same dicts, keys and
// numbers as forecast_summary_to_json's document parsed (tests/python/data checks that).
py::object summary_dict(const Forecast& f) {
  py::list totals;
  for (std::size_t t = 0; t < f.targets.size(); ++t) {
    const TargetTotals& tt = f.totals[t];
    std::vector<std::pair<std::string, py::object>> phases;
    for (const auto& [phase, us] : tt.phase_us)
      phases.emplace_back(to_string(phase), number(us / 1000.0));
    std::vector<std::pair<std::string, py::object>> methods;
    for (const auto& [method, n] : tt.method_ops)
      methods.emplace_back(to_string(method), py::int_(n));
    totals.append(sorted_dict({{"target", py::str(f.targets[t])},
                               {"total_ms", number(tt.total_us / 1000.0)},
                               {"phases", sorted_dict(std::move(phases))},
                               {"methods", sorted_dict(std::move(methods))}}));
  }
  std::vector<std::pair<std::string, py::object>> doc{{"targets", str_list(f.targets)},
                                                      {"totals", totals},
                                                      {"unsupported", str_list(f.unsupported)}};
  if (f.dropped_ops != 0) doc.emplace_back("dropped_ops", py::int_(f.dropped_ops));
  if (!f.timelines.empty()) {
    py::list timelines;
    for (std::size_t t = 0; t < f.timelines.size() && t < f.targets.size(); ++t) {
      timelines.append(timeline_dict(f.targets[t], f.timelines[t]));
    }
    doc.emplace_back("timelines", timelines);
  }
  return sorted_dict(std::move(doc));
}

// Per-op rows (forecast_rows.h) as Python sees them: a read-only bytes-like buffer shared with
// the engine (a repeated step's rows are the last one's), read by numpy.frombuffer without a
// copy; bytes(rows) copies them.
struct OpRowsBuffer {
  std::shared_ptr<const std::string> data;
};

py::object rows_object(std::shared_ptr<const std::string> rows) {
  return py::cast(OpRowsBuffer{std::move(rows)});
}

// A trace argument from Python: a document (dict), walked into a TraceTree while the GIL is
// held, or its JSON text (str or bytes), viewed (the caller's object outlives the call).
// read() needs no GIL and frees the tree.
class TraceArg {
 public:
  TraceArg(py::handle trace, const char* function) {
    if (PyDict_Check(trace.ptr())) {
      tree_ = trace_tree_of(trace);
    } else if (PyUnicode_Check(trace.ptr()) || PyBytes_Check(trace.ptr())) {
      text_ = trace.cast<std::string_view>();
    } else if (PyByteArray_Check(trace.ptr())) {  // a decompressed file, viewed as it is
      text_ = std::string_view(PyByteArray_AS_STRING(trace.ptr()),
                               static_cast<std::size_t>(PyByteArray_GET_SIZE(trace.ptr())));
    } else {
      throw py::type_error(std::string(function) +
                           " takes a trace document (dict) or its JSON text (str, bytes), got " +
                           Py_TYPE(trace.ptr())->tp_name);
    }
  }

  Trace read() {
    if (!tree_) return trace_from_json(text_);
    Trace trace = trace_from_tree(*tree_);
    tree_.reset();  // the structs hold everything now
    return trace;
  }

 private:
  std::optional<TraceTree> tree_;
  std::string_view text_;
};

// The trace's step `step`, counted from the end when negative (Python's indexing).
const Step& step_at(const Trace& trace, int step) {
  const auto count = static_cast<int>(trace.steps.size());
  const int index = step < 0 ? count + step : step;
  if (index < 0 || index >= count) {
    throw py::index_error("step " + std::to_string(step) + " is out of range: the trace has " +
                          std::to_string(count) + " step(s)");
  }
  return trace.steps[static_cast<std::size_t>(index)];
}

std::string forecast_step(const std::string& trace_json, const std::vector<std::string>& targets,
                          int step, const std::string& weights_dir, double host_speed,
                          const std::string& host_model_json) {
  const Trace trace = trace_from_json(trace_json);
  return forecast_to_json(forecast_for(step_at(trace, step), trace.origin, targets, weights_dir,
                                       {host_speed, host_model_json}));
}

ForecastParts forecast_one_step(TraceArg& trace_arg, const std::vector<std::string>& targets,
                                const std::string& weights_dir, const TimelineSettings& timeline) {
  const Trace trace = trace_arg.read();
  if (trace.steps.size() != 1) {
    throw py::value_error("forecast_step_parts takes a trace document of one step, got " +
                          std::to_string(trace.steps.size()));
  }
  return forecast_parts(trace.steps.front(), trace.origin, targets, weights_dir, timeline);
}

// Habitat's wave scaling of kernels known only by their time, work and (when known) launch
// shape, as the evaluation's NeuSight rows are: habitat.evaluate runs the engine's formula.
std::vector<double> wave_scale_us(const std::vector<double>& time_us,
                                  const std::vector<double>& flops,
                                  const std::vector<double>& bytes, const std::string& origin,
                                  const std::string& target,
                                  const std::optional<std::vector<double>>& blocks,
                                  const std::optional<std::vector<int>>& threads_per_block,
                                  const std::string& precision,
                                  const std::optional<std::string>& devices_json) {
  const std::size_t n = time_us.size();
  if (flops.size() != n || bytes.size() != n || (blocks && blocks->size() != n) ||
      (threads_per_block && threads_per_block->size() != n)) {
    throw py::value_error(
        "wave_scale_us: time_us, flops, bytes, blocks and threads_per_block "
        "must have the same length");
  }
  const auto p = precision_from_string(precision);
  if (!p) throw py::value_error("unknown precision '" + precision + "'");
  const Device& o = find_device(origin, devices_json);
  const Device& t = find_device(target, devices_json);
  const WaveScaler scaler(o, t);
  constexpr double kMaxGrid = std::numeric_limits<int>::max();
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    KernelLaunch k;
    k.duration_us = time_us[i];
    // Unknown grid: many waves (the full-wave formula). Unknown block size: 1024 threads, the
    // largest block and so the fewest resident blocks per SM.
    k.grid[0] = blocks ? static_cast<int>(std::clamp(std::ceil((*blocks)[i]), 1.0, kMaxGrid))
                       : std::numeric_limits<int>::max();
    const int threads = threads_per_block ? (*threads_per_block)[i] : 0;
    k.block[0] = threads > 0 ? threads : 1024;
    out[i] = scaler.scale(k, flops[i] / bytes[i], *p).time_us;
  }
  return out;
}

}  // namespace

void bind_engine(py::module_& m) {
  m.def("wave_scale_us", &wave_scale_us, py::arg("time_us"), py::arg("flops"), py::arg("bytes"),
        py::arg("origin"), py::arg("target"), py::arg("blocks") = py::none(),
        py::arg("threads_per_block") = py::none(), py::arg("precision") = "fp32",
        py::arg("devices_json") = py::none(),
        "Habitat's wave scaling (the engine's WaveScaler) of kernels timed on `origin` to\n"
        "`target`, one per entry: time, FLOPs and bytes (intensity = flops/bytes), and when\n"
        "known the launch's thread blocks and threads per block (registers and shared memory\n"
        "are taken as not limiting). Devices by name, in devices_json when given.");

  m.def("forecast_step", &forecast_step, py::arg("trace_json"), py::arg("targets"),
        py::arg("step") = -1, py::arg("weights_dir") = "", py::arg("host_speed") = 1.0,
        py::arg("host_model_json") = "", py::call_guard<py::gil_scoped_release>(),
        "Forecast one step of a trace document for each target with the learned models in\n"
        "weights_dir (none: roofline only); returns the forecast as JSON.");

  py::class_<OpRowsBuffer>(m, "OpRowsBuffer", py::buffer_protocol(),
                           "A step's per-op rows (read-only bytes, shared with the engine).")
      .def_buffer([](OpRowsBuffer& r) {
        return py::buffer_info(const_cast<char*>(r.data->data()), 1,
                               py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(r.data->size())}, {py::ssize_t{1}}, true);
      })
      .def("__len__", [](const OpRowsBuffer& r) { return r.data->size(); })
      .def("__bytes__", [](const OpRowsBuffer& r) { return py::bytes(*r.data); })
      .def("__reduce__", [](const OpRowsBuffer& r) {
        // Pickled as the bytes it holds.
        return py::make_tuple(py::module_::import("builtins").attr("bytes"),
                              py::make_tuple(py::bytes(*r.data)));
      });

  m.attr("OP_ROW_METHODS") = method_names();
  m.attr("OP_ROW_CLASSES") = op_class_names();
  m.attr("OP_ROW_PRECISIONS") = precision_names();

  m.def(
      "forecast_step_parts",
      [](py::handle trace_doc, const std::vector<std::string>& targets,
         const std::string& weights_dir, double host_speed, const std::string& host_model_json) {
        TraceArg trace(trace_doc, "forecast_step_parts");
        ForecastParts f;
        {
          py::gil_scoped_release release;
          f = forecast_one_step(trace, targets, weights_dir, {host_speed, host_model_json});
        }
        return py::make_tuple(summary_dict(f.summary), rows_object(std::move(f.rows)));
      },
      py::arg("trace"), py::arg("targets"), py::arg("weights_dir") = "",
      py::arg("host_speed") = 1.0, py::arg("host_model_json") = "",
      "Forecasts the one step of a trace document (a dict, read without JSON text, or its JSON\n"
      "text): (the forecast document without its ops,\n"
      "the per-op rows (forecast_rows.h; an OpRowsBuffer, bytes-like), read as columns only when\n"
      "detail is read).");

  m.def(
      "forecast_trace",
      // A document (dict) is walked into a TraceTree with the GIL, never encoded to text; a
      // str is viewed (alive through the call): a 200k-op document is not copied once more
      // while it is parsed and forecast.
      [](py::handle trace_doc, const std::vector<std::string>& targets,
         const std::string& weights_dir, double host_speed, const std::string& host_model_json,
         double overhead_per_op_us) {
        // Parsed once, every step forecast; each step is kept as C++ structs in a capsule
        // (captured_trace_json encodes it when its detail is read).
        struct Part {
          SharedTrace step;
          ForecastParts forecast;
        };
        std::vector<Part> parts;
        std::string origin;
        TraceArg trace_arg(trace_doc, "forecast_trace");
        {
          py::gil_scoped_release release;
          Trace trace = trace_arg.read();
          Trace origin_only;
          origin_only.origin = trace.origin;
          origin = trace_to_json(origin_only);
          parts.reserve(trace.steps.size());
          for (Step& step : trace.steps) {
            ForecastParts f = forecast_parts(step, trace.origin, targets, weights_dir,
                                             {host_speed, host_model_json, overhead_per_op_us});
            auto one = std::make_shared<Trace>();
            one->origin = trace.origin;
            one->steps.push_back(std::move(step));
            parts.push_back({std::move(one), std::move(f)});
          }
        }
        py::list steps;
        for (Part& part : parts) {
          const Step& step = part.step->steps.front();
          steps.append(py::make_tuple(make_trace_capsule(std::move(part.step)), step.index,
                                      step.wall_ms, summary_dict(part.forecast.summary),
                                      rows_object(std::move(part.forecast.rows))));
        }
        return py::make_tuple(origin, steps);
      },
      py::arg("trace"), py::arg("targets"), py::arg("weights_dir") = "",
      py::arg("host_speed") = 1.0, py::arg("host_model_json") = "",
      py::arg("overhead_per_op_us") = -1.0,
      "Forecasts every step of a trace document (a dict, read without JSON text, or its JSON\n"
      "text), read once: (the trace document without\n"
      "steps, [(step capsule, index, wall_ms, forecast document without ops, per-op rows)]).\n"
      "captured_trace_json(capsule) gives a step's trace when its detail is read.");

  m.def(
      "forecast_captured",
      [](py::handle capsule, const std::string& origin_trace_json,
         const std::vector<std::string>& targets, const std::string& weights_dir, double host_speed,
         const std::string& host_model_json, double steady_wall_ms) {
        const SharedTrace captured = trace_from_capsule(capsule);
        ForecastParts f;
        {
          py::gil_scoped_release release;
          const Trace origin = trace_from_json(origin_trace_json);
          f = forecast_parts(captured->steps.front(), origin.origin, targets, weights_dir,
                             {host_speed, host_model_json, -1, steady_wall_ms});
        }
        return py::make_tuple(summary_dict(f.summary), rows_object(std::move(f.rows)));
      },
      py::arg("captured"), py::arg("origin_trace_json"), py::arg("targets"), py::arg("weights_dir"),
      py::arg("host_speed") = 1.0, py::arg("host_model_json") = "", py::arg("steady_wall_ms") = 0.0,
      "Forecasts a step captured by habitat._C (its .capsule; the origin comes from a trace\n"
      "document whose steps are ignored): (the forecast document without its ops, the per-op\n"
      "rows, an OpRowsBuffer). steady_wall_ms > 0: the wall time of the same step run without\n"
      "recording (predict_on's steady-state steps), to which the timeline's host is calibrated.");

  m.def(
      "validate_host_model",
      [](const std::string& text) { static_cast<void>(host_cost_model_from_json(text)); },
      py::arg("text"),
      "Checks a host model document (HABITAT_HOST_MODEL); ValueError \"host model: ...\" naming\n"
      "the field when it is not one.");
  m.attr("DEFAULT_OVERHEAD_PER_OP_US") = kDefaultOverheadPerOpUs;
  m.def(
      "estimate_overhead_per_op",
      [](const std::string& trace_json, int step) {
        const double c = estimate_overhead_per_op(step_at(trace_from_json(trace_json), step));
        return c >= 0 ? c : kDefaultOverheadPerOpUs;
      },
      py::arg("trace_json"), py::arg("step") = 0,
      "Habitat's per-op recording cost in a format-1 step, estimated from its wrapper ops\n"
      "(habitat/timeline.h); DEFAULT_OVERHEAD_PER_OP_US when it has too few.");

  m.def(
      "origin_op_windows",
      [](const std::string& trace_json, int step) {
        const Trace trace = trace_from_json(trace_json);
        const Step& s = step_at(trace, step);
        OriginHostWindows w;
        {
          py::gil_scoped_release release;
          w = origin_op_windows(s, trace.origin, TimelineOptions{});
        }
        py::list ops;
        for (std::size_t i = 0; i < w.ops.size(); ++i) {
          ops.append(py::make_tuple(s.ops[i].id, w.ops[i].start_us, w.ops[i].end_us));
        }
        py::dict out;
        out["host_scale"] = w.host_scale;
        out["ops"] = ops;
        return out;
      },
      py::arg("trace_json"), py::arg("step") = -1,
      "Each op's host window on a GPU origin as the timeline sees it (habitat/timeline.h\n"
      "origin_op_windows): {'host_scale': the host calibration, 'ops': [(id, start_us, end_us)]}\n"
      "with Habitat's own time and the origin's sync waits removed and the calibration applied;\n"
      "no ops for a CPU origin.");

  m.def(
      "learned_op_parts",
      [](const std::string& trace_json, int step) {
        const Trace trace = trace_from_json(trace_json);
        py::list out;
        for (const OpRecord& op : step_at(trace, step).ops) {
          const OpCost cost = estimate_cost(op, op_precision(op, trace.origin));
          py::list parts;
          for (const LearnedPart& part : learned_parts(op, cost, true)) {
            parts.append(py::make_tuple(std::string(to_string(part.family)), part.shape,
                                        std::string(to_string(learned_part_precision(cost, part))),
                                        part.scale));
          }
          if (!parts.empty()) out.append(py::make_tuple(op.id, to_string(cost.op_class), parts));
        }
        return out;
      },
      py::arg("trace_json"), py::arg("step") = -1,
      "The learned-family parts the engine forecasts each op of a step from (a fused attention\n"
      "op as one attention part): [(op id, op class, [(family, shape, precision, scale)])], ops\n"
      "without parts left out. What trainers read trace rows with, so they cannot drift from the\n"
      "engine's features.");

  m.def(
      "captured_trace_json",
      [](py::handle capsule) {
        const SharedTrace captured = trace_from_capsule(capsule);
        std::string text;
        {
          py::gil_scoped_release release;
          text = trace_to_json(*captured);
        }
        return py::bytes(text);
      },
      py::arg("captured"), "A trace document (default origin) holding a captured step.");

  m.def(
      "captured_cuda_device",
      [](py::handle capsule) -> std::optional<std::string> {
        const SharedTrace captured = trace_from_capsule(capsule);
        // Found without decoding the step into Python: the forecast worker asks while a
        // detailed step is being recorded, and a decode would hold the GIL it needs.
        py::gil_scoped_release release;
        for (const Step& step : captured->steps)
          for (const OpRecord& op : step.ops)
            for (const Argument& arg : op.args)
              for (const TensorMeta& meta : arg.value.tensors)
                if (meta.device.str().starts_with("cuda")) return meta.device.str();
        return std::nullopt;
      },
      py::arg("captured"),
      "The device (\"cuda:N\") of the first CUDA tensor among a captured step's op arguments, "
      "in op order, or None.");
}

}  // namespace habitat::python
