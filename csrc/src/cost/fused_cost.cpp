#include "cost/fused_cost.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "habitat/precision.h"
#include "trace/op_args.h"

namespace habitat {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// "8,32" -> {8, 32}; "" -> {} (a 0-d tensor).
std::optional<std::vector<int64_t>> parse_ints(std::string_view s) {
  std::vector<int64_t> out;
  s = trim(s);
  if (s.empty()) return out;
  while (true) {
    const size_t comma = s.find(',');
    const std::string_view item = trim(s.substr(0, comma));
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc{} || end != item.data() + item.size()) return std::nullopt;
    out.push_back(v);
    if (comma == std::string_view::npos) return out;
    s.remove_prefix(comma + 1);
  }
}

std::optional<TensorMeta> parse_buffer(std::string_view s) {
  const size_t open = s.find('[');
  const size_t close = s.find(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  TensorMeta t;
  t.dtype = std::string(trim(s.substr(0, open)));
  if (t.dtype.empty()) return std::nullopt;
  auto shape = parse_ints(s.substr(open + 1, close - open - 1));
  if (!shape) return std::nullopt;
  t.shape = std::move(*shape);
  const std::string_view rest = trim(s.substr(close + 1));
  if (rest.empty()) return t;
  if (rest.front() != '(' || rest.back() != ')') return std::nullopt;
  auto strides = parse_ints(rest.substr(1, rest.size() - 2));
  if (!strides || strides->size() != t.shape.size()) return std::nullopt;
  t.strides = std::move(*strides);
  t.contiguous = false;
  return t;
}

// Bytes of memory the buffer's elements span: a broadcast (stride-0) dimension is read once.
double span_bytes(const TensorMeta& t) {
  const auto size = dtype_size(t.dtype);
  if (!size) return 0;
  if (t.strides.empty()) return static_cast<double>(t.numel()) * *size;
  double span = 1;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] == 0) return 0;
    span += static_cast<double>(t.shape[i] - 1) * static_cast<double>(std::llabs(t.strides[i]));
  }
  // Overlapping strides cannot span more than the elements they address.
  const double elements = std::min(span, static_cast<double>(t.numel()));
  return elements * *size;
}

bool sources_contain(std::string_view sources, std::string_view stem) {
  return sources.find(stem) != std::string_view::npos;
}

}  // namespace

bool is_fused_kernel(const OpRecord& op) { return op.name.starts_with(kFusedKernelNamespace); }

std::optional<std::vector<TensorMeta>> parse_fused_buffers(std::string_view text) {
  std::vector<TensorMeta> out;
  text = trim(text);
  while (!text.empty()) {
    const size_t semi = text.find(';');
    auto t = parse_buffer(trim(text.substr(0, semi)));
    if (!t) return std::nullopt;
    out.push_back(std::move(*t));
    if (semi == std::string_view::npos) break;
    text.remove_prefix(semi + 1);
  }
  return out;
}

std::optional<OpCost> fused_kernel_cost(const OpRecord& op, bool allow_tf32) {
  if (!is_fused_kernel(op)) return std::nullopt;
  OpCost cost;  // Unknown until the record proves readable
  const std::string* kind = op_args::text(op.args, "kind");
  const std::string* reads = op_args::text(op.args, "reads");
  const std::string* writes = op_args::text(op.args, "writes");
  if (kind == nullptr || reads == nullptr || writes == nullptr || *kind == "unknown") return cost;
  const auto read = parse_fused_buffers(*reads);
  const auto written = parse_fused_buffers(*writes);
  if (!read || !written) return cost;

  for (const auto& t : *read) cost.bytes_read += span_bytes(t);
  for (const auto& t : *written) cost.bytes_written += span_bytes(t);
  cost.flops = op_args::number(op.args, "flops").value_or(0);
  const std::string& dtype = !written->empty() ? written->front().dtype.str()
                             : !read->empty()  ? read->front().dtype.str()
                                               : std::string();
  const std::string* sources = op_args::text(op.args, "sources");
  const std::string_view src = sources != nullptr ? std::string_view(*sources) : "";
  if (*kind == "template") {
    cost.op_class = sources_contain(src, "convolution") ? OpClass::Conv : OpClass::Gemm;
    cost.precision = matmul_precision(dtype, allow_tf32);
  } else {
    cost.op_class = *kind == "reduction" ? OpClass::Reduction : OpClass::Elementwise;
    cost.precision =
        dtype == "float64" || dtype == "complex128" ? Precision::Fp64 : Precision::Fp32Simt;
  }
  cost.kernels = cost.bytes() > 0 || cost.flops > 0 ? 1 : 0;
  return cost;
}

}  // namespace habitat
