// Which of ATen's two CUDA embedding_dense_backward paths runs (Embedding.cu
// embedding_dense_backward_cuda): the per-feature kernel over a zero-filled gradient for up to
// 3072 indices without scale_grad_by_freq, else a radix sort of the indices and a reduction of
// their segments. The kernel count (op_cost_memory.cpp) and the time
// (predict/embedding_kernels.cpp) both follow it.
#pragma once

#include <cstdint>

namespace habitat::embedding_paths {

inline constexpr int64_t kFeaturePathMaxIndices = 3072;

inline bool feature_path(int64_t indices, bool scale_grad_by_freq) {
  return indices <= kFeaturePathMaxIndices && !scale_grad_by_freq;
}

}  // namespace habitat::embedding_paths
