// Entry point of the op cost model: parses the op's name and hands it to its family's rule.
#include "habitat/op_cost.h"

#include <array>
#include <stdexcept>
#include <utility>

#include "cost/fused_cost.h"
#include "cost/op_cost_detail.h"
#include "habitat/compiled_kernels.h"

namespace habitat {
namespace {

using op_cost::OpContext;
using op_cost::OpRule;
using op_cost::RuleTable;

constexpr std::array<std::pair<OpClass, const char*>, 13> kClassNames{{
    {OpClass::Gemm, "gemm"},
    {OpClass::Conv, "conv"},
    {OpClass::Attention, "attention"},
    {OpClass::Elementwise, "elementwise"},
    {OpClass::Reduction, "reduction"},
    {OpClass::Norm, "norm"},
    {OpClass::Softmax, "softmax"},
    {OpClass::Embedding, "embedding"},
    {OpClass::Copy, "copy"},
    {OpClass::Optimizer, "optimizer"},
    {OpClass::Loss, "loss"},
    {OpClass::NoKernel, "no_kernel"},
    {OpClass::Unknown, "unknown"},
}};

// Families register separately; an op claimed by two of them is a bug in this file set.
const RuleTable& rules() {
  static const RuleTable table = [] {
    RuleTable all;
    for (auto add :
         {op_cost::add_gemm_rules, op_cost::add_conv_rules, op_cost::add_attention_rules,
          op_cost::add_norm_rules, op_cost::add_pointwise_rules, op_cost::add_reduction_rules,
          op_cost::add_pool_rules, op_cost::add_memory_rules, op_cost::add_optimizer_rules,
          op_cost::add_loss_rules}) {
      RuleTable family;
      add(family);
      for (auto& [key, rule] : family) {
        if (!all.emplace(key, rule).second) {
          throw std::logic_error("op cost rules: aten::" + key + " has two rules");
        }
      }
    }
    return all;
  }();
  return table;
}

// Overload names of out= variants that do not end in "out" (from the aten schemas).
bool is_out_overload(std::string_view overload) {
  constexpr std::array<std::string_view, 9> kNamed{"grad_input",    "output",   "values",
                                                   "values_stable", "dim_max",  "dim_min",
                                                   "dim_values",    "out_mode", "result"};
  if (overload == "out" || overload.ends_with("_out") || overload.starts_with("Out")) return true;
  for (auto n : kNamed) {
    if (overload == n) return true;
  }
  return false;
}

}  // namespace

namespace op_cost {

std::optional<OpContext> aten_context(const OpRecord& op, const PrecisionFlags& flags) {
  constexpr std::string_view kNamespace = "aten::";
  std::string_view name = op.name;
  if (!name.starts_with(kNamespace)) return std::nullopt;
  name.remove_prefix(kNamespace.size());
  OpContext ctx{
      .op = op, .stem = name, .allow_tf32 = flags.tf32(MatrixFamily::Matmul), .flags = flags};
  // aten::add_ is the in-place add; dunder names (aten::__and__) are not in-place.
  if (name.size() > 1 && name.ends_with('_') && !name.ends_with("__")) {
    ctx.in_place = true;
    ctx.stem.remove_suffix(1);
  }
  if (is_out_overload(op.overload)) {
    // out= arguments are always the schema's last ones, one per returned tensor
    // (one Tensor[] for ops that return nothing).
    ctx.out_variant = true;
    ctx.n_outs = std::min(op.args.size(), std::max<std::size_t>(op.outputs.size(), 1));
  }
  return ctx;
}

}  // namespace op_cost

const char* to_string(OpClass c) {
  for (const auto& [value, name] : kClassNames) {
    if (value == c) return name;
  }
  return "unknown";
}

double OpCost::arithmetic_intensity() const {
  const double b = bytes();
  return b > 0 ? flops / b : 0.0;
}

OpCost estimate_cost(const OpRecord& op, bool allow_tf32) {
  PrecisionFlags flags;
  flags.matmul_allow_tf32 = allow_tf32;
  flags.cudnn_allow_tf32 = allow_tf32;
  return estimate_cost(op, flags);
}

OpCost estimate_cost(const OpRecord& op, const PrecisionFlags& flags) {
  const bool allow_tf32 = flags.tf32(MatrixFamily::Matmul);
  // Kernels torch.compile generated carry their own cost description.
  if (auto fused = fused_kernel_cost(op, allow_tf32)) return *fused;
  const std::string_view name = op.name;
  // record_function markers (profiler::_record_function_enter_new/_exit) are host-only.
  if (name.starts_with("profiler::_record_function")) return op_cost::no_kernel_cost();
  // A compiled graph's run: its work is its fused records and the aten ops inside it.
  if (name == kCompiledGraphOp) return op_cost::no_kernel_cost();
  // c10d collectives are communication, forecast per cluster (habitat/collectives.h and
  // habitat.analysis.parallel), not compute of one GPU.
  if (name.starts_with("c10d::")) return op_cost::no_kernel_cost();
  const std::optional<OpContext> context = op_cost::aten_context(op, flags);
  if (!context) return OpCost{};
  const OpContext& ctx = *context;
  const RuleTable& table = rules();
  const std::string stem(ctx.stem);
  auto it = op.overload.empty() ? table.end() : table.find(stem + "." + op.overload);
  if (it == table.end()) it = table.find(stem);
  if (it == table.end()) return OpCost{};
  return op_cost::with_complex_arithmetic(ctx, it->second.cost(ctx, it->second.param));
}

}  // namespace habitat
