// Entry points that register each part of habitat._engine; one file owns each.
#pragma once

#include <pybind11/pybind11.h>

namespace habitat::python {

void bind_devices(pybind11::module_& m);   // bind_devices.cpp: Device, DeviceDatabase
void bind_trace(pybind11::module_& m);     // bind_trace.cpp: trace documents (load, save, validate)
void bind_engine(pybind11::module_& m);    // bind_engine.cpp: the predictor
void bind_learned(pybind11::module_& m);   // bind_learned.cpp: learned models (MLP runtime)
void bind_parallel(pybind11::module_& m);  // bind_parallel.cpp: clusters, collective cost model
void bind_memory(pybind11::module_& m);    // bind_memory.cpp: a step's peak-memory estimate
void bind_event_file(pybind11::module_& m);  // bind_event_file.cpp: TensorBoard scalar records

}  // namespace habitat::python
