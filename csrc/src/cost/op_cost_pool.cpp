// Pooling (windowed reductions, class Reduction) and resampling (class Elementwise). The
// backward ops take the forward input only for its shape: it is not counted as read.
#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

// Spatial rank from the op's name (max_pool2d -> 2); 2 when the name has none.
int spatial_rank(std::string_view stem) {
  for (int r = 1; r <= 3; ++r) {
    if (stem.find(std::to_string(r) + "d") != std::string_view::npos) return r;
  }
  return 2;
}

// Input elements one pooling window reads: kernel_size may give one size for all dimensions.
// CUDA's pooling kernels clip each window to the input (aten/src/ATen/native/cuda/
// AveragePool2d.cu: hend = min(hend, height)), so a dimension reads at most the input's extent
// along it: Hugging Face's EfficientNet pools its 7x7 map with AvgPool2d(1280, ceil_mode=True).
double window(const OpContext& c) {
  const auto k = ints_arg(c, "kernel_size");
  if (k.empty()) return 1;
  const TensorMeta* self = tensor_arg(c, "self");
  const int rank = spatial_rank(c.stem);
  double w = 1;
  for (int d = 0; d < rank; ++d) {
    auto taps = k.size() == 1 ? k[0] : k[std::min<std::size_t>(d, k.size() - 1)];
    if (self != nullptr && self->shape.size() >= static_cast<std::size_t>(rank)) {
      taps = std::min(taps, self->shape[self->shape.size() - rank + d]);
    }
    w *= static_cast<double>(std::max<int64_t>(taps, 1));
  }
  return w;
}

// max/avg pool forward: one compare or add per window element per output.
OpCost pool(const OpContext& c, double) {
  const TensorMeta* out = main_output(c);
  if (out == nullptr) return OpCost{};
  return streaming_cost(c, OpClass::Reduction, numel(*out) * window(c));
}

// Pool backward: each output gradient goes back to its window (max: to the recorded index).
OpCost pool_backward(const OpContext& c, double) {
  const TensorMeta* grad = tensor_arg(c, "grad_output");
  if (grad == nullptr) return OpCost{};
  const bool max_pool = c.stem.find("max") != std::string_view::npos;
  const double flops = numel(*grad) * (max_pool ? 1 : window(c));
  OpCost cost = make_cost(OpClass::Reduction, flops, input_bytes_without(c, "self"),
                          output_bytes(c), simt_precision(grad->dtype), 1);
  // CUDA's max-pool backward (DilatedMaxPool{2,3}d.cu) zero-fills the input gradient before
  // its kernel writes it: a fill kernel and a second write. (The CPU records the fill as a
  // child; the parent's estimate, which stands for it, must hold it.)
  if (max_pool && cost.kernels > 0) {
    cost.bytes_written *= 2;
    cost.kernels = 2;
  }
  return cost;
}

// Adaptive pooling: every input element joins about one window.
OpCost adaptive_pool(const OpContext& c, double) {
  const TensorMeta* self = tensor_arg(c, "self");
  if (self == nullptr) return OpCost{};
  return streaming_cost(c, OpClass::Reduction, numel(*self));
}

OpCost adaptive_pool_backward(const OpContext& c, double) {
  const TensorMeta* out = main_output(c);
  if (out == nullptr) return OpCost{};
  return make_cost(OpClass::Reduction, numel(*out), input_bytes_without(c, "self"), output_bytes(c),
                   simt_precision(out->dtype), 1);
}

// Interpolation: `param` FLOPs per output element (taps multiplied and summed: linear 3,
// bilinear 7, trilinear 15, bicubic 31; nearest 0).
OpCost upsample(const OpContext& c, double per_element) {
  const TensorMeta* out = main_output(c);
  if (out == nullptr) return OpCost{};
  return streaming_cost(c, OpClass::Elementwise, numel(*out) * per_element);
}

// Interpolation backward accumulates each output gradient into its taps: after a zero-fill
// for the weighted modes (atomics), directly for nearest.
OpCost upsample_backward(const OpContext& c, double per_element) {
  const TensorMeta* grad = tensor_arg(c, "grad_output");
  if (grad == nullptr) return OpCost{};
  return make_cost(OpClass::Elementwise, numel(*grad) * std::max(per_element, 1.0), input_bytes(c),
                   output_bytes(c), simt_precision(grad->dtype), per_element > 0 ? 2 : 1);
}

}  // namespace

void add_pool_rules(RuleTable& t) {
  add_rules(t,
            "max_pool1d max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices "
            "avg_pool1d avg_pool2d avg_pool3d",
            {pool});
  add_rules(t,
            "max_pool2d_with_indices_backward max_pool3d_with_indices_backward "
            "avg_pool2d_backward avg_pool3d_backward",
            {pool_backward});
  add_rules(t,
            "adaptive_avg_pool1d adaptive_avg_pool2d _adaptive_avg_pool2d adaptive_avg_pool3d "
            "_adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d",
            {adaptive_pool});
  add_rules(t,
            "_adaptive_avg_pool2d_backward _adaptive_avg_pool3d_backward "
            "adaptive_max_pool2d_backward adaptive_max_pool3d_backward",
            {adaptive_pool_backward});
  add_rules(t,
            "upsample_nearest1d upsample_nearest2d upsample_nearest3d _upsample_nearest_exact1d "
            "_upsample_nearest_exact2d _upsample_nearest_exact3d",
            {upsample, 0});
  add_rules(t,
            "upsample_nearest1d_backward upsample_nearest2d_backward upsample_nearest3d_backward "
            "_upsample_nearest_exact1d_backward _upsample_nearest_exact2d_backward "
            "_upsample_nearest_exact3d_backward",
            {upsample_backward, 0});
  t["upsample_linear1d"] = {upsample, 3};
  t["upsample_bilinear2d"] = {upsample, 7};
  t["upsample_trilinear3d"] = {upsample, 15};
  t["upsample_bicubic2d"] = {upsample, 31};
  t["upsample_linear1d_backward"] = {upsample_backward, 3};
  t["upsample_bilinear2d_backward"] = {upsample_backward, 7};
  t["upsample_trilinear3d_backward"] = {upsample_backward, 15};
  t["upsample_bicubic2d_backward"] = {upsample_backward, 31};
}

}  // namespace habitat::op_cost
