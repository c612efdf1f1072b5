// The step's peak-memory estimate for Python (habitat.analysis.memory), computed from a step
// the engine holds as C++ structs: a saved 200k-op step is estimated without an object per op.
#include <pybind11/stl.h>

#include "bindings.h"
#include "bindings/trace_capsule.h"
#include "habitat/step_memory.h"

namespace habitat::python {
namespace py = pybind11;

void bind_memory(py::module_& m) {
  m.def(
      "estimate_step_memory",
      [](py::handle capsule) {
        const SharedTrace trace = trace_from_capsule(capsule);
        if (trace->steps.empty()) throw py::value_error("the captured trace holds no step");
        StepMemory r;
        {
          py::gil_scoped_release release;
          r = estimate_step_memory(trace->steps.front());
        }
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
      },
      py::arg("capsule"),
      "Peak-memory estimate of the step in `capsule` (a step the engine holds): the fields of "
      "habitat.analysis.memory.MemoryEstimate, by the same method.");
}

}  // namespace habitat::python
