// Entry points that register each part of habitat._C; one file owns each.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "predictor.h"
#include "trace.h"

namespace habitat::python {

void bind_devices(pybind11::module_& m);  // bind_devices.cpp: Device, DeviceDatabase
void bind_trace(pybind11::module_& m);    // bind_trace.cpp: trace documents (load, save, validate)
void bind_engine(pybind11::module_& m);   // bind_engine.cpp: the predictor
void bind_capture(pybind11::module_& m);  // bind_capture.cpp: the dispatch-key recorder
void bind_learned(pybind11::module_& m);  // bind_learned.cpp: learned models (MLP runtime)
void bind_cupti(pybind11::module_& m);    // bind_cupti.cpp: CUPTI kernel tracing

// bind_engine.cpp: forecasts one step for each target with the learned models in weights_dir
// (none: roofline only). Call without the GIL.
Forecast forecast_for(const Step& step, const TraceOrigin& origin,
                      const std::vector<std::string>& targets, const std::string& weights_dir);

}  // namespace habitat::python
