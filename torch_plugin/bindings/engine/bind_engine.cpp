// The predictor for Python: saved traces arrive as JSON documents, steps captured by
// habitat._C as C++ structs (trace_capsule.h), so a live step is never encoded to forecast it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "bindings/trace_capsule.h"
#include "device_registry.h"
#include "habitat/learned_envelope.h"
#include "habitat/learned_models.h"
#include "habitat/predictor.h"
#include "habitat/trace.h"
#include "habitat/wave_scaling.h"

namespace habitat::python {

namespace py = pybind11;

namespace {

// Learned models by weights directory, loaded once: a step is forecast every training step.
const ShapeModel* learned_models(const std::string& weights_dir) {
  if (weights_dir.empty()) return nullptr;
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<LearnedModels>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(weights_dir);
  if (it == cache.end()) {
    auto models = std::make_unique<LearnedModels>(LearnedModels::load(weights_dir));
    if (models->empty()) models.reset();
    it = cache.emplace(weights_dir, std::move(models)).first;
  }
  return it->second.get();
}

// Forecasts one step for each target with the learned models in weights_dir (none: roofline
// only). Call without the GIL.
Forecast forecast_for(const Step& step, const TraceOrigin& origin,
                      const std::vector<std::string>& targets, const std::string& weights_dir) {
  const ShapeModel* learned = learned_models(weights_dir);
  // A GPU at least as good on every figure is never forecast slower (learned_envelope.h).
  std::optional<DominanceEnvelope> envelope;
  if (learned != nullptr) envelope.emplace(*learned, device_database());
  Predictor predictor(device_database(), envelope ? &*envelope : nullptr);
  // HABITAT_OP_MEMO=0 turns the per-op memo off (benchmarks and tests compare the two).
  static const bool memoize = [] {
    const char* v = std::getenv("HABITAT_OP_MEMO");
    return v == nullptr || std::string(v) != "0";
  }();
  predictor.set_memoize(memoize);
  return predictor.predict(step, origin, targets);
}

std::string forecast_step(const std::string& trace_json, const std::vector<std::string>& targets,
                          int step, const std::string& weights_dir) {
  const Trace trace = trace_from_json(trace_json);
  const auto count = static_cast<int>(trace.steps.size());
  const int index = step < 0 ? count + step : step;
  if (index < 0 || index >= count) {
    throw py::index_error("step " + std::to_string(step) + " is out of range: the trace has " +
                          std::to_string(count) + " step(s)");
  }
  return forecast_to_json(
      forecast_for(trace.steps[static_cast<std::size_t>(index)], trace.origin, targets, weights_dir));
}

// The same, in two parts read at different times: the forecast document without its ops (the
// totals, read at once) and the JSON of the ops array (parsed only when per-op detail is read).
std::pair<std::string, std::string> forecast_step_parts(const std::string& trace_json,
                                                        const std::vector<std::string>& targets,
                                                        const std::string& weights_dir) {
  const Trace trace = trace_from_json(trace_json);
  if (trace.steps.size() != 1) {
    throw py::value_error("forecast_step_parts takes a trace document of one step, got " +
                          std::to_string(trace.steps.size()));
  }
  const Forecast f = forecast_for(trace.steps.front(), trace.origin, targets, weights_dir);
  return {forecast_summary_to_json(f), forecast_ops_to_json(f)};
}

// Habitat's wave scaling of kernels known only by their time, work and (when known) launch
// shape, as the evaluation's NeuSight rows are: habitat.evaluate runs the engine's formula.
std::vector<double> wave_scale_us(const std::vector<double>& time_us, const std::vector<double>& flops,
                                  const std::vector<double>& bytes, const std::string& origin,
                                  const std::string& target,
                                  const std::optional<std::vector<double>>& blocks,
                                  const std::optional<std::vector<int>>& threads_per_block,
                                  const std::string& precision,
                                  const std::optional<std::string>& devices_json) {
  const std::size_t n = time_us.size();
  if (flops.size() != n || bytes.size() != n || (blocks && blocks->size() != n) ||
      (threads_per_block && threads_per_block->size() != n)) {
    throw py::value_error("wave_scale_us: time_us, flops, bytes, blocks and threads_per_block "
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
        py::arg("step") = -1, py::arg("weights_dir") = "", py::call_guard<py::gil_scoped_release>(),
        "Forecast one step of a trace document for each target with the learned models in\n"
        "weights_dir (none: roofline only); returns the forecast as JSON.");

  m.def(
      "forecast_step_parts",
      [](const std::string& trace_json, const std::vector<std::string>& targets,
         const std::string& weights_dir) {
        std::pair<std::string, std::string> parts;
        {
          py::gil_scoped_release release;
          parts = forecast_step_parts(trace_json, targets, weights_dir);
        }
        return py::make_tuple(parts.first, py::bytes(parts.second));
      },
      py::arg("trace_json"), py::arg("targets"), py::arg("weights_dir") = "",
      "Forecasts the one step of a trace document: (the forecast document without its ops,\n"
      "JSON of the ops array as bytes, to parse only when per-op detail is read).");

  m.def(
      "forecast_trace",
      [](const std::string& trace_json, const std::vector<std::string>& targets,
         const std::string& weights_dir) {
        // Parsed once, every step forecast; each step is kept as C++ structs in a capsule
        // (captured_trace_json encodes it when its detail is read).
        struct Part {
          SharedTrace step;
          std::string summary;
          std::string ops;
        };
        std::vector<Part> parts;
        std::string origin;
        {
          py::gil_scoped_release release;
          Trace trace = trace_from_json(trace_json);
          Trace origin_only;
          origin_only.origin = trace.origin;
          origin = trace_to_json(origin_only);
          parts.reserve(trace.steps.size());
          for (Step& step : trace.steps) {
            const Forecast f = forecast_for(step, trace.origin, targets, weights_dir);
            auto one = std::make_shared<Trace>();
            one->origin = trace.origin;
            one->steps.push_back(std::move(step));
            parts.push_back({std::move(one), forecast_summary_to_json(f), forecast_ops_to_json(f)});
          }
        }
        py::list steps;
        for (Part& part : parts) {
          const Step& step = part.step->steps.front();
          steps.append(py::make_tuple(make_trace_capsule(std::move(part.step)), step.index,
                                      step.wall_ms, part.summary, py::bytes(part.ops)));
        }
        return py::make_tuple(origin, steps);
      },
      py::arg("trace_json"), py::arg("targets"), py::arg("weights_dir") = "",
      "Forecasts every step of a trace document, parsed once: (the trace document without\n"
      "steps, [(step capsule, index, wall_ms, forecast document without ops, ops JSON bytes)]).\n"
      "captured_trace_json(capsule) gives a step's trace when its detail is read.");

  m.def(
      "forecast_captured",
      [](py::handle capsule, const std::string& origin_trace_json,
         const std::vector<std::string>& targets, const std::string& weights_dir) {
        const SharedTrace captured = trace_from_capsule(capsule);
        std::string summary;
        std::string ops;
        {
          py::gil_scoped_release release;
          const Trace origin = trace_from_json(origin_trace_json);
          const Forecast f = forecast_for(captured->steps.front(), origin.origin, targets, weights_dir);
          summary = forecast_summary_to_json(f);
          ops = forecast_ops_to_json(f);
        }
        return py::make_tuple(summary, py::bytes(ops));
      },
      py::arg("captured"), py::arg("origin_trace_json"), py::arg("targets"), py::arg("weights_dir"),
      "Forecasts a step captured by habitat._C (its .capsule; the origin comes from a trace\n"
      "document whose steps are ignored): (the forecast document without its ops, JSON of the\n"
      "ops array).");

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
}

}  // namespace habitat::python
