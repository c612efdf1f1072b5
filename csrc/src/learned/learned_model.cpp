// Learned efficiency models: loading, op -> family mapping, prediction.
#include "learned/learned_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "cost/aten_loops.h"
#include "cost/attention_problem.h"
#include "cost/depthwise.h"
#include "cost/gemm_operands.h"
#include "cost/writer_ops.h"
#include "habitat/file_io.h"
#include "habitat/learned_models.h"
#include "hardware/roofline.h"
#include "learned/attention_variants.h"
#include "learned/conv_geometry.h"
#include "learned/shape_extent.h"
#include "trace/json_reader.h"
#include "trace/op_args.h"

namespace habitat {
namespace {

std::string strip_aten(const std::string& name) {
  return name.starts_with("aten::") ? name.substr(6) : name;
}

double numel(std::span<const int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), 1.0,
                         [](double a, int64_t d) { return a * static_cast<double>(d); });
}

double elem_bytes(const TensorMeta& t) { return dtype_size(t.dtype).value_or(4); }

const TensorMeta* first_of(const OpRecord& op, std::initializer_list<std::string_view> names) {
  return op_args::first_tensor(op.args, names);
}

int64_t int_arg(const OpRecord& op, const char* name, int64_t fallback) {
  return op_args::first_int(op.args, name, fallback);
}

bool bool_arg(const OpRecord& op, const char* name) { return int_arg(op, name, 0) != 0; }

// The GEMM family's [b, m, n, k] from the operands the cost rule reads (gemm_operands.h);
// b counts the products (out elements / (m n), times addbmm's summed batch).
std::vector<LearnedPart> gemm_parts(const std::string& name, const OpRecord& op) {
  const op_cost::GemmOperands* spec = op_cost::find_gemm(name);
  if (spec == nullptr || !spec->learned) return {};
  const TensorMeta* a = first_of(op, {spec->a});
  const TensorMeta* b = first_of(op, {spec->b});
  if (a == nullptr || b == nullptr || a->shape.empty() || b->shape.empty()) return {};
  if (spec->weight_nk && b->shape.size() != 2) return {};
  // linear is sized from its operands; the others from the recorded product.
  const TensorMeta* out = op.outputs.empty() ? nullptr : &op.outputs.front();
  if (out == nullptr && !spec->weight_nk) return {};
  if (out != nullptr && out->shape.empty()) return {};
  const op_cost::GemmDims d = op_cost::gemm_dims(*spec, *a, *b, spec->weight_nk ? nullptr : out);
  const double batch = d.m * d.n > 0 ? d.elements / (d.m * d.n) : 0.0;
  if (!(d.k > 0 && d.m > 0 && d.n > 0 && batch >= 1)) return {};
  return {{LearnedFamily::Gemm,
           {{"b", std::round(batch) * d.summed},
            {"m", d.m},
            {"n", d.n},
            {"k", d.k},
            {"elem_bytes", elem_bytes(*a)}}}};
}

// A 4-D or 5-D tensor laid out channels-last (channels_last, channels_last_3d): recorded
// non-contiguous with unit channel stride.
bool channels_last(const TensorMeta& t) {
  const std::size_t rank = t.shape.size();
  return !t.contiguous && (rank == 4 || rank == 5) && t.strides.size() == rank && t.strides[1] == 1;
}

// A conv shape's groups (optional_column_default when left out).
double conv_groups(const LearnedShape& shape) {
  const auto it = shape.find("groups");
  return it == shape.end() ? *optional_column_default(LearnedFamily::Conv, "groups") : it->second;
}

