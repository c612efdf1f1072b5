// modelled_schedule: a CPU-traced step's host cadence on a GPU machine, from a host model.
#include "predict/timeline_host_model.h"

#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "habitat/op_cost.h"
#include "predict/cuda_paths.h"
#include "predict/fixed_point_text.h"
#include "predict/op_index.h"

namespace habitat {
namespace {

// The op's forecast device work as one launch, issued when the host is done with it.
HostEvent launch_event(double host_us, std::size_t op, uint32_t stream, Phase phase) {
  HostEvent e;
  e.host_us = host_us;
  e.op = op;
  e.stream = stream;
  e.phase = phase;
  return e;
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

// The kernels CUDA would launch for the top-level op at `first` and its subtree (the ops
// after it up to the next top-level op): each op's own estimate (estimate_cost) where the
// CPU's op is CUDA's, the CUDA path where they differ (cuda_paths: a oneDNN RNN layer as
// cuDNN's per-time-step kernels, an op whose own estimate stands for its CPU children, host
// bookkeeping that launches nothing).
double expected_kernels(const Step& step, std::size_t first, const cuda_paths::Mapping& cuda,
                        const std::vector<const cuda_paths::Expansion*>& expansion_of) {
  double kernels = 0;
  int skip_below = -1;  // depth of an op whose estimate stands for its subtree
  for (std::size_t i = first; i < step.ops.size() && (i == first || step.ops[i].depth > 0); ++i) {
    const OpRecord& op = step.ops[i];
    if (skip_below >= 0 && op.depth > skip_below) continue;
    skip_below = -1;
    if (cuda.host_only[i]) continue;
    if (const cuda_paths::Expansion* e = expansion_of[i]) {
      for (const auto& [part, count] : e->parts) kernels += count * estimate_cost(part).kernels;
      skip_below = op.depth;
      continue;
    }
    if (cuda.parent_wins[i]) {
      kernels += estimate_cost(op).kernels;
      skip_below = op.depth;
      continue;
    }
    if (!op.has_children) kernels += estimate_cost(op).kernels;
  }
  return kernels;
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
    s.events.push_back(launch_event(host, i, stream, op.phase));
  }
  s.host_end_us = host;
  return s;
}

// Per top-level op, its subtree's cost on the GPU machine; the optimizer's per-tensor ops as
// the foreach calls CUDA makes instead.
HostSchedule inclusive_schedule(const Step& step, const TraceOrigin& origin,
                                const HostCostModel& model, uint32_t stream,
                                std::string& mapping_note) {
  // Tensors per foreach call: the greatest common divisor of the optimizer's per-tensor op
  // counts (AdamW over 148 tensors: add_ x296, lerp_ x148, ... -> 148).
  std::map<std::string, std::pair<std::string, long>> optimizer_ops;  // name -> (foreach, count)
  for (const auto& op : step.ops) {
    if (op.depth != 0 || op.phase != Phase::Optimizer) continue;
    auto it = optimizer_ops.find(op.name);
    if (it == optimizer_ops.end())
      it = optimizer_ops.emplace(op.name, std::make_pair(foreach_of(op.name, model), 0L)).first;
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
  double unknown_kernels = 0;
  const OpIndex index_of(step);
  const cuda_paths::Mapping cuda = cuda_paths::map_cpu_step(step, index_of, origin);
  std::vector<const cuda_paths::Expansion*> expansion_of(step.ops.size(), nullptr);
  for (const auto& e : cuda.expansions) {
    if (e.index < expansion_of.size()) expansion_of[e.index] = &e;
  }
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (op.depth == 0 && !cuda.state_init.ops[i]) {
      const double gap = gap_of(model, op.phase);
      const std::string foreach_name = op.phase == Phase::Optimizer && per_call > 0
                                           ? optimizer_ops[op.name].first
                                           : std::string();
      if (!foreach_name.empty()) {
        // One foreach call per `per_call` tensors: its gap shared among them.
        host += model.foreach_per_tensor_us.at(foreach_name) + gap / static_cast<double>(per_call);
      } else {
        const auto it = model.top_level_op_us.find(op.name);
        double cost = 0;
        if (it != model.top_level_op_us.end()) {
          cost = it->second;
        } else {
          const double kernels = expected_kernels(step, i, cuda, expansion_of);
          if (kernels <= 0) {
            cost = model.default_top_level_view_us;
          } else if (model.unseen_per_kernel_us > 0) {
            cost = model.unseen_base_us + model.unseen_per_kernel_us * kernels;
          } else {
            cost = model.default_top_level_us;
          }
          ++(kernels > 0 ? unknown_work : unknown_view);
          unknown_kernels += kernels;
        }
        host += gap + cost;
      }
    }
    s.events.push_back(launch_event(host, i, stream, op.phase));
  }
  s.host_end_us = host;
  if (mapped > 0) {
    mapping_note = "; the optimizer's " + std::to_string(mapped) +
                   " per-tensor op calls taken as CUDA's foreach calls (" +
                   std::to_string(per_call) + " tensors each)";
  }
  if (cuda.state_init.calls > 0) {
    mapping_note += "; the optimizer's state created in this step (" +
                    std::to_string(cuda.state_init.calls) +
                    (cuda.state_init.calls == 1 ? " call" : " calls") +
                    ": its first step) left out, as no later step runs them";
  }
  if (unknown_work + unknown_view > 0) {
    const std::string per_work =
        model.unseen_per_kernel_us > 0
            ? fixed(model.unseen_base_us, 1) + " us + " + fixed(model.unseen_per_kernel_us, 1) +
                  " us per CUDA kernel (" + fixed(unknown_kernels, 0) + " kernels)"
            : fixed(model.default_top_level_us, 1) + " us each";
    mapping_note +=
        "; " + std::to_string(unknown_work + unknown_view) +
        " top-level op(s) of names the calibration never saw: " + std::to_string(unknown_work) +
        " that launch work at " + per_work + ", " + std::to_string(unknown_view) +
        " that launch none at " + fixed(model.default_top_level_view_us, 1) + " us each";
  }
  return s;
}

}  // namespace

HostSchedule modelled_schedule(const Step& step, const TraceOrigin& origin,
                               const HostCostModel& model, uint32_t stream) {
  std::string mapping_note;
  HostSchedule s = model.inclusive() ? inclusive_schedule(step, origin, model, stream, mapping_note)
                                     : exclusive_schedule(step, model, stream);
  s.launch_source = LaunchSource::Modelled;
  s.overhead_source = OverheadSource::None;
  s.traced_host_us = step.wall_ms * 1000.0;
  s.notes.push_back("CPU origin: the host cadence is a model of eager PyTorch on a GPU machine (" +
                    model.calibration + "), not the CPU's own op times" + mapping_note);
  return s;
}

}  // namespace habitat
