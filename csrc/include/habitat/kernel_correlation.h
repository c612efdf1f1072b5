// Joins CUPTI activity records into the kernels each captured op launched.
//
// CUPTI delivers three kinds of records, in any order and split across buffers (per-thread
// buffers for API records, per-stream buffers for kernels):
//   kernel record           --correlation id-->  the runtime/driver API call that launched it
//   external correlation    --correlation id-->  the op id pushed around that API call
// The plugin pushes one external id (kind CUSTOM2) per intercepted op, so a kernel belongs
// to exactly the innermost op whose launch call it came from. These structs mirror the
// CUPTI fields we need, so the join is plain C++ and is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "habitat/trace.h"

namespace habitat {

// CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2: torch.profiler (Kineto) owns CUSTOM0 and CUSTOM1.
inline constexpr uint32_t kHabitatExternalKind = 5;

struct KernelRecord {
  uint32_t correlation_id = 0;
  std::string name;
  int grid[3] = {1, 1, 1};
  int block[3] = {1, 1, 1};
  int registers_per_thread = 0;
  int static_shared_bytes = 0;
  int dynamic_shared_bytes = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;  // 0 or <= start: the record was flushed before the kernel finished
  uint32_t stream = 0;
  uint32_t device = 0;
};

struct ApiRecord {
  uint32_t correlation_id = 0;
  uint32_t thread_id = 0;  // as CUPTI reports it (system thread id by default)
  uint32_t cbid = 0;       // CUPTI callback id of the runtime or driver function
  bool driver = false;     // true: driver API (cuLaunchKernel, Triton); false: runtime API
  uint64_t start_ns = 0;   // host time of the call (CUPTI clock; 0 = unknown): launch time
  uint64_t end_ns = 0;     // when the call returned (0 = unknown)
};

// CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: a host wait, or a stream waiting on an event.
struct SyncActivityRecord {
  uint32_t type = 0;  // CUpti_ActivitySynchronizationType: 1 event sync, 2 stream wait event,
                      // 3 stream sync, 4 context sync
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t stream = 0;         // the synchronised (or waiting) stream
  uint64_t event_sync_id = 0;  // joins the CUDA_EVENT record of the event waited on
};

// CUPTI_ACTIVITY_KIND_CUDA_EVENT: where an event was recorded.
struct EventActivityRecord {
  uint64_t event_sync_id = 0;
  uint32_t stream = 0;
};

struct ExternalCorrelationRecord {
  uint32_t kind = 0;  // CUpti_ExternalCorrelationKind
  uint64_t external_id = 0;
  uint32_t correlation_id = 0;
};

// External ids carry a step generation next to the op id: op ids restart every step, so a
// record that arrives after its step was flushed must not land on the next step's op.
inline constexpr int kOpIdBits = 40;
inline constexpr uint64_t kOpIdMask = (uint64_t{1} << kOpIdBits) - 1;
inline constexpr uint32_t kGenerationMask = (uint32_t{1} << (64 - kOpIdBits)) - 1;
inline uint64_t encode_external_id(uint32_t generation, uint64_t op_id) {
  return (uint64_t{generation & kGenerationMask} << kOpIdBits) | (op_id & kOpIdMask);
}
inline uint32_t external_generation(uint64_t external_id) {
  return static_cast<uint32_t>(external_id >> kOpIdBits);
}
inline uint64_t external_op_id(uint64_t external_id) { return external_id & kOpIdMask; }

// What happened to the records of one step. Every kernel record lands in exactly one of
// attributed, unattributed, stale or incomplete.
struct CorrelationStats {
  int64_t kernels = 0;       // kernel records received
  int64_t attributed = 0;    // joined to an op
  int64_t unattributed = 0;  // launched outside any op: other threads, user CUDA code, NCCL
  int64_t stale = 0;         // carried the id of an earlier step (its step flushed too early)
  int64_t incomplete = 0;    // no end time: flushed before the kernel finished
  double attributed_us = 0;
  double unattributed_us = 0;
  int64_t dropped = 0;   // records CUPTI dropped for lack of buffer space
  int64_t overflow = 0;  // records discarded because the step hit the correlator's bound
  std::map<uint32_t, int64_t> unattributed_by_thread;  // launching thread (0 = unknown)
  std::map<uint32_t, int64_t> unattributed_by_stream;

  bool lossless() const { return dropped == 0 && overflow == 0 && stale == 0 && incomplete == 0; }
};

struct StepKernels {
  std::map<uint64_t, std::vector<KernelLaunch>> by_op;  // op id -> kernels in start order
  // Kernels' launch_us/device_start_us and syncs' start_us are on CUPTI's clock (us) until
  // shift_to_step moves them to the step's.
  std::vector<SyncRecord> syncs;
  CorrelationStats stats;
};

class Correlator {
 public:
  // Records held per step before further ones are counted as overflow (about 100 bytes
  // each): ample for a training step, and a bound when a step never ends.
  static constexpr std::size_t kDefaultMaxRecords = std::size_t{1} << 21;

  explicit Correlator(std::size_t max_records = kDefaultMaxRecords) : max_records_(max_records) {}

  // The generation to encode into external ids pushed during the current step.
  uint32_t generation() const { return generation_; }

  void add(KernelRecord record);
  void add(const ApiRecord& record);
  void add(const ExternalCorrelationRecord& record);
  void add(const SyncActivityRecord& record);
  void add(const EventActivityRecord& record);
  void add_dropped(int64_t records) { dropped_ += records; }

  // Joins everything received since the previous call, then starts the next step (a new
  // generation) with empty state. Records of other external kinds are ignored.
  StepKernels take_step();

  std::size_t pending_records() const {
    return kernels_.size() + threads_.size() + external_.size() + syncs_.size();
  }

 private:
  bool has_room();

  std::size_t max_records_;
  uint32_t generation_ = 1;
  std::vector<KernelRecord> kernels_;
  std::unordered_map<uint32_t, uint32_t> threads_;   // correlation id -> launching thread
  std::unordered_map<uint32_t, uint64_t> external_;  // correlation id -> external id
  struct ApiCall {
    uint64_t start_ns = 0;
    uint64_t end_ns = 0;
  };
  std::unordered_map<uint32_t, ApiCall> api_calls_;  // correlation id -> the launch call (ns)
  std::vector<SyncActivityRecord> syncs_;
  std::unordered_map<uint64_t, uint32_t> event_streams_;  // event sync id -> recording stream
  // The previous step's ids, kept one step so a kernel that arrives late is reported as
  // stale rather than as launched outside any op.
  std::unordered_map<uint32_t, uint64_t> previous_external_;
  int64_t dropped_ = 0;
  int64_t overflow_ = 0;
};

// Sets the kernels of every op in `ops` that launched any, matching the ids the ops had when
// their external ids were pushed. Returns how many kernels named an op id `ops` does not hold
// (an op dropped at the step's record cap, for example).
int64_t attach_kernels(std::vector<OpRecord>& ops, StepKernels&& kernels);

// Moves the CUPTI-clock times of a step's kernels and syncs to the step's clock:
// `step_start_us` is CUPTI's timestamp (us) at the step's start; times before it clamp to 0.
void shift_to_step(std::vector<OpRecord>& ops, std::vector<SyncRecord>& syncs,
                   double step_start_us);

}  // namespace habitat
