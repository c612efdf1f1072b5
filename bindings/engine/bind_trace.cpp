// Trace documents for Python: validation, loading and saving go through the engine's reader
// and writer so both languages accept exactly the same documents. Traces come in as dicts
// (walked into a TraceTree, never encoded to text) or JSON text and go out as JSON text;
// python/habitat/data/trace.py turns them into dicts.
#include <Python.h>

#include <optional>
#include <string>
#include <system_error>

#include "bindings.h"
#include "habitat/input_limits.h"
#include "habitat/trace.h"
#include "habitat/trace_tree.h"
#include "trace_tree_of.h"

namespace habitat::python {
namespace py = pybind11;
namespace {

// OSError(errno, message, filename) picks the matching subclass (FileNotFoundError,
// PermissionError, IsADirectoryError), so callers can catch what they expect from open().
[[noreturn]] void raise_os_error(const std::system_error& e, const char* action,
                                 const std::string& path) {
  const std::string message = std::string(action) + ": " + e.code().message();
  py::object os_error = py::reinterpret_borrow<py::object>(PyExc_OSError);
  py::object exc = os_error(e.code().value(), message, path);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

// Runs `work` without the GIL (parsing a long trace should not stall other Python threads),
// turning file errors into OSError once the GIL is back.
template <class Work>
auto without_gil(const char* action, const std::string& path, Work&& work) {
  std::optional<std::system_error> io_error;
  decltype(work()) result{};
  {
    py::gil_scoped_release release;
    try {
      result = work();
    } catch (const std::system_error& e) {
      io_error = e;
    }
  }
  if (io_error) raise_os_error(*io_error, action, path);
  return result;
}

}  // namespace

void bind_trace(py::module_& m) {
  py::register_local_exception<TraceFormatError>(m, "TraceFormatError", PyExc_ValueError);
  // An input over a cap of habitat/input_limits.h, or not a regular file: a ValueError whose
  // message names the cap and the variable that raises it.
  py::register_local_exception<InputLimitError>(m, "InputLimitError", PyExc_ValueError);
  m.def(
      "input_limits",
      [] {
        const InputLimits l = input_limits();
        py::dict out;
        out["max_bytes"] = l.max_bytes;
        out["max_ops"] = l.max_ops;
        out["max_steps"] = l.max_steps;
        out["bytes_basis"] = l.bytes_basis;
        return out;
      },
      "The caps on one input file in force now (habitat/input_limits.h): max_bytes (its\n"
      "decompressed text), max_ops, max_steps, and what set max_bytes (bytes_basis).\n"
      "Raises InputLimitError when an override variable is not a number.");
  m.attr("MAX_JSON_DEPTH") = kMaxJsonDepth;
  m.attr("TRACE_FORMAT_NAME") = Trace::kFormatName;
  m.attr("TRACE_FORMAT_VERSION") = Trace::kFormatVersion;

  m.def(
      "validate_trace_json",
      [](const std::string& text) {
        py::gil_scoped_release release;
        return trace_to_json(trace_from_json(text));
      },
      py::arg("text"),
      "Parse and validate a habitat trace document; return it in canonical compact form.\n"
      "Raises TraceFormatError (a ValueError) naming the first invalid field.");

  m.def(
      "validate_trace_doc",
      [](py::handle doc) {
        TraceTree tree = trace_tree_of(doc);
        py::gil_scoped_release release;
        return trace_to_json(trace_from_tree(tree));
      },
      py::arg("doc"),
      "validate_trace_json of a document held as Python objects (a dict), read without JSON\n"
      "text: the same checks and messages; returns the canonical compact JSON text.");

  m.def(
      "load_trace",
      [](const std::string& path) {
        return without_gil("cannot read habitat trace", path,
                           [&] { return trace_to_json(load_trace(path)); });
      },
      py::arg("path"),
      "Read and validate the trace file at `path`; return its canonical JSON text.\n"
      "Raises OSError if the file cannot be read, TraceFormatError if it is not a valid trace.");

  m.def(
      "save_trace_doc",
      [](py::handle doc, const std::string& path) {
        TraceTree tree = trace_tree_of(doc);
        without_gil("cannot write habitat trace", path, [&] {
          save_trace(trace_from_tree(tree), path);
          return true;
        });
      },
      py::arg("doc"), py::arg("path"),
      "save_trace_json of a document held as Python objects (a dict), read without JSON text.");

  m.def(
      "save_trace_json",
      [](const std::string& text, const std::string& path) {
        without_gil("cannot write habitat trace", path, [&] {
          save_trace(trace_from_json(text), path);
          return true;
        });
      },
      py::arg("text"), py::arg("path"),
      "Validate a trace document and write it to `path` in canonical form (atomically).");
}

}  // namespace habitat::python