// cuDNN's NCHW <-> NHWC layout transforms around a tensor-core convolution pass
// (python/habitat/learned/conv_layout.py states the evidence and the constants, which the conv
// model's metadata carries; benchmarks/accuracy/conv_layout.py --collection fits them): given
// NCHW tensors, a tensor-core pass transforms its two inputs to NHWC and its output back, a
// fixed `fixed_us_per_pass` plus reading and writing the pass's three tensors (input, weight,
// output) at a share of the DRAM bandwidth that depends on the element width.
double conv_transform_us(const LearnedShape& shape, const Device& target, Precision precision,
                         const FamilyModel::NchwTransforms& cost) {
  auto nchw = shape.find("nchw");
  if (nchw == shape.end() || nchw->second == 0) return 0.0;
  if (std::find(cost.precisions.begin(), cost.precisions.end(), precision) ==
      cost.precisions.end()) {
    return 0.0;
  }
  auto peak = target.peak_tflops.find(precision);
  if (peak == target.peak_tflops.end() || !(peak->second > 0) || !(target.memory_bandwidth_gbs > 0))
    return 0.0;
  const double k = shape.at("kernel"), size = shape.at("size"), eb = shape.at("elem_bytes");
  const double out = conv_output_size(size, shape.at("padding"), k, shape.at("stride"));
  const double elements = conv_tensor_elements(shape.at("batch"), shape.at("cin"), shape.at("cout"),
                                               k, size, out, conv_groups(shape));
  // The share of the nearest listed element width.
  double share = 1.0, distance = std::numeric_limits<double>::infinity();
  for (const auto& [width, s] : cost.bandwidth_share_by_element_bytes) {
    if (std::abs(width - eb) < distance) {
      distance = std::abs(width - eb);
      share = s;
    }
  }
  return cost.fixed_us_per_pass +
         2.0 * eb * elements / (share * target.bandwidth_bytes_per_s()) * 1e6;
}

std::vector<LearnedPart> conv_parts(const std::string& name, const OpRecord& op) {
  const bool backward = name == "convolution_backward";
  const double groups = static_cast<double>(std::max<int64_t>(int_arg(op, "groups", 1), 1));
  // "self": cudnn_convolution, cudnn_convolution_transpose and mkldnn_convolution name their input
  // so.
  const TensorMeta* x = first_of(op, {"input", "self"});
  const TensorMeta* w = first_of(op, {"weight"});
  if (x == nullptr || w == nullptr) return {};
  const bool transposed = bool_arg(op, "transposed") || name.find("transpose") != std::string::npos;
  // A transposed convolution of x [N, Ci, H, W] by w [Ci, Co, R, S] is the data gradient of
  // the convolution of its output y [N, Co, H', W'] by w read as [out Ci, in Co, R, S]; its
  // input gradient is that convolution's forward pass and its weight gradient the same
  // convolution's weight gradient. cuDNN runs them as those passes (dgrad kernels for a
  // transposed forward), so they are forecast as the direct convolution's passes.
  const TensorMeta* y = nullptr;
  if (transposed) {
    y = backward ? first_of(op, {"grad_output"})
                 : (op.outputs.empty() ? nullptr : &op.outputs.front());
    if (y == nullptr) return {};
  }
  const TensorMeta& image = transposed ? *y : *x;  // the direct convolution's input
  const std::optional<SquareConv> square = square_conv(op, image, *w);
  if (!square) return {};
  // A depthwise convolution: the caller takes the measured roofline (cost/depthwise.h); a 3-D
  // one the roofline too (PyTorch's own DepthwiseConv3d.cu kernels, which no collection measured).
  if (op_cost::is_depthwise_conv(op)) return {};
  if (image.shape.size() == 5 && groups > 1 && w->shape[1] == 1) return {};
  // A grouped one is `groups` independent convolutions of cin/groups -> cout/groups channels
  // (the conv model's features are one group's, and the number of groups). w is [cout, cin /
  // groups, ...], transposed [ci, co / groups, ...].
  LearnedShape shape{
      {"batch", static_cast<double>(image.shape[0])},
      {"cin", static_cast<double>(w->shape[1]) * groups},  // transposed: co
      {"cout", static_cast<double>(w->shape[0])},          // transposed: ci
      {"groups", groups},
      {"kernel", square->kernel},
      {"size", square->size},
      {"stride", square->stride},
      {"padding", square->padding},
      {"elem_bytes", elem_bytes(*x)},
      {"grad", 0.0},
      // cuDNN runs channels-last when the input or the weight is (PyTorch's
      // cudnn_conv_suggest_memory_format); otherwise NCHW, through the layout transforms
      // grouped convolutions too: on the H100 collections' grouped NCHW rows the transforms
      // are a median 42-50 % of a bf16 pass's device time, 23-44 % of a TF32 one's.
      {"nchw", channels_last(*x) || channels_last(*w) ? 0.0 : 1.0},
      // not a model column: 2 or 3 (nchw_simt_forward_us)
      {"spatial_dims", static_cast<double>(image.shape.size()) - 2.0}};
  if (!backward) {
    if (transposed) shape["grad"] = 1.0;
    return {{LearnedFamily::Conv, shape}};
  }
  // The input and weight gradients are measured passes of their own (grad 1 and 2), each run
  // only when output_mask asks for it; the bias gradient is a reduction the model leaves out.
  const std::vector<int64_t> mask = op_args::ints(op.args, "output_mask");
  std::vector<LearnedPart> parts;
  for (int grad : {1, 2}) {
    const std::size_t bit = static_cast<std::size_t>(grad - 1);
    if (bit < mask.size() && mask[bit] == 0) continue;
    LearnedShape pass = shape;
    // A transposed convolution's input gradient is the direct convolution's forward pass.
    pass["grad"] = transposed && grad == 1 ? 0 : grad;
    parts.push_back({LearnedFamily::Conv, std::move(pass)});
  }
  return parts;
}

