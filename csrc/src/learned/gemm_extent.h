// A tensor-core GEMM larger than the shapes the GEMM model was trained on: each dimension past
// the collections' extent (8192) and a multiple of 16 bytes is extended linearly from the
// model's slope between half the extent and the extent, instead of the net's own extrapolation
// (whose efficiency falls with the log-size). The why and the figures:
// python/habitat/learned/gemm_extent.py, which this mirrors number for number.
#pragma once

#include <functional>

#include "habitat/learned_features.h"

namespace habitat {

inline constexpr double kGemmDataExtent = 8192.0;

// Whether any of m, n, k of a GEMM shape lies past the extent, a multiple of 16 bytes.
bool gemm_beyond_data(const LearnedShape& shape);

// `inside` (the model's time at a shape) with every such dimension extended (m, then n, then k).
double extended_gemm_us(const LearnedShape& shape,
                        const std::function<double(const LearnedShape&)>& inside);

}  // namespace habitat
