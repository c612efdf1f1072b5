#include "learned/attention_variants.h"

#include "trace/op_args.h"

namespace habitat {
namespace {

struct VariantFactors {
  double dropout;
  double mask;
};

// Device time with training's attention dropout (p = 0.1) or transformers' additive padding
// mask over the plain call's, medians over the H200's encoder shapes (2026-11-28: 6 shapes of
// 128-577 tokens, heads of 64; bf16 and fp16 pooled as 16-bit), per backend, precision and
// pass: benchmarks/accuracy/sdpa_variants_fit.py, benchmarks/results/sdpa-variants-fit.txt.
// Each is within 15 % of its median over the shapes but cuDNN's 16-bit mask forward
// (1.32-2.83, highest where the length is not a multiple of 64). Flash takes no mask (PyTorch
// runs a masked call on another backend). Dropout with a mask: the product (not measured).
VariantFactors factors(double backend, bool fp32, bool backward) {
  if (fp32) return backward ? VariantFactors{1.16, 1.04} : VariantFactors{1.30, 1.14};
  if (backend == 2) return backward ? VariantFactors{1.20, 1.40} : VariantFactors{2.02, 1.58};
  if (backend == 1) return backward ? VariantFactors{1.40, 1.08} : VariantFactors{1.81, 1.41};
  return backward ? VariantFactors{1.08, 1.0} : VariantFactors{1.20, 1.0};  // flash
}

}  // namespace

double attention_variant_scale(const OpRecord& op, double backend, bool backward, bool fp32) {
  const double p = op_args::number(op.args, "dropout_p").value_or(0.0);
  const bool masked = op_args::first_tensor(op.args, {"attn_mask", "attn_bias", "bias"}) != nullptr;
  if (!(p > 0.0) && !masked) return 1.0;
  const VariantFactors f = factors(backend, fp32, backward);
  return (p > 0.0 ? f.dropout : 1.0) * (masked ? f.mask : 1.0);
}

}  // namespace habitat
