#include "learned/conv_geometry.h"

#include <array>
#include <cmath>
#include <vector>

#include "trace/op_args.h"

namespace habitat {
namespace {

using Pair = std::array<double, 2>;  // height, width

// An int-list argument per spatial dimension: one value for both, one each, or `fallback`.
Pair per_dimension(const OpRecord& op, std::string_view name, double fallback) {
  const std::vector<int64_t> v = op_args::ints(op.args, name);
  if (v.empty()) return {fallback, fallback};
  if (v.size() == 1) return {static_cast<double>(v[0]), static_cast<double>(v[0])};
  return {static_cast<double>(v[v.size() - 2]), static_cast<double>(v.back())};
}

}  // namespace

std::optional<SquareConv> square_conv(const OpRecord& op, const TensorMeta& image,
                                      const TensorMeta& weight) {
  const std::size_t rank = image.shape.size();
  if ((rank != 3 && rank != 4) || weight.shape.size() != rank) return std::nullopt;
  const auto dim = [](const TensorMeta& t, std::size_t back) {
    return static_cast<double>(t.shape[t.shape.size() - back]);
  };
  // A 1-D convolution is a 2-D one of height 1 with a filter of height 1.
  const Pair side = rank == 4 ? Pair{dim(image, 2), dim(image, 1)} : Pair{1, dim(image, 1)};
  const Pair filter = rank == 4 ? Pair{dim(weight, 2), dim(weight, 1)} : Pair{1, dim(weight, 1)};
  Pair stride = per_dimension(op, "stride", 1);
  Pair padding = per_dimension(op, "padding", 0);
  Pair dilation = per_dimension(op, "dilation", 1);
  if (rank == 3) {
    stride = {1, stride[1]};
    padding = {0, padding[1]};
    dilation = {1, dilation[1]};
  }
  if (side[0] == side[1] && filter[0] == filter[1] && stride[0] == stride[1] &&
      padding[0] == padding[1] && dilation[0] == 1 && dilation[1] == 1) {
    return SquareConv{side[0], filter[0], stride[0], padding[0]};
  }
  Pair out{};
  for (std::size_t d = 0; d < 2; ++d) {
    if (!(stride[d] > 0)) return std::nullopt;
    const double extent = dilation[d] * (filter[d] - 1) + 1;
    out[d] = std::floor((side[d] + 2 * padding[d] - extent) / stride[d]) + 1;
    if (!(out[d] > 0)) return std::nullopt;
  }
  SquareConv sq;
  sq.size = std::sqrt(side[0] * side[1]);
  sq.kernel = std::sqrt(filter[0] * filter[1]);
  sq.stride = std::sqrt(stride[0] * stride[1]);
  const double out_side = std::max(1.0, std::round(std::sqrt(out[0] * out[1])));
  // conv_output_size floors (size + 2 padding - kernel) / stride: aim at the middle of the
  // output's step so the floor lands on out_side - 1. A pointwise pass keeps an exact square
  // (the NCHW 1x1 GEMM path reads its pixels as size x size).
  if (sq.kernel == 1 && sq.stride == 1 && padding[0] == 0 && padding[1] == 0) {
    sq.size = out_side;
    return sq;
  }
  sq.padding = ((out_side - 1) * sq.stride + sq.kernel - sq.size) / 2 + sq.stride / 4;
  return sq;
}

}  // namespace habitat