// Fused attention ops (flash, memory-efficient, cuDNN, and the composite
// scaled_dot_product_attention) as one attention part; the math path, and any op when no
// attention model is loaded, as the two GEMMs (and the softmax) it is made of.
std::vector<LearnedPart> attention_parts(const std::string& name, const OpRecord& op,
                                         bool fused_model) {
  const std::optional<op_cost::AttentionProblem> p = op_cost::attention_problem(name, op.args);
  if (!p) return {};
  const double eb = elem_bytes(*first_of(op, {"query"}));
  const bool backward = name.ends_with("_backward");
  const bool math = name.find("_math") != std::string::npos;
  if (fused_model && !math) {
    // The fused kernel's library, from the op's name (the engine names a CPU trace's attention
    // after the backend PyTorch picks on the target: cuda_paths::cuda_attention_op).
    const double backend = name.find("cudnn") != std::string::npos       ? 2.0
                           : name.find("efficient") != std::string::npos ? 1.0
                                                                         : 0.0;
    return {{LearnedFamily::Attention,
             {{"batch_heads", p->batch_heads},
              {"l", p->l},
              {"s", p->s},
              {"e", std::max(p->e, p->ev)},
              {"causal", p->causal ? 1.0 : 0.0},
              {"backward", backward ? 1.0 : 0.0},
              {"elem_bytes", eb},
              {"backend", backend}},
             attention_variant_scale(op, backend, backward, eb >= 4.0)}};
  }
  // A causal mask lets fused kernels skip the score tiles it hides; the math path computes
  // every score and masks them after.
  const double causal = math ? 1.0 : p->kept_share();
  // Forward: S = Q K^T and O = P V. Backward: dV, dP, dQ, dK plus the recomputed S.
  const double gemm_scale = causal * (backward ? 2.5 : 1.0);
  const double bh = p->batch_heads;
  std::vector<LearnedPart> parts{
      {LearnedFamily::Gemm,
       {{"b", bh}, {"m", p->l}, {"n", p->s}, {"k", p->e}, {"elem_bytes", eb}},
       gemm_scale},
      {LearnedFamily::Gemm,
       {{"b", bh}, {"m", p->l}, {"n", p->ev}, {"k", p->s}, {"elem_bytes", eb}},
       gemm_scale}};
  if (math) {
    parts.push_back({LearnedFamily::Softmax,
                     {{"rows", bh * p->l},
                      {"cols", p->s},
                      {"elem_bytes", eb},
                      {"backward", backward ? 1.0 : 0.0},
                      {"log", 0.0}}});
  }
  return parts;
}

