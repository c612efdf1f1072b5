// The CUPTI Activity API client: records the CUDA kernels each captured op launches.
//
// Plain C++ (no torch headers) so CMake compiles it wherever cupti.h exists. Built without
// HABITAT_WITH_CUPTI (CPU-only torch, or no CUPTI headers) every call reports that CUPTI
// support was not compiled in. No call throws or aborts on a CUPTI error: each returns a
// Status naming the problem, and tracing stays off.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "habitat/kernel_correlation.h"

namespace habitat::cupti {

struct TracerState;  // defined by cupti_tracer.cpp

struct Status {
  bool ok = false;
  std::string message;
};

// False when this build has no CUPTI support at all.
bool compiled_in();

// CUPTI's clock now, in microseconds (the clock of kernel and API records); 0 without CUPTI.
// Taken at a step's start, it moves the step's records to the step's clock.
double timestamp_us();

struct TracerOptions {
  // Also collect NVTX MARKER records of the "habitat" domain (needs the process started
  // with NVTX_INJECTION64_PATH pointing at libcupti); used to check that ranges are emitted.
  bool record_nvtx = false;
};

struct StepResult {
  StepKernels kernels;
  int64_t nvtx_ranges = 0;               // "habitat" NVTX ranges seen (with record_nvtx)
  std::vector<std::string> nvtx_sample;  // a few of their names
  int64_t orphan_kernels = 0;            // flush_into: kernels of ops the step did not hold
  // flush_into: the step's host synchronisations and stream waits (CUPTI clock, us; see
  // shift_to_step), when the CUPTI library records them.
  std::vector<SyncRecord> syncs;
  Status status;  // not ok: the step's kernels are incomplete
};

// Activity buffers: lent to CUPTI and not back yet, and other clients' buffers that CUPTI
// completed into our callback (neither read nor freed).
struct BufferStats {
  int64_t outstanding = 0;
  int64_t foreign = 0;
};

class KernelTracer {
 public:
  // The process-wide tracer: CUPTI has one activity client per process.
  static KernelTracer& instance();

  // Registers the buffer callbacks and enables the concurrent-kernel, runtime, driver and
  // external-correlation kinds. Calling it while active is a no-op that returns ok.
  Status start(const TracerOptions& options = {});
  // Disables the kinds it enabled, then forces every buffer it lent back (ok only when all
  // came back), so another client may register next. Never cuptiFinalize: other CUPTI
  // clients (torch.profiler) may still need CUPTI. Tracing holds CUPTI only while started:
  // KernelTracing stops after every traced step.
  Status stop();
  // Marks tracing off without any CUPTI call: another client (torch.profiler) has taken
  // the callbacks over, and touching the kinds now would break it. start() re-registers.
  void detach(const std::string& reason);
  // Forces every buffer out (synchronise the device first, or running kernels arrive as
  // incomplete), joins the step's records and starts the next step.
  StepResult flush_step();
  // flush_step(), then the kernels go into `ops` (ids as pushed by ScopedKernelAttribution,
  // before any renumbering); the result keeps the counts. Does nothing when not active.
  StepResult flush_into(std::vector<OpRecord>& ops);
  // The counts and status of the latest flush (its kernels already handed out).
  StepResult last_step() const;

  bool active() const;
  BufferStats buffers() const;
  // False when CUPTI is not compiled in or the last start() failed: callers fall back.
  bool usable() const;
  // "tracing", "not started", or why tracing is off.
  std::string status() const;
  // CUPTI's host time per kernel launch on this host, as measured when tracing began
  // (python/habitat/capture/cupti.py: a launch loop timed with and without CUPTI); each traced
  // step carries it (Step::launch_overhead_us) so the timeline can take it out. Unset (nullopt)
  // until measured; a negative value unsets it.
  void set_launch_overhead_us(double us);
  std::optional<double> launch_overhead_us() const;

  // Used by ScopedKernelAttribution. push returns false when nothing was pushed.
  bool push(uint64_t op_id);
  void pop();

  KernelTracer(const KernelTracer&) = delete;
  KernelTracer& operator=(const KernelTracer&) = delete;
  ~KernelTracer();

 private:
  KernelTracer();
  std::unique_ptr<TracerState> state_;
  std::atomic<double> launch_overhead_us_{-1.0};  // < 0: not measured
};

// Attributes every kernel launched on this thread while it lives to op `op_id`. Costs one
// relaxed atomic load when tracing is off. Nested guards attribute to the innermost op.
class ScopedKernelAttribution {
 public:
  explicit ScopedKernelAttribution(uint64_t op_id);
  ~ScopedKernelAttribution();
  ScopedKernelAttribution(const ScopedKernelAttribution&) = delete;
  ScopedKernelAttribution& operator=(const ScopedKernelAttribution&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace habitat::cupti
