// FLOPs and bytes moved by an aten op, from its shapes, dtypes and cost-relevant scalars.
#pragma once

#include <string>

#include "habitat/precision.h"
#include "habitat/trace.h"

namespace habitat {

// Families share a forecasting method and an efficiency.
enum class OpClass {
  Gemm,         // mm, addmm, bmm, baddbmm, matmul, linear and their backward GEMMs
  Conv,         // convolution forward and backward
  Attention,    // scaled_dot_product_attention, flash/efficient attention fwd/bwd
  Elementwise,  // unary/binary point-wise, dropout, activations and their backward
  Reduction,    // sum, mean, max, norms of tensors, ...
  Norm,         // layer/batch/group/rms norm fwd and bwd
  Softmax,      // softmax, log_softmax and backward
  Embedding,    // embedding and embedding_dense_backward
  Copy,         // copy_, to, cat, clone, contiguous, index, gather/scatter
  Optimizer,    // _foreach_* and fused Adam/AdamW/SGD
  Loss,         // cross entropy, nll, mse and their backward
  NoKernel,     // views, metadata, factory ops of no size: no device work
  Unknown,      // not modelled: reported, never counted as zero
};

const char* to_string(OpClass c);

struct OpCost {
  OpClass op_class = OpClass::Unknown;
  double flops = 0;  // floating point operations (a multiply-add counts as 2)
  double bytes_read = 0;
  double bytes_written = 0;
  Precision precision = Precision::Fp32Simt;  // the peak column the work runs at
  int kernels = 0;  // device kernels the op is expected to launch (launch overhead)

  double bytes() const { return bytes_read + bytes_written; }
  // FLOPs per byte moved; 0 when no bytes move.
  double arithmetic_intensity() const;
  bool known() const { return op_class != OpClass::Unknown; }
};

// Cost of the op's own work. Composite ops that decompose into recorded children
// (has_children) should not be costed; the predictor takes their children instead.
// `allow_tf32` selects TF32 for float32 matrix work of every family (GEMM and conv alike).
OpCost estimate_cost(const OpRecord& op, bool allow_tf32 = false);
// The same under the switches the op ran with (op_precision): float32 GEMMs follow the
// matmul switch, convolutions cuDNN's.
OpCost estimate_cost(const OpRecord& op, const PrecisionFlags& flags);

}  // namespace habitat