std::optional<std::pair<double, double>> rows_cols(const TensorMeta& t, int64_t dim) {
  if (t.shape.empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return std::nullopt;
  const double cols = static_cast<double>(t.shape[dim]);
  const double total = numel(t.shape);
  if (!(cols > 0 && total > 0)) return std::nullopt;
  return std::make_pair(total / cols, cols);
}

std::vector<LearnedPart> softmax_parts(const std::string& name, const OpRecord& op) {
  const bool backward = name.ends_with("_backward_data");
  const TensorMeta* x =
      backward ? first_of(op, {"output", "grad_output"}) : first_of(op, {"self", "input"});
  if (x == nullptr) return {};
  auto rc = rows_cols(*x, int_arg(op, "dim", -1));
  if (!rc) return {};
  return {{LearnedFamily::Softmax,
           {{"rows", rc->first},
            {"cols", rc->second},
            {"elem_bytes", elem_bytes(*x)},
            {"backward", backward ? 1.0 : 0.0},
            {"log", name.find("log_softmax") != std::string::npos ? 1.0 : 0.0}}}};
}

std::vector<LearnedPart> norm_parts(const std::string& name, const OpRecord& op) {
  const TensorMeta* x = first_of(op, {"input", "self"});
  const std::vector<int64_t> normalized = op_args::ints(op.args, "normalized_shape");
  if (x == nullptr || normalized.empty()) return {};
  const double cols = numel(normalized);
  const double total = numel(x->shape);
  if (!(cols > 0 && total >= cols)) return {};
  return {{LearnedFamily::LayerNorm,
           {{"rows", total / cols},
            {"cols", cols},
            {"elem_bytes", elem_bytes(*x)},
            {"backward", name.ends_with("_backward") ? 1.0 : 0.0}}}};
}

// Reductions of PyTorch's reduce kernel the reduction model learned (sum and mean; the others
// of the same kernel template alike); the rest of the class (arg-reductions, norms, variances,
// scans) takes the measured roofline.
bool is_learned_reduction(const std::string& name) {
  for (const char* r : {"sum", "mean", "nansum", "nanmean", "amax", "amin"}) {
    if (name == r) return true;
  }
  return false;
}

// A reduction as rows x cols: rows outputs, each of cols inputs; strided when the innermost
// dimension is not among the reduced ones (a sum over the first dim of a matrix).
std::vector<LearnedPart> reduction_parts(const std::string& name, const OpRecord& op) {
  const TensorMeta* x = op.first_tensor();
  if (!is_learned_reduction(name) || x == nullptr || x->shape.empty() || op.outputs.empty()) {
    return {};
  }
  const double total = numel(x->shape);
  const double rows = std::max(1.0, numel(op.outputs.front().shape));
  if (!(total > 0) || total < rows) return {};
  const auto rank = static_cast<int64_t>(x->shape.size());
  bool inner = false;
  const std::vector<int64_t> dims = op_args::ints(op.args, "dim");
  for (int64_t d : dims) inner = inner || d == rank - 1 || d == -1;
  const bool strided = !dims.empty() && !inner && rows > 1;
  return {{LearnedFamily::Reduction,
           {{"rows", rows},
            {"cols", total / rows},
            {"elem_bytes", elem_bytes(*x)},
            {"strided", strided ? 1.0 : 0.0}}}};
}

// Training-mode batch norm and its backward (cost/op_cost_norm.cpp batch_norm_training): per
// channel, statistics over the other dimensions. Inference is an element-wise transform.
std::vector<LearnedPart> batch_norm_parts(const std::string& name, const OpRecord& op) {
  if (name.find("batch_norm") == std::string::npos || name == "batch_norm" ||
      name == "_batch_norm_impl_index" || name == "_native_batch_norm_legit_no_training" ||
      name == "_batch_norm_no_update") {
    return {};
  }
  const bool backward = name.ends_with("_backward");
  const bool training = name == "cudnn_batch_norm_backward" || name == "_batch_norm_with_update" ||
                        op_args::boolean(op.args, backward ? "train" : "training", true);
  const TensorMeta* x = first_of(op, {"input", "self"});
  if (!training || x == nullptr || x->shape.size() < 2) return {};
  const double channels = static_cast<double>(x->shape[1]);
  const double total = numel(x->shape);
  if (!(channels > 0 && total >= channels)) return {};
  return {{LearnedFamily::BatchNorm,
           {{"count", total / channels},
            {"channels", channels},
            {"elem_bytes", elem_bytes(*x)},
            {"backward", backward ? 1.0 : 0.0},
            {"channels_last", channels_last(*x) ? 1.0 : 0.0}}}};
}

bool is_transcendental(const std::string& name) {
  for (const char* t : {"exp", "log", "tanh", "sigmoid", "gelu", "silu", "pow", "erf", "sin", "cos",
                        "sqrt", "softplus", "mish", "elu", "tan"}) {
    if (name.find(t) != std::string::npos) return true;
  }
  return false;
}

// A writer (cost/writer_ops.h) reads none of its tensors; "fill_" -> "fill" (the name is
// already without "aten::").
bool is_writer(std::string_view name) {
  if (name.ends_with('_') && !name.ends_with("__")) name.remove_suffix(1);
  return op_cost::is_writer_stem(name);
}

std::vector<LearnedPart> elementwise_parts(const std::string& name, const OpRecord& op) {
  if (op.outputs.empty()) return {};
  const TensorMeta& out = op.outputs.front();
  const double n = numel(out.shape);
  if (!(n > 0)) return {};
  // Tensors of the output's size that the op reads (an in-place op's self among them); a
  // writer reads none (fill_'s self is only written).
  double inputs = 0;
  if (!is_writer(name)) {
    for (const Argument& a : op.args) {
      if (a.name == "out") continue;  // an out= variant's result is written, not read
      for (const TensorMeta& t : a.value.tensors) {
        if (t.defined && numel(t.shape) == n) inputs += 1;
      }
    }
    inputs = std::max(1.0, inputs);
  }
  // A training-mode dropout is CUDA's fused native_dropout (predict/cuda_paths.h): it streams
  // three tensors, the input, the output and a one-byte mask, and draws a random number per
  // element. Costed as the two-operand form (three streams): over the 356 native_dropout
  // kernels of the recorded H100 and H200 steps, 19.1 % mean |error| (signed -7.2 %) where the
  // one-operand form was 32.5 % under.
  if (name == "dropout") inputs = 2.0;
  return {{LearnedFamily::Elementwise,
           {{"n", n},
            {"inputs", inputs},
            {"transcendental", is_transcendental(name) ? 1.0 : 0.0},
            {"elem_bytes", elem_bytes(out)},
            {"vectorized", aten_loops::runs_vectorized(op, n) ? 1.0 : 0.0}}}};
}

}  // namespace

