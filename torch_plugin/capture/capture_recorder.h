// One step's captured ops: a thread-safe, bounded buffer of habitat::OpRecord.
//
// Ops are committed when they finish, from whichever thread ran them (the recording thread
// and autograd's device threads). Each record carries a process-wide start sequence number
// as its id while recording; finish() orders the records by it and renumbers ids (and
// parents) densely from 0, so the step reads in start order.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "capture/capture_args.h"
#include "capture/torch_compat.h"
#include "habitat/trace.h"

namespace habitat::capture {

using Clock = std::chrono::steady_clock;

class Recorder {
 public:
  // `detailed`: record every op in full; otherwise (a steady-state step) only the step's
  // fingerprint is kept (add_fingerprint) and ops are not recorded.
  explicit Recorder(size_t max_ops, bool detailed = true);
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  bool recording() const { return recording_.load(std::memory_order_acquire); }
  bool detailed() const { return detailed_; }

  // Adds one op (its name and tensor shapes/dtypes hashed by the caller) to the step's
  // fingerprint. Order-insensitive (a sum of mixed hashes), so ops committed by several
  // threads in any interleaving give the same fingerprint; any change of an op's name, shape
  // or dtype, or of the number of ops, changes it.
  void add_fingerprint(uint64_t op_hash) {
    fingerprint_sum_.fetch_add(finalize_hash(op_hash), std::memory_order_relaxed);
    fingerprint_ops_.fetch_add(1, std::memory_order_relaxed);
  }
  // The fingerprint so far: 0 only for a step without ops.
  uint64_t fingerprint() const;
  // Adds a step recorded inside this one (nested window) to this step's fingerprint.
  void absorb_fingerprint(const Recorder& inner);
  uint64_t fingerprint_ops() const { return fingerprint_ops_.load(std::memory_order_relaxed); }
  static uint64_t finalize_hash(uint64_t h) {  // splitmix64's finaliser
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
  }

  // Reserves room for one more op; false (and the op counts as dropped) once the step
  // holds max_ops, so a runaway step cannot exhaust memory.
  bool admit();
  // A process-wide increasing number: the op's place in start order.
  static uint64_t next_sequence();
  double micros_since_start(Clock::time_point t) const;
  // Small number of the calling thread within this step: 0 for the first thread seen.
  uint64_t thread_number();
  // Adds a finished op and moves the storages seen so far out of `storages` (held until the
  // recorder dies; `storages` is left empty with its capacity); ignored once the step is
  // finished (a straggling thread).
  void commit(OpRecord&& op, StorageRefs& storages);

  // Stops recording and moves the records out, in start order, ids still raw sequence
  // numbers (see to_step).
  std::vector<OpRecord> finish();
  // Copies in the finished records of a step recorded inside this one (a nested
  // predict_on on the same thread): its ops belong to this step too.
  void absorb(Recorder& inner, const std::vector<OpRecord>& inner_ops);
  // The step of finished records: ids renumbered 0..n-1 in start order, parents mapped
  // (a parent that was not recorded becomes none).
  static Step to_step(std::vector<OpRecord> ops, int64_t index, double wall_ms);

  // Habitat's host time outside ops during the step (Python module hooks), in ns.
  void add_hook_ns(uint64_t ns) { hook_ns_.fetch_add(ns, std::memory_order_relaxed); }
  uint64_t hook_ns() const { return hook_ns_.load(std::memory_order_relaxed); }

  // The precision switches when the window opened (what the trace origin records); an op
  // run under other switches records its own.
  const compat::PrecisionState& precision_baseline() const { return precision_baseline_; }

  size_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  size_t max_ops() const { return max_ops_; }
  Clock::time_point start() const { return start_; }

 private:
  const size_t max_ops_;
  const bool detailed_;
  std::atomic<uint64_t> fingerprint_sum_{0};
  std::atomic<uint64_t> fingerprint_ops_{0};
  const uint64_t generation_;  // tells this recorder's thread numbers from a previous one's
  const Clock::time_point start_;
  const compat::PrecisionState precision_baseline_;
  std::atomic<bool> recording_{true};
  std::atomic<size_t> admitted_{0};
  std::atomic<size_t> dropped_{0};
  std::atomic<uint64_t> hook_ns_{0};

  mutable std::mutex mutex_;  // guards everything below
  std::vector<OpRecord> ops_;
  StorageRefs storages_;  // keeps storage addresses unique for the step (see StorageRefs)
  std::vector<std::thread::id> threads_;  // index = thread number
  bool finished_ = false;
};

}  // namespace habitat::capture
