#include "habitat/prediction_memo.h"

#include <algorithm>
#include <cstring>

#include "habitat/predictor.h"

namespace habitat {
namespace {

bool same_tensor(const TensorMeta& a, const TensorMeta& b) {
  return a.contiguous == b.contiguous && a.defined == b.defined && a.storage == b.storage &&
         a.storage_offset == b.storage_offset && a.shape == b.shape && a.strides == b.strides &&
         a.dtype == b.dtype && a.device == b.device;
}

bool same_tensors(const std::vector<TensorMeta>& a, const std::vector<TensorMeta>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), same_tensor);
}

bool same_arg(const Argument& a, const Argument& b) {
  const ArgValue& x = a.value;
  const ArgValue& y = b.value;
  // Doubles compared by their bits, as the op key does: -0.0 and 0.0 stay apart.
  return x.kind == y.kind && std::memcmp(&x.real, &y.real, sizeof x.real) == 0 && x.ints == y.ints &&
         a.name == b.name && x.text == y.text && same_tensors(x.tensors, y.tensors);
}

bool same_kernel(const KernelLaunch& a, const KernelLaunch& b) {
  return std::equal(a.grid, a.grid + 3, b.grid) && std::equal(a.block, a.block + 3, b.block) &&
         a.registers_per_thread == b.registers_per_thread &&
         a.static_shared_bytes == b.static_shared_bytes &&
         a.dynamic_shared_bytes == b.dynamic_shared_bytes &&
         std::memcmp(&a.duration_us, &b.duration_us, sizeof a.duration_us) == 0 &&
         a.stream == b.stream && a.name == b.name;
}

bool same_op_work(const OpRecord& a, const OpRecord& b) {
  return a.id == b.id && a.parent == b.parent && a.depth == b.depth &&
         a.has_children == b.has_children && a.phase == b.phase && a.thread == b.thread &&
         a.name == b.name && a.overload == b.overload && a.module_path == b.module_path &&
         a.autograd_node == b.autograd_node && a.precision == b.precision &&
         std::equal(a.args.begin(), a.args.end(), b.args.begin(), b.args.end(), same_arg) &&
         same_tensors(a.outputs, b.outputs) &&
         std::equal(a.kernels.begin(), a.kernels.end(), b.kernels.begin(), b.kernels.end(), same_kernel);
}

}  // namespace

bool same_work(const Step& a, const Step& b) {
  return a.measured_peak_bytes == b.measured_peak_bytes && a.dropped_ops == b.dropped_ops &&
         std::equal(a.ops.begin(), a.ops.end(), b.ops.begin(), b.ops.end(), same_op_work);
}

std::pair<PredictionMemo::Entry*, bool> PredictionMemo::find_or_add(const std::string& key) {
  if (const auto it = entries_.find(key); it != entries_.end()) return {&it->second, false};
  if (entries_.size() >= max_ops_) entries_.clear();  // ops that never repeat: start afresh
  return {&entries_.try_emplace(key).first->second, true};
}

std::size_t PredictionMemo::slot(const Device* target) {
  return slots_.try_emplace(target, slots_.size()).first->second;
}

std::shared_ptr<const Forecast> PredictionMemo::repeat_of(const Step& step,
                                                         const std::vector<const Device*>& targets) const {
  if (!last_ || last_->targets != targets || !same_work(last_->step, step)) return nullptr;
  return last_->forecast;
}

void PredictionMemo::remember(const Step& step, const std::vector<const Device*>& targets,
                              std::shared_ptr<const Forecast> forecast) {
  last_ = LastStep{step, targets, std::move(forecast)};
}

}  // namespace habitat
