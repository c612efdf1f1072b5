// A captured step handed from habitat._C (capture, links libtorch) to habitat._engine
// (forecasting, links no libtorch) without encoding or copying it: a PyCapsule that shares
// ownership of the C++ Trace.
//
// The two modules are built by one setup.py with one compiler, the same flags and torch's
// std::string ABI, so they agree on the structs' layout. The capsule's name carries a layout
// tag anyway, so a stale _C beside a newer _engine is refused with a clear error instead of
// reading a struct it does not know.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "habitat/trace.h"

namespace habitat::python {

inline const char* trace_capsule_name() {
  static const std::string name =
      "habitat.Trace/v" + std::to_string(Trace::kFormatVersion) + "/" +
      std::to_string(sizeof(Trace)) + "." + std::to_string(sizeof(Step)) + "." +
      std::to_string(sizeof(OpRecord)) + "." + std::to_string(sizeof(TensorMeta)) + "." +
      std::to_string(sizeof(KernelLaunch)) + "." + std::to_string(sizeof(std::string));
  return name.c_str();
}

using SharedTrace = std::shared_ptr<const Trace>;

inline pybind11::capsule make_trace_capsule(SharedTrace trace) {
  auto holder = std::make_unique<SharedTrace>(std::move(trace));
  pybind11::capsule capsule(holder.get(), trace_capsule_name(), [](PyObject* o) {
    std::unique_ptr<SharedTrace>(
        static_cast<SharedTrace*>(PyCapsule_GetPointer(o, trace_capsule_name())));
  });
  holder.release();  // the capsule owns it now
  return capsule;
}

inline SharedTrace trace_from_capsule(pybind11::handle capsule) {
  if (!PyCapsule_IsValid(capsule.ptr(), trace_capsule_name())) {
    throw pybind11::type_error(
        "not a captured step of this habitat build (habitat._C and habitat._engine come from "
        "different builds): reinstall habitat with pip install --no-build-isolation .");
  }
  return *static_cast<SharedTrace*>(PyCapsule_GetPointer(capsule.ptr(), trace_capsule_name()));
}

}  // namespace habitat::python
