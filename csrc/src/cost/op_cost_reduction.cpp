// Reductions and scans. FLOPs = elements(input) * per-input work + elements(output) *
// per-output work (the final divide of a mean, the sqrt of a norm). Bytes: input read once,
// output written once; the output's size comes from the record, or from dim/keepdim when the
// record has none. One kernel: ATen reduces even whole tensors in a single launch.
#include <algorithm>
#include <cmath>
#include <set>

#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

struct ReductionWork {
  std::string_view stem;
  double per_input;
  double per_output;
};

constexpr ReductionWork kReductions[] = {
    {"sum", 1, 0},
    {"nansum", 2, 0},
    {"mean", 1, 1},
    {"nanmean", 2, 1},
    {"amax", 1, 0},
    {"amin", 1, 0},
    {"max", 1, 0},
    {"min", 1, 0},
    {"aminmax", 2, 0},
    {"argmax", 1, 0},
    {"argmin", 1, 0},
    {"prod", 1, 0},
    {"any", 1, 0},
    {"all", 1, 0},
    {"count_nonzero", 1, 0},
    // Welford: delta, mean update, second delta, M2 update; std adds a sqrt per output.
    {"var", 4, 1},
    {"std", 4, 2},
    {"var_mean", 4, 1},
    {"std_mean", 4, 2},
    {"logsumexp", 4, 1},  // max, subtract, exp, add; log per output
};

const ReductionWork* find_reduction(std::string_view stem) {
  for (const auto& r : kReductions) {
    if (r.stem == stem) return &r;
  }
  return nullptr;
}

// Output elements from the dim/keepdim arguments: every listed dimension (all of them when
// dim is absent, None or empty) collapses to one element.
double reduced_elements(const OpContext& c, const TensorMeta& in) {
  const auto dims = ints_arg(c, "dim");
  if (dims.empty()) return 1;
  const auto rank = static_cast<int64_t>(in.shape.size());
  std::set<int64_t> reduced;
  for (int64_t d : dims) reduced.insert(d < 0 ? d + rank : d);
  double n = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced.contains(d)) n *= static_cast<double>(in.shape[d]);
  }
  return n;
}

OpCost reduce(const OpContext& c, double per_input, double per_output) {
  const TensorMeta* in = tensor_arg(c, "self");
  if (in == nullptr) return OpCost{};
  double out_elements = 0;
  double written = 0;
  if (const TensorMeta* out = main_output(c)) {
    out_elements = numel(*out);
    written = output_bytes(c);
  } else {
    out_elements = reduced_elements(c, *in);
    written = out_elements * static_cast<double>(element_size(*in));
  }
  const double flops = numel(*in) * per_input + out_elements * per_output;
  return make_cost(OpClass::Reduction, flops, input_bytes(c), written, simt_precision(op_dtype(c)),
                   1);
}

OpCost table_reduction(const OpContext& c, double) {
  const ReductionWork* r = find_reduction(c.stem);
  return r != nullptr ? reduce(c, r->per_input, r->per_output) : OpCost{};
}

// Vector p-norms: |x|^p accumulated (2 operations per element for p = 1, 2, inf, 0 and 3 for
// a general p), then the p-th root per output (free for p = 1, inf, 0).
OpCost vector_norm(const OpContext& c, double) {
  const double p = number_arg(c, "ord").value_or(number_arg(c, "p").value_or(2.0));
  const bool simple = p == 1 || p == 2 || p == 0 || std::isinf(p);
  const double root = (p == 1 || p == 0 || std::isinf(p)) ? 0 : 1;
  return reduce(c, simple ? 2 : 3, root);
}

// Scans keep the input's shape: one operation per element.
OpCost scan(const OpContext& c, double per_element) {
  const TensorMeta* in = tensor_arg(c, "self");
  if (in == nullptr) return OpCost{};
  const TensorMeta* out = main_output(c);
  const double written = out != nullptr ? output_bytes(c) : footprint_bytes(*in);
  return make_cost(OpClass::Reduction, numel(*in) * per_element, input_bytes(c), written,
                   simt_precision(op_dtype(c)), 1);
}

// topk along a dimension: CUDA's radix select (aten/src/ATen/native/cuda/TensorTopK.cu, 8-bit
// digits) reads the input once per digit of its key (4 passes for 4-byte elements, 2 for 2-byte
// ones) and once more to gather the k values and their int64 indices. A mixture-of-experts
// router's top-2 of 8 expert scores per token is one.
OpCost topk(const OpContext& c, double) {
  const TensorMeta* in = tensor_arg(c, "self");
  if (in == nullptr) return OpCost{};
  const double passes = static_cast<double>(std::max<int64_t>(element_size(*in), 1)) + 1;
  return make_cost(OpClass::Reduction, numel(*in) * passes, input_bytes(c) * passes,
                   output_bytes(c), simt_precision(op_dtype(c)), 1);
}

}  // namespace

void add_reduction_rules(RuleTable& t) {
  for (const auto& r : kReductions) t[std::string(r.stem)] = {table_reduction};
  t["norm"] = {vector_norm};
  t["linalg_vector_norm"] = {vector_norm};
  t["cumsum"] = {scan, 1};
  t["cumprod"] = {scan, 1};
  t["logcumsumexp"] = {scan, 4};
  t["topk"] = {topk};
}

}  // namespace habitat::op_cost
