// The pybind11 module habitat._C: each part of the plugin binds its own names.
#include <pybind11/pybind11.h>

#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "Habitat: C++ engine and PyTorch capture plugin";
  habitat::python::bind_devices(m);
  habitat::python::bind_trace(m);
  habitat::python::bind_engine(m);
  habitat::python::bind_capture(m);
  habitat::python::bind_learned(m);
  habitat::python::bind_cupti(m);
}
