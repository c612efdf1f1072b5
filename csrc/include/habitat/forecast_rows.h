// Per-op forecasts as fixed-size binary rows, for readers that want columns (Python reads them
// as a numpy structured array) instead of one JSON object per op.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "habitat/predictor.h"

namespace habitat {

// One row per op, in step order, packed in native byte order with no padding; T targets:
//   uint64 id, float64 flops, float64 bytes, float64 time_us[T], float64 share_us[T],
//   uint8 method[T], uint8 share_method[T], uint8 op_class, uint8 precision
// Methods, classes and precisions are their enums' values (method_names() and the like give
// the names in that order).
std::string forecast_ops_to_rows(const Forecast& f);
std::size_t forecast_row_bytes(std::size_t n_targets);

std::vector<std::string> method_names();
std::vector<std::string> op_class_names();
std::vector<std::string> precision_names();

}  // namespace habitat
