// Multi-tensor optimizer ops: _foreach_* (one point-wise op over lists of tensors) and the
// fused Adam/AdamW/SGD steps. FLOPs and bytes are summed over the list elements.
//
// Kernel counts follow ATen's multi_tensor_apply (ATen/native/cuda/MultiTensorApply.cuh):
// tensors are cut into 65536-element chunks, one block per chunk, and a kernel is launched
// whenever a launch's block table (320 blocks) or tensor table fills up. The tensor table
// holds 110/64/48/36/30 tensors for 1/2/3/4/5 lists (96 for one list with a scalar list).
// These are its limits for 4 KB kernel arguments, which every recorded run used: no foreach
// or fused-optimizer launch of torch 2.11 (CUDA 13) on the H100 and H200 had more than 320
// blocks (the 2026-11 kernel collections' 352 AdamW rows, the recorded steps: MobileNetV3's
// 174 tensors took 2-4 launches per update expression), where ATen's 32 KB tables (2240
// blocks, 770 tensors) would have taken one. Mixed devices or dtypes make ATen fall back to
// one kernel per tensor; the fast path is assumed.
#include <algorithm>
#include <cmath>

#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

constexpr int64_t kChunkElements = 65536;
constexpr int kMaxBlocks = 320;
constexpr int kMaxTensors[5] = {110, 64, 48, 36, 30};
constexpr int kMaxTensorsScalarList[5] = {96, 64, 48, 36, 30};

// Launches of multi_tensor_apply over tensors of these sizes with `depth` lists.
int multi_tensor_kernels(const std::vector<const TensorMeta*>& tensors, int depth,
                         bool scalar_list) {
  depth = std::clamp(depth, 1, 5);
  const int max_tensors = (scalar_list ? kMaxTensorsScalarList : kMaxTensors)[depth - 1];
  int kernels = 0, blocks = 0, loaded = 0;
  for (const auto* t : tensors) {
    // No GPU holds 2^48 elements; the cap keeps a corrupt shape from stalling the loop.
    const int64_t n = std::min<int64_t>(t->numel(), int64_t{1} << 48);
    if (n <= 0) continue;  // empty tensors are skipped without taking a slot
    ++loaded;
    int64_t remaining = (n + kChunkElements - 1) / kChunkElements;
    while (remaining > 0) {
      // Chunks go in until the block table fills or the tensor ends.
      const int64_t take = std::min<int64_t>(remaining, kMaxBlocks - blocks);
      blocks += static_cast<int>(take);
      remaining -= take;
      const bool last_chunk = remaining == 0;
      if ((loaded == max_tensors && last_chunk) || blocks == kMaxBlocks) {
        ++kernels;
        blocks = 0;
        loaded = last_chunk ? 0 : 1;  // an unfinished tensor carries into the next launch
      }
    }
  }
  return kernels + (blocks > 0 ? 1 : 0);
}

double total_elements(const std::vector<const TensorMeta*>& tensors) {
  double n = 0;
  for (const auto* t : tensors) n += numel(*t);
  return n;
}

// The list the op iterates over: self, or the first Tensor[] input
// (_foreach_pow.ScalarAndTensor has a scalar self).
std::vector<const TensorMeta*> primary_list(const OpContext& c) {
  for (std::size_t i = 0; i < c.n_inputs(); ++i) {
    if (c.op.args[i].value.kind == ArgValue::Kind::TensorList) {
      return tensor_list_arg(c, c.op.args[i].name);
    }
  }
  return {};
}

int tensor_list_inputs(const OpContext& c) {
  int lists = 0;
  for (std::size_t i = 0; i < c.n_inputs(); ++i) {
    lists += c.op.args[i].value.kind == ArgValue::Kind::TensorList ? 1 : 0;
  }
  return lists;
}

// _foreach_<op>: the point-wise <op> over each element of the lists. Out-of-place variants
// add an output list to the kernel's depth. `_foreach_norm` is a per-tensor reduction plus
// one clean-up kernel; zero_ and copy_ do not read self.
OpCost foreach_op(const OpContext& c, double) {
  const std::string_view op = c.stem.substr(std::string_view("_foreach_").size());
  const bool reduction = op == "norm" || op == "max";
  const bool overwrites = op == "zero" || op == "copy";
  std::optional<double> per_element = pointwise_flops_per_element(op);
  if (reduction) per_element = 2;
  if (overwrites) per_element = 0;
  if (!per_element) return OpCost{};
  const auto list = primary_list(c);
  const int depth = tensor_list_inputs(c) + (c.in_place || reduction ? 0 : 1);
  const bool scalar_list = c.op.overload.find("ScalarList") != std::string::npos;
  int kernels = multi_tensor_kernels(list, depth, scalar_list) + (reduction ? 1 : 0);
  return make_cost(OpClass::Optimizer, total_elements(list) * *per_element,
                   input_bytes(c, overwrites), output_bytes(c), simt_precision(op_dtype(c)),
                   kernels);
}

