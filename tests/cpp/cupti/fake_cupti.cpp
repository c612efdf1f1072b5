#include "fake_cupti.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "cupti/cupti_kernel_record.h"

namespace fake_cupti {
namespace {

using habitat::ActivityKernel;
using habitat::ActivityMemcpy;
using habitat::ActivityMemset;

constexpr std::size_t kHeader = 8;  // each record is preceded by its padded size

struct Pair {
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
};

struct OpenBuffer {
  uint8_t* data = nullptr;
  std::size_t size = 0;
  std::size_t used = 0;
  Pair requester;
};

struct World {
  std::optional<Pair> registered;
  std::optional<Pair> previous;
  std::set<CUpti_ActivityKind> enabled;
  std::set<CUpti_CallbackId> runtime_apis;  // enabled one by one (cuptiActivityEnableRuntimeApi)
  std::set<CUpti_CallbackId> driver_apis;
  std::optional<OpenBuffer> open;
  std::map<CUpti_ExternalCorrelationKind, std::vector<uint64_t>> external;
  uint32_t next_correlation = 1;
  uint64_t clock_ns = 1000;
  int64_t misdelivered = 0;
  int64_t completed = 0;
  std::size_t records_per_buffer = 0;
};

World& world() {
  static World w;
  return w;
}

std::size_t padded(std::size_t n) { return (n + 7) / 8 * 8; }

void complete_open() {
  World& w = world();
  if (!w.open) return;
  const OpenBuffer buffer = *w.open;
  w.open.reset();
  ++w.completed;
  if (!w.registered) return;  // nobody to hand it to: lost, as with CUPTI
  if (w.registered->request != buffer.requester.request ||
      w.registered->complete != buffer.requester.complete) {
    ++w.misdelivered;
  }
  w.registered->complete(nullptr, 0, buffer.data, buffer.size, buffer.used);
}

// Room for one record of `bytes` in the open buffer, asking the registered pair for a
// buffer as CUPTI does; null when no client gives one (the record is dropped).
uint8_t* room(std::size_t bytes) {
  World& w = world();
  const std::size_t need = kHeader + padded(bytes);
  if (w.open && w.open->used + need > w.open->size) complete_open();
  if (!w.open) {
    if (!w.registered) return nullptr;
    uint8_t* data = nullptr;
    std::size_t size = 0;
    std::size_t max_records = 0;
    w.registered->request(&data, &size, &max_records);
    if (data == nullptr || size < need) return nullptr;
    if (w.records_per_buffer > 0) size = std::min(size, w.records_per_buffer * (kHeader + 256));
    w.open = OpenBuffer{data, size, 0, *w.registered};
  }
  uint8_t* at = w.open->data + w.open->used;
  const uint64_t stored = padded(bytes);
  std::memcpy(at, &stored, sizeof stored);
  w.open->used += need;
  return at + kHeader;
}

template <typename Record>
void emit(const Record& record, CUpti_ActivityKind kind) {
  if (world().enabled.count(kind) == 0) return;
  if (uint8_t* at = room(sizeof(Record))) std::memcpy(at, &record, sizeof(Record));
}

}  // namespace

void reset() { world() = World{}; }

namespace {

// The records every call leaves: its runtime API record (the call's kind enabled, or that call's
// records enabled alone) and an external correlation record per kind pushed. Returns the call's
// correlation id; `t` is when it began.
uint32_t api_call(uint32_t cbid, uint64_t& t) {
  World& w = world();
  const uint32_t correlation = w.next_correlation++;
  t = (w.clock_ns += 1000);
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.cbid = cbid;
  api.start = t;
  api.end = t + 10;
  api.correlationId = correlation;
  api.threadId = 1;
  if (w.runtime_apis.count(api.cbid) != 0 && w.enabled.count(CUPTI_ACTIVITY_KIND_RUNTIME) == 0) {
    w.enabled.insert(CUPTI_ACTIVITY_KIND_RUNTIME);  // this call's record only
    emit(api, CUPTI_ACTIVITY_KIND_RUNTIME);
    w.enabled.erase(CUPTI_ACTIVITY_KIND_RUNTIME);
  } else {
    emit(api, CUPTI_ACTIVITY_KIND_RUNTIME);
  }
  for (const auto& [kind, stack] : w.external) {
    if (stack.empty()) continue;
    CUpti_ActivityExternalCorrelation ext{};
    ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    ext.externalKind = kind;
    ext.externalId = stack.back();
    ext.correlationId = correlation;
    emit(ext, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  }
  return correlation;
}

}  // namespace

namespace {

// A device activity of `ns` nanoseconds on stream 7, after the records of the API call `cbid`
// that launched it.
template <typename Record>
Record device_record(CUpti_ActivityKind kind, uint32_t cbid, uint64_t ns) {
  uint64_t t = 0;
  Record r{};
  r.kind = kind;
  r.correlationId = api_call(cbid, t);
  r.start = t + 100;
  r.end = t + 100 + ns;
  r.streamId = 7;
  return r;
}

}  // namespace

void launch_kernel(const char* name) {
  auto k = device_record<ActivityKernel>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 500);
  k.name = name;
  k.gridX = k.gridY = k.gridZ = 1;
  k.blockX = 128;
  k.blockY = k.blockZ = 1;
  emit(k, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
}

void copy_memory(CUpti_ActivityMemcpyKind kind, uint64_t bytes) {
  auto c = device_record<ActivityMemcpy>(CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 300);
  c.copyKind = static_cast<uint8_t>(kind);
  c.bytes = bytes;
  emit(c, CUPTI_ACTIVITY_KIND_MEMCPY);
}

void set_memory(uint64_t bytes) {
  auto m = device_record<ActivityMemset>(CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, 200);
  m.bytes = bytes;
  emit(m, CUPTI_ACTIVITY_KIND_MEMSET);
}

int64_t misdelivered() { return world().misdelivered; }
std::size_t runtime_apis_enabled() { return world().runtime_apis.size(); }
bool kind_enabled(CUpti_ActivityKind kind) { return world().enabled.count(kind) != 0; }
int64_t completed() { return world().completed; }
bool buffer_open() { return world().open.has_value(); }
void set_records_per_buffer(std::size_t records) { world().records_per_buffer = records; }
void reregister_previous() {
  World& w = world();
  std::swap(w.previous, w.registered);
}

}  // namespace fake_cupti

// ----- the CUPTI entry points the tracer calls ------------------------------------------
using fake_cupti::world;

extern "C" {

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult, const char** str) {
  *str = "FAKE_CUPTI_ERROR";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = world().clock_ns;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  auto& w = world();
  w.previous = w.registered;
  w.registered = fake_cupti::Pair{request, complete};
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  world().enabled.insert(kind);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  world().enabled.erase(kind);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  auto& open = world().open;
  // Without FORCED only buffers with records that are complete are handed out; the fake
  // keeps a partly filled buffer open then, as CUPTI may.
  if (open && (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0) fake_cupti::complete_open();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                CUpti_Activity** record) {
  uint8_t* at = buffer;
  if (*record != nullptr) {
    uint8_t* current = reinterpret_cast<uint8_t*>(*record);
    uint64_t size = 0;
    std::memcpy(&size, current - fake_cupti::kHeader, sizeof size);
    at = current + size;
  }
  if (at + fake_cupti::kHeader > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(at + fake_cupti::kHeader);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (enable) {
    world().runtime_apis.insert(cbid);
  } else {
    world().runtime_apis.erase(cbid);
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (enable) {
    world().driver_apis.insert(cbid);
  } else {
    world().driver_apis.erase(cbid);
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                            uint64_t id) {
  world().external[kind].push_back(id);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                           uint64_t* last) {
  auto& stack = world().external[kind];
  if (stack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (last != nullptr) *last = stack.back();
  stack.pop_back();
  return CUPTI_SUCCESS;
}

}  // extern "C"
