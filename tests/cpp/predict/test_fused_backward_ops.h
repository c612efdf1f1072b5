// Ops of a CPU-traced step for the fused-backward tests (test_attention_backward.cpp,
// test_rms_norm_backward.cpp): an op with its autograd node and outputs, and a forecast's
// backward time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "habitat/predictor.h"
#include "habitat/trace.h"

namespace habitat::test {

inline OpRecord op(uint64_t id, std::string name, std::vector<Argument> args, Phase phase,
                   std::optional<uint64_t> parent = std::nullopt, std::string node = "",
                   std::vector<TensorMeta> outputs = {}) {
  OpRecord r;
  r.id = id;
  r.name = std::move(name);
  r.args = std::move(args);
  r.parent = parent;
  r.depth = parent ? 1 : 0;
  r.phase = phase;
  r.autograd_node = std::move(node);
  r.outputs = std::move(outputs);
  return r;
}

// What the step's backward ops add up to on the forecast's first target.
inline double backward_us(const Forecast& f, const Step& step) {
  double us = 0;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    if (step.ops[i].phase == Phase::Backward) us += f.ops[i].share[0].time_us;
  }
  return us;
}

}  // namespace habitat::test
