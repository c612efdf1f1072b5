#include "learned/conv_geometry.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>
#include <vector>

#include "cost/conv_window.h"
#include "trace/op_args.h"

namespace habitat {
namespace {

using Pair = std::array<double, 2>;  // height, width

// An int-list argument per spatial dimension (op_cost::per_dim: one value for both, or one
// each), or `fallback`.
Pair per_dimension(const OpRecord& op, std::string_view name, double fallback) {
  const std::vector<int64_t> v = op_args::ints(op.args, name);
  const auto f = static_cast<int64_t>(fallback);
  return {static_cast<double>(op_cost::per_dim(v, 0, f)),
          static_cast<double>(op_cost::per_dim(v, 1, f))};
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
    stride = {1, stride[0]};
    padding = {0, padding[0]};
    dilation = {1, dilation[0]};
  }
  if (side[0] == side[1] && filter[0] == filter[1] && stride[0] == stride[1] &&
      padding[0] == padding[1] && dilation[0] == 1 && dilation[1] == 1) {
    return SquareConv{side[0], filter[0], stride[0], padding[0]};
  }
  if (!(stride[0] > 0 && stride[1] > 0)) return std::nullopt;
  const double positions = op_cost::conv_output_positions(op.args, image, weight);
  if (!(positions > 0)) return std::nullopt;
  SquareConv sq;
  sq.size = std::sqrt(side[0] * side[1]);
  sq.kernel = std::sqrt(filter[0] * filter[1]);
  sq.stride = std::sqrt(stride[0] * stride[1]);
  const double out_side = std::max(1.0, std::round(std::sqrt(positions)));
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