// Bytes written by a fused optimizer step that updates these lists in place (or its
// functional form's outputs).
double fused_writes(const OpContext& c, std::initializer_list<const char*> updated) {
  if (!c.op.outputs.empty() || c.out_variant) return output_bytes(c);
  double bytes = 0;
  for (const char* name : updated) {
    for (const auto* t : tensor_list_arg(c, name)) bytes += footprint_bytes(*t);
  }
  // With a grad scaler the step unscales the gradients and writes them back.
  if (tensor_arg(c, "grad_scale") != nullptr) {
    for (const auto* t : tensor_list_arg(c, "grads")) bytes += footprint_bytes(*t);
  }
  return bytes;
}

// _fused_adam_/_fused_adamw_ per parameter element: m = b1*m + (1-b1)*g (3),
// v = b2*v + (1-b2)*g*g (4), denom = sqrt(v)/sqrt(bc2) + eps (3), p -= lr*m/bc1/denom (3);
// weight decay adds g += wd*p (Adam, 2) or p *= 1 - lr*wd (AdamW, 1); amsgrad a max;
// a grad scaler a multiply.
OpCost fused_adam(const OpContext& c, double decoupled_decay) {
  const auto params = tensor_list_arg(c, "self");
  const bool amsgrad = bool_arg(c, "amsgrad", false);
  double per_element = 13;
  if (number_arg(c, "weight_decay").value_or(0) != 0) per_element += decoupled_decay ? 1 : 2;
  if (amsgrad) per_element += 1;
  if (tensor_arg(c, "grad_scale") != nullptr) per_element += 1;
  const double written =
      amsgrad ? fused_writes(c, {"self", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"})
              : fused_writes(c, {"self", "exp_avgs", "exp_avg_sqs"});
  const int kernels = multi_tensor_kernels(params, amsgrad ? 5 : 4, false);
  return make_cost(OpClass::Optimizer, total_elements(params) * per_element, input_bytes(c),
                   written, simt_precision(op_dtype(c)), kernels);
}

// _fused_sgd_ per element: p -= lr*g (2); weight decay g += wd*p (2); momentum
// buf = m*buf + (1-d)*g (3, a copy on the first step); nesterov g += m*buf (2).
OpCost fused_sgd(const OpContext& c, double) {
  const auto params = tensor_list_arg(c, "self");
  const bool momentum = number_arg(c, "momentum").value_or(0) != 0;
  double per_element = 2;
  if (number_arg(c, "weight_decay").value_or(0) != 0) per_element += 2;
  if (momentum && !bool_arg(c, "is_first_step", false)) per_element += 3;
  if (momentum && bool_arg(c, "nesterov", false)) per_element += 2;
  if (tensor_arg(c, "grad_scale") != nullptr) per_element += 1;
  const double written =
      momentum ? fused_writes(c, {"self", "momentum_buffer_list"}) : fused_writes(c, {"self"});
  const int kernels = multi_tensor_kernels(params, momentum ? 3 : 2, false);
  return make_cost(OpClass::Optimizer, total_elements(params) * per_element, input_bytes(c),
                   written, simt_precision(op_dtype(c)), kernels);
}

// GradScaler: unscale the gradients and flag non-finite values (multiply, check).
OpCost amp_unscale(const OpContext& c, double) {
  const auto grads = tensor_list_arg(c, "self");
  return make_cost(OpClass::Optimizer, total_elements(grads) * 2, input_bytes(c), output_bytes(c),
                   simt_precision(op_dtype(c)), multi_tensor_kernels(grads, 1, false));
}

}  // namespace

void add_optimizer_rules(RuleTable& t) {
  constexpr std::string_view kForeachOps =
      "add sub mul div addcmul addcdiv lerp maximum minimum clamp_min clamp_max sqrt rsqrt exp "
      "log neg abs sign reciprocal sigmoid tanh pow zero copy norm max sin cos floor ceil round "
      "trunc frac expm1 log1p log2 log10 erf erfc lgamma sinh cosh tan asin acos atan";
  for_each_stem(kForeachOps,
                [&](std::string_view op) { t["_foreach_" + std::string(op)] = {foreach_op}; });
  t["_fused_adam"] = {fused_adam, 0};
  t["_fused_adamw"] = {fused_adam, 1};
  t["_fused_sgd"] = {fused_sgd};
  t["_amp_foreach_non_finite_check_and_unscale"] = {amp_unscale};
  // GradScaler's scale update: a handful of scalars in one kernel.
  t["_amp_update_scale"] = {
      [](const OpContext& c, double) { return streaming_cost(c, OpClass::Optimizer, 4, 1); }};
}

}  // namespace habitat::op_cost
