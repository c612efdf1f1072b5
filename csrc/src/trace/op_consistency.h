// What an op's recorded arguments and outputs must agree on for the op to have run: a trace
// edited by hand, or damaged, can hold an aten::mm whose output is not rows x columns of its
// inputs, or a pooling window of -2. The reader refuses such an op by name (trace_json.cpp)
// rather than forecast something that never ran. Checked for the ops whose shapes follow
// from their inputs without a schema: matrix products and the window arguments of
// convolutions and pooling.
#pragma once

#include <optional>
#include <string>

#include "habitat/trace.h"

namespace habitat {

// Why `op` could not have run as recorded ("outputs[0].shape is [5, 7], but aten::mm of
// [64, 128] and [128, 32] makes [64, 32]"), or nothing when it could.
std::optional<std::string> op_inconsistency(const OpRecord& op);

}  // namespace habitat
