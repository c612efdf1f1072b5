// Shapes larger than a model's training rows: each dimension of a family's extent that lies past
// it is extended linearly from the model's slope between half the extent and the extent, instead
// of the net's own extrapolation (whose efficiency falls with the log-size there). Tensor-core
// GEMMs past 8192 in m, n, k (16-byte multiples only), element-wise ops past 2^26 elements, layer
// norms and softmaxes past 2^25 elements in their rows (log-softmaxes past 2^29). The
// why and the figures: python/habitat/learned/extent.py, which this mirrors number for number.
#pragma once

#include <functional>
#include <vector>

#include "habitat/learned_features.h"

namespace habitat {

struct ShapeExtent {
  std::vector<const char*> dims;  // extended in this order
  double limit = 0;
  bool tensor_cores_aligned = false;  // only on tensor cores, dimensions of 16-byte multiples
  const char* per = nullptr;  // the limit is on the product of the dimension and this column
  // Shapes whose `otherwise_column` holds `otherwise_value` (an absent column: 0) have the limit
  // `otherwise_limit` instead.
  const char* otherwise_column = nullptr;
  double otherwise_value = 0;
  double otherwise_limit = 0;

  double limit_of(const LearnedShape& shape) const;
};

// The family's extent; nullptr for a family whose model extrapolates on its own.
const ShapeExtent* shape_extent(LearnedFamily f);

// Whether any dimension of the extent lies past it (`tensor_path`: the shape runs on tensor
// cores, features.tensor_path).
bool beyond_extent(const ShapeExtent& extent, const LearnedShape& shape, bool tensor_path);

// `inside` (the model's time at a shape) with every dimension past the extent extended.
double extended_us(const ShapeExtent& extent, const LearnedShape& shape, bool tensor_path,
                   const std::function<double(const LearnedShape&)>& inside);

}  // namespace habitat
