// Learned predictors (MLP efficiency models) for the kernel-varying and memory-bound op
// families, loaded from weights/. Implemented in learned_model.cpp.
#pragma once

#include <memory>
#include <string>

#include "habitat/device.h"
#include "habitat/predictor.h"

namespace habitat {

// Loads every model found in `weights_dir`. Returns null when the directory holds no
// models (the predictor then uses the roofline path); throws std::runtime_error naming
// the file when a model file is present but corrupt.
std::unique_ptr<ShapeModel> load_learned_models(const std::string& weights_dir);

}  // namespace habitat
