// modelled_schedule: a CPU-traced step's host cadence on a GPU machine, from a host model.
#include "predict/timeline_host_model.h"

#include "habitat/op_cost.h"

#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace habitat {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The foreach op CUDA's optimizer calls where the CPU's single-tensor loop called `name`
// ("aten::add_" -> "aten::_foreach_add_"; "aten::div" -> "aten::_foreach_div_", the foreach
// path dividing in place what the single-tensor path divides out of place); "" when the
// model has none.
std::string foreach_of(const std::string& name, const HostCostModel& model) {
  const std::string prefix = "aten::";
  if (name.rfind(prefix, 0) != 0) return "";
  const std::string base = "aten::_foreach_" + name.substr(prefix.size());
  if (model.foreach_per_tensor_us.count(base)) return base;
  const std::string toggled =
      !base.empty() && base.back() == '_' ? base.substr(0, base.size() - 1) : base + "_";
  return model.foreach_per_tensor_us.count(toggled) ? toggled : "";
}

// Whether the top-level op at `first` or an op under it does device work on a GPU: any op of
// its subtree (the ops after it up to the next top-level op) that is not a view, metadata or
// host-only op by its shapes (estimate_cost).
bool launches_work(const Step& step, std::size_t first) {
  for (std::size_t i = first; i < step.ops.size() && (i == first || step.ops[i].depth > 0); ++i) {
    const OpRecord& op = step.ops[i];
    if (op.has_children) continue;
    const OpClass c = estimate_cost(op).op_class;
    if (c != OpClass::NoKernel && c != OpClass::Unknown) return true;
  }
  return false;
}

double gap_of(const HostCostModel& model, Phase phase) {
  const auto it = model.phase_gap_us.find(phase);
  return it != model.phase_gap_us.end() ? it->second : model.top_level_gap_us;
}

// Per-op costs, every op its own name's exclusive cost (the first host models).
HostSchedule exclusive_schedule(const Step& step, const HostCostModel& model, uint32_t stream) {
  HostSchedule s;
  double host = 0;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (op.depth == 0) host += model.top_level_gap_us;
    const auto it = model.op_us.find(op.name);
    host += it != model.op_us.end() ? it->second : model.default_op_us;
    HostEvent e;
    e.host_us = host;
    e.op = i;
    e.stream = stream;
    e.phase = op.phase;
    s.events.push_back(e);
  }
  s.host_end_us = host;
  return s;
}

// Per top-level op, its subtree's cost on the GPU machine; the optimizer's per-tensor ops as
// the foreach calls CUDA makes instead.
HostSchedule inclusive_schedule(const Step& step, const HostCostModel& model, uint32_t stream,
                                std::string& mapping_note) {
  // Tensors per foreach call: the greatest common divisor of the optimizer's per-tensor op
  // counts (AdamW over 148 tensors: add_ x296, lerp_ x148, ... -> 148).
  std::map<std::string, std::pair<std::string, long>> optimizer_ops;  // name -> (foreach, count)
  for (const auto& op : step.ops) {
    if (op.depth != 0 || op.phase != Phase::Optimizer) continue;
    auto it = optimizer_ops.find(op.name);
    if (it == optimizer_ops.end()) it = optimizer_ops.emplace(op.name, std::make_pair(foreach_of(op.name, model), 0L)).first;
    ++it->second.second;
  }
  long per_call = 0;
  long mapped = 0;
  for (const auto& [name, entry] : optimizer_ops) {
    if (entry.first.empty()) continue;
    per_call = std::gcd(per_call, entry.second);
    mapped += entry.second;
  }
  HostSchedule s;
  double host = 0;
  std::size_t unknown_work = 0;  // top-level ops of names the calibration never saw
  std::size_t unknown_view = 0;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (op.depth == 0) {
      const double gap = gap_of(model, op.phase);
      const std::string foreach_name =
          op.phase == Phase::Optimizer && per_call > 0 ? optimizer_ops[op.name].first : std::string();
      if (!foreach_name.empty()) {
        // One foreach call per `per_call` tensors: its gap shared among them.
        host += model.foreach_per_tensor_us.at(foreach_name) + gap / static_cast<double>(per_call);
      } else {
        const auto it = model.top_level_op_us.find(op.name);
        double cost = 0;
        if (it != model.top_level_op_us.end()) {
          cost = it->second;
        } else {
          const bool work = launches_work(step, i);
          cost = work ? model.default_top_level_us : model.default_top_level_view_us;
          ++(work ? unknown_work : unknown_view);
        }
        host += gap + cost;
      }
    }
    HostEvent e;
    e.host_us = host;
    e.op = i;
    e.stream = stream;
    e.phase = op.phase;
    s.events.push_back(e);
  }
  s.host_end_us = host;
  if (mapped > 0) {
    mapping_note = "; the optimizer's " + std::to_string(mapped) + " per-tensor op calls taken as CUDA's foreach calls (" +
                   std::to_string(per_call) + " tensors each)";
  }
  if (unknown_work + unknown_view > 0) {
    mapping_note += "; " + std::to_string(unknown_work + unknown_view) +
                    " top-level op(s) of names the calibration never saw at the median of its ops that do device "
                    "work (" + std::to_string(unknown_work) + ", " + fixed(model.default_top_level_us, 1) +
                    " us) or that do none (" + std::to_string(unknown_view) + ", " +
                    fixed(model.default_top_level_view_us, 1) + " us)";
  }
  return s;
}

}  // namespace

HostSchedule modelled_schedule(const Step& step, const HostCostModel& model, uint32_t stream) {
  std::string mapping_note;
  HostSchedule s = model.inclusive() ? inclusive_schedule(step, model, stream, mapping_note)
                                     : exclusive_schedule(step, model, stream);
  s.launch_source = LaunchSource::Modelled;
  s.overhead_source = OverheadSource::None;
  s.traced_host_us = step.wall_ms * 1000.0;
  s.notes.push_back("CPU origin: the host cadence is a model of eager PyTorch on a GPU machine (" +
                    model.calibration + "), not the CPU's own op times" + mapping_note);
  return s;
}

}  // namespace habitat
