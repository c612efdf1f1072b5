// Loss functions. The point-wise losses (mse, bce, smooth L1, ...) cost FLOPs per input
// element and the compulsory traffic (inputs read, loss written; the per-element loss that a
// mean/sum reduction consumes is not counted as memory traffic). With a reduction the
// forward launches a point-wise kernel and a reduction kernel. nll_loss gathers one
// log-probability per target, not the whole [N, C] input.
#include <algorithm>

#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

constexpr int kReductionNone = 0;  // at::Reduction::None; Mean = 1, Sum = 2

int forward_kernels(const OpContext& c) {
  return number_arg(c, "reduction").value_or(1) == kReductionNone ? 1 : 2;
}

OpCost pointwise_loss(const OpContext& c, double per_element) {
  const TensorMeta* self = tensor_arg(c, "self");
  if (self == nullptr) return OpCost{};
  double flops = numel(*self) * per_element;
  if (tensor_arg(c, "weight") != nullptr) flops += numel(*self);
  return streaming_cost(c, OpClass::Loss, flops, forward_kernels(c));
}

// Backward of a point-wise loss: one kernel writing grad_input.
OpCost pointwise_loss_backward(const OpContext& c, double per_element) {
  const TensorMeta* self = tensor_arg(c, "self");
  if (self == nullptr) return OpCost{};
  return streaming_cost(c, OpClass::Loss, numel(*self) * per_element, 1);
}

// nll_loss forward: picks self[i, target[i]] (times the class weight) and sums: 2 FLOPs and
// one gathered element per target.
OpCost nll_loss(const OpContext& c, double) {
  const TensorMeta* self = tensor_arg(c, "self");
  const TensorMeta* target = tensor_arg(c, "target");
  if (self == nullptr || target == nullptr) return OpCost{};
  const double picks = numel(*target);
  double read = std::min(footprint_bytes(*self), picks * static_cast<double>(element_size(*self)));
  for (const auto* t : input_tensors(c)) {
    if (t != self) read += footprint_bytes(*t);
  }
  return make_cost(OpClass::Loss, 2 * picks, read, output_bytes(c), simt_precision(self->dtype), 1);
}

// nll_loss backward: zero-fills grad_input ([N, C]) and writes -weight * grad at each
// target. self only lends its shape.
OpCost nll_loss_backward(const OpContext& c, double) {
  const TensorMeta* self = tensor_arg(c, "self");
  const TensorMeta* target = tensor_arg(c, "target");
  if (self == nullptr || target == nullptr) return OpCost{};
  double written = output_bytes(c);
  if (written == 0) written = footprint_bytes(*self);
  return make_cost(OpClass::Loss, 2 * numel(*target), input_bytes_without(c, "self"), written,
                   simt_precision(self->dtype), 2);
}

// cross_entropy_loss = log_softmax (5 per element) + nll_loss (2 per target), as one op when
// the record shows no children.
OpCost cross_entropy(const OpContext& c, double) {
  const TensorMeta* self = tensor_arg(c, "self");
  const TensorMeta* target = tensor_arg(c, "target");
  if (self == nullptr || target == nullptr) return OpCost{};
  const double flops = 5 * numel(*self) + 2 * numel(*target);
  return streaming_cost(c, OpClass::Loss, flops, 2);
}

}  // namespace

void add_loss_rules(RuleTable& t) {
  add_rules(t, "nll_loss nll_loss_nd nll_loss_forward nll_loss2d nll_loss2d_forward", {nll_loss});
  t["nll_loss_backward"] = {nll_loss_backward};
  t["nll_loss2d_backward"] = {nll_loss_backward};
  t["cross_entropy_loss"] = {cross_entropy};
  // Forward FLOPs per element include the reduction's add.
  t["mse_loss"] = {pointwise_loss, 3};        // subtract, square, add
  t["l1_loss"] = {pointwise_loss, 3};         // subtract, abs, add
  t["smooth_l1_loss"] = {pointwise_loss, 6};  // d, |d|, compare, square/scale, add
  t["huber_loss"] = {pointwise_loss, 6};
  t["soft_margin_loss"] = {pointwise_loss, 5};                  // log(1 + exp(-y x)), add
  t["binary_cross_entropy"] = {pointwise_loss, 8};              // 2 logs, 1 - x, 1 - t, 2 mul, add
  t["binary_cross_entropy_with_logits"] = {pointwise_loss, 9};  // log-sigmoid form
  t["mse_loss_backward"] = {pointwise_loss_backward, 3};        // 2 * (x - t) * g / N
  t["smooth_l1_loss_backward"] = {pointwise_loss_backward, 4};
  t["huber_loss_backward"] = {pointwise_loss_backward, 4};
  t["soft_margin_loss_backward"] = {pointwise_loss_backward, 5};
  t["binary_cross_entropy_backward"] = {pointwise_loss_backward, 6};  // g (x - t) / (x (1 - x))
}

}  // namespace habitat::op_cost
