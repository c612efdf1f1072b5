#include "learned/conv_geometry.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "cost/conv_window.h"
#include "trace/op_args.h"

namespace habitat {
namespace {

// A window argument's value in spatial dimension d (op_cost::per_dim: one value for all, or one
// each), or `fallback`.
double at_dim(const std::vector<int64_t>& values, std::size_t d, int64_t fallback) {
  return static_cast<double>(op_cost::per_dim(values, d, fallback));
}

}  // namespace

std::optional<SquareConv> square_conv(const OpRecord& op, const TensorMeta& image,
                                      const TensorMeta& weight) {
  const std::size_t rank = image.shape.size();
  if (rank < 3 || rank > 5 || weight.shape.size() != rank) return std::nullopt;
  const std::size_t dims = rank - 2;
  const std::vector<int64_t> strides = op_args::ints(op.args, "stride");
  const std::vector<int64_t> paddings = op_args::ints(op.args, "padding");
  const std::vector<int64_t> dilations = op_args::ints(op.args, "dilation");
  const SquareConv first{static_cast<double>(image.shape[2]), static_cast<double>(weight.shape[2]),
                         at_dim(strides, 0, 1), at_dim(paddings, 0, 0)};
  // Products over the spatial dimensions: a 2-D square of side sqrt(product) has the input
  // area, filter taps and stride area of the op's own, whatever its number of dimensions (a
  // 1-D convolution is a 2-D one of height 1, which cuDNN runs it as).
  double side = 1, filter = 1, stride = 1;
  bool square = rank == 4, unpadded = true;
  for (std::size_t d = 0; d < dims; ++d) {
    const auto s = static_cast<double>(image.shape[d + 2]);
    const auto k = static_cast<double>(weight.shape[d + 2]);
    const double st = at_dim(strides, d, 1);
    const double pad = at_dim(paddings, d, 0);
    side *= s;
    filter *= k;
    stride *= st;
    unpadded = unpadded && pad == 0;
    square = square && at_dim(dilations, d, 1) == 1 && s == first.size && k == first.kernel &&
             st == first.stride && pad == first.padding;
  }
  if (square) return first;
  if (!(stride > 0)) return std::nullopt;
  const double positions = op_cost::conv_output_positions(op.args, image, weight);
  if (!(positions > 0)) return std::nullopt;
  SquareConv sq;
  sq.size = std::sqrt(side);
  sq.kernel = std::sqrt(filter);
  sq.stride = std::sqrt(stride);
  const double out_side = std::max(1.0, std::round(std::sqrt(positions)));
  // conv_output_size floors (size + 2 padding - kernel) / stride: aim at the middle of the
  // output's step so the floor lands on out_side - 1. A pointwise pass keeps an exact square
  // (the NCHW 1x1 GEMM path reads its pixels as size x size).
  if (sq.kernel == 1 && sq.stride == 1 && unpadded) {
    sq.size = out_side;
    return sq;
  }
  sq.padding = ((out_side - 1) * sq.stride + sq.kernel - sq.size) / 2 + sq.stride / 4;
  return sq;
}

}  // namespace habitat
