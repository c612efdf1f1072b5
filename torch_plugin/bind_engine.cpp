// The predictor, exposed to Python over JSON documents so a saved trace can be
// re-forecast without torch (the engine never sees a torch type).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "device_registry.h"
#include "predictor.h"
#include "trace.h"

namespace habitat::python {

namespace py = pybind11;

namespace {

std::string forecast_step(const std::string& trace_json, const std::vector<std::string>& targets,
                          int step) {
  const Trace trace = trace_from_json(trace_json);
  const auto count = static_cast<int>(trace.steps.size());
  const int index = step < 0 ? count + step : step;
  if (index < 0 || index >= count) {
    throw py::index_error("step " + std::to_string(step) + " is out of range: the trace has " +
                          std::to_string(count) + " step(s)");
  }
  const Predictor predictor(device_database(), nullptr);
  const Step& s = trace.steps[static_cast<std::size_t>(index)];
  return forecast_to_json(predictor.predict(s, trace.origin, targets), s);
}

}  // namespace

void bind_engine(py::module_& m) {
  m.def("forecast_step", &forecast_step, py::arg("trace_json"), py::arg("targets"),
        py::arg("step") = -1, py::call_guard<py::gil_scoped_release>(),
        "Forecast one step of a trace document for each target; returns the forecast as JSON.");
}

}  // namespace habitat::python
