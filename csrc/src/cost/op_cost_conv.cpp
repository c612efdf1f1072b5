// Convolutions. A convolution is a GEMM of (output positions) x (reduction Cin/groups * kernel
// taps) x Cout, so FLOPs = 2 * elements(output) * elements(weight) / weight.size(0). For a
// transposed convolution the roles of input and output swap (weight is [Cin, Cout/g, k...]),
// giving 2 * elements(input) * elements(weight) / weight.size(0); both match
// torch.utils.flop_counter. The bias add is not counted as FLOPs (epilogue), only read.
#include <algorithm>
#include <span>

#include "cost/conv_window.h"
#include "cost/depthwise.h"
#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

// Elements of a (non-transposed) convolution's output from the input, weight and the
// stride/padding/dilation arguments, for records without an output.
double computed_output_elements(const OpContext& c, const TensorMeta& input,
                                const TensorMeta& weight) {
  if (input.shape.size() < 3 || weight.shape.size() != input.shape.size()) return 0;
  return static_cast<double>(input.shape[0] * weight.shape[0]) *
         conv_output_positions(c.inputs(), input, weight);
}

// The share of its input a (non-transposed, undilated) pass reads: a filter narrower than its
// stride touches `kernel` of every `stride` rows in each spatial dimension, so a 1x1 stride-2
// convolution reads a quarter of its input (the H100 rows of such passes ran up to 3x under
// the full input's roofline; learned_features.h conv_input_extent counts the same rows).
double input_read_share(const OpContext& c, const TensorMeta& input, const TensorMeta& weight) {
  if (input.shape.size() < 3 || weight.shape.size() != input.shape.size()) return 1.0;
  const auto stride = ints_arg(c, "stride");
  const auto dilation = ints_arg(c, "dilation");
  const auto padding = ints_arg(c, "padding");  // empty for "valid" and "same"
  double share = 1.0;
  for (std::size_t d = 0; d + 2 < input.shape.size(); ++d) {
    const int64_t in = input.shape[d + 2];
    const int64_t k = weight.shape[d + 2];
    const int64_t s = std::max<int64_t>(per_dim(stride, d, 1), 1);
    if (k >= s || in <= 0 || per_dim(dilation, d, 1) != 1) continue;
    const int64_t out = (in + 2 * per_dim(padding, d, 0) - k) / s + 1;
    share *= static_cast<double>(std::clamp<int64_t>(out * k, 1, in)) / static_cast<double>(in);
  }
  return share;
}

// FLOPs of the forward convolution described by these shapes (and of each of its two
// backward passes, which are convolutions of the same size).
double conv_flops(double io_elements, const TensorMeta& weight) {
  if (weight.shape.empty() || weight.shape[0] == 0) return 0;
  return 2.0 * io_elements * numel(weight) / static_cast<double>(weight.shape[0]);
}

bool is_transposed(const OpContext& c, double param) {
  return bool_arg(c, "transposed", param != 0);
}

// A depthwise convolution (cost/depthwise.h) reuses no read across kernel rows, on PyTorch's
// kernels or cuDNN's NHWC ones: each pass streams its large operands (the input; grad_output;
// both for the weight gradient) once per kernel row. On the H100's depthwise rows
// (benchmarks/results/kernels/H100-SXM5-80GB-2026-11-26-families, kernels 3 and 7) the time
// over that traffic is within 1.5x across kernel sizes in every pass and layout, against 3-5x
// over the compulsory traffic (or, for the weight gradient, the traffic of a re-read per kernel
// tap). How many times a pass reads its large operand: the kernel's rows for a depthwise
// convolution, once otherwise.
double depthwise_rereads(const OpContext& c, const TensorMeta& weight) {
  return is_depthwise_conv(c.op) ? static_cast<double>(std::max<int64_t>(weight.shape[2], 1)) : 1.0;
}

