// The pybind11 module habitat._C: the capture plugin (dispatch-key fallback, CUPTI, NVTX).
// Captured steps go to habitat._engine as C++ structs (trace_capsule.h).
#include <pybind11/pybind11.h>

#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "Habitat: PyTorch capture plugin";
  habitat::python::bind_capture(m);
  habitat::python::bind_cupti(m);
}