std::vector<LearnedPart> learned_parts(const OpRecord& op, const OpCost& cost,
                                       bool attention_model) {
  const std::string name = strip_aten(op.name);
  switch (cost.op_class) {
    case OpClass::Gemm:
      return gemm_parts(name, op);
    case OpClass::Conv:
      return conv_parts(name, op);
    case OpClass::Attention:
      return attention_parts(name, op, attention_model);
    case OpClass::Softmax:
      return softmax_parts(name, op);
    case OpClass::Norm:
      if (name.find("layer_norm") != std::string::npos ||
          name.find("rms_norm") != std::string::npos) {
        return norm_parts(name, op);
      }
      return batch_norm_parts(name, op);
    case OpClass::Reduction:
      return reduction_parts(name, op);
    case OpClass::Elementwise:
      return elementwise_parts(name, op);
    default:
      return {};
  }
}

namespace {

// One model file pair (stem.safetensors, stem.json) of family `f`; nullopt when absent.
std::optional<FamilyModel> load_family_model(const std::filesystem::path& dir,
                                             const std::string& stem, LearnedFamily f) {
  namespace fs = std::filesystem;
  const fs::path weights = dir / (stem + ".safetensors");
  const fs::path meta_path = dir / (stem + ".json");
  if (!fs::is_regular_file(weights)) return std::nullopt;
  if (!fs::exists(meta_path)) {
    throw std::runtime_error(meta_path.string() + ": missing metadata beside " + weights.string());
  }
  std::vector<std::string> features;
  int layers = 0;
  double e_max = 1.0, launch_floor_us = 0.0;
  std::optional<FamilyModel::NchwTransforms> nchw_transforms;
  try {
    using namespace json_reader;
    const json meta =
        parse(read_file(meta_path.string(), "learned-model metadata", kPackagedFileMaxBytes));
    const Loc root;
    expect_object(meta, root);
    optional(meta, root, "features",
             [&](const json& v, const Loc& l) { features = read_strings(v, l); });
    layers = read_int32(required(meta, root, "layers"), root.child("layers"), 1);
    optional(meta, root, "e_max",
             [&](const json& v, const Loc& l) { e_max = read_duration(v, l); });
    optional(meta, root, "launch_floor_us",
             [&](const json& v, const Loc& l) { launch_floor_us = read_duration(v, l); });
    optional(meta, root, "nchw_transforms", [&](const json& v, const Loc& l) {
      expect_object(v, l);
      FamilyModel::NchwTransforms t;
      t.fixed_us_per_pass =
          read_duration(required(v, l, "fixed_us_per_pass"), l.child("fixed_us_per_pass"));
      const Loc shares_at = l.child("bandwidth_share_by_element_bytes");
      for (const auto& [width, share] :
           expect_object(required(v, l, "bandwidth_share_by_element_bytes"), shares_at).items()) {
        const Loc at = shares_at.child(width);
        double bytes = 0;
        try {
          bytes = std::stod(width);
        } catch (const std::exception&) {
          throw DecodeError{at.str() + ": expected an element width in bytes"};
        }
        const double s = read_real(share, at);
        if (!(bytes > 0) || !(s > 0)) throw DecodeError{at.str() + ": must be > 0"};
        t.bandwidth_share_by_element_bytes[bytes] = s;
      }
      if (t.bandwidth_share_by_element_bytes.empty())
        throw DecodeError{shares_at.str() + ": expected at least one element width"};
      for (const std::string& name :
           read_strings(required(v, l, "precisions"), l.child("precisions"))) {
        const auto p = precision_from_string(name);
        if (!p)
          throw DecodeError{l.child("precisions").str() + ": unknown precision '" + name + "'"};
        t.precisions.push_back(*p);
      }
      nchw_transforms = std::move(t);
    });
  } catch (const json_reader::DecodeError& e) {
    throw std::runtime_error(meta_path.string() + ": " + e.message);
  }
  const std::vector<std::string>& names = feature_names(f);
  std::vector<std::size_t> columns;
  if (features != names) {
    // A model trained on fewer features than the engine computes reads them by name.
    for (const std::string& name : features) {
      auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end()) {
        throw std::runtime_error(
            meta_path.string() + ": feature '" + name +
            "' is not one this build computes; "
            "retrain with python -m habitat.learned.train or update the engine");
      }
      columns.push_back(static_cast<std::size_t>(it - names.begin()));
    }
  }
  FamilyModel model{Mlp::from_tensors(read_safetensors(weights.string()), layers, weights.string()),
                    e_max, launch_floor_us, std::move(columns), nchw_transforms};
  if (model.mlp.inputs() != static_cast<int>(features.size())) {
    throw std::runtime_error(weights.string() +
                             ": input width differs from the metadata's features");
  }
  return model;
}

}  // namespace

