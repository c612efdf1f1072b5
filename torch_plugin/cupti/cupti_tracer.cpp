#include "cupti/cupti_tracer.h"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>
#include <utility>

#ifdef HABITAT_WITH_CUPTI
#include <cupti.h>

#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "cupti/cupti_kernel_record.h"
#include "habitat/trace.h"
#endif

namespace habitat::cupti {

#ifndef HABITAT_WITH_CUPTI

// ----- stub: this build cannot trace kernels ------------------------------------------

namespace {
constexpr const char* kNotCompiled =
    "CUPTI support was not compiled in: this torch build has no CUDA (or CUPTI headers were "
    "missing). Install a CUDA build of torch and the CUDA toolkit's CUPTI, then rebuild habitat "
    "with `pip install --no-build-isolation .`";
}  // namespace

struct TracerState {};

bool compiled_in() { return false; }
double timestamp_us() { return 0.0; }
KernelTracer::KernelTracer() : state_(std::make_unique<TracerState>()) {}
KernelTracer::~KernelTracer() = default;
Status KernelTracer::start(const TracerOptions&) { return {false, kNotCompiled}; }
Status KernelTracer::stop() { return {true, ""}; }
void KernelTracer::detach(const std::string&) {}
StepResult KernelTracer::flush_step() { return last_step(); }
StepResult KernelTracer::flush_into(std::vector<OpRecord>&) { return last_step(); }
StepResult KernelTracer::last_step() const {
  StepResult r;
  r.status = {false, kNotCompiled};
  return r;
}
bool KernelTracer::active() const { return false; }
BufferStats KernelTracer::buffers() const { return {}; }
bool KernelTracer::usable() const { return false; }
std::string KernelTracer::status() const { return kNotCompiled; }
bool KernelTracer::push(uint64_t) { return false; }
void KernelTracer::pop() {}

#else

// ----- CUPTI Activity API client --------------------------------------------------------

namespace {

constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
static_assert(static_cast<uint32_t>(kExternalKind) == kHabitatExternalKind);

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

// Device work other than kernels: copies within the GPU's memory and memsets run on the stream
// as kernels do (a contiguous clone is a cudaMemcpyAsync, no kernel). Enabled when the CUPTI
// library supports them; tracing goes on without them when it does not.
constexpr CUpti_ActivityKind kMemoryKinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
};

// Timeline records (host syncs, stream waits, where events were recorded): enabled when the
// CUPTI library supports them, and tracing goes on without them when it does not.
// The record layouts read below (with cudaEventSyncId) are CUPTI 13's.
#if CUPTI_API_VERSION >= 130000
#define HABITAT_CUPTI_SYNC_RECORDS 1
constexpr CUpti_ActivityKind kOptionalKinds[] = {
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_CUDA_EVENT,
};
#endif

// HABITAT_CUPTI_API_RECORDS=launches: runtime and driver API records for the calls that launch
// kernels only (what the join needs: the launching thread and time), instead of a record for
// every CUDA API call (cudaGetDevice, cudaGetLastError, the driver calls under each runtime
// call), each of which costs host time inside the traced step. Off by default: on an H100
// (2026-11-27) it lost kernels, 15.7 of ResNet-50's 37.7 ms recorded
// (benchmarks/results/first-step-H100-SXM5-80GB-2026-11-27/README.md).
#if CUPTI_API_VERSION >= 130000
#define HABITAT_CUPTI_API_FILTER 1
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    // The copies and memsets recorded as device work (kMemoryKinds) are launched so too.
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
};
constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};

bool launch_api_records_only() {
  const char* v = std::getenv("HABITAT_CUPTI_API_RECORDS");
  return v != nullptr && std::strcmp(v, "launches") == 0;
}

// Turns the launch calls' API records on or off; false when CUPTI refused one (then every
// one switched here is switched back).
bool switch_launch_api_records(uint8_t on) {
  for (CUpti_CallbackId cbid : kRuntimeLaunches) {
    if (cuptiActivityEnableRuntimeApi(cbid, on) != CUPTI_SUCCESS) {
      if (on) switch_launch_api_records(0);
      return false;
    }
  }
  for (CUpti_CallbackId cbid : kDriverLaunches) {
    if (cuptiActivityEnableDriverApi(cbid, on) != CUPTI_SUCCESS) {
      if (on) switch_launch_api_records(0);
      return false;
    }
  }
  return true;
}
#endif

