#include "bindings.h"

namespace habitat::python {

void bind_capture(pybind11::module_& m) { (void)m; }

}  // namespace habitat::python
