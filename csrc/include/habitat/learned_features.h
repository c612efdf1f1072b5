// Feature vectors of the learned efficiency models, from an op family's canonical shape
// and the target device. Mirrors python/habitat/learned/features.py number for number
// (tests/python/learned/test_learned_parity.py checks it); change both together.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "habitat/device.h"
#include "habitat/precision.h"

namespace habitat {

enum class LearnedFamily {
  Gemm,
  Conv,
  Elementwise,
  Softmax,
  LayerNorm,
  Attention,
  Reduction,
  BatchNorm
};

std::string_view to_string(LearnedFamily f);
std::optional<LearnedFamily> learned_family_from_string(std::string_view name);

// Shape columns of each family, in the Python order:
//   gemm         b, m, n, k, elem_bytes  (C[b,m,n] = A[b,m,k] @ B[b,k,n])
//   conv         batch, cin, cout, kernel, size, stride, padding, elem_bytes, grad, groups
//                (grad 0: forward, 1: input gradient, 2: weight gradient; groups: 1 when
//                left out)
//   elementwise  n, inputs, transcendental, elem_bytes
//   softmax      rows, cols, elem_bytes
//   layernorm    rows, cols, elem_bytes
//   attention    batch_heads, l, s, e, causal, backward, elem_bytes, backend  (a fused SDPA
//                kernel; backend 0: flash, 1: memory-efficient, 2: cuDNN)
//   reduction    rows, cols, elem_bytes, strided  (rows outputs, each of cols inputs; strided 1:
//                the reduced elements are not contiguous, e.g. a sum over the first dim)
//   batchnorm    count, channels, elem_bytes, backward, channels_last  (training mode: per
//                channel, statistics over count = N x H x W elements)
using LearnedShape = std::map<std::string, double>;
const std::vector<std::string>& shape_columns(LearnedFamily f);
// The value of a column a shape may leave out (features.py OPTIONAL_COLUMNS: a softmax's `log`
// 0, a conv's `groups` 1); nullopt for a column every shape must have.
std::optional<double> optional_column_default(LearnedFamily f, std::string_view name);
const std::vector<std::string>& feature_names(LearnedFamily f);

// A square convolution's output side, and the elements of its input, weight and output (the
// conv shape columns): the tensors cuDNN's layout transforms move; with the input's side
// `input_side` of conv_input_extent, the bytes its roofline counts.
inline double conv_output_size(double size, double padding, double kernel, double stride) {
  return std::floor((size + 2.0 * padding - kernel) / stride) + 1.0;
}
inline double conv_tensor_elements(double batch, double cin, double cout, double kernel,
                                   double input_side, double out_size, double groups) {
  return batch * cin * input_side * input_side + cout * cin / groups * kernel * kernel +
         batch * cout * out_size * out_size;
}
// The rows (and columns) of the input a pass touches: a filter narrower than its stride reads
// `kernel` of every `stride` rows (a 1x1 stride-2 convolution a quarter of its input: the H100
// rows of such convs ran up to 3x under the full-input roofline); the data gradient (grad 1)
// writes the whole input gradient, zeros included. Mirrors features.py conv_input_extent.
inline double conv_input_extent(double size, double kernel, double stride, double out_size,
                                double grad) {
  if (grad == 1) return size;
  return std::min(size, (out_size - 1.0) * std::min(kernel, stride) + kernel);
}

struct LearnedFeatures {
  std::vector<double> values;  // feature_names(f) order
  double roofline_us = 0;      // the time the predicted efficiency divides
};

// Throws std::invalid_argument naming a missing or non-positive shape column.
LearnedFeatures compute_learned_features(LearnedFamily f, const LearnedShape& shape,
                                         const Device& device, Precision precision);

}  // namespace habitat
