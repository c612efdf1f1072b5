// The backward of an op the CPU ran as its decomposition where CUDA runs one fused op: autograd
// records a backward op for each piece on the CPU, CUDA runs the fused backward once
// (attention_backward.h, rms_norm_backward.h find them).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace habitat::cuda_paths {

struct FusedBackward {
  // Per op: a piece of some decomposition's backward, which launches nothing of its own on CUDA
  // (the fused backward does its work).
  std::vector<char> pieces;
  // (op, forward): the piece that stands for the fused backward of that forward.
  std::vector<std::pair<std::size_t, std::size_t>> carriers;
};

}  // namespace habitat::cuda_paths
