#include "bindings.h"

namespace habitat::python {

void bind_trace(pybind11::module_& m) { (void)m; }

}  // namespace habitat::python
