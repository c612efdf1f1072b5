#include "predict/cuda_paths.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "habitat/op_cost.h"
#include "predict/cpu_autocast.h"
#include "trace/op_args.h"

namespace habitat::cuda_paths {
namespace {

constexpr std::string_view kAten = "aten::";

// Per-tensor point-wise stems whose update torch.optim's foreach path runs as _foreach_<stem>
// (torch/optim/{adam,adamw,sgd,...}.py, _multi_tensor_*), and linalg_vector_norm, which
// an optimizer's own norm (LAMB-like steps in torch.optim's style) runs per tensor.
const std::set<std::string_view>& foreach_stems() {
  static const std::set<std::string_view> stems{
      "add",     "sub",     "mul",       "div",        "addcmul", "addcdiv", "lerp",
      "maximum", "minimum", "clamp_min", "clamp_max",  "sqrt",    "rsqrt",   "exp",
      "neg",     "abs",     "sign",      "reciprocal", "copy",    "zero"};
  return stems;
}

bool zero_dim(const TensorMeta& t) { return t.defined && t.shape.empty(); }

struct Stem {
  std::string foreach_name;  // "aten::_foreach_mul_"
  bool ok = false;
};

Stem foreach_name_of(const OpRecord& op) {
  std::string_view name = op.name;
  if (!name.starts_with(kAten)) return {};
  name.remove_prefix(kAten.size());
  if (name == "linalg_vector_norm") return {"aten::_foreach_norm", true};
  const bool in_place = name.size() > 1 && name.ends_with('_') && !name.ends_with("__");
  std::string_view stem = in_place ? name.substr(0, name.size() - 1) : name;
  if (!foreach_stems().contains(stem)) return {};
  return {"aten::_foreach_" + std::string(stem) + (in_place ? "_" : ""), true};
}

// What makes two per-tensor calls parts of one foreach call: the same op and overload, the
// same argument kinds, scalars in the same places, the same dtypes, the same phase.
using GroupKey = std::tuple<int, std::string, std::string, std::string>;

GroupKey group_key(const OpRecord& op) {
  std::string signature;
  for (const auto& a : op.args) {
    signature += std::to_string(static_cast<int>(a.value.kind));
    for (const auto& t : a.value.tensors) signature += (zero_dim(t) ? "s" : "t") + t.dtype;
    signature += ',';
  }
  return {static_cast<int>(op.phase), op.name, op.overload, signature};
}

// The _foreach_ op of a group: each tensor argument that is not a 0-dim scalar becomes the
// list of the members' tensors in that place; scalars are the first member's.
OpRecord foreach_op(const Step& step, const std::vector<std::size_t>& members, std::string name) {
  const OpRecord& first = step.ops[members.front()];
  OpRecord op;
  op.id = first.id;
  op.name = std::move(name);
  op.phase = first.phase;
  op.precision = first.precision;
  for (std::size_t j = 0; j < first.args.size(); ++j) {
    Argument arg = first.args[j];
    const bool list = arg.value.kind == ArgValue::Kind::Tensor && !arg.value.tensors.empty() &&
                      !zero_dim(arg.value.tensors.front());
    if (list) {
      arg.value.kind = ArgValue::Kind::TensorList;
      arg.value.tensors.clear();
      for (const std::size_t m : members) {
        const auto& tensors = step.ops[m].args[j].value.tensors;
        arg.value.tensors.insert(arg.value.tensors.end(), tensors.begin(), tensors.end());
      }
    }
    op.args.push_back(std::move(arg));
  }
  for (const std::size_t m : members) {
    const auto& outs = step.ops[m].outputs;
    op.outputs.insert(op.outputs.end(), outs.begin(), outs.end());
  }
  return op;
}

TensorMeta matrix(int64_t rows, int64_t cols, const std::string& dtype) {
  TensorMeta t;
  t.shape = {rows, cols};
  t.strides = {cols, 1};
  t.dtype = dtype;
  t.device = "cuda:0";
  return t;
}

Argument tensor_argument(std::string name, TensorMeta t) {
  Argument a{std::move(name), {}};
  a.value.kind = ArgValue::Kind::Tensor;
  a.value.tensors.push_back(std::move(t));
  return a;
}

// A 16-bit floating-point dtype name (bfloat16, float16 or half; "torch." prefix allowed).
bool sixteen_bit(std::string_view dtype) {
  if (dtype.starts_with("torch.")) dtype.remove_prefix(6);
  return dtype == "bfloat16" || dtype == "float16" || dtype == "half";
}

// The kinds of kernel cuDNN runs for an RNN layer, each costed as the engine's op of the same
// shape: a GEMM [m, k] x [k, n] (aten::mm), an element-wise cell kernel over [m, n] reading two
// operands, the gates and the state (aten::add), a weight layout transform of an [m, n] matrix
// (aten::clone).
enum class RnnKernel { Gemm, Cell, Transform };

OpRecord rnn_part(const OpRecord& layer, const PrecisionFlags& flags, RnnKernel kind, int64_t m,
                  int64_t k, int64_t n, const std::string& dtype) {
  OpRecord op;
  op.id = layer.id;
  op.phase = layer.phase;
  op.precision = flags;
  switch (kind) {
    case RnnKernel::Gemm:
      op.name = "aten::mm";
      op.args = {tensor_argument("self", matrix(m, k, dtype)),
                 tensor_argument("mat2", matrix(k, n, dtype))};
      break;
    case RnnKernel::Cell:
      op.name = "aten::add";
      op.overload = "Tensor";
      op.args = {tensor_argument("self", matrix(m, n, dtype)),
                 tensor_argument("other", matrix(m, n, dtype))};
      break;
    case RnnKernel::Transform:
      op.name = "aten::clone";
      op.args = {tensor_argument("self", matrix(m, n, dtype))};
      break;
  }
  op.outputs = {matrix(m, n, dtype)};
  return op;
}

// The device time of a cuDNN RNN layer over the engine's forecast of its parts run one after
// another: the time the op kept the device busy (the union of its kernels' intervals) on the
// LSTM benchmark's format-2 H100 steps, fitted per pass and matrix precision by
// benchmarks/accuracy/cudnn_rnn_fit.py (benchmarks/results/cudnn-rnn-fit.txt). cuDNN's kernels
// are slower than the engine's forecasts of the same shapes (TF32 GEMMs on Ampere-generation
// cutlass_80 kernels, cell kernels about 2-3x an add of the gates), and a stacked layer's
// kernels run on other streams beside the layer below's, so part of their time overlaps. One
// network's shapes on one GPU measured these: factors, not a model. TF32 off (true FP32 GEMMs):
// never measured, no factor.
double cudnn_rnn_scale(const std::string& dtype, bool tf32, bool backward) {
  if (sixteen_bit(dtype)) return backward ? 1.08 : 1.18;
  if (tf32) return backward ? 1.13 : 1.27;
  return 1.0;
}

const TensorMeta* arg_tensor(const OpRecord& op, const char* name) {
  const TensorMeta* t = op.tensor(name);
  return t != nullptr && t->defined ? t : nullptr;
}

// The storages of every recurrent layer's output in the step: a layer whose input is one of
// them is stacked on another (layer 2 and up of a multi-layer LSTM/GRU).
std::set<uint64_t> rnn_layer_outputs(const Step& step) {
  std::set<uint64_t> out;
  for (const OpRecord& op : step.ops) {
    if (op.name == "aten::mkldnn_rnn_layer" && !op.outputs.empty() && op.outputs[0].storage != 0) {
      out.insert(op.outputs[0].storage);
    }
  }
  return out;
}

// The bias gradient of a layer: the gate gradients of every step summed over time and batch.
OpRecord rnn_bias_grad(const OpRecord& layer, const PrecisionFlags& flags, int64_t rows,
                       int64_t gates, const std::string& dtype) {
  OpRecord op;
  op.id = layer.id;
  op.phase = layer.phase;
  op.precision = flags;
  op.name = "aten::sum";
  op.overload = "dim_IntList";
  Argument dim{"dim", {}};
  dim.value.kind = ArgValue::Kind::IntList;
  dim.value.ints = {0};
  op.args = {tensor_argument("self", matrix(rows, gates, dtype)), std::move(dim)};
  TensorMeta out = matrix(1, gates, dtype);
  out.shape = {gates};
  out.strides = {1};
  op.outputs = {out};
  return op;
}

// mkldnn_rnn_layer(input, weight0 = W_ih [G*H, I], weight1 = W_hh [G*H, H], ...) and its
// backward (weight1 = W_ih, weight2 = W_hh): one direction of one layer.
std::optional<Expansion> rnn_layer(const Step& step, std::size_t i, const TraceOrigin& origin,
                                   const std::set<uint64_t>& stacked_inputs) {
  const OpRecord& op = step.ops[i];
  const bool backward = op.name == "aten::mkldnn_rnn_layer_backward";
  if (!backward && op.name != "aten::mkldnn_rnn_layer") return std::nullopt;
  const TensorMeta* input = arg_tensor(op, "input");
  const TensorMeta* w_ih = arg_tensor(op, backward ? "weight1" : "weight0");
  const TensorMeta* w_hh = arg_tensor(op, backward ? "weight2" : "weight1");
  if (input == nullptr || w_ih == nullptr || w_hh == nullptr || input->shape.size() != 3 ||
      w_ih->shape.size() != 2 || w_hh->shape.size() != 2) {
    return std::nullopt;
  }
  // The batch is the initial state's first dimension (the layer receives its input time-major
  // whatever `batch_first` says: torch passes the flag through after transposing).
  const TensorMeta* hx = arg_tensor(op, "hx_");
  const int64_t gates = w_ih->shape[0];  // gate count x hidden size
  const int64_t in = w_ih->shape[1];
  const int64_t hidden = w_hh->shape[1];
  const int64_t batch = hx != nullptr && hx->shape.size() == 2 ? hx->shape[0] : input->shape[1];
  if (batch <= 0 || gates <= 0 || in <= 0 || hidden <= 0) return std::nullopt;
  const int64_t steps = input->numel() / (batch * in);
  if (steps <= 0) return std::nullopt;
  // cuDNN RNNs pick TF32 by cuDNN's switch, not the matmul one.
  PrecisionFlags flags = op_precision(op, origin);
  flags.matmul_allow_tf32 = flags.tf32(MatrixFamily::Rnn);
  flags.float32_matmul_precision = flags.matmul_allow_tf32 ? "high" : "highest";
  const std::string& dtype = w_ih->dtype;
  const auto t = static_cast<double>(steps);
  Expansion e;
  e.index = i;
  e.time_scale = cudnn_rnn_scale(dtype, flags.matmul_allow_tf32, backward);
  const auto add = [&](RnnKernel kind, int64_t m, int64_t k, int64_t n, double count) {
    e.parts.emplace_back(rnn_part(op, flags, kind, m, k, n, dtype), count);
  };
  if (!backward) {
    add(RnnKernel::Gemm, steps * batch, in, gates, 1);  // input projection of every step
    add(RnnKernel::Gemm, batch, hidden, gates, t);      // recurrent GEMM per step
    add(RnnKernel::Cell, batch, 0, gates, t);           // cell: gates and state to h, c
    // Each forward call transforms both weight matrices' layout (H100 CUPTI: one
    // region_transform kernel per matrix and layer).
    add(RnnKernel::Transform, gates, 0, in, 1);
    add(RnnKernel::Transform, gates, 0, hidden, 1);
  } else {
    add(RnnKernel::Cell, batch, 0, gates, t);       // cell gradient per step
    add(RnnKernel::Gemm, batch, gates, hidden, t);  // gradient to the previous h per step
    // cuDNN runs a multi-layer RNN's backward as a wavefront over layers and time: a stacked
    // layer's input gradient (the gradient of the layer below's output) is computed step by
    // step, one [batch, gates] x [gates, in] GEMM each, as the layer below needs it; the
    // first layer's in one GEMM over the whole sequence. (H100 CUPTI, the recorded LSTM:
    // 64 such per-step GEMMs for its two stacked layers.)
    const bool stacked = input->storage != 0 && stacked_inputs.contains(input->storage);
    if (stacked) {
      add(RnnKernel::Gemm, batch, gates, in, t);
    } else {
      add(RnnKernel::Gemm, steps * batch, gates, in, 1);  // input gradient
    }
    add(RnnKernel::Gemm, gates, steps * batch, in, 1);      // W_ih gradient
    add(RnnKernel::Gemm, gates, steps * batch, hidden, 1);  // W_hh gradient
    // Bias gradients: the gate gradients summed over every step and batch row (one
    // reduction; b_ih and b_hh get the same sum).
    if (arg_tensor(op, "weight3") != nullptr) {
      e.parts.emplace_back(rnn_bias_grad(op, flags, steps * batch, gates, dtype), 1.0);
    }
  }
  return e;
}

bool is_dtype(const TensorMeta* t, std::string_view name) {
  if (t == nullptr) return false;
  const std::string_view d = t->dtype.str();  // without "torch." (trace.h)
  return d == name || (name == "float16" && d == "half");
}

// PyTorch's choice of backend for a CUDA batch norm (aten/src/ATen/native/Normalization.cpp,
// _select_batch_norm_backend): cuDNN unless the input or the weight is bfloat16 or a half
// input comes with a half weight; it also needs weight and bias, both running statistics
// (or neither, in training), a >= 3-D input, a batch of at most 880801 (training) or 65535
// (inference), fewer than 2^31 elements and cuDNN enabled. Otherwise the native kernels run
// (Normalization.cuh), which is what the CPU trace records. The backward follows the forward.
bool cudnn_batch_norm(const OpRecord& op, bool backward, bool cudnn_enabled) {
  const TensorMeta* input = arg_tensor(op, "input");
  const TensorMeta* weight = arg_tensor(op, "weight");
  if (!cudnn_enabled || input == nullptr || weight == nullptr) return false;
  if (is_dtype(input, "bfloat16") || is_dtype(weight, "bfloat16")) return false;
  if (is_dtype(input, "float16") && !is_dtype(weight, "float32")) return false;
  if (input->shape.size() < 3 || input->numel() >= (int64_t{1} << 31) - 1) return false;
  // The backward's running statistics and bias are those the forward had; bias is not
  // among its arguments (affine batch norms have both).
  if (!backward && arg_tensor(op, "bias") == nullptr) return false;
  const bool stats =
      arg_tensor(op, "running_mean") != nullptr && arg_tensor(op, "running_var") != nullptr;
  const bool training = op_args::boolean(op.args, backward ? "train" : "training", true);
  if (!stats && !training) return false;
  return input->shape[0] <= (training ? 880801 : 65535);
}

// The CPU records native_batch_norm(_backward); CUDA runs cuDNN's op where PyTorch picks it.
std::optional<Expansion> batch_norm_backend(const Step& step, std::size_t i, bool cudnn_enabled) {
  const OpRecord& op = step.ops[i];
  const bool backward = op.name == "aten::native_batch_norm_backward";
  if (!backward && op.name != "aten::native_batch_norm") return std::nullopt;
  if (!cudnn_batch_norm(op, backward, cudnn_enabled)) return std::nullopt;
  OpRecord cudnn = op;
  cudnn.name = backward ? "aten::cudnn_batch_norm_backward" : "aten::cudnn_batch_norm";
  cudnn.overload.clear();
  cudnn.has_children = false;
  Expansion e;
  e.index = i;
  e.parts.emplace_back(std::move(cudnn), 1.0);
  return e;
}

// torch.backends.cudnn.enabled as the step's batch_norm calls recorded it (their
// cudnn_enabled argument); true when none recorded it.
bool step_cudnn_enabled(const Step& step) {
  for (const OpRecord& op : step.ops) {
    if (op.name != "aten::batch_norm" && op.name != "aten::_batch_norm_impl_index") continue;
    if (!op_args::boolean(op.args, "cudnn_enabled", true)) return false;
  }
  return true;
}

// The ops whose CUDA path their name alone decides; true when `op` is one (and `m` marks it).
bool mark_by_name(const OpRecord& op, std::size_t i, Mapping& m) {
  // The CPU's foreach ops are a loop of per-tensor ops (their children); CUDA runs the
  // multi-tensor kernel the op's own estimate describes.
  if (op.name.starts_with("aten::_foreach_") && op.has_children) {
    m.parent_wins[i] = 1;
    return true;
  }
  // The batch-norm wrappers: their leaf (native_batch_norm, cuDNN's op where CUDA picks it) is
  // what runs; the wrapper's own estimate, its class's roofline, would win when larger.
  if ((op.name == "aten::batch_norm" || op.name == "aten::_batch_norm_impl_index") &&
      op.has_children) {
    m.children_win[i] = 1;
    return true;
  }
  // The CPU computes a mean as a sum and a div_ (its children: ReduceOps.cpp mean_out); CUDA
  // runs one reduce kernel (MeanOps), which the op's own estimate describes.
  if (op.name == "aten::mean" && op.has_children) {
    m.parent_wins[i] = 1;
    return true;
  }
  // Training-mode dropout: the CPU draws a noise tensor, scales it and multiplies (bernoulli_,
  // div_, mul: its children, Dropout.cpp _dropout_impl); CUDA runs one fused native_dropout
  // kernel (is_fused_kernel_acceptable), which the op's own estimate describes. feature_ and
  // alpha_dropout take the unfused path on CUDA too.
  if (op.name == "aten::dropout" && op.has_children) {
    m.parent_wins[i] = 1;
    return true;
  }
  // CUDA's addmm with a bias vector (beta 1) runs the GEMM alone, the bias added by cuBLASLt's
  // epilogue (Blas.cpp addmm_out_cuda_impl, useLtInterface); the CPU first copies the broadcast
  // bias into the result (its children: expand, copy_). The recorded H100 steps' addmm ops
  // launch one GEMM kernel each.
  if (op.name == "aten::addmm" && op.has_children) {
    const TensorMeta* bias = arg_tensor(op, "self");
    if (bias != nullptr && bias->shape.size() == 1 &&
        op_args::number(op.args, "beta").value_or(1.0) == 1.0) {
      m.parent_wins[i] = 1;
      return true;
    }
  }
  // The CPU's embedding gradient records its zero fill as children and sums the rows itself;
  // CUDA runs its own kernels (Embedding.cu), fill included, which the op's estimate describes.
  if (op.name == "aten::embedding_dense_backward" && op.has_children) {
    m.parent_wins[i] = 1;
    return true;
  }
  // oneDNN computes a CPU convolution in its own layout and reorders the result, or the incoming
  // gradient, back with `contiguous` (its children); cuDNN runs no such copy (the conv forecast
  // holds its own NCHW <-> NHWC transforms, conv_transform_us). MobileNetV3-Large bf16: 31 of 62
  // forward and 34 of 62 backward passes carry one, none of the H100's convolutions does. As
  // children they stood for the pass wherever the copy was forecast the longer: 18 of its 1x1
  // forward passes forecast as a 51 MB copy.
  if ((op.name == "aten::mkldnn_convolution" || op.name == "aten::convolution_backward") &&
      op.has_children) {
    m.parent_wins[i] = 1;
    return true;
  }
  // The CPU runs _fused_rms_norm as its decomposition (its children); CUDA runs one kernel,
  // which the op's own estimate describes (its backward: add_fused_backwards).
  if (op.name == "aten::_fused_rms_norm" && op.has_children) {
    m.parent_wins[i] = 1;
    return true;
  }
  if (op.name == "aten::_local_scalar_dense" || op.name == "aten::item") {
    m.host_only[i] = 1;  // a copy to the host on CUDA (and a sync), not a kernel
    return true;
  }
  return false;
}

// Point-wise ops whose only children cast an operand (to, _to_copy, copy_ and their
// allocations): the CPU converts a bf16 operand of an add with an fp32 one into a temporary
// before computing; CUDA's TensorIterator casts inside its one kernel (the unrolled loop,
// cost/aten_loops.h), so the op's own estimate stands for them. T5-small bf16: 48 such casts
// under the forward's adds in the CPU trace, none in the H100's.
std::vector<char> casting_pointwise_ops(const Step& step, const OpIndex& index_of) {
  const std::size_t n = step.ops.size();
  std::vector<char> only_casts(n, 0);  // 1: has children, all of them casts so far
  std::vector<char> other_child(n, 0);
  for (const OpRecord& op : step.ops) {
    if (!op.parent) continue;
    const std::size_t p = index_of.find(*op.parent);
    if (p == OpIndex::npos) continue;
    const std::string_view name = op.name;
    const bool cast = name == "aten::to" || name == "aten::_to_copy" || name == "aten::copy_" ||
                      name == "aten::empty" || name == "aten::empty_like" ||
                      name == "aten::empty_strided";
    if (cast) {
      only_casts[p] = 1;
    } else {
      other_child[p] = 1;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    only_casts[i] = only_casts[i] && !other_child[i] && step.ops[i].has_children &&
                    estimate_cost(step.ops[i]).op_class == OpClass::Elementwise;
  }
  return only_casts;
}

// Expanded ops stand for their children: their expansion is what CUDA runs.
void add_expansions(std::vector<Expansion> expansions, Mapping& m) {
  for (Expansion& e : expansions) {
    m.parent_wins[e.index] = 1;
    m.expansions.push_back(std::move(e));
  }
}

// The backward pieces of the step's math-path attentions (m.attention_backward, their carriers
// costed by the predictor) and decomposed RMS norms (each costed as the fused backward on its
// first piece): no kernel of their own.
void add_fused_backwards(const Step& step, Mapping& m) {
  std::vector<std::size_t> rms_norms;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    if (step.ops[i].name == "aten::_fused_rms_norm" && step.ops[i].has_children) {
      rms_norms.push_back(i);
    }
  }
  const FusedBackward rms = decomposed_rms_norm_backward(step, rms_norms);
  m.absorbed.assign(step.ops.size(), 0);
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    m.absorbed[i] = m.attention_backward.pieces[i] || rms.pieces[i];
    if (m.absorbed[i]) m.parent_wins[i] = 1;  // their children's work too
  }
  std::vector<Expansion> rms_backwards;
  for (const auto& [carrier, forward] : rms.carriers) {
    m.absorbed[carrier] = 0;
    rms_backwards.push_back({carrier, {{fused_backward_op(step.ops[forward]), 1.0}}});
  }
  add_expansions(std::move(rms_backwards), m);
}

}  // namespace