LearnedModels LearnedModels::load(const std::string& dir) {
  LearnedModels models;
  for (LearnedFamily f :
       {LearnedFamily::Gemm, LearnedFamily::Conv, LearnedFamily::Elementwise,
        LearnedFamily::Softmax, LearnedFamily::LayerNorm, LearnedFamily::Attention,
        LearnedFamily::Reduction, LearnedFamily::BatchNorm}) {
    if (auto m = load_family_model(dir, std::string(to_string(f)), f))
      models.models_.emplace(f, std::move(*m));
  }
  models.roofline_table_ = RooflineTable::load(dir);
  return models;
}

std::optional<MeasuredRoofline> LearnedModels::measured_roofline(const OpRecord& op,
                                                                 const OpCost& cost) const {
  return roofline_table_.find(op, cost);
}

std::vector<std::string> LearnedModels::families() const {
  std::vector<std::string> out;
  for (const auto& [f, m] : models_) out.emplace_back(to_string(f));
  return out;
}

namespace {

// One model's forecast from the features of one canonical shape (learned_models.h's head:
// roofline / efficiency, at least the roofline and the launch floor).
double model_time_us(const FamilyModel& model, const LearnedFeatures& x) {
  double y = 0;
  if (model.columns.empty()) {
    y = model.mlp.forward(x.values);
  } else {
    std::vector<double> selected;
    selected.reserve(model.columns.size());
    for (std::size_t c : model.columns) selected.push_back(x.values[c]);
    y = model.mlp.forward(selected);
  }
  // log(sigmoid(y)) computed stably, as numpy's -logaddexp(0, -y).
  const double log_sigmoid = y >= 0 ? -std::log1p(std::exp(-y)) : y - std::log1p(std::exp(y));
  const double kernel_us = x.roofline_us * std::exp(-(std::log(model.e_max) + log_sigmoid));
  // e_max > 1 lets the fit run above the datasheet roofline; a forecast never does.
  return std::max({model.launch_floor_us, x.roofline_us, kernel_us});
}

// A GEMM's features say whether it runs on tensor cores (features.tensor_path).
bool on_tensor_path(const LearnedFeatures& x) {
  static const std::size_t index = [] {
    const auto& names = feature_names(LearnedFamily::Gemm);
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), "tensor_path") -
                                    names.begin());
  }();
  return index < x.values.size() && x.values[index] > 0;
}

}  // namespace

