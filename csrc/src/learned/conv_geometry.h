// The square convolution the conv model knows (its shape columns size, kernel, stride, padding:
// every collection row is square) that stands for an op's own: a rectangular one, a dilated
// one, or a 1-D one (wav2vec 2.0's and Whisper's audio front ends), which cuDNN runs as a 2-D
// convolution of height 1.
#pragma once

#include <optional>

#include "habitat/trace.h"

namespace habitat {

struct SquareConv {
  double size = 0;  // the input's side
  double kernel = 0;
  double stride = 1;
  double padding = 0;
};

// `image` is the direct convolution's input [N, C, H, W] or [N, C, L], `weight` its filter
// [Co, Ci, R, S] or [Co, Ci, K]; stride, padding and dilation come from the op's arguments (one
// value for every dimension or one each). A square, undilated convolution keeps its own
// figures. Any other gets the geometric means of its sides, filter sides and strides, and the
// padding that gives the square its output pixels (the nearest square number): the implicit
// GEMM (output pixels x filter taps x channels) and the input it reads stay what they are.
// nullopt when the tensors are neither 3-D nor 4-D, a stride is not positive or the output is
// empty.
std::optional<SquareConv> square_conv(const OpRecord& op, const TensorMeta& image,
                                      const TensorMeta& weight);

}  // namespace habitat
