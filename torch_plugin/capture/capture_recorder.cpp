#include "capture/capture_recorder.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>

namespace habitat::capture {
namespace {

std::atomic<uint64_t> g_sequence{1};
std::atomic<uint64_t> g_generation{1};
// Ops of the latest detailed step: the next one reserves as much room (steps repeat), so its
// records are not moved again and again while the vector grows.
std::atomic<size_t> g_last_step_ops{0};
constexpr size_t kMaxReservedOps = size_t{1} << 16;

struct ThreadNumberCache {
  uint64_t generation = 0;
  uint64_t number = 0;
};
thread_local ThreadNumberCache t_thread_number;

}  // namespace

Recorder::Recorder(size_t max_ops, bool detailed)
    : max_ops_(max_ops),
      detailed_(detailed),
      generation_(g_generation.fetch_add(1, std::memory_order_relaxed)),
      start_(Clock::now()),
      precision_baseline_(compat::precision_state()) {
  if (detailed_) {
    ops_.reserve(
        std::min({max_ops_, g_last_step_ops.load(std::memory_order_relaxed), kMaxReservedOps}));
  }
}

uint64_t Recorder::fingerprint() const {
  const uint64_t n = fingerprint_ops();
  if (n == 0) return 0;
  const uint64_t h =
      finalize_hash(fingerprint_sum_.load(std::memory_order_relaxed) ^ finalize_hash(n));
  return h == 0 ? 1 : h;
}

void Recorder::absorb_fingerprint(const Recorder& inner) {
  fingerprint_sum_.fetch_add(inner.fingerprint_sum_.load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
  fingerprint_ops_.fetch_add(inner.fingerprint_ops(), std::memory_order_relaxed);
}

bool Recorder::admit() {
  if (admitted_.fetch_add(1, std::memory_order_relaxed) < max_ops_) return true;
  dropped_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

uint64_t Recorder::next_sequence() { return g_sequence.fetch_add(1, std::memory_order_relaxed); }

double Recorder::micros_since_start(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - start_).count();
}

uint64_t Recorder::thread_number() {
  ThreadNumberCache& cache = t_thread_number;
  if (cache.generation == generation_) return cache.number;
  const auto self = std::this_thread::get_id();
  std::lock_guard lock(mutex_);
  auto it = std::find(threads_.begin(), threads_.end(), self);
  if (it == threads_.end()) it = threads_.insert(threads_.end(), self);
  cache = {generation_, static_cast<uint64_t>(it - threads_.begin())};
  return cache.number;
}

void Recorder::commit(OpRecord&& op, StorageRefs& storages) {
  std::lock_guard lock(mutex_);
  if (!finished_) {
    ops_.push_back(std::move(op));
    storages_.insert(storages_.end(), std::make_move_iterator(storages.begin()),
                     std::make_move_iterator(storages.end()));
  }
  storages.clear();
}

std::vector<OpRecord> Recorder::finish() {
  recording_.store(false, std::memory_order_release);
  std::vector<OpRecord> ops;
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
    ops.swap(ops_);
  }
  if (detailed_) g_last_step_ops.store(ops.size(), std::memory_order_relaxed);
  const auto by_id = [](const OpRecord& a, const OpRecord& b) { return a.id < b.id; };
  if (std::is_sorted(ops.begin(), ops.end(), by_id)) return ops;
  // Committed as they finish, read in start order. Sorting (id, position) pairs and then
  // moving each record once is far cheaper than sorting the records (ids are unique, so the
  // order is the same).
  std::vector<std::pair<uint64_t, size_t>> order(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) order[i] = {ops[i].id, i};
  std::sort(order.begin(), order.end());
  std::vector<OpRecord> sorted;
  sorted.reserve(ops.size());
  for (const auto& entry : order) sorted.push_back(std::move(ops[entry.second]));
  return sorted;
}

void Recorder::absorb(Recorder& inner, const std::vector<OpRecord>& inner_ops) {
  const double shift_us = std::chrono::duration<double, std::micro>(inner.start_ - start_).count();
  std::vector<std::thread::id> inner_threads;
  StorageRefs inner_storages;
  {
    std::lock_guard lock(inner.mutex_);
    inner_threads = inner.threads_;
    inner_storages.swap(inner.storages_);
  }
  std::lock_guard lock(mutex_);
  if (finished_) return;
  storages_.insert(storages_.end(), std::make_move_iterator(inner_storages.begin()),
                   std::make_move_iterator(inner_storages.end()));
  for (const OpRecord& op : inner_ops) {
    if (admitted_.fetch_add(1, std::memory_order_relaxed) >= max_ops_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    OpRecord copy = op;
    copy.start_us += shift_us;
    if (copy.thread < inner_threads.size()) {
      const auto tid = inner_threads[copy.thread];
      auto it = std::find(threads_.begin(), threads_.end(), tid);
      if (it == threads_.end()) it = threads_.insert(threads_.end(), tid);
      copy.thread = static_cast<uint64_t>(it - threads_.begin());
    }
    ops_.push_back(std::move(copy));
  }
}

Step Recorder::to_step(std::vector<OpRecord> ops, int64_t index, double wall_ms) {
  // The raw ids in start order (finish() sorted them): a parent's new id is its position,
  // found by binary search. Records in another order fall back to a map.
  std::vector<uint64_t> raw(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) raw[i] = ops[i].id;
  const bool sorted = std::is_sorted(raw.begin(), raw.end());
  std::unordered_map<uint64_t, uint64_t> dense;
  if (!sorted) {
    dense.reserve(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) dense.emplace(raw[i], i);
  }
  const auto position = [&](uint64_t id) -> std::optional<uint64_t> {
    if (sorted) {
      const auto it = std::lower_bound(raw.begin(), raw.end(), id);
      if (it == raw.end() || *it != id) return std::nullopt;
      return static_cast<uint64_t>(it - raw.begin());
    }
    const auto it = dense.find(id);
    return it == dense.end() ? std::nullopt : std::optional<uint64_t>(it->second);
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    OpRecord& op = ops[i];
    op.id = i;
    if (op.parent) op.parent = position(*op.parent);
  }
  Step step;
  step.index = index;
  step.wall_ms = wall_ms;
  step.ops = std::move(ops);
  return step;
}

}  // namespace habitat::capture
