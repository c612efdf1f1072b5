#include "predict/attention_backward.h"

#include <array>
#include <cstdint>
#include <map>
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

// The geometry every tensor of `op` has the shape of (the first that fits), if any.
std::optional<std::size_t> piece_of(const OpRecord& op, const std::vector<Geometry>& geometries) {
  for (std::size_t g = 0; g < geometries.size(); ++g) {
    bool any = false;
    bool all = true;
    for (const auto& a : op.args) {
      for (const auto& t : a.value.tensors) {
        if (!t.defined || t.shape.empty()) continue;
        any = true;
        all = all && attention_shaped(t.shape, geometries[g]);
      }
    }
    if (any && all) return g;
  }
  return std::nullopt;
}

}  // namespace

FusedAttentionBackward math_attention_backward(const Step& step,
                                               const std::vector<std::size_t>& forwards) {
  FusedAttentionBackward out;
  out.pieces.assign(step.ops.size(), 0);
  std::vector<Geometry> geometries;
  std::map<Geometry, std::vector<std::size_t>> forwards_of;
  for (const std::size_t f : forwards) {
    const std::optional<Geometry> g = geometry(step.ops[f]);
    if (!g) continue;
    auto& list = forwards_of[*g];
    if (list.empty()) geometries.push_back(*g);
    list.push_back(f);
  }
  if (geometries.empty()) return out;
  std::vector<std::vector<std::size_t>> pieces(geometries.size());
  std::vector<std::vector<std::size_t>> softmaxes(geometries.size());
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& op = step.ops[i];
    if (op.phase != Phase::Backward || op.parent || !piece_nodes().contains(op.autograd_node)) {
      continue;
    }
    const std::optional<std::size_t> g = piece_of(op, geometries);
    if (!g) continue;
    pieces[*g].push_back(i);
    if (softmax_backward(op.name)) softmaxes[*g].push_back(i);
  }
  for (std::size_t g = 0; g < geometries.size(); ++g) {
    if (softmaxes[g].empty()) continue;  // not a math path's backward: leave its ops alone
    for (const std::size_t i : pieces[g]) out.pieces[i] = 1;
    const auto& fwd = forwards_of[geometries[g]];
    for (std::size_t k = 0; k < softmaxes[g].size() && k < fwd.size(); ++k) {
      out.carriers.emplace_back(softmaxes[g][k], fwd[k]);
    }
  }
  return out;
}

}  // namespace habitat::cuda_paths
