#include "habitat/compiled_kernels.h"

#include <optional>
#include <string>

#include "cost/fused_cost.h"

namespace habitat {
namespace {

std::optional<int64_t> graph_of(const OpRecord& op) {
  const ArgValue* graph = op.arg("graph");
  if (graph == nullptr || graph->kind != ArgValue::Kind::Int || graph->ints.empty()) return {};
  return graph->ints.front();
}

// Indices of the fused records issued for the run `ops[run]`, in issue order.
std::vector<std::size_t> records_of_run(const std::vector<OpRecord>& ops, std::size_t run) {
  const OpRecord& graph_op = ops[run];
  const auto graph = graph_of(graph_op);
  std::vector<std::size_t> records;
  for (std::size_t i = run; i-- > 0;) {
    const OpRecord& op = ops[i];
    if (op.thread != graph_op.thread) continue;  // another thread's ops interleave
    if (!is_fused_kernel(op) || graph_of(op) != graph) break;
    records.insert(records.begin(), i);
  }
  return records;
}

}  // namespace

bool is_compiled_graph(const OpRecord& op) { return op.name == kCompiledGraphOp; }

std::size_t attribute_compiled_kernels(std::vector<OpRecord>& ops) {
  std::size_t moved = 0;
  for (std::size_t run = 0; run < ops.size(); ++run) {
    if (!is_compiled_graph(ops[run]) || ops[run].kernels.empty()) continue;
    const std::vector<std::size_t> records = records_of_run(ops, run);
    std::vector<char> taken(records.size(), 0);
    std::vector<KernelLaunch> unmatched;
    for (KernelLaunch& kernel : ops[run].kernels) {
      const std::string record_name = std::string(kFusedKernelNamespace) + kernel.name;
      bool placed = false;
      for (std::size_t r = 0; r < records.size() && !placed; ++r) {
        if (taken[r] || ops[records[r]].name != record_name) continue;
        taken[r] = 1;
        ops[records[r]].kernels.push_back(std::move(kernel));
        placed = true;
        ++moved;
      }
      if (!placed) unmatched.push_back(std::move(kernel));
    }
    ops[run].kernels = std::move(unmatched);
  }
  return moved;
}

}  // namespace habitat
