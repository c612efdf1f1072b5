// Argument lookups and the compulsory-traffic accounting every cost rule shares.
#include <algorithm>
#include <set>
#include <span>
#include <tuple>

#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

using Kind = ArgValue::Kind;

bool is_tensor_kind(Kind k) { return k == Kind::Tensor || k == Kind::TensorList; }

// Two metas name the same memory when they view the same storage the same way. Storage 0
// means "unknown": such tensors are never merged.
using ViewKey =
    std::tuple<uint64_t, int64_t, std::vector<int64_t>, std::vector<int64_t>, std::string>;

ViewKey view_key(const TensorMeta& t) {
  return {t.storage, t.storage_offset, t.shape, t.strides, t.dtype};
}

}  // namespace

void add_rules(RuleTable& table, std::string_view stems, OpRule rule) {
  for_each_stem(stems, [&](std::string_view stem) { table[std::string(stem)] = rule; });
}

bool mask_bit(const OpContext& c, const std::string& name, std::size_t i) {
  const auto bits = ints_arg(c, name);
  return i >= bits.size() || bits[i] != 0;
}

double numel(const TensorMeta& t) { return static_cast<double>(t.numel()); }

double numel(std::span<const int64_t> shape) {
  double n = 1;
  for (int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

int64_t element_size(const TensorMeta& t) { return dtype_size(t.dtype).value_or(0); }

double footprint_bytes(const TensorMeta& t) {
  if (!t.defined) return 0;
  if (t.strides.size() != t.shape.size()) return static_cast<double>(t.nbytes());
  double n = 1;
  for (std::size_t d = 0; d < t.shape.size(); ++d) {
    // An expanded (stride-0) dimension re-reads the same elements.
    if (t.strides[d] != 0 || t.shape[d] == 0) n *= static_cast<double>(t.shape[d]);
  }
  return n * static_cast<double>(element_size(t));
}

std::vector<const TensorMeta*> input_tensors(const OpContext& c) {
  std::vector<const TensorMeta*> out;
  std::set<ViewKey> seen;
  for (std::size_t i = 0; i < c.n_inputs(); ++i) {
    const ArgValue& v = c.op.args[i].value;
    if (!is_tensor_kind(v.kind)) continue;
    for (const auto& t : v.tensors) {
      if (!t.defined) continue;
      if (t.storage != 0 && !seen.insert(view_key(t)).second) continue;
      out.push_back(&t);
    }
  }
  return out;
}

double input_bytes(const OpContext& c, bool skip_self) {
  return skip_self ? input_bytes_without(c, "self") : input_bytes_without(c, "");
}

double input_bytes_without(const OpContext& c, const std::string& name) {
  std::set<const TensorMeta*> skipped;
  for (const auto* t : tensor_list_arg(c, name)) skipped.insert(t);
  double bytes = 0;
  for (const auto* t : input_tensors(c)) {
    if (!skipped.contains(t)) bytes += footprint_bytes(*t);
  }
  return bytes;
}

std::vector<const TensorMeta*> written_tensors(const OpContext& c) {
  std::vector<const TensorMeta*> out;
  for (const auto& t : c.op.outputs) {
    if (t.defined) out.push_back(&t);
  }
  if (!out.empty()) return out;
  if (c.out_variant) {
    for (std::size_t i = c.n_inputs(); i < c.op.args.size(); ++i) {
      for (const auto& t : c.op.args[i].value.tensors) {
        if (t.defined) out.push_back(&t);
      }
    }
  } else if (c.in_place) {
    out = tensor_list_arg(c, "self");
  }
  return out;
}

double output_bytes(const OpContext& c) {
  double bytes = 0;
  for (const auto* t : written_tensors(c)) bytes += footprint_bytes(*t);
  return bytes;
}

const TensorMeta* main_output(const OpContext& c) {
  const auto written = written_tensors(c);
  return written.empty() ? nullptr : written.front();
}

Precision simt_precision(std::string_view dtype) {
  if (dtype.starts_with("torch.")) dtype.remove_prefix(6);
  const bool fp64 = dtype == "float64" || dtype == "double" || dtype == "complex128";
  return fp64 ? Precision::Fp64 : Precision::Fp32Simt;
}

MatrixFamily matrix_family(std::string_view stem) {
  // Every convolution stem (conv2d, convolution_backward, cudnn_convolution_transpose,
  // slow_conv_dilated2d, _nnpack_spatial_convolution, ...) names it; cuDNN runs them all.
  if (stem.find("conv") != std::string_view::npos) return MatrixFamily::Conv;
  if (stem.find("attention") != std::string_view::npos ||
      stem.find("_sdp") != std::string_view::npos) {
    return MatrixFamily::Attention;
  }
  return MatrixFamily::Matmul;
}

Precision matrix_precision(const OpContext& c, const TensorMeta* operand) {
  return matmul_precision(operand != nullptr ? operand->dtype.str() : op_dtype(c),
                          matrix_family(c.stem), c.flags);
}

OpCost with_complex_arithmetic(const OpContext& c, OpCost cost) {
  const bool matrix = cost.op_class == OpClass::Gemm || cost.op_class == OpClass::Conv ||
                      cost.op_class == OpClass::Attention;
  if (!matrix) return cost;
  const auto inputs = input_tensors(c);
  const bool complex = std::any_of(inputs.begin(), inputs.end(),
                                   [](const TensorMeta* t) { return is_complex(t->dtype); });
  if (complex) cost.flops *= 4;
  return cost;
}

std::string op_dtype(const OpContext& c) {
  if (const auto* out = main_output(c); out != nullptr && is_floating(out->dtype)) {
    return out->dtype;
  }
  const auto inputs = input_tensors(c);
  for (const auto* t : inputs) {
    if (is_floating(t->dtype)) return t->dtype;
  }
  return inputs.empty() ? std::string("float32") : inputs.front()->dtype.str();
}

OpCost make_cost(OpClass cls, double flops, double read, double written, Precision p, int kernels) {
  OpCost cost;
  cost.op_class = cls;
  cost.flops = flops;
  cost.bytes_read = read;
  cost.bytes_written = written;
  cost.precision = p;
  cost.kernels = (flops > 0 || read > 0 || written > 0) ? kernels : 0;
  return cost;
}

OpCost streaming_cost(const OpContext& c, OpClass cls, double flops, int kernels) {
  return make_cost(cls, flops, input_bytes(c), output_bytes(c), simt_precision(op_dtype(c)),
                   kernels);
}

OpCost no_kernel_cost() {
  OpCost cost;
  cost.op_class = OpClass::NoKernel;
  return cost;
}

}  // namespace habitat::op_cost