std::optional<double> LearnedModels::predict_family_us(LearnedFamily f, const LearnedShape& shape,
                                                       const Device& device,
                                                       Precision precision) const {
  auto main = models_.find(f);
  if (main == models_.end()) return std::nullopt;
  const FamilyModel& model = main->second;
  const LearnedFeatures x = compute_learned_features(f, shape, device, precision);
  if (const ShapeExtent* extent = shape_extent(f)) {
    const bool tensor_path = f == LearnedFamily::Gemm && on_tensor_path(x);
    if (beyond_extent(*extent, shape, tensor_path)) {
      const double inside = extended_us(*extent, shape, tensor_path, [&](const LearnedShape& s) {
        return model_time_us(model, compute_learned_features(f, s, device, precision));
      });
      return std::max(inside, x.roofline_us);  // at least the whole shape's roofline
    }
  }
  return model_time_us(model, x);
}

Precision learned_part_precision(const OpCost& cost, const LearnedPart& part) {
  const bool matrix = cost.op_class == OpClass::Gemm || cost.op_class == OpClass::Conv ||
                      cost.op_class == OpClass::Attention;
  if (!matrix || part.family == LearnedFamily::Softmax) return Precision::Fp32Simt;
  return cost.precision;
}

std::optional<double> LearnedModels::part_us(const LearnedPart& part, const Device& target,
                                             Precision precision) const {
  std::optional<double> t = predict_family_us(part.family, part.shape, target, precision);
  if (t && part.family == LearnedFamily::Conv) {
    // predict_family_us answered, so the conv model is loaded.
    if (const auto& transforms = models_.at(LearnedFamily::Conv).nchw_transforms) {
      *t += conv_transform_us(part.shape, target, precision, *transforms);
    }
  }
  return t;
}

// An NCHW convolution with a 1x1 filter, stride 1 and no padding is a GEMM over the tensors as
// they lie: per image, Y [cout, HW] = W [cout, cin] X [cin, HW]. cuDNN runs most such passes as
// GEMM kernels without layout transforms (11 of 13 stride-1 TF32 forward passes of the H100
// families collection, `Transform Latency` 0): in a 16-bit or TF32 precision the pass is the
// faster of that GEMM and the tensor-core pass between transforms. Input gradient: per image,
// dX [cin, HW] = W^T dY. Weight gradient: per image, dW_n [cout, cin] = dY_n X_n^T into fp32
// partials, which cuDNN's reduce_wgrad_nchw_helper then sums over the batch (the kernels of
// every such row of the families collection): the batched GEMM plus a column sum of
// [batch, cout x cin], forecast by the reduction model.
std::optional<double> LearnedModels::nchw_pointwise_gemm_us(const LearnedShape& conv,
                                                            const Device& target,
                                                            Precision precision) const {
  // learned_parts gives a conv part every column; "nchw" is looked up as conv_transform_us does.
  const auto nchw = conv.find("nchw");
  if (!has(LearnedFamily::Gemm) || nchw == conv.end() || nchw->second != 1.0 ||
      conv.at("kernel") != 1.0 || conv.at("stride") != 1.0 || conv.at("padding") != 0.0) {
    return std::nullopt;
  }
  // one GEMM per image and group
  const double groups = conv_groups(conv);
  const double batch = conv.at("batch") * groups, cin = conv.at("cin") / groups,
               cout = conv.at("cout") / groups;
  const double pixels = conv.at("size") * conv.at("size"), eb = conv.at("elem_bytes");
  const double grad = conv.at("grad");
  if (grad == 2.0) {
    const auto partials = predict_family_us(
        LearnedFamily::Gemm,
        {{"b", batch}, {"m", cout}, {"k", pixels}, {"n", cin}, {"elem_bytes", eb}}, target,
        precision);
    const auto reduce = predict_family_us(
        LearnedFamily::Reduction,
        {{"rows", cout * cin}, {"cols", batch}, {"elem_bytes", 4.0}, {"strided", 1.0}}, target,
        Precision::Fp32Simt);
    if (!partials || !reduce) return std::nullopt;
    return *partials + *reduce;
  }
  const LearnedShape gemm{{"b", batch},
                          {"m", grad == 1.0 ? cin : cout},
                          {"k", grad == 1.0 ? cout : cin},
                          {"n", pixels},
                          {"elem_bytes", eb}};
  return predict_family_us(LearnedFamily::Gemm, gemm, target, precision);
}

