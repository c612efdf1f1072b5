// Multi-tensor optimizer ops: _foreach_* (one point-wise op over lists of tensors) and the
// fused Adam/AdamW/SGD steps. FLOPs and bytes are summed over the list elements; kernels are
// multi_tensor_apply's launches (cost/multi_tensor_apply.h).
#include <algorithm>
#include <cmath>

#include "cost/multi_tensor_apply.h"
#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

constexpr int kMaxBlocks = 320;
constexpr int kMaxTensors[5] = {110, 64, 48, 36, 30};
constexpr int kMaxTensorsScalarList[5] = {96, 64, 48, 36, 30};

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

bool is_foreach_reduction(std::string_view foreach_stem) {
  return foreach_stem == "norm" || foreach_stem == "max";
}

// How an op calls multi_tensor_apply: the list it walks, the lists the kernel takes, whether
// a scalar list rides along, which functor runs and the kernels besides its launches.
struct Lists {
  std::vector<const TensorMeta*> tensors;
  int depth = 1;
  bool scalar_list = false;
  MultiTensorKernel kernel = MultiTensorKernel::Foreach;
  int other_kernels = 0;
};

// _foreach_<op>: out-of-place variants add an output list to the kernel's depth;
// `_foreach_norm` is a per-tensor reduction plus one clean-up kernel. The fused SGD update is
// one light expression, as a foreach functor's; the fused Adam one walks 4 or 5 lists.
std::optional<Lists> lists_of(const OpContext& c) {
  Lists l;
  if (c.stem.starts_with("_foreach_")) {
    const bool reduction =
        is_foreach_reduction(c.stem.substr(std::string_view("_foreach_").size()));
    l.tensors = primary_list(c);
    l.depth = tensor_list_inputs(c) + (c.in_place || reduction ? 0 : 1);
    l.scalar_list = c.op.overload.find("ScalarList") != std::string::npos;
    l.other_kernels = reduction ? 1 : 0;
  } else if (c.stem == "_fused_adam" || c.stem == "_fused_adamw") {
    l.tensors = tensor_list_arg(c, "self");
    l.depth = bool_arg(c, "amsgrad", false) ? 5 : 4;
    l.kernel = MultiTensorKernel::FusedAdam;
  } else if (c.stem == "_fused_sgd") {
    l.tensors = tensor_list_arg(c, "self");
    l.depth = number_arg(c, "momentum").value_or(0) != 0 ? 3 : 2;
  } else if (c.stem == "_amp_foreach_non_finite_check_and_unscale") {
    l.tensors = tensor_list_arg(c, "self");
  } else {
    return std::nullopt;
  }
  return l;
}

int kernels_of(const OpContext& c) {
  const std::optional<Lists> l = lists_of(c);
  if (!l) return 0;
  return static_cast<int>(multi_tensor_launches(l->tensors, l->depth, l->scalar_list).size()) +
         l->other_kernels;
}

// _foreach_<op>: the point-wise <op> over each element of the lists; zero_ and copy_ do not
// read self.
OpCost foreach_op(const OpContext& c, double) {
  const std::string_view op = c.stem.substr(std::string_view("_foreach_").size());
  const bool reduction = is_foreach_reduction(op);
  const bool overwrites = op == "zero" || op == "copy";
  std::optional<double> per_element = pointwise_flops_per_element(op);
  if (reduction) per_element = 2;
  if (overwrites) per_element = 0;
  if (!per_element) return OpCost{};
  return make_cost(OpClass::Optimizer, total_elements(primary_list(c)) * *per_element,
                   input_bytes(c, overwrites), output_bytes(c), simt_precision(op_dtype(c)),
                   kernels_of(c));
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
  return make_cost(OpClass::Optimizer, total_elements(params) * per_element, input_bytes(c),
                   written, simt_precision(op_dtype(c)), kernels_of(c));
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
  return make_cost(OpClass::Optimizer, total_elements(params) * per_element, input_bytes(c),
                   written, simt_precision(op_dtype(c)), kernels_of(c));
}

// GradScaler: unscale the gradients and flag non-finite values (multiply, check).
OpCost amp_unscale(const OpContext& c, double) {
  const auto grads = tensor_list_arg(c, "self");
  return make_cost(OpClass::Optimizer, total_elements(grads) * 2, input_bytes(c), output_bytes(c),
                   simt_precision(op_dtype(c)), kernels_of(c));
}

}  // namespace

std::vector<MultiTensorLaunch> multi_tensor_launches(const std::vector<const TensorMeta*>& tensors,
                                                     int depth, bool scalar_list) {
  depth = std::clamp(depth, 1, 5);
  const int max_tensors = (scalar_list ? kMaxTensorsScalarList : kMaxTensors)[depth - 1];
  const auto chunk = static_cast<int64_t>(kMultiTensorChunk);
  std::vector<MultiTensorLaunch> launches;
  MultiTensorLaunch open;
  int blocks = 0, loaded = 0;
  for (const auto* t : tensors) {
    // No GPU holds 2^48 elements; the cap keeps a corrupt shape from stalling the loop.
    int64_t left = std::min<int64_t>(t->numel(), int64_t{1} << 48);
    if (left <= 0) continue;  // empty tensors are skipped without taking a slot
    ++loaded;
    while (left > 0) {
      // Chunks go in until the block table fills or the tensor ends.
      const int64_t take = std::min<int64_t>((left + chunk - 1) / chunk, kMaxBlocks - blocks);
      const int64_t moved = std::min(left, take * chunk);
      open.longest_block = std::max(open.longest_block, static_cast<double>(std::min(left, chunk)));
      open.elements += static_cast<double>(moved);
      blocks += static_cast<int>(take);
      left -= moved;
      const bool last_chunk = left == 0;
      if ((loaded == max_tensors && last_chunk) || blocks == kMaxBlocks) {
        launches.push_back(open);
        open = {};
        blocks = 0;
        loaded = last_chunk ? 0 : 1;  // an unfinished tensor carries into the next launch
      }
    }
  }
  if (blocks > 0) launches.push_back(open);
  return launches;
}

std::optional<MultiTensorWork> multi_tensor_work(const OpRecord& op) {
  const std::optional<OpContext> c = aten_context(op, PrecisionFlags{});
  if (!c) return std::nullopt;
  const std::optional<Lists> l = lists_of(*c);
  if (!l) return std::nullopt;
  MultiTensorWork work{.kernel = l->kernel,
                       .launches = multi_tensor_launches(l->tensors, l->depth, l->scalar_list),
                       .other_kernels = l->other_kernels};
  if (!l->tensors.empty()) work.element_bytes = dtype_size(l->tensors.front()->dtype).value_or(4);
  return work;
}

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
