// Ops that write a new value into every element without reading the old one: constant fills
// (fill_, zero_), factories (zeros, arange, randn, zeros_like: their tensor argument only gives
// the shape) and random draws. The one list behind the cost model's `writer` rules
// (op_cost_pointwise.cpp) and the learned element-wise features (learned/learned_model.cpp),
// so the two cannot disagree about which ops read nothing.
#pragma once

#include <string_view>

namespace habitat::op_cost {

struct WriterOps {
  std::string_view stems;    // space-separated aten stems
  double flops_per_element;  // arange/linspace: start + i * step; random draws: Philox and shaping
};

inline constexpr WriterOps kWriterOps[] = {
    {"fill zero zeros ones full eye scalar_tensor zeros_like ones_like full_like new_zeros "
     "new_ones new_full",
     0},
    {"arange linspace logspace", 2},
    // Integer Philox work, then scale and shift (uniform) or Box-Muller (normal: log, sqrt, cos,
    // multiply, scale, shift).
    {"rand rand_like uniform random randint randint_like", 2},
    {"randn randn_like normal", 6},
    {"exponential", 3},
};

// `stem`: the aten name without namespace, overload or in-place underscore ("fill" for fill_).
constexpr bool is_writer_stem(std::string_view stem) {
  for (const WriterOps& group : kWriterOps) {
    std::string_view rest = group.stems;
    while (!rest.empty()) {
      const std::size_t end = rest.find(' ');
      if (rest.substr(0, end) == stem) return true;
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }
  }
  return false;
}

}  // namespace habitat::op_cost
