#include "capture/capture_state.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <optional>
#include <stdexcept>

#include "capture/capture_key.h"
#include "capture/torch_compat.h"
#include "cupti/cupti_tracer.h"
#include "habitat/compiled_kernels.h"

namespace habitat::capture {
namespace {

const c10::DebugInfoKind kSessionKind = compat::session_debug_info_kind();

thread_local ThreadState t_state;

Session* current_session() {
  return static_cast<Session*>(c10::ThreadLocalDebugInfo::get(kSessionKind));
}

}  // namespace

std::atomic<int> g_active_sessions{0};

void ThreadState::reset_context() {
  modules.clear();
  optimizer_depth = 0;
  suspended = 0;
  storages.clear();
  node = nullptr;
  node_sequence = 0;
  node_name = {};
  own_pending_us = 0;
}

ThreadState& thread_state() { return t_state; }

Session::Session(size_t max_ops, bool detailed) : max_ops_(max_ops), detailed_(detailed) {}

// The thread's debug info holds open sessions, so a Session is only destroyed closed.
Session::~Session() = default;

Recorder* Session::live_recorder() {
  for (Session* s = this; s != nullptr; s = s->outer_.get()) {
    if (s->recorder_ != nullptr && s->recorder_->recording()) return s->recorder_.get();
  }
  return nullptr;
}

void Session::begin() {
  if (open_ || finished_) {
    throw std::runtime_error(
        "this capture session was already used; start a new one for each step");
  }
  include_key_on_this_thread();
  if (Session* outer = current_session()) outer_ = outer->shared_from_this();
  Recorder* enclosing = outer_ == nullptr ? nullptr : outer_->live_recorder();
  outermost_ = enclosing == nullptr;
  // Inside a detailed window a steady-state one records in detail too: its ops are the
  // enclosing step's as well (absorbed at end()), which a fingerprint alone would lose.
  if (enclosing != nullptr && enclosing->detailed()) detailed_ = true;
  if (outermost_) thread_state().reset_context();
  recorder_ = std::make_unique<Recorder>(max_ops_, detailed_);
  if (cupti::KernelTracer::instance().active()) {
    // CUPTI's clock at the recorder's start: both clocks read back to back now, less the time
    // since the recorder started (reserving its records takes tens of microseconds).
    const double cupti_now = cupti::timestamp_us();
    const double since_start = recorder_->micros_since_start(Clock::now());
    cupti_start_us_ = cupti_now > 0 ? cupti_now - since_start : 0.0;
  } else {
    cupti_start_us_ = 0.0;
  }
  c10::ThreadLocalDebugInfo::_push(kSessionKind, shared_from_this());
  open_ = true;
  g_active_sessions.fetch_add(1, std::memory_order_relaxed);
}

Step Session::end(int64_t index, std::string* warning) {
  if (!open_) throw std::runtime_error("capture session is not open");
  const auto stop = Clock::now();
  open_ = false;
  finished_ = true;
  g_active_sessions.fetch_sub(1, std::memory_order_relaxed);
  std::vector<OpRecord> ops = recorder_->finish();
  // Kernels are keyed by the ids ops got at launch: join them before any renumbering. Only
  // the outermost window flushes (a flush takes every kernel so far); a nested window's ops
  // reach it through absorb() with their ids unchanged.
  fingerprint_ = recorder_->fingerprint();
  fingerprint_ops_ = recorder_->fingerprint_ops();
  std::vector<SyncRecord> syncs;
  std::optional<double> launch_overhead_us;
  if (auto& tracer = cupti::KernelTracer::instance(); outermost_ && detailed_ && tracer.active()) {
    cupti::StepResult flushed = tracer.flush_into(ops);
    syncs = std::move(flushed.syncs);
    launch_overhead_us = tracer.launch_overhead_us();
    // Launch and device times onto the step's clock (the timeline's inputs); without a
    // CUPTI timestamp at the start they cannot be placed, so they are dropped.
    if (cupti_start_us_ > 0) {
      shift_to_step(ops, syncs, cupti_start_us_);
    } else {
      for (OpRecord& op : ops) {
        for (KernelLaunch& k : op.kernels) k.launch_us = k.device_start_us = std::nullopt;
      }
      syncs.clear();
    }
    attribute_compiled_kernels(ops);  // ops are in start order, as it needs
  }
  const double wall_ms =
      std::chrono::duration<double, std::milli>(stop - recorder_->start()).count();

  // Leave the thread's debug info as it was before begin(). Something pushed after us and
  // still in place (e.g. a profiler started inside the window and stopped after it) keeps
  // this session in the chain; it no longer records, so it is inert.
  bool popped = false;
  try {
    if (c10::ThreadLocalDebugInfo::_peek(kSessionKind).get() == this) {
      c10::ThreadLocalDebugInfo::_pop(kSessionKind);
      popped = true;
    }
  } catch (const c10::Error&) {
  }
  if (!popped && warning != nullptr) {
    *warning =
        "habitat: the capture window was not closed in the order it was opened (another "
        "context, such as a profiler, opened inside it is still open); capture stopped anyway";
  }
  if (outer_ != nullptr) {
    if (Recorder* outer = outer_->live_recorder()) {
      outer->absorb_fingerprint(*recorder_);
      if (outer->detailed()) outer->absorb(*recorder_, ops);
    }
  }
  if (outermost_) thread_state().reset_context();
  outer_.reset();
  Step step = Recorder::to_step(std::move(ops), index, wall_ms);
  step.dropped_ops = static_cast<int64_t>(recorder_->dropped());
  step.syncs = std::move(syncs);
  step.launch_overhead_us = launch_overhead_us;
  if (detailed_ && recorder_->hook_ns() > 0) {
    step.hook_overhead_us = static_cast<double>(recorder_->hook_ns()) / 1000.0;
  }
  return step;
}

Recorder* active_recorder() {
  if (g_active_sessions.load(std::memory_order_relaxed) == 0) return nullptr;
  Session* s = current_session();
  return s == nullptr ? nullptr : s->live_recorder();
}

bool recording_on_this_thread() {
  return active_recorder() != nullptr && thread_state().suspended == 0;
}

void include_key_on_this_thread() {
  if (!c10::impl::tls_is_dispatch_key_included(kCaptureKey)) {
    c10::impl::tls_set_dispatch_key_included(kCaptureKey, true);
  }
}

void release_key_on_this_thread() { c10::impl::tls_set_dispatch_key_included(kCaptureKey, false); }

bool key_included_on_this_thread() { return c10::impl::tls_is_dispatch_key_included(kCaptureKey); }

}  // namespace habitat::capture
