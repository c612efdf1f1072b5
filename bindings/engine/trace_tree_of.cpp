// Walking a Python trace document into a TraceTree. Encoding a 10k-op step with json.dumps
// only for the engine to parse it again took twice as long as forecasting it for 20 GPUs;
// this walk copies each value once. Python values map to JSON as json.dumps maps them.
#include "trace_tree_of.h"

#include <Python.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

namespace habitat::python {
namespace {

// As deep as the JSON parser reads (json_dom.cpp); deeper is no trace, or a cycle.
constexpr int kMaxDepth = 256;

class Walker {
 public:
  void fill(TraceTree::Node node, PyObject* obj, int depth) {
    if (obj == Py_None) {
      node.set_null();
    } else if (obj == Py_True || obj == Py_False) {
      node.set_bool(obj == Py_True);
    } else if (PyUnicode_Check(obj)) {
      node.set_string(utf8(obj));
    } else if (PyLong_Check(obj)) {
      set_integer(node, obj);
    } else if (PyFloat_Check(obj)) {
      const double d = PyFloat_AS_DOUBLE(obj);
      if (!std::isfinite(d)) {
        fail(std::string(std::isnan(d) ? "nan"
                         : d > 0       ? "inf"
                                       : "-inf") +
             " is not a JSON number: write non-finite floats as \"inf\", \"-inf\" or \"nan\"");
      }
      node.set_real(d);
    } else if (PyList_Check(obj) || PyTuple_Check(obj)) {
      enter(depth);
      const bool list = PyList_Check(obj);
      const Py_ssize_t n = list ? PyList_GET_SIZE(obj) : PyTuple_GET_SIZE(obj);
      node.set_array(static_cast<std::size_t>(n));
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = list ? PyList_GET_ITEM(obj, i) : PyTuple_GET_ITEM(obj, i);
        path_.push_back({nullptr, i, item});
        fill(node.element(static_cast<std::size_t>(i)), item, depth + 1);
        path_.pop_back();
      }
    } else if (PyDict_Check(obj)) {
      enter(depth);
      node.set_object(static_cast<std::size_t>(PyDict_GET_SIZE(obj)));
      Py_ssize_t pos = 0;
      std::size_t i = 0;
      PyObject* key = nullptr;
      PyObject* value = nullptr;
      while (PyDict_Next(obj, &pos, &key, &value)) {
        path_.push_back({key, -1, value});
        // The member copies its key: str keys (all of a trace's) are read in place.
        const TraceTree::Node member =
            PyUnicode_Check(key) ? node.member(i++, utf8(key)) : node.member(i++, key_text(key));
        fill(member, value, depth + 1);
        path_.pop_back();
      }
    } else {
      fail(
          std::string("a ") + Py_TYPE(obj)->tp_name +
          " is not a JSON value: documents hold only dicts, lists, str, int, float, bool and None");
    }
  }

 private:
  struct Frame {
    PyObject* key;     // a member's key; null for an array element
    Py_ssize_t index;  // an array element's index
    PyObject* value;
  };

  void enter(int depth) {
    if (depth >= kMaxDepth) {
      fail("nested more than " + std::to_string(kMaxDepth) +
           " levels deep (a list or dict that contains itself?)");
    }
  }

  std::string_view utf8(PyObject* text) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(text, &size);
    if (data == nullptr) {
      PyErr_Clear();
      fail("a str that is not valid Unicode (a lone surrogate?)");
    }
    return {data, static_cast<std::size_t>(size)};
  }

  // Integers stay integers while they fit 64 bits, as a JSON parser keeps them; larger ones
  // become the nearest double, as the parser reads the digits json.dumps writes.
  void set_integer(TraceTree::Node node, PyObject* obj) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow == 0) {
      node.set_int(v);
      return;
    }
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(obj);
      if (!PyErr_Occurred()) {
        node.set_uint(u);
        return;
      }
      PyErr_Clear();
    }
    const double d = PyLong_AsDouble(obj);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      fail("an integer too large for a JSON number");
    }
    node.set_real(d);
  }

  // A key that is not a str as json.dumps writes it: int, float, bool and None as their JSON
  // text; others are refused.
  std::string key_text(PyObject* key) {
    if (key == Py_True) return "true";
    if (key == Py_False) return "false";
    if (key == Py_None) return "null";
    if (PyLong_Check(key) || (PyFloat_Check(key) && std::isfinite(PyFloat_AS_DOUBLE(key)))) {
      // int.__repr__ / float.__repr__, as json.dumps (a subclass's own repr is not used).
      PyObject* text = PyLong_Check(key) ? PyLong_Type.tp_repr(key) : PyFloat_Type.tp_repr(key);
      if (text == nullptr) throw pybind11::error_already_set();
      std::string out(utf8(text));
      Py_DECREF(text);
      return out;
    }
    fail(std::string("a key of type ") + Py_TYPE(key)->tp_name +
         ": keys must be str, int, float, bool or None");
  }

  // "steps[0].ops[3] (aten::mm).args[1]", as the trace reader names fields (json_reader's Loc).
  std::string where() const {
    std::string s;
    for (std::size_t i = 0; i < path_.size(); ++i) {
      const Frame& f = path_[i];
      if (f.key != nullptr) {
        if (!s.empty()) s += '.';
        PyObject* text = PyObject_Str(f.key);
        const char* data = text != nullptr ? PyUnicode_AsUTF8(text) : nullptr;
        s += data != nullptr ? data : "?";
        Py_XDECREF(text);
        PyErr_Clear();
      } else {
        s += '[' + std::to_string(f.index) + ']';
        // An op (steps[i].ops[j]) is named after its op, as the reader names it.
        if (i == 3 && is_key(path_[0], "steps") && is_key(path_[2], "ops") &&
            PyDict_Check(f.value)) {
          PyObject* name = PyDict_GetItemString(f.value, "name");
          const char* data =
              name != nullptr && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
          if (data != nullptr && *data != '\0') s += std::string(" (") + data + ")";
          PyErr_Clear();
        }
      }
    }
    return s;
  }

  static bool is_key(const Frame& f, const char* name) {
    return f.key != nullptr && PyUnicode_Check(f.key) &&
           PyUnicode_CompareWithASCIIString(f.key, name) == 0;
  }

  [[noreturn]] void fail(const std::string& what) const {
    const std::string at = where();
    throw TraceFormatError("invalid habitat trace: " + (at.empty() ? what : at + ": " + what));
  }

  std::vector<Frame> path_;
};

}  // namespace

TraceTree trace_tree_of(pybind11::handle doc) {
  if (!PyDict_Check(doc.ptr())) {
    throw pybind11::type_error(std::string("a trace document is a dict, got ") +
                               Py_TYPE(doc.ptr())->tp_name);
  }
  TraceTree tree;
  Walker walker;
  walker.fill(tree.root(), doc.ptr(), 0);
  return tree;
}

}  // namespace habitat::python
