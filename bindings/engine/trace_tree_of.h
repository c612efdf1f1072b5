// A trace document held as Python objects, handed to the engine without JSON text.
#pragma once

#include <pybind11/pybind11.h>

#include "habitat/trace_tree.h"

namespace habitat::python {

// The document `doc` (a dict of dicts, lists, tuples, str, int, float, bool and None: what
// json.dumps writes) as a TraceTree, read by the engine's trace reader (trace_from_tree), as
// if it had been written by json.dumps(doc, allow_nan=False) and parsed: the same values,
// the same accepted documents. A value JSON cannot hold (a NaN, a set, a numpy scalar)
// raises TraceFormatError naming where it is. Call with the GIL held.
TraceTree trace_tree_of(pybind11::handle doc);

}  // namespace habitat::python
