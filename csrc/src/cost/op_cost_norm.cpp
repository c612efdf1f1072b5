// Normalisation layers and softmax: streaming ops whose FLOPs per element are counted from
// their arithmetic (each +, -, *, /, exp, sqrt counts one). They are memory-bound on every
// GPU, so the FLOP counts only need to be right in magnitude; bytes are the compulsory
// traffic (inputs read once, outputs written once).
#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

// Forward statistics and normalisation per element: mean (1 add), variance (subtract,
// square, add: 3), normalise (subtract, multiply by rstd: 2).
constexpr double kStatsAndNormalize = 6;
// Applying known statistics (inference batch norm): subtract, multiply.
constexpr double kNormalizeOnly = 2;
// RMS norm: square and add for the mean square, multiply by rstd.
constexpr double kRmsForward = 3;
// Input gradient of a mean/variance norm: recompute x_hat (2), g * w (1), g * w * x_hat (1),
// two row sums (2), combine (multiply, two subtracts, multiply by rstd: 4).
constexpr double kNormInputGrad = 10;
// RMS norm input gradient: x_hat (1), g * w (1), sum of g * w * x_hat (2), combine (3).
constexpr double kRmsInputGrad = 7;
// Weight gradient: multiply by x_hat and sum; bias gradient: sum.
constexpr double kWeightGrad = 2;
constexpr double kBiasGrad = 1;

const TensorMeta* norm_input(const OpContext& c) {
  const TensorMeta* in = tensor_arg(c, "input");
  return in != nullptr ? in : tensor_arg(c, "self");
}

double affine_flops(const OpContext& c) {
  return (tensor_arg(c, "weight") != nullptr ? 1.0 : 0.0) +
         (tensor_arg(c, "bias") != nullptr ? 1.0 : 0.0);
}

// Batch-norm flavours compute statistics in training mode and use running ones otherwise.
// The _no_training and _no_update ops carry no flag.
bool batch_norm_training(const OpContext& c) {
  if (c.stem == "_native_batch_norm_legit_no_training") return false;
  if (c.stem == "_batch_norm_no_update") return tensor_arg(c, "running_mean") == nullptr;
  if (c.stem == "_batch_norm_with_update") return true;
  return bool_arg(c, "training", true);
}

// param: kernels the op's usual CUDA implementation launches.
OpCost mean_var_norm(const OpContext& c, double param) {
  const TensorMeta* in = norm_input(c);
  if (in == nullptr) return OpCost{};
  const double per_element = kStatsAndNormalize + affine_flops(c);
  return streaming_cost(c, OpClass::Norm, numel(*in) * per_element, static_cast<int>(param));
}

// param: kernels of a training call (native CUDA: statistics, their finalisation, the
// normalisation; cuDNN: 1). Inference runs one element-wise kernel either way.
OpCost batch_norm(const OpContext& c, double param) {
  const TensorMeta* in = norm_input(c);
  if (in == nullptr) return OpCost{};
  const bool training = batch_norm_training(c);
  const double per_element = (training ? kStatsAndNormalize : kNormalizeOnly) + affine_flops(c);
  const bool native_passes = training && param > 1;
  OpCost cost = streaming_cost(c, OpClass::Norm, numel(*in) * per_element,
                               training ? static_cast<int>(param) : 1);
  // PyTorch's native CUDA batch norm (batch_norm_collect_statistics*_kernel, then
  // batch_norm_transform_input*_kernel; aten/src/ATen/native/cuda/Normalization.cuh) reads
  // the input twice: once for the statistics, once to normalise it. cuDNN's kernels
  // (single-read / semi-persistent) read it once.
  if (native_passes) cost.bytes_read += footprint_bytes(*in);
  return cost;
}

OpCost rms_norm(const OpContext& c, double) {
  const TensorMeta* in = norm_input(c);
  if (in == nullptr) return OpCost{};
  const double weight = tensor_arg(c, "weight") != nullptr ? 1.0 : 0.0;
  return streaming_cost(c, OpClass::Norm, numel(*in) * (kRmsForward + weight), 1);
}

// Backward of layer/batch/group norm: output_mask picks grad_input, grad_weight, grad_bias.
// The input gradient is one kernel; the weight and bias gradients share another.
OpCost norm_backward(const OpContext& c, double input_grad_flops) {
  const TensorMeta* in = norm_input(c);
  if (in == nullptr) return OpCost{};
  const bool rms = c.stem == "_fused_rms_norm_backward";
  const bool gx = mask_bit(c, "output_mask", 0);
  const bool gw = mask_bit(c, "output_mask", 1);
  const bool gb = !rms && mask_bit(c, "output_mask", 2);
  const double per_element =
      (gx ? input_grad_flops : 0) + (gw ? kWeightGrad : 0) + (gb ? kBiasGrad : 0);
  const int kernels = (gx ? 1 : 0) + (gw || gb ? 1 : 0);
  return streaming_cost(c, OpClass::Norm, numel(*in) * per_element, kernels);
}