// cuDNN runs some 16-bit NCHW 2-D forward passes on its SIMT kernels
// (precomputed_convolve_sgemm and kin, reading the NCHW tensors as they lie) where those beat the
// tensor-core pass between layout transforms: 23 of the 125 bf16 NCHW 2-D forward rows of the
// H100 and H200 collections, 3 of their 250 backward ones, none of the 3-D rows. Such a pass took
// 0.85-1.39x the fp32 row of its problem (median 1.00 to 1.16 per collection), so it is forecast as
// that FP32 pass.
std::optional<double> LearnedModels::nchw_simt_forward_us(const LearnedShape& conv,
                                                          const Device& target,
                                                          Precision precision) const {
  if (precision != Precision::Bf16Tensor && precision != Precision::Fp16Tensor) return std::nullopt;
  const auto nchw = conv.find("nchw"), dims = conv.find("spatial_dims");
  if (nchw == conv.end() || nchw->second != 1.0 || conv.at("grad") != 0.0 ||
      (dims != conv.end() && dims->second != 2.0)) {
    return std::nullopt;
  }
  LearnedShape fp32 = conv;
  fp32["elem_bytes"] = 4.0;
  return part_us({LearnedFamily::Conv, fp32}, target, Precision::Fp32Simt);
}

namespace {

// The learned model forecasts ATen's vectorized kernel; its other two are bound by elements.
double elementwise_floor_us(const LearnedPart& part, const Device& target) {
  const auto vectorized = part.shape.find("vectorized");
  const auto n = part.shape.find("n");
  if (vectorized == part.shape.end() || vectorized->second != 0 || n == part.shape.end()) return 0;
  return aten_loops::non_vectorized_us(n->second, target);
}

}  // namespace

std::optional<double> LearnedModels::predict_us(const OpRecord& op, const OpCost& cost,
                                                const Device& target) const {
  const std::vector<LearnedPart> parts = learned_parts(op, cost, has(LearnedFamily::Attention));
  if (parts.empty()) return std::nullopt;
  double total = 0;
  for (const LearnedPart& part : parts) {
    const Precision p = learned_part_precision(cost, part);
    std::optional<double> t;
    try {
      t = part_us(part, target, p);
      // cuBLAS and cuDNN run a TF32 batched GEMM or convolution on FP32 SIMT kernels (NCHW
      // ones, no layout transforms) where those are faster. An unbatched TF32 GEMM (a linear
      // layer's addmm, cuBLASLt) stays on tensor cores: 1 of 451 and 13 of 1350 TF32 linear
      // rows of the H100 and H200 collections ran SIMT kernels (bmm: 50 of 441, 177 of 1350),
      // and the tiny ones ran a tensor-op kernel and a split-K reduction in ~4 us where FP32
      // mode's SIMT kernel took 2.
      const auto b = part.shape.find("b");
      const bool batched_gemm =
          part.family == LearnedFamily::Gemm && b != part.shape.end() && b->second > 1;
      if (t && p == Precision::Tf32Tensor && (batched_gemm || part.family == LearnedFamily::Conv)) {
        if (const auto simt = part_us(part, target, Precision::Fp32Simt)) t = std::min(*t, *simt);
      }
      if (t && part.family == LearnedFamily::Elementwise)
        t = std::max(*t, elementwise_floor_us(part, target));
      if (t && part.family == LearnedFamily::Conv && p != Precision::Fp32Simt) {
        if (const auto gemm = nchw_pointwise_gemm_us(part.shape, target, p)) {
          t = std::min(*t, *gemm);
        }
        if (const auto simt = nchw_simt_forward_us(part.shape, target, p)) t = std::min(*t, *simt);
      }
    } catch (const std::invalid_argument&) {
      return std::nullopt;  // degenerate shape (zero-size tensor): let the caller fall back
    }
    if (!t) return std::nullopt;
    total += part.scale * *t;
  }
  // The parts' rooflines count their own bytes; the op's cost model may count a little more
  // (a bias read): no forecast is below the op's own roofline either.
  if (cost.flops > 0 || cost.bytes_read + cost.bytes_written > 0) {
    total = std::max(total, roofline_time_us(target, cost.precision, cost.flops,
                                             cost.bytes_read + cost.bytes_written));
  }
  return total;
}

std::unique_ptr<ShapeModel> load_learned_models(const std::string& weights_dir) {
  auto models = std::make_unique<LearnedModels>(LearnedModels::load(weights_dir));
  if (models->empty()) return nullptr;
  return models;
}

}  // namespace habitat
