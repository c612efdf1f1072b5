#include "predict/attention_backward.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string_view>

namespace habitat::cuda_paths {
namespace {

// The autograd nodes of the math path's pieces (torch/csrc/autograd/generated names): its
// matmuls run as bmm, the scale and the dropout mask as mul, the casts of an autocast or a
// half-precision input to float32 as _to_copy, and the views between them.
const std::set<std::string_view>& piece_nodes() {
  static const std::set<std::string_view> nodes{
      "BmmBackward0",    "MulBackward0",       "MulBackward1",         "DivBackward0",
      "DivBackward1",    "SoftmaxBackward0",   "SafeSoftmaxBackward0", "NativeDropoutBackward0",
      "ToCopyBackward0", "TransposeBackward0", "UnsafeViewBackward0",  "ViewBackward0",
      "ExpandBackward0", "CloneBackward0"};
  return nodes;
}

bool softmax_backward(std::string_view name) {
  return name == "aten::_softmax_backward_data" || name == "aten::_safe_softmax_backward";
}

// B, H, L, S, E, Ev of an SDPA call ([B, H, L, E] query, [B, H, S, E] key, [B, H, S, Ev] value).
using Geometry = std::array<int64_t, 6>;

std::optional<Geometry> geometry(const OpRecord& op) {
  const TensorMeta* q = op.tensor("query");
  const TensorMeta* k = op.tensor("key");
  const TensorMeta* v = op.tensor("value");
  if (q == nullptr || k == nullptr || v == nullptr) return std::nullopt;
  if (q->shape.size() != 4 || k->shape.size() != 4 || v->shape.size() != 4) return std::nullopt;
  return Geometry{q->shape[0], q->shape[1], q->shape[2], k->shape[2], q->shape[3], v->shape[3]};
}

bool attention_dim(int64_t d, const Geometry& g) {
  return d == g[2] || d == g[3] || d == g[4] || d == g[5];
}

// [B, H, x, y] or [B*H, x, y], x and y among L, S, E, Ev.
bool attention_shaped(const Dims& s, const Geometry& g) {
  if (s.size() == 4) {
    return s[0] == g[0] && s[1] == g[1] && attention_dim(s[2], g) && attention_dim(s[3], g);
  }
  if (s.size() == 3) return s[0] == g[0] * g[1] && attention_dim(s[1], g) && attention_dim(s[2], g);
  return false;
}

// The math-path attentions of one geometry: their forwards in step order, and the backward
// pieces and softmax backwards found for them.
struct Attentions {
  Geometry geometry{};
  std::vector<std::size_t> forwards;
  std::vector<std::size_t> pieces;
  std::vector<std::size_t> softmaxes;
};

// Whether every tensor of `op` has a shape of geometry `g`'s (and it has one).
bool piece_shaped(const OpRecord& op, const Geometry& g) {
  bool any = false;
  for (const auto& a : op.args) {
    for (const auto& t : a.value.tensors) {
      if (!t.defined || t.shape.empty()) continue;
      if (!attention_shaped(t.shape, g)) return false;
      any = true;
    }
  }
  return any;
}

// The step's math-path attentions grouped by geometry, in the order each geometry first appears.
std::vector<Attentions> group_by_geometry(const Step& step,
                                          const std::vector<std::size_t>& forwards) {
  std::vector<Attentions> groups;
  for (const std::size_t f : forwards) {
    const std::optional<Geometry> g = geometry(step.ops[f]);
    if (!g) continue;
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Attentions& a) { return a.geometry == *g; });
    if (it == groups.end()) it = groups.insert(groups.end(), Attentions{*g, {}, {}, {}});
    it->forwards.push_back(f);
  }
  return groups;
}

}  // namespace

FusedBackward math_attention_backward(const Step& step, const std::vector<std::size_t>& forwards) {
  FusedBackward out;
  out.pieces.assign(step.ops.size(), 0);
  std::vector<Attentions> groups = group_by_geometry(step, forwards);
  if (groups.empty()) return out;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (op.phase != Phase::Backward || op.parent || !piece_nodes().contains(op.autograd_node)) {
      continue;
    }
    const auto g = std::find_if(groups.begin(), groups.end(),
                                [&](const Attentions& a) { return piece_shaped(op, a.geometry); });
    if (g == groups.end()) continue;
    g->pieces.push_back(i);
    if (softmax_backward(op.name)) g->softmaxes.push_back(i);
  }
  for (const Attentions& a : groups) {
    if (a.softmaxes.empty()) continue;  // not a math path's backward: leave its ops alone
    for (const std::size_t i : a.pieces) out.pieces[i] = 1;
    for (std::size_t k = 0; k < a.softmaxes.size() && k < a.forwards.size(); ++k) {
      out.carriers.emplace_back(a.softmaxes[k], a.forwards[k]);
    }
  }
  return out;
}

}  // namespace habitat::cuda_paths