constexpr std::size_t kMaxNvtxSample = 32;
constexpr std::size_t kMaxPooledBuffers = 8;
// CUPTI asks for another buffer when one fills, so the size only sets how often it asks.
constexpr std::size_t kBufferBytes = std::size_t{4} << 20;

const char* kind_name(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return "DRIVER";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return "EXTERNAL_CORRELATION";
    case CUPTI_ACTIVITY_KIND_MARKER:
      return "MARKER";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "MEMSET";
    default:
      return "?";
  }
}

// Why a CUPTI call failed, with what the user can do about it.
std::string describe(CUptiResult result, const std::string& call) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown";
  std::string msg = "CUPTI kernel tracing is off: " + call + " failed with " + text + " (" +
                    std::to_string(static_cast<int>(result)) + ")";
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      msg +=
          ". The driver allows profiling only to administrators: run as root, or load the "
          "nvidia module with NVreg_RestrictProfilingToAdminUsers=0";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_HARDWARE_BUSY:
      msg +=
          ". Another CUPTI client (Nsight Systems/Compute, torch.profiler or another "
          "profiler) holds CUPTI; Habitat steps aside until it is gone";
      break;
    case CUPTI_ERROR_UNKNOWN:
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_INVALID_DEVICE:
    case CUPTI_ERROR_NOT_COMPATIBLE:
      msg +=
          ". No usable CUDA driver/GPU for this CUPTI, or the driver is older than the "
          "CUPTI library: check nvidia-smi and that the driver supports this CUDA version";
      break;
    default:
      break;
  }
  return msg + ". Forecasts fall back to per-op timing or shapes.";
}

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

// A copy or memset as the kernel record the join attributes to its op: no launch
// configuration (the record's one block of one thread).
KernelRecord memory_operation(std::string_view name, uint32_t correlation, uint64_t start,
                              uint64_t end, uint32_t stream, uint32_t device) {
  KernelRecord r;
  r.correlation_id = correlation;
  r.name = std::string(name);
  r.start_ns = start;
  r.end_ns = end;
  r.stream = stream;
  r.device = device;
  return r;
}

}  // namespace

struct TracerState {
  // Control: start/stop/flush, one caller at a time.
  std::mutex control_mu;
  std::vector<CUpti_ActivityKind> enabled;
  std::string status = "not started";
  bool start_failed = false;
  bool launch_records_only =
      false;  // API records of the launch calls only (HABITAT_CUPTI_API_RECORDS)

  // Hot path: read on every op by ScopedKernelAttribution.
  std::atomic<bool> active{false};
  std::atomic<uint32_t> generation{1};
  std::atomic<int64_t> push_errors{0};

  // Records: filled by CUPTI's buffer-completed callback, possibly on its own thread.
  std::mutex records_mu;
  Correlator correlator;
  int64_t nvtx_ranges = 0;
  std::vector<std::string> nvtx_sample;
  std::string callback_error;
  StepResult last;  // counts of the latest flush, under control_mu

  // Buffers are allocated here and handed to CUPTI; `lent` remembers which are ours, so a
  // buffer that another client's callback received is never freed twice, and one we receive
  // that is not ours is never freed by us.
  std::mutex buffers_mu;
  std::vector<Buffer> pool;
  std::unordered_set<uint8_t*> lent;

