// The step's peak-memory estimate for Python (habitat.analysis.memory), computed from a step
// the engine holds as C++ structs: a saved 200k-op step is estimated without an object per op.
#include <pybind11/stl.h>

#include "bindings.h"
#include "bindings/trace_capsule.h"
#include "habitat/step_memory.h"

namespace habitat::python {
namespace py = pybind11;

namespace {

py::dict to_python(const StepMemory& r) {
  py::dict d;
  d["parameters"] = r.parameters;
  d["gradients"] = r.gradients;
  d["optimizer_state"] = r.optimizer_state;
  d["inputs"] = r.inputs;
  d["activations"] = r.activations;
  d["live_peak"] = r.live_peak;
  d["peak_op"] = r.peak_op;
  d["peak_phase"] = r.peak_phase;
  d["uses_matmul"] = r.uses_matmul;
  d["measured_peak_bytes"] = r.measured_peak_bytes;
  d["notes"] = r.notes;
  return d;
}

StepMemory first_step_memory(const Trace& trace) {
  if (trace.steps.empty()) throw py::value_error("the trace holds no step");
  py::gil_scoped_release release;
  return estimate_step_memory(trace.steps.front());
}

}  // namespace

void bind_memory(py::module_& m) {
  m.def(
      "estimate_step_memory",
      [](py::handle capsule) { return to_python(first_step_memory(*trace_from_capsule(capsule))); },
      py::arg("capsule"),
      "Peak-memory estimate of the step in `capsule` (a step the engine holds): the fields of "
      "habitat.analysis.memory.MemoryEstimate.");
  m.def(
      "estimate_step_memory_json",
      [](std::string_view text) {
        Trace trace;
        {
          py::gil_scoped_release release;
          trace = trace_from_json(text);
        }
        return to_python(first_step_memory(trace));
      },
      py::arg("text"), "Peak-memory estimate of the first step of a trace document (JSON text).");
}

}  // namespace habitat::python
