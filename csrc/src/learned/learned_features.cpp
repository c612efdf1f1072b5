#include "habitat/learned_features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "cost/attention_problem.h"

namespace habitat {
namespace {

// Constants shared with features.py.
constexpr double kSoftmaxFlopsPerElement = 5.0;
constexpr double kSoftmaxBackwardMulPasses = 3.0;
constexpr double kLayerNormFlopsPerElement = 8.0;
constexpr double kLayerNormVector = 4.0;
constexpr double kTranscendentalFlops = 16.0;
constexpr double kElementwiseBlockElements = 512.0;
constexpr double kMiB = 1048576.0;
constexpr double kMaxAlignBytes = 16.0;

// Fused attention (features.py): the backward is 2.5x the forward's matrix work; query rows per
// block; keys per tile (a length pays for its whole last tile: log2_tile_waste).
constexpr double kAttentionBackwardFlops = 2.5;
constexpr double kAttentionBlockRows = 128.0;
constexpr double kAttentionKeyTile = 64.0;

// The l x s score matrix rounded up to whole tiles (query blocks by key tiles) over l x s; 1
// when empty (features.py tile_waste).
double tile_waste(double l, double s) {
  if (!(l > 0 && s > 0)) return 1.0;
  const double padded = std::ceil(l / kAttentionBlockRows) * kAttentionBlockRows *
                        std::ceil(s / kAttentionKeyTile) * kAttentionKeyTile;
  return padded / std::max(l * s, 1.0);
}

constexpr double kReductionFlopsPerElement = 1.0;
constexpr double kBatchNormFlopsPerElement = 8.0;

constexpr std::array<std::pair<LearnedFamily, std::string_view>, 8> kNames{{
    {LearnedFamily::Gemm, "gemm"},
    {LearnedFamily::Conv, "conv"},
    {LearnedFamily::Elementwise, "elementwise"},
    {LearnedFamily::Softmax, "softmax"},
    {LearnedFamily::LayerNorm, "layernorm"},
    {LearnedFamily::Attention, "attention"},
    {LearnedFamily::Reduction, "reduction"},
    {LearnedFamily::BatchNorm, "batchnorm"},
}};

double log2c(double x) { return std::log2(std::max(x, 1e-30)); }

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Empty: the device enters only through op-relative quantities (see features.py).
const std::vector<std::string> kDeviceFeatures{};
const std::vector<std::string> kGemmCore{
    "log2_t_compute_us", "log2_t_memory_us",  "log2_intensity_over_ridge",
    "log2_waves_64",     "wave_fill_64",      "log2_waves_128",
    "wave_fill_128",     "log2_bytes_over_l2"};

// Precision features of the matrix families (features.py _PRECISION): whether the op's
// precision runs on units of its own on this device, the operand width, and the alignment.
const std::vector<std::string> kPrecisionFeatures{"tensor_path", "log2_elem_bytes", "log2_align"};
// The memory-bound families' operand width and DRAM bandwidth per SM (GB/s; features.py _MEMORY).
const std::vector<std::string> kMemoryFeatures{"log2_elem_bytes", "log2_bandwidth_per_sm"};

bool is_matrix_precision(Precision p) {
  return p == Precision::Tf32Tensor || p == Precision::Fp16Tensor || p == Precision::Bf16Tensor ||
         p == Precision::Fp8Tensor;
}

double tensor_path(const Device& dev, Precision p) {
  if (!is_matrix_precision(p)) return 0.0;
  auto it = dev.peak_tflops.find(p);
  return it != dev.peak_tflops.end() && it->second > 0 ? 1.0 : 0.0;
}

// Largest power of two dividing round(x) (at least 1), capped at kMaxAlignBytes.
double pow2_part(double x) {
  const auto v = static_cast<int64_t>(std::max(std::round(x), 1.0));
  return std::min(static_cast<double>(v & -v), kMaxAlignBytes);
}

double log2_align(double a, double b, double elem_bytes) {
  return std::log2(std::min(pow2_part(a * elem_bytes), pow2_part(b * elem_bytes)));
}

// log2 of the FP32 lanes per SM per clock (64 on Volta, Turing and A100; 128 on Ada, Hopper and
// GA10x, whose second half shares its issue slots) on the FP32 SIMT path, else 0: features.py.
double simt_lanes(const Device& dev, double on_tensor_path) {
  const double per_clock = 2.0 * dev.sms * dev.boost_clock_mhz * 1e6;
  const double peak = dev.peak_flops(Precision::Fp32Simt);
  if (on_tensor_path > 0 || per_clock <= 0 || peak <= 0) return 0.0;
  return std::log2(peak / per_clock);
}

struct Roof {
  double peak;       // FLOP/s for the precision
  double bandwidth;  // bytes/s
};

// The roofline/wave block shared by gemm and conv; appends features, returns roofline us.
double gemm_core(double b, double m, double n, double flops, double bytes, const Device& dev,
                 const Roof& roof, std::vector<double>& out) {
  const double t_c = flops / roof.peak * 1e6;
  const double t_m = bytes / roof.bandwidth * 1e6;
  const double ridge = roof.peak / roof.bandwidth;
  out.push_back(log2c(t_c));
  out.push_back(log2c(t_m));
  out.push_back(log2c(flops / bytes / ridge));
  const double sms = dev.sms;
  for (double tile : {64.0, 128.0}) {
    const double blocks = b * std::ceil(m / tile) * std::ceil(n / tile);
    const double waves = std::ceil(blocks / sms);
    out.push_back(log2c(blocks / sms));
    out.push_back(blocks / (waves * sms));
  }
  out.push_back(log2c(bytes / (dev.l2_mb * kMiB)));
  return std::max(t_c, t_m);
}

// A shape column by name (compute_learned_features' reader: throws for a missing or
// non-positive one, zero allowed where the flag says).
using Column = std::function<double(const std::string&, bool)>;

double flag(const Column& col, const char* family, const char* name) {
  const double v = col(name, true);
  if (v != 0 && v != 1) {
    throw std::invalid_argument(std::string(family) + " column '" + name + "' must be 0 or 1");
  }
  return v;
}

// The features the row-wise memory-bound families share (features.py): their two sizes, the
// DRAM time, the bytes over L2, the parallel work per SM, the operand width and the bandwidth
// per SM; each family appends its flags.
std::vector<double> memory_bound_features(double a, double b, double t_m, double bytes,
                                          double per_sm, double eb, const Device& dev) {
  return {log2c(a),
          log2c(b),
          log2c(t_m),
          log2c(bytes / (dev.l2_mb * kMiB)),
          log2c(per_sm / dev.sms),
          log2c(eb),
          std::log2(dev.memory_bandwidth_gbs / dev.sms)};
}

// The gemm family (features.py): b batched (m x k) @ (k x n) products.
double gemm_features(const Column& col, double eb, const Device& dev, const Roof& roof,
                     Precision precision, std::vector<double>& x) {
  const double b = col("b", false), m = col("m", false), n = col("n", false), k = col("k", false);
  const double flops = 2.0 * b * m * n * k;
  const double bytes = eb * b * (m * k + k * n + m * n);
  x = {log2c(b), log2c(m), log2c(n), log2c(k)};
  const double roofline_us = gemm_core(b, m, n, flops, bytes, dev, roof, x);
  const double tensor = tensor_path(dev, precision);
  x.insert(x.end(), {tensor, log2c(eb), log2_align(k, n, eb), simt_lanes(dev, tensor)});
  return roofline_us;
}

// The conv family (features.py): a square 2-d convolution as its implicit GEMM, forward or
// either gradient. A grouped one is `groups` independent convolutions of cin / groups -> cout /
// groups channels: its channel, implicit-GEMM and alignment features are one group's, its tiles
// all groups'.
double conv_features(const Column& col, double eb, const Device& dev, const Roof& roof,
                     Precision precision, std::vector<double>& x) {
  const double batch = col("batch", false), cin = col("cin", false), cout = col("cout", false),
               r = col("kernel", false), groups = col("groups", false);
  if (groups < 1 || std::fmod(cin, groups) != 0 || std::fmod(cout, groups) != 0) {
    throw std::invalid_argument(
        "conv column 'groups' must be at least 1 and divide both cin and cout");
  }
  const double size = col("size", false), stride = col("stride", false), pad = col("padding", true);
  const double out_size = conv_output_size(size, pad, r, stride);
  if (!(out_size > 0)) throw std::invalid_argument("conv shape gives an empty output");
  const double cin_g = cin / groups, cout_g = cout / groups;
  const double gm = batch * out_size * out_size, gn = cout_g, gk = cin_g * r * r;
  const double flops = 2.0 * gm * gn * gk * groups;
  const double grad = col("grad", true);
  if (grad != 0 && grad != 1 && grad != 2) {
    throw std::invalid_argument(
        "conv column 'grad' must be 0 (forward), 1 (data gradient) or 2 (weight gradient)");
  }
  const double bytes = eb * conv_tensor_elements(batch, cin, cout, r,
                                                 conv_input_extent(size, r, stride, out_size, grad),
                                                 out_size, groups);
  x = {log2c(batch), log2c(cin_g), log2c(cout_g), r, stride, log2c(size), log2c(gm), log2c(gk)};
  const double roofline_us = gemm_core(groups, gm, gn, flops, bytes, dev, roof, x);
  x.insert(x.end(), {tensor_path(dev, precision), log2c(eb), log2_align(cin_g, cout_g, eb),
                     grad == 1 ? 1.0 : 0.0, grad == 2 ? 1.0 : 0.0, log2c(groups)});
  return roofline_us;
}

// The elementwise family (features.py): n outputs from `inputs` operands, some transcendental.
double elementwise_features(const Column& col, double eb, const Device& dev, const Roof& roof,
                            double fp32_peak, std::vector<double>& x) {
  const double n = col("n", false), inputs = col("inputs", true),
               trans = col("transcendental", true);
  const double bytes = eb * n * (inputs + 1.0);
  const double flops = n * (1.0 + kTranscendentalFlops * trans);
  const double t_m = bytes / roof.bandwidth * 1e6;
  const double blocks = std::ceil(n / kElementwiseBlockElements);
  x = {log2c(n),
       inputs,
       trans,
       log2c(t_m),
       log2c(bytes / (dev.l2_mb * kMiB)),
       log2c(blocks / dev.sms),
       log2c(eb),
       std::log2(dev.memory_bandwidth_gbs / dev.sms)};
  return std::max(t_m, flops / fp32_peak * 1e6);
}

// The fused attention family (features.py): batch_heads of l queries over s keys of width e.
double attention_features(const Column& col, double eb, const Device& dev, const Roof& roof,
                          Precision precision, std::vector<double>& x) {
  const double bh = col("batch_heads", false), l = col("l", false), sk = col("s", false),
               e = col("e", false);
  const double causal = col("causal", true), backward = col("backward", true);
  if ((causal != 0 && causal != 1) || (backward != 0 && backward != 1)) {
    throw std::invalid_argument("attention columns 'causal' and 'backward' must be 0 or 1");
  }
  const double backend = col("backend", true);
  if (backend != 0 && backend != 1 && backend != 2) {
    throw std::invalid_argument(
        "attention column 'backend' must be 0 (flash), 1 (memory-efficient) or 2 (cuDNN)");
  }
  const double scale = (causal > 0 ? op_cost::causal_share(l, sk) : 1.0) *
                       (backward > 0 ? kAttentionBackwardFlops : 1.0);
  const double flops = 4.0 * bh * l * sk * e * scale;
  // forward reads Q, K, V, writes O; backward reads Q, K, V, O, dO, writes dQ, dK, dV
  const double bytes = eb * bh * (backward > 0 ? 4.0 : 2.0) * (l + sk) * e;
  const double t_c = flops / roof.peak * 1e6;
  const double t_m = bytes / roof.bandwidth * 1e6;
  const double blocks = bh * std::ceil(l / kAttentionBlockRows);
  const double sms = dev.sms;
  const double waves = std::ceil(blocks / sms);
  x = {log2c(bh),
       log2c(l),
       log2c(sk),
       log2c(e),
       causal,
       backward,
       log2c(t_c),
       log2c(t_m),
       log2c(flops / bytes / (roof.peak / roof.bandwidth)),
       log2c(blocks / sms),
       blocks / (waves * sms),
       tensor_path(dev, precision),
       log2c(eb),
       backend == 1 ? 1.0 : 0.0,
       backend == 2 ? 1.0 : 0.0,
       log2c(tile_waste(l, sk))};
  return std::max(t_c, t_m);
}

// The softmax and layernorm families (features.py): row-wise over cols, forward or backward.
double row_features(const Column& col, bool softmax, double eb, const Device& dev, const Roof& roof,
                    double fp32_peak, std::vector<double>& x) {
  const double rows = col("rows", false), cols = col("cols", false);
  const double backward = flag(col, softmax ? "softmax" : "layernorm", "backward");
  const double log = softmax ? flag(col, "softmax", "log") : 0.0;
  // forward: reads x, writes y; backward: reads y (or x) and dy, writes dx. CUDA's softmax
  // backward first writes dy * y (a mul kernel, three passes; SoftMax.cu
  // softmax_backward_cuda_out), then reads it and y and writes dx; the log-softmax backward is
  // the one kernel.
  double passes = 2.0 + backward;
  if (softmax) passes += kSoftmaxBackwardMulPasses * backward * (1.0 - log);
  double bytes = eb * rows * cols * passes;
  if (!softmax) bytes = bytes + eb * 2.0 * cols;
  const double per = softmax ? kSoftmaxFlopsPerElement : kLayerNormFlopsPerElement;
  const double t_m = bytes / roof.bandwidth * 1e6;
  x = memory_bound_features(rows, cols, t_m, bytes, rows, eb, dev);
  x.push_back(backward);
  if (softmax) x.push_back(log);
  // PyTorch's one-pass vectorized layer-norm kernel needs cols % 4 == 0 (features.py,
  // LAYERNORM_VECTOR); otherwise two scalar kernels run.
  if (!softmax) x.push_back(std::fmod(cols, kLayerNormVector) == 0.0 ? 1.0 : 0.0);
  return std::max(t_m, per * rows * cols * (1.0 + backward) / fp32_peak * 1e6);
}

// The reduction family (features.py): rows outputs of cols inputs each; returns the roofline.
double reduction_features(const Column& col, double eb, const Device& dev, const Roof& roof,
                          double fp32_peak, std::vector<double>& x) {
  const double rows = col("rows", false), cols = col("cols", false);
  const double strided = flag(col, "reduction", "strided");
  // reads the input once, writes one element per row
  const double bytes = eb * rows * (cols + 1.0);
  const double t_m = bytes / roof.bandwidth * 1e6;
  x = memory_bound_features(rows, cols, t_m, bytes, rows, eb, dev);
  x.push_back(strided);
  return std::max(t_m, kReductionFlopsPerElement * rows * cols / fp32_peak * 1e6);
}

// The batchnorm family (features.py): training mode, per channel over count elements.
double batch_norm_features(const Column& col, double eb, const Device& dev, const Roof& roof,
                           double fp32_peak, std::vector<double>& x) {
  const double count = col("count", false), channels = col("channels", false);
  const double backward = flag(col, "batchnorm", "backward");
  const double cl = flag(col, "batchnorm", "channels_last");
  // forward: reads x, writes y; backward: reads x and dy, writes dx (the statistics and the
  // fp32 parameters are per channel: negligible)
  const double elements = count * channels;
  const double bytes = eb * elements * (2.0 + backward);
  const double t_m = bytes / roof.bandwidth * 1e6;
  x = memory_bound_features(count, channels, t_m, bytes, channels, eb, dev);
  x.insert(x.end(), {backward, cl});
  return std::max(t_m, kBatchNormFlopsPerElement * elements * (1.0 + backward) / fp32_peak * 1e6);
}

}  // namespace

std::string_view to_string(LearnedFamily f) {
  for (const auto& [v, n] : kNames) {
    if (v == f) return n;
  }
  return "gemm";
}

std::optional<LearnedFamily> learned_family_from_string(std::string_view name) {
  for (const auto& [v, n] : kNames) {
    if (n == name) return v;
  }
  return std::nullopt;
}

const std::vector<std::string>& shape_columns(LearnedFamily f) {
  static const std::map<LearnedFamily, std::vector<std::string>> columns{
      {LearnedFamily::Gemm, {"b", "m", "n", "k", "elem_bytes"}},
      {LearnedFamily::Conv,
       {"batch", "cin", "cout", "kernel", "size", "stride", "padding", "elem_bytes", "grad",
        "groups"}},
      {LearnedFamily::Elementwise, {"n", "inputs", "transcendental", "elem_bytes"}},
      {LearnedFamily::Softmax, {"rows", "cols", "elem_bytes", "backward", "log"}},
      {LearnedFamily::LayerNorm, {"rows", "cols", "elem_bytes", "backward"}},
      {LearnedFamily::Attention,
       {"batch_heads", "l", "s", "e", "causal", "backward", "elem_bytes", "backend"}},
      {LearnedFamily::Reduction, {"rows", "cols", "elem_bytes", "strided"}},
      {LearnedFamily::BatchNorm, {"count", "channels", "elem_bytes", "backward", "channels_last"}},
  };
  return columns.at(f);
}

std::optional<double> optional_column_default(LearnedFamily f, std::string_view name) {
  // A softmax shape without `log` is a softmax's, not a log-softmax's; a conv one without
  // `groups` is ungrouped.
  if (f == LearnedFamily::Softmax && name == "log") return 0.0;
  if (f == LearnedFamily::Conv && name == "groups") return 1.0;
  return std::nullopt;
}

const std::vector<std::string>& feature_names(LearnedFamily f) {
  static const std::vector<std::string> row_features = concat(
      concat(
          {"log2_rows", "log2_cols", "log2_t_memory_us", "log2_bytes_over_l2", "log2_rows_per_sm"},
          kMemoryFeatures),
      {"backward"});
  static const std::map<LearnedFamily, std::vector<std::string>> names{
      {LearnedFamily::Gemm,
       concat(concat(concat(concat({"log2_b", "log2_m", "log2_n", "log2_k"}, kGemmCore),
                            kPrecisionFeatures),
                     {"simt_lanes"}),
              kDeviceFeatures)},
      {LearnedFamily::Conv,
       concat(concat(concat(concat({"log2_batch", "log2_cin", "log2_cout", "kernel", "stride",
                                    "log2_size", "log2_gemm_m", "log2_gemm_k"},
                                   kGemmCore),
                            kPrecisionFeatures),
                     {"grad_data", "grad_weight", "log2_groups"}),
              kDeviceFeatures)},
      {LearnedFamily::Elementwise,
       concat(concat({"log2_n", "inputs", "transcendental", "log2_t_memory_us",
                      "log2_bytes_over_l2", "log2_blocks_per_sm"},
                     kMemoryFeatures),
              kDeviceFeatures)},
      {LearnedFamily::Softmax, concat(concat(row_features, {"log"}), kDeviceFeatures)},
      {LearnedFamily::LayerNorm, concat(concat(row_features, {"vectorized"}), kDeviceFeatures)},
      {LearnedFamily::Attention,
       concat({"log2_bh", "log2_l", "log2_s", "log2_e", "causal", "backward", "log2_t_compute_us",
               "log2_t_memory_us", "log2_intensity_over_ridge", "log2_waves_128", "wave_fill_128",
               "tensor_path", "log2_elem_bytes", "backend_efficient", "backend_cudnn",
               "log2_tile_waste"},
              kDeviceFeatures)},
      {LearnedFamily::Reduction, concat(concat(concat({"log2_rows", "log2_cols", "log2_t_memory_us",
                                                       "log2_bytes_over_l2", "log2_rows_per_sm"},
                                                      kMemoryFeatures),
                                               {"strided"}),
                                        kDeviceFeatures)},
      {LearnedFamily::BatchNorm,
       concat(concat(concat({"log2_count", "log2_channels", "log2_t_memory_us",
                             "log2_bytes_over_l2", "log2_channels_per_sm"},
                            kMemoryFeatures),
                     {"backward", "channels_last"}),
              kDeviceFeatures)},
  };
  return names.at(f);
}

LearnedFeatures compute_learned_features(LearnedFamily f, const LearnedShape& shape,
                                         const Device& dev, Precision precision) {
  auto col = [&](const std::string& name, bool allow_zero = false) {
    if (!shape.contains(name)) {
      if (const auto fallback = optional_column_default(f, name)) return *fallback;
    }
    auto it = shape.find(name);
    if (it == shape.end()) {
      throw std::invalid_argument(std::string(to_string(f)) + " shape lacks column '" + name + "'");
    }
    if (!(it->second > 0) && !(allow_zero && it->second == 0)) {
      throw std::invalid_argument(std::string(to_string(f)) + " shape column '" + name +
                                  "' must be positive");
    }
    return it->second;
  };
  if (dev.sms <= 0 || dev.memory_bandwidth_gbs <= 0 || dev.l2_mb <= 0) {
    throw std::invalid_argument("device " + dev.name + " lacks SMs, bandwidth or L2 size");
  }
  const Roof roof{dev.peak_flops(precision), dev.memory_bandwidth_gbs * 1e9};
  const double fp32_peak = dev.peak_flops(Precision::Fp32Simt);
  const double eb = col("elem_bytes");
  LearnedFeatures out;
  auto& x = out.values;
  switch (f) {
    case LearnedFamily::Gemm:
      out.roofline_us = gemm_features(col, eb, dev, roof, precision, x);
      break;
    case LearnedFamily::Conv:
      out.roofline_us = conv_features(col, eb, dev, roof, precision, x);
      break;
    case LearnedFamily::Elementwise:
      out.roofline_us = elementwise_features(col, eb, dev, roof, fp32_peak, x);
      break;
    case LearnedFamily::Attention:
      out.roofline_us = attention_features(col, eb, dev, roof, precision, x);
      break;
    case LearnedFamily::Reduction:
      out.roofline_us = reduction_features(col, eb, dev, roof, fp32_peak, x);
      break;
    case LearnedFamily::BatchNorm:
      out.roofline_us = batch_norm_features(col, eb, dev, roof, fp32_peak, x);
      break;
    case LearnedFamily::Softmax:
    case LearnedFamily::LayerNorm:
      out.roofline_us = row_features(col, f == LearnedFamily::Softmax, eb, dev, roof, fp32_peak, x);
      break;
  }
  return out;
}

}  // namespace habitat
