// Device time of ATen's CUDA embedding kernels from their launch structure: the row gather of
// embedding / index_select along the first dimension, and embedding_dense_backward. These
// kernels are bound by how many blocks, elements or dependent memory round trips they run
// (one 32-thread block per index of a narrow table, a serial walk over the indices), which a
// roofline over bytes does not see: T5's relative-position table ([32, 8], 262144 lookups) runs
// 160 us on an H100 for 8 MB moved.
#pragma once

#include <optional>

#include "habitat/device.h"
#include "habitat/trace.h"

namespace habitat {

// The forecast in microseconds, or nullopt for an op this model does not describe (other ops,
// index_select along another dimension, missing shapes). Constants fitted on the H100 families
// collection by benchmarks/accuracy/embedding_kernels_fit.py, which also scores them.
std::optional<double> embedding_kernels_us(const OpRecord& op, const Device& device);

}  // namespace habitat