  void consume(const CUpti_Activity* record) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const ActivityKernel*>(record);
        KernelRecord r;
        r.correlation_id = k->correlationId;
        r.name = k->name != nullptr ? k->name : "";
        r.grid[0] = k->gridX;
        r.grid[1] = k->gridY;
        r.grid[2] = k->gridZ;
        r.block[0] = k->blockX;
        r.block[1] = k->blockY;
        r.block[2] = k->blockZ;
        r.registers_per_thread = k->registersPerThread;
        r.static_shared_bytes = k->staticSharedMemory;
        r.dynamic_shared_bytes = k->dynamicSharedMemory;
        r.start_ns = k->start;
        r.end_ns = k->end;
        r.stream = k->streamId;
        r.device = k->deviceId;
        correlator.add(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        // Host <-> device copies are the timeline's (a blocking one is a host sync), not an
        // op's device work.
        const auto* c = reinterpret_cast<const ActivityMemcpy*>(record);
        if (c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD) {
          correlator.add(memory_operation(kDeviceCopyName, c->correlationId, c->start, c->end,
                                          c->streamId, c->deviceId));
        }
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const ActivityMemset*>(record);
        correlator.add(memory_operation(kDeviceMemsetName, m->correlationId, m->start, m->end,
                                        m->streamId, m->deviceId));
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        correlator.add(ApiRecord{a->correlationId, a->threadId, static_cast<uint32_t>(a->cbid),
                                 record->kind == CUPTI_ACTIVITY_KIND_DRIVER, a->start, a->end});
        break;
      }
#ifdef HABITAT_CUPTI_SYNC_RECORDS
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
        correlator.add(SyncActivityRecord{static_cast<uint32_t>(y->type), y->start, y->end,
                                          y->streamId, y->cudaEventSyncId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_CUDA_EVENT: {
        const auto* e = reinterpret_cast<const CUpti_ActivityCudaEvent2*>(record);
        correlator.add(EventActivityRecord{e->cudaEventSyncId, e->streamId});
        break;
      }
#endif
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        correlator.add(ExternalCorrelationRecord{static_cast<uint32_t>(e->externalKind),
                                                 e->externalId, e->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MARKER: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(record);
        const bool starts = (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0;
        if (starts && m->domain != nullptr && std::strcmp(m->domain, "habitat") == 0) {
          ++nvtx_ranges;
          if (nvtx_sample.size() < kMaxNvtxSample && m->name != nullptr) {
            nvtx_sample.emplace_back(m->name);
          }
        }
        break;
      }
      default:
        break;  // kinds another client enabled
    }
  }

  uint8_t* lend_buffer() {
    std::lock_guard<std::mutex> lock(buffers_mu);
    Buffer b;
    if (!pool.empty()) {
      b = std::move(pool.back());
      pool.pop_back();
    } else {
      b.reset(static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes)));  // CUPTI: 8-aligned
      if (!b) return nullptr;
    }
    lent.insert(b.get());
    return b.release();
  }

  // Takes back a buffer we lent; false (and nothing is freed) for another client's buffer.
  bool return_buffer(uint8_t* raw) {
    std::lock_guard<std::mutex> lock(buffers_mu);
    if (lent.erase(raw) == 0) {
      ++foreign;
      return false;
    }
    Buffer b(raw);
    if (pool.size() < kMaxPooledBuffers) pool.push_back(std::move(b));
    return true;
  }

  bool owns(uint8_t* raw) {
    std::lock_guard<std::mutex> lock(buffers_mu);
    return lent.count(raw) != 0;
  }

  std::size_t outstanding() {
    std::lock_guard<std::mutex> lock(buffers_mu);
    return lent.size();
  }

  // Buffers another client requested that CUPTI completed into our callback (under buffers_mu).
  int64_t foreign = 0;
};

namespace {

// The tracer's state, reachable from CUPTI's C callbacks. Set once and never cleared: the
// tracer is never destroyed (see KernelTracer::instance()).
std::atomic<TracerState*> g_state{nullptr};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  TracerState* state = g_state.load();
  *buffer = state != nullptr ? state->lend_buffer() : nullptr;
  // A null buffer makes CUPTI drop records, which flush_step reports as dropped.
  *size = *buffer != nullptr ? kBufferBytes : 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                               size_t valid) {
  (void)size;
  TracerState* state = g_state.load();
  if (state == nullptr || buffer == nullptr) return;
  // CUPTI completes a buffer into whichever callbacks are registered now, not those that
  // requested it. Another client's buffer is neither read (its records are that client's)
  // nor freed (its owner does that); stop() and start() order their calls so it does not
  // happen when clients take turns between steps.
  if (!state->owns(buffer)) {
    state->return_buffer(buffer);  // counts it as foreign
    return;
  }
  {
    std::lock_guard<std::mutex> lock(state->records_mu);
    CUpti_Activity* record = nullptr;
    while (true) {
      const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &record);
      if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of the valid records
      if (r != CUPTI_SUCCESS) {
        state->callback_error = describe(r, "cuptiActivityGetNextRecord");
        break;
      }
      state->consume(record);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) {
      state->correlator.add_dropped(static_cast<int64_t>(dropped));
    }
  }
  state->return_buffer(buffer);
}

}  // namespace

bool compiled_in() { return true; }

double timestamp_us() {
  uint64_t ns = 0;
  return cuptiGetTimestamp(&ns) == CUPTI_SUCCESS ? static_cast<double>(ns) / 1000.0 : 0.0;
}

KernelTracer::KernelTracer() : state_(std::make_unique<TracerState>()) { g_state = state_.get(); }

// Never runs for the instance; kept so unique_ptr<TracerState> has a complete type here.
KernelTracer::~KernelTracer() = default;

