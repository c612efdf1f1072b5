// A depthwise convolution: 4-D, one input channel per group, as many groups as input channels.
// PyTorch runs it on its own kernels (aten/src/ATen/native/cuda/DepthwiseConv2d.cu) unless
// cuDNN's depthwise path applies, nothing like the convolutions the conv model learned. The one
// test behind the cost model's traffic (op_cost_conv.cpp), the learned conv parts, which leave it
// to the roofline (learned/learned_model.cpp), and the measured-roofline table's name for it
// (learned/roofline_table.cpp), so the three cannot disagree about which convolutions are.
#pragma once

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

}  // namespace habitat::op_cost
