// A convolution's window arguments per spatial dimension, and the output positions they give:
// the one reading the conv cost rule (op_cost_conv.cpp) and the learned conv model's square
// stand-in (learned/conv_geometry.cpp) share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "habitat/trace.h"
#include "trace/op_args.h"

namespace habitat::op_cost {

// SymInt[] arguments of convolutions may hold one value for all spatial dimensions.
inline int64_t per_dim(std::span<const int64_t> values, std::size_t d, int64_t fallback) {
  if (values.empty()) return fallback;
  return values.size() == 1 ? values.front() : (d < values.size() ? values[d] : fallback);
}

// Output positions (the product of the output's spatial sizes) of the non-transposed
// convolution of `input` [N, C, spatial...] by `weight` [Co, Ci, k...] under `args`' stride,
// padding ("same" included) and dilation; 0 when the ranks differ or the output is empty.
inline double conv_output_positions(op_args::Args args, const TensorMeta& input,
                                    const TensorMeta& weight) {
  if (input.shape.size() < 3 || weight.shape.size() != input.shape.size()) return 0;
  const auto stride = op_args::ints(args, "stride");
  const auto dilation = op_args::ints(args, "dilation");
  const std::string* pad = op_args::text(args, "padding");
  const bool same = pad != nullptr && *pad == "same";
  const auto padding = op_args::ints(args, "padding");  // empty for "valid"
  double n = 1;
  for (std::size_t d = 0; d + 2 < input.shape.size(); ++d) {
    const int64_t in = input.shape[d + 2];
    const int64_t k = weight.shape[d + 2];
    const int64_t s = std::max<int64_t>(per_dim(stride, d, 1), 1);  // a corrupt 0 must not trap
    if (same) {
      n *= static_cast<double>((in + s - 1) / s);
      continue;
    }
    const int64_t p = per_dim(padding, d, 0);
    const int64_t dil = per_dim(dilation, d, 1);
    const int64_t out = (in + 2 * p - dil * (k - 1) - 1) / s + 1;
    n *= static_cast<double>(std::max<int64_t>(out, 0));
  }
  return n;
}

}  // namespace habitat::op_cost
