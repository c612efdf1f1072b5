// habitat._C learned-model entry points: load the weights/ models and predict one
// canonical shape, so Python can check the engine against its own feature code.
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "bindings.h"
#include "device_registry.h"
#include "habitat/learned_models.h"

namespace habitat::python {
namespace py = pybind11;

namespace {

LearnedFamily family_or_throw(const std::string& name) {
  auto f = learned_family_from_string(name);
  if (!f) {
    throw py::value_error("unknown learned family '" + name +
                          "': expected gemm, conv, elementwise, softmax, layernorm, attention, "
                          "reduction or batchnorm");
  }
  return *f;
}

Precision precision_or_throw(const std::string& name) {
  auto p = precision_from_string(name);
  if (!p)
    throw py::value_error("unknown precision '" + name +
                          "': expected fp32, tf32, fp16, bf16, fp8 or fp64");
  return *p;
}

}  // namespace

void bind_learned(py::module_& m) {
  py::class_<LearnedModels>(
      m, "LearnedModels", "Learned efficiency MLPs loaded from a weights directory (C++ runtime).")
      .def("families", &LearnedModels::families)
      .def(
          "predict_kernel_us",
          [](const LearnedModels& self, const std::string& family, const LearnedShape& shape,
             const std::string& device, const std::string& precision,
             const std::optional<std::string>& devices_json) {
            return self.predict_family_us(family_or_throw(family), shape,
                                          find_device(device, devices_json),
                                          precision_or_throw(precision));
          },
          py::arg("family"), py::arg("shape"), py::arg("device"), py::arg("precision") = "fp32",
          py::arg("devices_json") = py::none(),
          "Predicted time in microseconds of one canonical shape (None if the family has no "
          "model).");

  m.def(
      "load_learned_models",
      [](const std::string& dir) -> std::unique_ptr<LearnedModels> {
        auto models = std::make_unique<LearnedModels>(LearnedModels::load(dir));
        if (models->empty()) return nullptr;
        return models;
      },
      py::arg("weights_dir"),
      "Loads <family>.safetensors + <family>.json from weights_dir; None when there are none.");

  m.def(
      "learned_features",
      [](const std::string& family, const LearnedShape& shape, const std::string& device,
         const std::string& precision, const std::optional<std::string>& devices_json) {
        const LearnedFeatures f = compute_learned_features(family_or_throw(family), shape,
                                                           find_device(device, devices_json),
                                                           precision_or_throw(precision));
        return py::make_tuple(f.values, f.roofline_us);
      },
      py::arg("family"), py::arg("shape"), py::arg("device"), py::arg("precision") = "fp32",
      py::arg("devices_json") = py::none(),
      "(features, roofline_us) of one canonical shape, as the engine computes them.");
}

}  // namespace habitat::python
