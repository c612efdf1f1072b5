#include "learned/shape_extent.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

namespace habitat {
namespace {

constexpr double kAlignedBytes = 16.0;  // features.MAX_ALIGN_BYTES

bool beyond(const ShapeExtent& extent, const LearnedShape& shape, const std::string& dim,
            bool tensor_path) {
  const double d = shape.at(dim);
  const double limit = extent.limit_of(shape);
  // at least a half extent of a whole unit (a row longer than the limit is not extended)
  if (d <= limit || limit < 2.0) return false;
  if (!extent.tensor_cores_aligned) return true;
  // A multiple of 16 bytes: its largest power-of-two divisor is at least 16 (d is a whole number
  // of elements of at least one byte).
  return tensor_path && std::fmod(d * shape.at("elem_bytes"), kAlignedBytes) == 0.0;
}

double extend(const ShapeExtent& extent, const LearnedShape& shape, bool tensor_path,
              const std::function<double(const LearnedShape&)>& inside,
              std::span<const char* const> dims) {
  if (dims.empty()) return inside(shape);
  const std::string dim = dims.front();
  const auto rest = dims.subspan(1);
  if (!beyond(extent, shape, dim, tensor_path)) {
    return extend(extent, shape, tensor_path, inside, rest);
  }
  const double limit = extent.limit_of(shape);
  LearnedShape at = shape;
  at[dim] = limit;
  LearnedShape half = shape;
  half[dim] = limit / 2;
  const double t_at = extend(extent, at, tensor_path, inside, rest);
  const double t_half = extend(extent, half, tensor_path, inside, rest);
  const double slope = std::max(0.0, (t_at - t_half) / (limit / 2));
  return t_at + slope * (shape.at(dim) - limit);
}

}  // namespace

double ShapeExtent::limit_of(const LearnedShape& shape) const {
  double l = limit;
  if (otherwise_column != nullptr) {
    const auto it = shape.find(otherwise_column);
    if ((it != shape.end() ? it->second : 0.0) == otherwise_value) l = otherwise_limit;
  }
  return per ? l / shape.at(per) : l;
}

const ShapeExtent* shape_extent(LearnedFamily f) {
  static const ShapeExtent gemm{{"m", "n", "k"}, 8192.0, true};
  static const ShapeExtent elementwise{{"n"}, 67108864.0, false};           // 2^26
  static const ShapeExtent layernorm{{"rows"}, 33554432.0, false, "cols"};  // 2^25 elements
  static const ShapeExtent softmax{{"rows"}, 33554432.0, false, "cols", "log", 1.0, 536870912.0};
  switch (f) {
    case LearnedFamily::Gemm:
      return &gemm;
    case LearnedFamily::Elementwise:
      return &elementwise;
    case LearnedFamily::LayerNorm:
      return &layernorm;
    case LearnedFamily::Softmax:
      return &softmax;
    default:
      return nullptr;
  }
}

bool beyond_extent(const ShapeExtent& extent, const LearnedShape& shape, bool tensor_path) {
  return std::any_of(extent.dims.begin(), extent.dims.end(),
                     [&](const char* dim) { return beyond(extent, shape, dim, tensor_path); });
}

double extended_us(const ShapeExtent& extent, const LearnedShape& shape, bool tensor_path,
                   const std::function<double(const LearnedShape&)>& inside) {
  return extend(extent, shape, tensor_path, inside, extent.dims);
}

}  // namespace habitat