Mapping map_cpu_step(const Step& step, const OpIndex& index_of, const TraceOrigin& origin) {
  const std::size_t n = step.ops.size();
  Mapping m;
  m.host_only.assign(n, 0);
  m.parent_wins.assign(n, 0);
  m.children_win.assign(n, 0);
  std::map<GroupKey, std::vector<std::size_t>> groups;
  std::map<GroupKey, std::string> names;
  // An op that re-dispatches itself (autocast) is costed through its inner call.
  std::vector<char> redispatches(n, 0);
  std::vector<std::size_t> math_attention;
  const bool cudnn_enabled = step_cudnn_enabled(step);
  const std::set<uint64_t> stacked_inputs = rnn_layer_outputs(step);
  for (const OpRecord& op : step.ops) {
    if (!op.parent) continue;
    const std::size_t p = index_of.find(*op.parent);
    if (p != OpIndex::npos && step.ops[p].name == op.name) redispatches[p] = 1;
  }
  const std::vector<char> casting = casting_pointwise_ops(step, index_of);
  for (std::size_t i = 0; i < n; ++i) {
    const OpRecord& op = step.ops[i];
    if (casting[i] && op.phase != Phase::Optimizer) {
      m.parent_wins[i] = 1;
      continue;
    }
    if (!redispatches[i]) {
      auto e = rnn_layer(step, i, origin, stacked_inputs);
      if (!e) e = batch_norm_backend(step, i, cudnn_enabled);
      if (e) {
        m.parent_wins[i] = 1;
        m.expansions.push_back(std::move(*e));
        continue;
      }
    }
    if (mark_by_name(op, i, m)) continue;
    if (op.name == "aten::_scaled_dot_product_attention_math" && op.parent) {
      const std::size_t p = index_of.find(*op.parent);
      if (p != OpIndex::npos && step.ops[p].name == "aten::scaled_dot_product_attention") {
        m.parent_wins[p] = 1;
        m.attention.push_back(p);
        math_attention.push_back(p);
      }
    }
    if (op.name == "aten::_scaled_dot_product_flash_attention_for_cpu" ||
        op.name == "aten::_scaled_dot_product_flash_attention_for_cpu_backward") {
      m.attention.push_back(i);
    }
    // Only the optimizer's per-tensor loops: torch.optim picks its foreach path by device.
    // Point-wise ops the user's own code calls in a loop (an EMA of the weights between
    // steps, phase "other") run one kernel per call on CUDA too; clip_grad_norm_ takes the
    // foreach path on the CPU as well (a _foreach_ op above).
    if (op.phase != Phase::Optimizer) continue;
    if (only_scalars(op)) {
      m.host_only[i] = 1;  // step counters: CPU tensors on CUDA too (capturable=False)
      continue;
    }
    // Only calls made by the optimizer's Python code itself.
    if (op.parent) continue;
    const TensorMeta* self = op.first_tensor();
    if (self == nullptr || zero_dim(*self)) continue;
    const Stem stem = foreach_name_of(op);
    if (!stem.ok) continue;
    const GroupKey key = group_key(op);
    groups[key].push_back(i);
    names[key] = stem.foreach_name;
  }
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    for (const std::size_t i : members) m.parent_wins[i] = step.ops[i].has_children ? 1 : 0;
    m.foreach_groups.push_back({foreach_op(step, members, names[key]), members});
  }
  m.state_init = optimizer_state_init(step);
  for (std::size_t i = 0; i < n; ++i) {
    if (m.state_init.ops[i]) m.host_only[i] = 1;
  }
  add_expansions(cpu_autocast_float_ops(step, index_of), m);
  m.attention_backward = math_attention_backward(step, math_attention);
  add_fused_backwards(step, m);
  return m;
}

std::string cuda_attention_op(std::string_view dtype, const Device& target, bool backward,
                              bool masked) {
  const bool half = sixteen_bit(dtype);
  const int cc = target.compute_capability();
  std::string backend = "efficient";
  if (half && (cc == 90 || (cc >= 100 && cc < 110))) {
    backend = "cudnn";
  } else if (half && cc >= 80 && !masked) {
    backend = "flash";
  }
  return "aten::_scaled_dot_product_" + backend + "_attention" + (backward ? "_backward" : "");
}

}  // namespace habitat::cuda_paths
