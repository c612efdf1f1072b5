#include "habitat/kernel_correlation.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace habitat {
namespace {

KernelLaunch to_launch(const KernelRecord& r) {
  KernelLaunch k;
  k.name = r.name;
  std::copy(std::begin(r.grid), std::end(r.grid), std::begin(k.grid));
  std::copy(std::begin(r.block), std::end(r.block), std::begin(k.block));
  k.registers_per_thread = r.registers_per_thread;
  k.static_shared_bytes = r.static_shared_bytes;
  k.dynamic_shared_bytes = r.dynamic_shared_bytes;
  k.duration_us = static_cast<double>(r.end_ns - r.start_ns) / 1000.0;
  k.stream = r.stream;
  return k;
}

bool complete(const KernelRecord& r) { return r.end_ns > r.start_ns && r.start_ns != 0; }

}  // namespace

bool Correlator::has_room() {
  if (pending_records() < max_records_) return true;
  ++overflow_;
  return false;
}

void Correlator::add(KernelRecord record) {
  if (has_room()) kernels_.push_back(std::move(record));
}

void Correlator::add(const ApiRecord& record) {
  if (!has_room()) return;
  threads_[record.correlation_id] = record.thread_id;
  if (record.start_ns != 0) {
    api_calls_[record.correlation_id] = {record.start_ns, record.end_ns};
  }
}

void Correlator::add(const SyncActivityRecord& record) {
  if (has_room()) syncs_.push_back(record);
}

void Correlator::add(const EventActivityRecord& record) {
  if (has_room()) event_streams_[record.event_sync_id] = record.stream;
}

void Correlator::add(const ExternalCorrelationRecord& record) {
  if (record.kind != kHabitatExternalKind) return;
  if (has_room()) external_[record.correlation_id] = record.external_id;
}

StepKernels Correlator::take_step() {
  StepKernels out;
  CorrelationStats& s = out.stats;
  s.dropped = std::exchange(dropped_, 0);
  s.overflow = std::exchange(overflow_, 0);

  std::stable_sort(
      kernels_.begin(), kernels_.end(),
      [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  for (const KernelRecord& k : kernels_) {
    ++s.kernels;
    if (!complete(k)) {
      ++s.incomplete;
      continue;
    }
    const double us = static_cast<double>(k.end_ns - k.start_ns) / 1000.0;
    auto ext = external_.find(k.correlation_id);
    if (ext != external_.end() && external_generation(ext->second) == generation_) {
      ++s.attributed;
      s.attributed_us += us;
      KernelLaunch launch = to_launch(k);
      launch.device_start_us = static_cast<double>(k.start_ns) / 1000.0;
      if (auto api = api_calls_.find(k.correlation_id); api != api_calls_.end()) {
        const ApiCall& call = api->second;
        launch.launch_us = static_cast<double>(call.start_ns) / 1000.0;
        if (call.end_ns >= call.start_ns) {
          launch.launch_wall_us = static_cast<double>(call.end_ns - call.start_ns) / 1000.0;
        }
      }
      out.by_op[external_op_id(ext->second)].push_back(std::move(launch));
    } else if (ext != external_.end() || previous_external_.contains(k.correlation_id)) {
      ++s.stale;
    } else {
      ++s.unattributed;
      s.unattributed_us += us;
      auto thread = threads_.find(k.correlation_id);
      ++s.unattributed_by_thread[thread == threads_.end() ? 0 : thread->second];
      ++s.unattributed_by_stream[k.stream];
    }
  }

  std::stable_sort(syncs_.begin(), syncs_.end(),
                   [](const SyncActivityRecord& a, const SyncActivityRecord& b) {
                     return a.start_ns < b.start_ns;
                   });
  for (const SyncActivityRecord& r : syncs_) {
    SyncRecord sync;
    const auto event_stream = event_streams_.find(r.event_sync_id);
    switch (r.type) {
      case 1:  // cudaEventSynchronize: waits for the event's stream
        sync.kind = SyncRecord::Kind::Event;
        sync.stream = event_stream != event_streams_.end() ? event_stream->second : r.stream;
        break;
      case 2:  // cudaStreamWaitEvent: a device-side wait of one stream on another
        if (event_stream == event_streams_.end()) continue;  // the event's stream is unknown
        sync.kind = SyncRecord::Kind::StreamWait;
        sync.stream = r.stream;
        sync.wait_stream = event_stream->second;
        break;
      case 3:
        sync.kind = SyncRecord::Kind::Stream;
        sync.stream = r.stream;
        break;
      case 4:
        sync.kind = SyncRecord::Kind::Device;
        break;
      default:
        continue;
    }
    sync.start_us = static_cast<double>(r.start_ns) / 1000.0;
    sync.wall_us =
        r.end_ns > r.start_ns ? static_cast<double>(r.end_ns - r.start_ns) / 1000.0 : 0.0;
    out.syncs.push_back(sync);
  }

  kernels_.clear();
  threads_.clear();
  api_calls_.clear();
  syncs_.clear();
  event_streams_.clear();
  previous_external_ = std::exchange(external_, {});
  generation_ = (generation_ + 1) & kGenerationMask;
  if (generation_ == 0) generation_ = 1;  // 0 is never pushed, so a zeroed id cannot match
  return out;
}

int64_t attach_kernels(std::vector<OpRecord>& ops, StepKernels&& kernels) {
  std::unordered_set<uint64_t> known;
  known.reserve(ops.size());
  for (OpRecord& op : ops) {
    known.insert(op.id);
    auto it = kernels.by_op.find(op.id);
    if (it == kernels.by_op.end()) continue;
    op.kernels = std::move(it->second);
  }
  int64_t orphans = 0;
  for (const auto& [id, list] : kernels.by_op) {
    if (!known.contains(id)) orphans += static_cast<int64_t>(list.size());
  }
  return orphans;
}

void shift_to_step(std::vector<OpRecord>& ops, std::vector<SyncRecord>& syncs,
                   double step_start_us) {
  const auto shift = [&](double t) { return std::max(0.0, t - step_start_us); };
  for (OpRecord& op : ops) {
    for (KernelLaunch& k : op.kernels) {
      if (k.launch_us) k.launch_us = shift(*k.launch_us);
      if (k.device_start_us) k.device_start_us = shift(*k.device_start_us);
    }
  }
  for (SyncRecord& s : syncs) s.start_us = shift(s.start_us);
}

}  // namespace habitat
