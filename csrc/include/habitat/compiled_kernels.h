// The GPU kernels of torch.compile'd graphs, matched to the fused-kernel records.
//
// The habitat backend (python/habitat/capture/compile.py) runs each compiled graph inside one op,
// "habitat::compiled_graph"(int graph) -> (), right after recording one
// "habitat_fused::<kernel>" op per kernel inductor generated for it (see fused_cost.h). CUPTI
// attributes a kernel to the innermost op running when it launches, so the generated kernels
// land on the graph op, and the aten kernels inductor calls on their own ops.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "habitat/trace.h"

namespace habitat {

inline constexpr std::string_view kCompiledGraphOp = "habitat::compiled_graph";

bool is_compiled_graph(const OpRecord& op);

// Moves each kernel of a graph op onto the fused record of the same run named after it
// ("triton_poi_fused_gelu_0" -> "habitat_fused::triton_poi_fused_gelu_0"), in launch order,
// so each record is forecast from its own measured kernel. A run's records are the fused
// records its thread recorded just before the graph op, for the same graph. Kernels that
// match none stay on the graph op (still counted). `ops` in start order; returns how many
// kernels moved.
std::size_t attribute_compiled_kernels(std::vector<OpRecord>& ops);

}  // namespace habitat
