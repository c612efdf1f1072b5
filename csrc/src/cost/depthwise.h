// A depthwise convolution: 4-D, one input channel per group, as many groups as input channels.
// PyTorch runs it on its own kernels (aten/src/ATen/native/cuda/DepthwiseConv2d.cu) unless
// cuDNN's depthwise path applies, nothing like the convolutions the conv model learned. The one
// test behind the cost model's traffic (op_cost_conv.cpp), the learned conv parts, which leave it
// to the roofline (learned/learned_model.cpp), and the measured-roofline table's name for it
// (learned/roofline_table.cpp), so the three cannot disagree about which convolutions are.
#pragma once

#include <string>

#include "habitat/trace.h"
#include "trace/op_args.h"

namespace habitat::op_cost {

inline bool is_depthwise_conv(const OpRecord& op) {
  // "self": cudnn_convolution and mkldnn_convolution name their input so.
  const TensorMeta* x = op_args::first_tensor(op.args, {"input", "self"});
  const TensorMeta* w = op_args::first_tensor(op.args, {"weight"});
  if (x == nullptr || w == nullptr || x->shape.size() != 4 || w->shape.size() != 4) return false;
  const int64_t groups = op_args::first_int(op.args, "groups", 1);
  return groups > 1 && w->shape[1] == 1 && x->shape[1] == groups;
}

// "k<kernel>s<stride>" of a depthwise convolution (is_depthwise_conv): at the same traffic, its
// kernels' time follows the filter size and stride (H100 and H200 rows: 3x3 stride-1 forwards
// move 0.7-0.8 TB/s, 7x7 ones 0.21-0.25), so the measured-roofline table keys it by them too.
inline std::string depthwise_variant(const OpRecord& op) {
  const TensorMeta* w = op_args::first_tensor(op.args, {"weight"});
  const int64_t kernel = w != nullptr && w->shape.size() == 4 ? w->shape[2] : 0;
  return "k" + std::to_string(kernel) + "s" +
         std::to_string(op_args::first_int(op.args, "stride", 1));
}

}  // namespace habitat::op_cost
