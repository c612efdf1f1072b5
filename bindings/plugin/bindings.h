// Entry points that register each part of habitat._C (the capture plugin); one file owns each.
#pragma once

#include <pybind11/pybind11.h>

namespace habitat::python {

void bind_capture(pybind11::module_& m);  // bind_capture.cpp: the dispatch-key recorder
void bind_cupti(pybind11::module_& m);    // bind_cupti.cpp: CUPTI kernel tracing

}  // namespace habitat::python
