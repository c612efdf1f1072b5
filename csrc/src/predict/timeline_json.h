// The forecast document's "timelines" array (one object per target), kept beside the
// timeline code rather than in predictor.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include "habitat/predictor.h"

namespace habitat {

nlohmann::json timelines_json(const Forecast& f);

}  // namespace habitat
