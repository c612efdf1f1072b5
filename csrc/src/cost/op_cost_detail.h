// Shared vocabulary of the per-family cost rules (op_cost_*.cpp); not part of the engine's API.
// docs/op-cost-model.md lists every op, its class and its formulas.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "habitat/op_cost.h"
#include "trace/op_args.h"

namespace habitat::op_cost {

// One op call as the rules see it: the record plus what its name says about it.
struct OpContext {
  const OpRecord& op;
  std::string_view stem;     // "add" for aten::add, aten::add_ and aten::add.out
  bool in_place = false;     // aten::add_: self is read and written
  bool out_variant = false;  // aten::add.out: the trailing out= arguments are written, not read
  std::size_t n_outs = 0;    // how many trailing schema arguments are out= arguments
  bool allow_tf32 = false;   // the matmul switch (kept for rules written before `flags`)
  PrecisionFlags flags{};    // every precision switch in force when the op ran

  // Schema arguments that are inputs (out= arguments excluded).
  std::size_t n_inputs() const { return op.args.size() - n_outs; }
  op_args::Args inputs() const { return op_args::Args(op.args).first(n_inputs()); }
};

// The context of an aten:: op (its stem, in-place and out= forms); nullopt for other
// namespaces.
std::optional<OpContext> aten_context(const OpRecord& op, const PrecisionFlags& flags);

// A rule turns an op call into its cost; `param` carries a per-op constant (FLOPs per
// element for point-wise ops, the transposed flag for conv_transpose, ...).
struct OpRule {
  OpCost (*cost)(const OpContext&, double param);
  double param = 0;
};

// Keys are "stem" or "stem.overload"; the overload-specific key wins.
using RuleTable = std::unordered_map<std::string, OpRule>;

// Calls visit(stem) for each stem in a space-separated list.
template <typename Visit>
void for_each_stem(std::string_view stems, Visit&& visit) {
  while (!stems.empty()) {
    const std::size_t end = std::min(stems.find(' '), stems.size());
    if (end > 0) visit(stems.substr(0, end));
    stems.remove_prefix(std::min(end + 1, stems.size()));
  }
}

// Registers `rule` for each stem in a space-separated list.
void add_rules(RuleTable& table, std::string_view stems, OpRule rule);

void add_gemm_rules(RuleTable& table);
void add_conv_rules(RuleTable& table);
void add_attention_rules(RuleTable& table);
void add_norm_rules(RuleTable& table);       // norms and softmax
void add_pointwise_rules(RuleTable& table);  // element-wise, dropout, factories
void add_reduction_rules(RuleTable& table);
void add_pool_rules(RuleTable& table);    // pooling and resampling
void add_memory_rules(RuleTable& table);  // copies, gathers/scatters, embedding, views
void add_optimizer_rules(RuleTable& table);
void add_loss_rules(RuleTable& table);

// FLOPs per output element of a point-wise op stem ("add", "gelu_backward", ...), shared
// with the _foreach_* rules; nullopt when the stem is not a point-wise op.
std::optional<double> pointwise_flops_per_element(std::string_view stem);

// --- arguments (trace/op_args.h over the input arguments) -----------------------------

inline const ArgValue* arg(const OpContext& c, std::string_view name) {
  return op_args::find(c.inputs(), name);
}
// The defined tensor of a Tensor argument, or nullptr (absent, None or undefined).
inline const TensorMeta* tensor_arg(const OpContext& c, std::string_view name) {
  return op_args::tensor(c.inputs(), name);
}
// The defined tensors of a Tensor[] argument (empty when absent).
inline std::vector<const TensorMeta*> tensor_list_arg(const OpContext& c, std::string_view name) {
  return op_args::tensor_list(c.inputs(), name);
}
// A Scalar/int/float argument (arrives as Int or Double); nullopt when absent or None.
inline std::optional<double> number_arg(const OpContext& c, std::string_view name) {
  return op_args::number(c.inputs(), name);
}
inline bool bool_arg(const OpContext& c, std::string_view name, bool fallback) {
  return op_args::boolean(c.inputs(), name, fallback);
}
// Int or IntList argument as a list; empty when absent or None.
inline std::vector<int64_t> ints_arg(const OpContext& c, std::string_view name) {
  return op_args::ints(c.inputs(), name);
}
// A bool[N] output_mask; missing entries read as true.
bool mask_bit(const OpContext& c, const std::string& name, std::size_t i);

// --- sizes and bytes -------------------------------------------------------------------

double numel(const TensorMeta& t);
double numel(std::span<const int64_t> shape);
int64_t element_size(const TensorMeta& t);  // 0 when the dtype is unknown
// Bytes of memory the tensor's elements occupy: broadcast (stride-0) dimensions count once.
double footprint_bytes(const TensorMeta& t);

// Every defined tensor in the input arguments, each storage view once (x * x reads x once).
std::vector<const TensorMeta*> input_tensors(const OpContext& c);
// Compulsory reads: the footprint of every distinct input tensor. Ops that overwrite self
// without reading it (fill_, zero_, copy_, normal_, ...) pass skip_self.
double input_bytes(const OpContext& c, bool skip_self = false);
// Compulsory reads without the named argument's tensors (backward ops that take a forward
// input only for its shape).
double input_bytes_without(const OpContext& c, const std::string& name);
// What the op writes: its outputs; for in-place ops that return nothing (the _foreach_ and
// _fused_ optimizers), their self; for out= variants without recorded outputs, the out=
// arguments.
std::vector<const TensorMeta*> written_tensors(const OpContext& c);
double output_bytes(const OpContext& c);
// The main written tensor (outputs[0], else the first written tensor); nullptr if none.
const TensorMeta* main_output(const OpContext& c);

// --- results ---------------------------------------------------------------------------

// Fp64 for float64/complex128 work, Fp32Simt otherwise: point-wise work runs on the SIMT units.
Precision simt_precision(std::string_view dtype);
// The tensor-core (or SIMT) column of the op's matrix work in the operand's dtype, under the
// switch of the op's family (matrix_family of its stem: cuDNN's for convolutions).
Precision matrix_precision(const OpContext& c, const TensorMeta* operand);
MatrixFamily matrix_family(std::string_view stem);
// Rules count real arithmetic per element; on complex operands a multiply-add is four real
// ones (GEMM, conv, attention: cgemm/zgemm do 8 real FLOPs per complex multiply-add).
OpCost with_complex_arithmetic(const OpContext& c, OpCost cost);
// The dtype that decides the op's precision: the main output's, else the first input's.
std::string op_dtype(const OpContext& c);

// A cost whose kernel count drops to 0 when the op moves and computes nothing (empty
// tensors launch no kernels).
OpCost make_cost(OpClass cls, double flops, double read, double written, Precision p, int kernels);
// Class with the standard compulsory traffic: all inputs read, all outputs written.
OpCost streaming_cost(const OpContext& c, OpClass cls, double flops, int kernels = 1);
OpCost no_kernel_cost();

}  // namespace habitat::op_cost
