#include "predict/embedding_kernels.h"

#include <algorithm>
#include <cmath>

#include "cost/embedding_paths.h"
#include "trace/op_args.h"

namespace habitat {
namespace {

// Fitted by benchmarks/accuracy/embedding_kernels_fit.py on the H100's rows (2026-11-26
// families collection, outside its held-out fifth); cycles are SM clock cycles, so they carry
// to other GPUs through the clock and SM count. The script prints these and their errors.
constexpr double kFixedSmallUs = 1.32;
constexpr double kCyclesPerSmallIndex = 703;  // one DRAM round trip per index, in turn
constexpr double kFixedVectorizedUs = 1.26;
constexpr double kCyclesPerBlock = 162;  // per block, over all SMs
constexpr double kFixedElementwiseUs = 3.68;
constexpr double kCyclesPerElement = 0.60;  // the element-wise gather's index arithmetic
constexpr double kGatherBandwidthShare = 0.98;
constexpr double kFixedFeatureUs = 2.17;
constexpr double kCyclesPerStepL2 = 1518;  // 32 indices, the gradient rows in L2
constexpr double kCyclesPerStepDram = 5024;
constexpr double kFixedSortUs = 66.0;  // radix sort and segment kernels: ~14 launches
constexpr double kCyclesPerPartialElement = 5.00;
constexpr double kCyclesPerIndex = 67.1;

// ATen's threshold (Indexing.cu index_select_out_cuda_impl; the backward's:
// cost/embedding_paths.h) and kernel shapes.
constexpr int64_t kSmallIndexMax = 16;
constexpr int64_t kVectorBytes = 16;
constexpr int64_t kVectorsPerBlock = 256;
constexpr int64_t kIndicesPerStep = 32;        // blockDim.y of the feature kernel
constexpr int64_t kFeaturesPerBlock = 32;      // blockDim.x
constexpr int64_t kFeatureBlocksPerSm = 2;     // 1024-thread blocks
constexpr double kRowsPerPartialSegment = 10;  // NROWS_PER_THREAD

struct Gather {
  double rows = 0;     // V: rows of the table
  double width = 0;    // D: elements per row
  double indices = 0;  // T
  int elem = 0;        // bytes per element
  int index_elem = 8;
};

double bandwidth_us(double bytes, const Device& d) {
  return bytes / (d.memory_bandwidth_gbs * 1e3);
}

std::optional<Gather> gather_of(const OpRecord& op) {
  const TensorMeta* table = nullptr;
  const TensorMeta* index = nullptr;
  if (op.name == "aten::embedding") {
    table = op_args::tensor(op.args, "weight");
    index = op_args::tensor(op.args, "indices");
  } else if (op.name == "aten::index_select") {
    table = op_args::tensor(op.args, "self");
    index = op_args::tensor(op.args, "index");
  } else {
    return std::nullopt;
  }
  if (table == nullptr || index == nullptr || table->shape.size() < 2 || !table->contiguous) {
    return std::nullopt;
  }
  if (op.name == "aten::index_select") {
    const auto rank = static_cast<double>(table->shape.size());
    const double dim = op_args::number(op.args, "dim").value_or(-1);
    if (dim != 0 && dim != -rank) return std::nullopt;  // rows: the first dimension only
  }
  Gather g;
  g.rows = static_cast<double>(table->shape[0]);
  g.width = g.rows > 0 ? static_cast<double>(table->numel()) / g.rows : 0;
  g.indices = static_cast<double>(index->numel());
  g.elem = dtype_size(table->dtype).value_or(0);
  g.index_elem = dtype_size(index->dtype).value_or(8);
  if (g.rows <= 0 || g.width <= 0 || g.elem <= 0) return std::nullopt;
  return g;
}

double forward_us(const Gather& g, const Device& d) {
  const double clock = d.boost_clock_mhz;  // cycles per microsecond
  if (g.indices <= kSmallIndexMax) return kFixedSmallUs + g.indices * kCyclesPerSmallIndex / clock;
  const double out = g.indices * g.width * g.elem;
  // Repeated rows come from cache: the table is read once at most.
  const double read = std::min(g.rows * g.width * g.elem, out) + g.indices * g.index_elem;
  const double dram = bandwidth_us(out + read, d) / kGatherBandwidthShare;
  const auto row_bytes = static_cast<int64_t>(g.width) * g.elem;
  if (row_bytes % kVectorBytes == 0) {
    const double vectors = static_cast<double>(row_bytes / kVectorBytes);
    const double blocks = g.indices * std::ceil(vectors / kVectorsPerBlock);
    return kFixedVectorizedUs + std::max(dram, d.sm_cycles_us(blocks * kCyclesPerBlock));
  }
  return kFixedElementwiseUs +
         std::max(dram, d.sm_cycles_us(g.indices * g.width * kCyclesPerElement));
}

// Expected distinct rows among `draws` uniform draws of `rows` (token ids repeat more).
double distinct_rows(double rows, double draws) {
  return rows > 1 ? -rows * std::expm1(draws * std::log1p(-1.0 / rows)) : 1.0;
}

std::optional<double> backward_us(const OpRecord& op, const Device& d) {
  const TensorMeta* grad = op_args::tensor(op.args, "grad_output");
  const TensorMeta* index = op_args::tensor(op.args, "indices");
  const std::optional<double> rows = op_args::number(op.args, "num_weights");
  if (grad == nullptr || index == nullptr || !rows || *rows <= 0 || grad->shape.empty()) {
    return std::nullopt;
  }
  const int elem = dtype_size(grad->dtype).value_or(0);
  const double width = static_cast<double>(grad->shape.back());
  const double indices = static_cast<double>(index->numel());
  if (elem <= 0 || width <= 0) return std::nullopt;
  const double clock = d.boost_clock_mhz;
  const double fill = bandwidth_us(*rows * width * elem, d);  // the zeroed weight gradient
  const bool by_frequency = op_args::boolean(op.args, "scale_grad_by_freq", false);
  if (embedding_paths::feature_path(static_cast<int64_t>(indices), by_frequency)) {
    const double blocks = std::ceil(width / kFeaturesPerBlock);
    const double waves = std::ceil(blocks / (kFeatureBlocksPerSm * d.sms));
    // The gradient rows a step updates come from L2 in the share of the gradient it holds (the
    // fit counted 4-byte accumulators, whatever the gradient's dtype).
    const double gradient_bytes = *rows * width * 4;
    const double l2_share = std::min(1.0, d.l2_mb * 1e6 / gradient_bytes);
    const double step = kCyclesPerStepL2 * l2_share + kCyclesPerStepDram * (1 - l2_share);
    return kFixedFeatureUs + fill + std::ceil(indices / kIndicesPerStep) * waves * step / clock;
  }
  const double segments = distinct_rows(*rows, indices);
  const double partials = segments + std::max(0.0, indices - segments) / kRowsPerPartialSegment;
  const double work = partials * width * kCyclesPerPartialElement + indices * kCyclesPerIndex;
  return kFixedSortUs + fill + d.sm_cycles_us(work);
}

}  // namespace

std::optional<double> embedding_kernels_us(const OpRecord& op, const Device& device) {
  if (device.sms <= 0 || device.boost_clock_mhz <= 0 || device.memory_bandwidth_gbs <= 0) {
    return std::nullopt;
  }
  if (op.name == "aten::embedding_dense_backward") return backward_us(op, device);
  if (const std::optional<Gather> g = gather_of(op)) return forward_us(*g, device);
  return std::nullopt;
}

}  // namespace habitat