Status KernelTracer::start(const TracerOptions& options) {
  TracerState& s = *state_;
  std::lock_guard<std::mutex> lock(s.control_mu);
  if (s.active) return {true, s.status};

  // CUPTI has one pair of buffer callbacks per process, and completes a buffer into the pair
  // registered when it completes. Buffers the previous client (torch.profiler's Kineto)
  // still has out are forced back to its callbacks before ours replace them; its result is
  // ignored (no client yet, or no device: registering below reports the problem).
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  // Registering again after another client replaced our callbacks takes them back.
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    s.status = describe(r, "cuptiActivityRegisterCallbacks");
    s.start_failed = true;
    return {false, s.status};
  }
  std::vector<CUpti_ActivityKind> kinds(std::begin(kKinds), std::end(kKinds));
  if (options.record_nvtx) kinds.push_back(CUPTI_ACTIVITY_KIND_MARKER);
#ifdef HABITAT_CUPTI_API_FILTER
  s.launch_records_only = launch_api_records_only() && switch_launch_api_records(1);
  if (s.launch_records_only) {
    std::erase_if(kinds, [](CUpti_ActivityKind k) {
      return k == CUPTI_ACTIVITY_KIND_RUNTIME || k == CUPTI_ACTIVITY_KIND_DRIVER;
    });
  }
#endif
  for (CUpti_ActivityKind kind : kinds) {
    r = cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) {
      s.status = describe(r, std::string("cuptiActivityEnable(") + kind_name(kind) + ")");
      s.start_failed = true;
      for (CUpti_ActivityKind on : s.enabled) cuptiActivityDisable(on);
      s.enabled.clear();
#ifdef HABITAT_CUPTI_API_FILTER
      if (s.launch_records_only) switch_launch_api_records(0);
      s.launch_records_only = false;
#endif
      return {false, s.status};
    }
    s.enabled.push_back(kind);
  }
  for (CUpti_ActivityKind kind : kMemoryKinds) {
    if (cuptiActivityEnable(kind) == CUPTI_SUCCESS) s.enabled.push_back(kind);
  }
#ifdef HABITAT_CUPTI_SYNC_RECORDS
  for (CUpti_ActivityKind kind : kOptionalKinds) {
    if (cuptiActivityEnable(kind) == CUPTI_SUCCESS) s.enabled.push_back(kind);
  }
#endif
  {
    // Records of a previous session (or of the time we were detached) are not this step's.
    std::lock_guard<std::mutex> records(s.records_mu);
    s.correlator.take_step();
    s.generation = s.correlator.generation();
    s.nvtx_ranges = 0;
    s.nvtx_sample.clear();
    s.callback_error.clear();
  }
  s.status = "tracing";
  s.start_failed = false;
  s.active = true;
  return {true, s.status};
}

Status KernelTracer::stop() {
  TracerState& s = *state_;
  std::lock_guard<std::mutex> lock(s.control_mu);
  if (!s.active) return {true, s.status};
  s.active = false;
  Status result{true, ""};
  // Kinds off first, then a forced flush: no record can ask for a new buffer after the
  // flush, so every buffer we lent is back before another client registers its callbacks
  // (a buffer of ours completed into Kineto's callbacks is "unknown" to it, and lost).
  CUptiResult r = CUPTI_SUCCESS;
  for (CUpti_ActivityKind kind : s.enabled) {
    r = cuptiActivityDisable(kind);
    if (r != CUPTI_SUCCESS && result.ok) {
      result = {false, describe(r, std::string("cuptiActivityDisable(") + kind_name(kind) + ")")};
    }
  }
  s.enabled.clear();
#ifdef HABITAT_CUPTI_API_FILTER
  if (s.launch_records_only && !switch_launch_api_records(0) && result.ok) {
    result = {false, "CUPTI refused to turn the launch calls' API records off"};
  }
  s.launch_records_only = false;
#endif
  r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS && result.ok) result = {false, describe(r, "cuptiActivityFlushAll")};
  if (const std::size_t out = s.outstanding(); out > 0 && result.ok) {
    result = {false, "CUPTI kept " + std::to_string(out) +
                         " of Habitat's activity buffers after a forced flush; another CUPTI "
                         "client started now may receive them"};
  }
  s.status = result.ok ? "stopped" : result.message;
  return result;
}