// Native CUDA batch-norm backward in training mode (batch_norm_backward_reduce*_kernel then
// batch_norm_backward_elemt*_kernel, or for NCHW the fused batch_norm_backward_kernel, one
// block per channel): the gradient sums over x and dy come first, then the input gradient
// reads x and dy again. So x and dy are read twice whenever the input gradient needs the
// batch statistics' gradients (train) and once otherwise.
OpCost batch_norm_backward(const OpContext& c, double) {
  OpCost cost = norm_backward(c, kNormInputGrad);
  const TensorMeta* in = norm_input(c);
  if (in == nullptr || cost.op_class == OpClass::Unknown) return cost;
  const bool gx = mask_bit(c, "output_mask", 0);
  if (gx && bool_arg(c, "train", true)) {
    const TensorMeta* dy = tensor_arg(c, "grad_out");
    cost.bytes_read += footprint_bytes(*in) + (dy != nullptr ? footprint_bytes(*dy) : 0.0);
  }
  return cost;
}

// cudnn_batch_norm_backward always computes all three gradients in one kernel.
OpCost cudnn_batch_norm_backward(const OpContext& c, double) {
  const TensorMeta* in = norm_input(c);
  if (in == nullptr) return OpCost{};
  const double per_element = kNormInputGrad + kWeightGrad + kBiasGrad;
  return streaming_cost(c, OpClass::Norm, numel(*in) * per_element, 1);
}

// Softmax forward: row max, subtract, exp, row sum, divide (log_softmax: subtract the log
// of the sum instead): 5 per element. Backward: 4 per element (softmax: g * y, row sum,
// subtract, multiply; log_softmax: exp(y), row sum of g, multiply, subtract).
OpCost softmax(const OpContext& c, double per_element) {
  const TensorMeta* shape = main_output(c);
  if (shape == nullptr) {
    const auto inputs = input_tensors(c);
    if (inputs.empty()) return OpCost{};
    shape = inputs.front();
  }
  return streaming_cost(c, OpClass::Softmax, numel(*shape) * per_element, 1);
}

// CUDA's softmax backward first writes g * y with a mul kernel of its own (SoftMax.cu
// softmax_backward_cuda_out), which the backward kernel then reads: two kernels, three more
// passes over the rows. The log-softmax backward is one kernel.
OpCost softmax_backward(const OpContext& c, double per_element) {
  OpCost cost = softmax(c, per_element);
  const TensorMeta* grad = tensor_arg(c, "grad_output");
  if (grad == nullptr || cost.kernels == 0) return cost;
  const double pass = numel(*grad) * static_cast<double>(element_size(*grad));
  cost.bytes_read += 2.0 * pass;
  cost.bytes_written += pass;
  cost.kernels = 2;
  return cost;
}

}  // namespace

void add_norm_rules(RuleTable& t) {
  t["native_layer_norm"] = {mean_var_norm, 1};
  t["layer_norm"] = {mean_var_norm, 1};
  t["native_group_norm"] = {mean_var_norm, 2};  // row moments, then the normalisation
  t["group_norm"] = {mean_var_norm, 2};
  add_rules(t,
            "native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_functional "
            "_native_batch_norm_legit_no_training _batch_norm_with_update _batch_norm_no_update",
            {batch_norm, 3});
  // The dispatching wrappers (their children are the backend's op) are costed as the least
  // work any backend does, so that the backend's own estimate decides.
  add_rules(t, "batch_norm _batch_norm_impl_index", {batch_norm, 1});
  t["cudnn_batch_norm"] = {batch_norm, 1};
  t["miopen_batch_norm"] = {batch_norm, 1};
  t["_fused_rms_norm"] = {rms_norm};
  t["rms_norm"] = {rms_norm};

  add_rules(t, "native_layer_norm_backward native_group_norm_backward",
            {norm_backward, kNormInputGrad});
  add_rules(t, "native_batch_norm_backward batch_norm_backward", {batch_norm_backward});
  t["_fused_rms_norm_backward"] = {norm_backward, kRmsInputGrad};
  t["cudnn_batch_norm_backward"] = {cudnn_batch_norm_backward};
  t["miopen_batch_norm_backward"] = {cudnn_batch_norm_backward};

  add_rules(t,
            "_softmax softmax _log_softmax log_softmax _safe_softmax special_softmax "
            "special_log_softmax",
            {softmax, 5});
  t["_masked_softmax"] = {softmax, 6};  // plus the masking select
  t["_softmax_backward_data"] = {softmax_backward, 4};
  t["_log_softmax_backward_data"] = {softmax, 4};
}

}  // namespace habitat::op_cost
