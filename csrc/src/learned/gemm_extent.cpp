#include "learned/gemm_extent.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <string>

namespace habitat {
namespace {

constexpr std::array<const char*, 3> kDimensions = {"m", "n", "k"};
constexpr double kAlignedBytes = 16.0;  // features.MAX_ALIGN_BYTES

bool beyond(const LearnedShape& shape, const std::string& dim) {
  const double d = shape.at(dim);
  if (d <= kGemmDataExtent) return false;
  const double bytes = d * shape.at("elem_bytes");
  // A multiple of 16 bytes: its largest power-of-two divisor is at least 16 (bytes is an
  // integer: d > 8192 elements of at least one byte).
  return std::fmod(bytes, kAlignedBytes) == 0.0;
}

double extend(const LearnedShape& shape, const std::function<double(const LearnedShape&)>& inside,
              std::span<const char* const> dims) {
  if (dims.empty()) return inside(shape);
  const std::string dim = dims.front();
  const auto rest = dims.subspan(1);
  if (!beyond(shape, dim)) return extend(shape, inside, rest);
  LearnedShape at = shape;
  at[dim] = kGemmDataExtent;
  LearnedShape half = shape;
  half[dim] = kGemmDataExtent / 2;
  const double t_extent = extend(at, inside, rest);
  const double t_half = extend(half, inside, rest);
  const double slope = std::max(0.0, (t_extent - t_half) / (kGemmDataExtent / 2));
  return t_extent + slope * (shape.at(dim) - kGemmDataExtent);
}

}  // namespace

bool gemm_beyond_data(const LearnedShape& shape) {
  return std::any_of(kDimensions.begin(), kDimensions.end(),
                     [&](const char* dim) { return beyond(shape, dim); });
}

double extended_gemm_us(const LearnedShape& shape,
                        const std::function<double(const LearnedShape&)>& inside) {
  return extend(shape, inside, kDimensions);
}

}  // namespace habitat
