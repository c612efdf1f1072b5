// Element-wise ops, dropout and the ops that fill new tensors. The iteration space is the
// output, which already has the broadcast shape, so FLOPs = elements(output) * FLOPs per
// element; each input is read at its own size (a broadcast [N] bias is N elements, not M*N).
// Each arithmetic operation or special function counts one FLOP; comparisons and selects
// count one too, as they occupy the same issue slots.
#include <utility>

#include "cost/op_cost_detail.h"
#include "cost/writer_ops.h"

namespace habitat::op_cost {
namespace {

// Stems (space-separated) grouped by FLOPs per output element. In-place (add_) and out=
// variants share their stem's entry; the _foreach_* ops reuse it for each list element.
constexpr std::string_view kNoFlop = "positive conj_physical";
constexpr std::string_view kOneFlop =
    "add sub rsub mul div true_divide floor_divide remainder fmod neg abs sign sgn signbit "
    "reciprocal square sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan tanh sinh "
    "cosh asin acos atan atan2 erf erfc erfinv lgamma digamma floor ceil round trunc frac pow "
    "float_power copysign heaviside maximum minimum fmax fmin max.other min.other eq ne lt le "
    "gt ge logical_and logical_or logical_xor logical_not bitwise_and bitwise_or bitwise_xor "
    "bitwise_not isnan isinf isfinite isposinf isneginf relu threshold threshold_backward "
    "clamp_min clamp_max masked_fill where";
constexpr std::string_view kTwoFlops =
    "clamp clip relu6 hardtanh hardtanh_backward leaky_relu leaky_relu_backward _prelu_kernel "
    "xlogy hardsigmoid_backward "
    "native_dropout_backward";  // g * mask * scale
constexpr std::string_view kThreeFlops =
    "nan_to_num hypot addcmul addcdiv _prelu_kernel_backward hardsigmoid logit logit_backward "
    "elu_backward "
    "lerp "                           // a + w * (b - a)
    "tanh_backward "                  // g * (1 - y^2)
    "sigmoid_backward "               // g * y * (1 - y)
    "native_dropout _fused_dropout";  // compare the draw with p, mask, scale
// Activations built on exp/erf, counted term by term.
constexpr std::pair<std::string_view, double> kActivations[] = {
    {"sigmoid", 4},         // 1 / (1 + exp(-x))
    {"silu", 5},            // x * sigmoid(x)
    {"silu_backward", 9},   // sigmoid (4), g * s * (1 + x * (1 - s)) (5)
    {"gelu", 5},            // x * 0.5 * (1 + erf(x / sqrt 2)); the tanh form is close
    {"gelu_backward", 10},  // cdf (4) + pdf (4) + combine (2)
    {"hardswish", 4},
    {"hardswish_backward", 4},
    {"logaddexp", 4},
    {"elu", 4},
    {"celu", 4},
    {"selu", 5},
    {"softplus", 4},
    {"softplus_backward", 5},
    {"mish", 7},
    {"mish_backward", 12},
    {"log_sigmoid_forward", 5},
    {"log_sigmoid_backward", 5},
    {"glu", 5},
    {"glu_backward", 6},
};

template <typename Visit>
void for_each_pointwise(Visit visit) {
  for_each_stem(kNoFlop, [&](std::string_view stem) { visit(stem, 0.0); });
  for_each_stem(kOneFlop, [&](std::string_view stem) { visit(stem, 1.0); });
  for_each_stem(kTwoFlops, [&](std::string_view stem) { visit(stem, 2.0); });
  for_each_stem(kThreeFlops, [&](std::string_view stem) { visit(stem, 3.0); });
  for (const auto& [name, flops] : kActivations) visit(name, flops);
}

OpCost pointwise(const OpContext& c, double per_element) {
  const TensorMeta* out = main_output(c);
  return streaming_cost(c, OpClass::Elementwise, out != nullptr ? numel(*out) * per_element : 0);
}

// aten::dropout hands back its input untouched when it is off; otherwise it runs
// native_dropout, whose record carries the work (on CUDA; a CPU trace's dropout stands for it,
// predict/cuda_paths.h): it reads the input and writes the output and a one-byte mask.
OpCost dropout(const OpContext& c, double per_element) {
  if (!bool_arg(c, "train", true) || number_arg(c, "p").value_or(0.5) == 0) {
    return no_kernel_cost();
  }
  OpCost cost = pointwise(c, per_element);
  const TensorMeta* out = main_output(c);
  if (c.stem == "dropout" && out != nullptr) cost.bytes_written += numel(*out);  // the mask
  return cost;
}

// The ops of kWriterOps (cost/writer_ops.h) and the in-place random generators.
OpCost writer(const OpContext& c, double per_element) {
  const TensorMeta* out = main_output(c);
  const double n = out != nullptr ? numel(*out) : 0;
  return make_cost(OpClass::Elementwise, n * per_element, input_bytes(c, /*skip_self=*/true),
                   output_bytes(c), simt_precision(op_dtype(c)), 1);
}

// bernoulli(self) draws with probabilities self; bernoulli_ overwrites self.
OpCost bernoulli(const OpContext& c, double per_element) {
  return c.in_place ? writer(c, per_element) : pointwise(c, per_element);
}

}  // namespace

std::optional<double> pointwise_flops_per_element(std::string_view stem) {
  std::optional<double> found;
  for_each_pointwise([&](std::string_view name, double flops) {
    if (name == stem) found = flops;
  });
  return found;
}

void add_pointwise_rules(RuleTable& t) {
  for_each_pointwise([&](std::string_view name, double flops) {
    t[std::string(name)] = {pointwise, flops};
  });
  t["dropout"] = {dropout, 3};
  t["feature_dropout"] = {dropout, 3};
  t["alpha_dropout"] = {dropout, 4};
  t["bernoulli"] = {bernoulli, 1};
  for (const WriterOps& group : kWriterOps)
    add_rules(t, group.stems, {writer, group.flops_per_element});
}

}  // namespace habitat::op_cost
