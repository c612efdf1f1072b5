// The square convolution the conv model knows (its shape columns size, kernel, stride, padding:
// every collection row is square) that stands for an op's own: a rectangular one, a dilated
// one, a 1-D one (wav2vec 2.0's and Whisper's audio front ends), which cuDNN runs as a 2-D
// convolution of height 1, or a 3-D one (video networks), which cuDNN runs as the implicit GEMM
// of the same output voxels, filter taps and channels.
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

// `image` is the direct convolution's input [N, C, spatial...] (1 to 3 spatial dimensions),
// `weight` its filter [Co, Ci, k...]; stride, padding and dilation come from the op's arguments
// (one value for every dimension or one each). A square, undilated 2-D convolution keeps its
// own figures. Any other gets the square roots of the products of its sides, filter sides and
// strides, and the padding that gives the square its output positions (the nearest square
// number): the implicit GEMM (output positions x filter taps x channels) and the input it reads
// stay what they are. nullopt for other ranks, a stride that is not positive or an empty
// output.
std::optional<SquareConv> square_conv(const OpRecord& op, const TensorMeta& image,
                                      const TensorMeta& weight);

}  // namespace habitat
