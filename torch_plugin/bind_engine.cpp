#include "bindings.h"

namespace habitat::python {

void bind_engine(pybind11::module_& m) { (void)m; }

}  // namespace habitat::python
