// The CUPTI kernel, memcpy and memset activity record layouts of the headers we compile
// against, shared by the tracer (which reads the records) and the fake CUPTI of the tests (which
// writes them).
#pragma once

#include <cupti.h>

namespace habitat {

// Only fields that sit at the same offsets from CUpti_ActivityKernel4 (CUpti_ActivityMemcpy,
// CUpti_ActivityMemset: kind to correlationId) on are read (docs/references.md, CUDA tools), so
// records from a newer CUPTI library decode correctly too.
#if CUPTI_API_VERSION >= 130000
using ActivityKernel = CUpti_ActivityKernel10;
using ActivityMemcpy = CUpti_ActivityMemcpy6;
using ActivityMemset = CUpti_ActivityMemset4;
#else
using ActivityKernel = CUpti_ActivityKernel4;
using ActivityMemcpy = CUpti_ActivityMemcpy;
using ActivityMemset = CUpti_ActivityMemset;
#endif

}  // namespace habitat
