// The CUPTI kernel activity record layout of the headers we compile against, shared by the
// tracer (which reads the records) and the fake CUPTI of the tests (which writes them).
#pragma once

#include <cupti.h>

namespace habitat {

// Only fields that sit at the same offsets from CUpti_ActivityKernel4 on are read
// (docs/references.md, CUDA tools), so records from a newer CUPTI library decode correctly too.
#if CUPTI_API_VERSION >= 130000
using ActivityKernel = CUpti_ActivityKernel10;
#else
using ActivityKernel = CUpti_ActivityKernel4;
#endif

}  // namespace habitat