void KernelTracer::detach(const std::string& reason) {
  TracerState& s = *state_;
  std::lock_guard<std::mutex> lock(s.control_mu);
  s.active = false;
  s.enabled.clear();  // the other client owns the kinds now
  s.status = "detached: " + reason;
}

StepResult KernelTracer::flush_step() {
  TracerState& s = *state_;
  std::lock_guard<std::mutex> lock(s.control_mu);
  StepResult out;
  if (!s.active) {
    out.status = {false, s.status};
    return out;
  }
  // Delivers buffers through buffer_completed, which takes records_mu itself.
  const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> records(s.records_mu);
  out.kernels = s.correlator.take_step();
  s.generation = s.correlator.generation();
  out.nvtx_ranges = std::exchange(s.nvtx_ranges, 0);
  out.nvtx_sample = std::exchange(s.nvtx_sample, {});
  out.status = {true, ""};
  if (r != CUPTI_SUCCESS) {
    out.status = {false, describe(r, "cuptiActivityFlushAll")};
  } else if (!s.callback_error.empty()) {
    out.status = {false, std::exchange(s.callback_error, {})};
  }
  const int64_t push_errors = s.push_errors.exchange(0);
  if (out.status.ok && push_errors > 0) {
    out.status = {false, std::to_string(push_errors) +
                             " ops could not push their CUPTI external correlation id; their "
                             "kernels are counted as unattributed"};
  }
  s.last.kernels.stats = out.kernels.stats;
  s.last.nvtx_ranges = out.nvtx_ranges;
  s.last.nvtx_sample = out.nvtx_sample;
  s.last.orphan_kernels = 0;
  s.last.status = out.status;
  return out;
}

StepResult KernelTracer::flush_into(std::vector<OpRecord>& ops) {
  StepResult out = flush_step();
  out.syncs = std::move(out.kernels.syncs);
  out.orphan_kernels = attach_kernels(ops, std::move(out.kernels));
  out.kernels.by_op.clear();
  std::lock_guard<std::mutex> lock(state_->control_mu);
  state_->last.orphan_kernels = out.orphan_kernels;
  return out;
}

StepResult KernelTracer::last_step() const {
  std::lock_guard<std::mutex> lock(state_->control_mu);
  return state_->last;
}

bool KernelTracer::active() const { return state_->active.load(std::memory_order_relaxed); }

BufferStats KernelTracer::buffers() const {
  BufferStats out;
  out.outstanding = static_cast<int64_t>(state_->outstanding());
  std::lock_guard<std::mutex> lock(state_->buffers_mu);
  out.foreign = state_->foreign;
  return out;
}

bool KernelTracer::usable() const {
  std::lock_guard<std::mutex> lock(state_->control_mu);
  return !state_->start_failed;
}

std::string KernelTracer::status() const {
  std::lock_guard<std::mutex> lock(state_->control_mu);
  return state_->status;
}

bool KernelTracer::push(uint64_t op_id) {
  TracerState& s = *state_;
  if (!s.active.load(std::memory_order_relaxed)) return false;
  const uint64_t id = encode_external_id(s.generation.load(std::memory_order_relaxed), op_id);
  if (cuptiActivityPushExternalCorrelationId(kExternalKind, id) != CUPTI_SUCCESS) {
    s.push_errors.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void KernelTracer::pop() {
  uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(kExternalKind, &last);
}

#endif  // HABITAT_WITH_CUPTI

void KernelTracer::set_launch_overhead_us(double us) {
  launch_overhead_us_.store(us >= 0 ? us : -1.0, std::memory_order_relaxed);
}

std::optional<double> KernelTracer::launch_overhead_us() const {
  const double us = launch_overhead_us_.load(std::memory_order_relaxed);
  return us >= 0 ? std::optional<double>(us) : std::nullopt;
}

KernelTracer& KernelTracer::instance() {
  // Deliberately never destroyed (the absl::NoDestructor pattern): CUPTI may call the
  // buffer callbacks from its own threads during process exit, after static destructors.
  // Built in static storage, so nothing is allocated and no destructor is registered.
  alignas(KernelTracer) static std::byte storage[sizeof(KernelTracer)];
  static KernelTracer* const tracer = ::new (static_cast<void*>(storage)) KernelTracer();
  return *tracer;
}

ScopedKernelAttribution::ScopedKernelAttribution(uint64_t op_id)
    : pushed_(KernelTracer::instance().push(op_id)) {}

ScopedKernelAttribution::~ScopedKernelAttribution() {
  if (pushed_) KernelTracer::instance().pop();
}

}  // namespace habitat::cupti
