// The pybind11 module habitat._engine: the torch-free engine. It links no libtorch, so
// saved traces are forecast, compared and reported where torch is not installed.
#include <pybind11/pybind11.h>

#include "bindings.h"

PYBIND11_MODULE(_engine, m) {
  m.doc() = "Habitat: the torch-free prediction engine (devices, traces, forecasts)";
  habitat::python::bind_devices(m);
  habitat::python::bind_trace(m);
  habitat::python::bind_engine(m);
  habitat::python::bind_learned(m);
  habitat::python::bind_parallel(m);
  habitat::python::bind_memory(m);
  habitat::python::bind_event_file(m);
}