// Forward convolutions: aten::convolution, conv2d, cudnn_convolution, conv_transpose2d, ...
// `param` is 1 for the ops that are transposed by name.
OpCost conv_forward(const OpContext& c, double param) {
  const TensorMeta* input = tensor_arg(c, "input");
  if (input == nullptr) input = tensor_arg(c, "self");  // cudnn_convolution names it self
  const TensorMeta* weight = tensor_arg(c, "weight");
  if (input == nullptr || weight == nullptr) return OpCost{};
  const TensorMeta* out = main_output(c);
  const bool transposed = is_transposed(c, param);
  double out_elements = 0;
  if (out != nullptr) {
    out_elements = numel(*out);
  } else if (!transposed) {
    out_elements = computed_output_elements(c, *input, *weight);
  }
  const double flops = conv_flops(transposed ? numel(*input) : out_elements, *weight);
  const double written =
      out != nullptr ? output_bytes(c) : out_elements * static_cast<double>(element_size(*input));
  // Convolution libraries add the bias in a second kernel.
  const int kernels = tensor_arg(c, "bias") != nullptr ? 2 : 1;
  const double share = transposed ? 1.0 : input_read_share(c, *input, *weight);
  const double read =
      input_bytes(c) + (depthwise_rereads(c, *weight) - 2.0 + share) * footprint_bytes(*input);
  return make_cost(OpClass::Conv, flops, read, written, matrix_precision(c, input), kernels);
}

// convolution_backward: one data-gradient and one weight-gradient convolution (each the size
// of the forward pass) and one bias-gradient reduction, each run only when output_mask asks.
// Bytes are each pass's compulsory traffic, summed: each pass is its own kernel and reads
// grad_output again (a depthwise pass once per kernel row: depthwise_rereads).
OpCost conv_backward(const OpContext& c, double) {
  const TensorMeta* grad_out = tensor_arg(c, "grad_output");
  const TensorMeta* input = tensor_arg(c, "input");
  const TensorMeta* weight = tensor_arg(c, "weight");
  if (grad_out == nullptr || input == nullptr || weight == nullptr) return OpCost{};
  const double pass_flops =
      conv_flops(is_transposed(c, 0) ? numel(*input) : numel(*grad_out), *weight);
  const double esize = static_cast<double>(element_size(*grad_out));
  const double go_bytes = footprint_bytes(*grad_out);
  double flops = 0, read = 0, written = 0;
  int kernels = 0;
  const double rereads = depthwise_rereads(c, *weight);
  if (mask_bit(c, "output_mask", 0)) {  // grad_input = conv_transpose(grad_output, weight)
    flops += pass_flops;
    read += rereads * go_bytes + footprint_bytes(*weight);
    written += numel(*input) * esize;
    ++kernels;
  }
  if (mask_bit(c, "output_mask", 1)) {  // grad_weight = conv(input, grad_output)
    flops += pass_flops;
    const double share = is_transposed(c, 0) ? 1.0 : input_read_share(c, *input, *weight);
    read += rereads * (go_bytes + share * footprint_bytes(*input));
    written += numel(*weight) * esize;
    ++kernels;
  }
  if (mask_bit(c, "output_mask", 2)) {  // grad_bias = grad_output summed over all but channels
    flops += numel(*grad_out);
    read += go_bytes;
    const double channels = grad_out->shape.size() > 1 ? grad_out->shape[1] : 1;
    written += channels * esize;
    ++kernels;
  }
  return make_cost(OpClass::Conv, flops, read, written, matrix_precision(c, input), kernels);
}

}  // namespace

void add_conv_rules(RuleTable& t) {
  add_rules(t,
            "convolution _convolution convolution_overrideable _convolution_mode conv1d conv2d "
            "conv3d cudnn_convolution miopen_convolution mkldnn_convolution _slow_conv2d_forward "
            "slow_conv3d_forward thnn_conv2d slow_conv_dilated2d slow_conv_dilated3d "
            "_nnpack_spatial_convolution",
            {conv_forward, 0});
  add_rules(t,
            "conv_transpose1d conv_transpose2d conv_transpose3d cudnn_convolution_transpose "
            "miopen_convolution_transpose slow_conv_transpose2d slow_conv_transpose3d",
            {conv_forward, 1});
  t["convolution_backward"] = {conv_backward};
  t["convolution_backward_overrideable"] = {conv_backward};
}

}  // namespace habitat::op_cost
