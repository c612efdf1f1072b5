// Per-thread capture state and the recording window (a Session).
//
// Enabling: a Session begun on a thread includes kCaptureKey in that thread's TLS dispatch
// key set and leaves it included; outside a window the fallback is a pass-through. Python
// decides when to take it off again (predict_on: between steps and for timed steps, until
// dynamo has compiled code, which guards on the TLS key set).
// Gating: a Session is pushed as c10::ThreadLocalDebugInfo, which at::ThreadLocalState
// carries into autograd's engine threads (and at::launch) together with the included key,
// so backward ops run on other threads reach the same recorder.
#pragma once

#include <c10/util/ThreadLocalDebugInfo.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "capture/capture_recorder.h"
#include "capture/torch_compat.h"
#include "habitat/trace.h"

namespace habitat::capture {

// An op that has started on this thread and not finished yet.
struct OpenOp {
  OpRecord record;
  Recorder* recorder = nullptr;  // the recorder it will be committed to
};

struct ThreadState {
  std::vector<OpenOp> open;  // innermost last
  // The nn.Module forward calls in progress, as qualified paths (from Python hooks).
  std::vector<InternedString> modules;  // interned once per module call, copied per op
  int optimizer_depth = 0;              // > 0 inside optimizer.step()
  // > 0 while torch.compile traces or autotunes on this thread: its ops are not step work.
  int suspended = 0;
  // > 0 inside an op a detailed step did not record (over its op limit): its inner calls
  // are not top-level ops of the step's fingerprint.
  int unrecorded = 0;
  // The op this thread committed last: its id (raw sequence) and operator.
  uint64_t last_op_id = 0;
  bool last_op_is_compiled_graph = false;
  // Storages seen by ops not committed yet; one buffer per thread, so its capacity is reused.
  StorageRefs storages;
  // The last backward node seen, to name it once per node rather than once per op.
  const void* node = nullptr;
  uint64_t node_sequence = 0;
  InternedString node_name;
  // Habitat's own time on this thread (us) that no record holds yet: module hooks, the last
  // record's commit. The next op recorded on the thread takes it (OpRecord::own_before_us).
  double own_pending_us = 0;
  // The global precision switches read by this thread's current top-level op.
  compat::PrecisionState switches;

  ThreadState() { open.reserve(64); }
  void reset_context();
};

ThreadState& thread_state();

// Habitat's own time spent on the calling thread outside any op's record (a Python module
// hook's, a commit's), for the next op recorded there (OpRecord::own_before_us).
inline void add_own_time_us(ThreadState& ts, double us) {
  if (us > 0) ts.own_pending_us += us;
}

// Number of Sessions recording anywhere in the process; 0 lets the fallback skip all work.
extern std::atomic<int> g_active_sessions;

class Session : public c10::DebugInfoBase, public std::enable_shared_from_this<Session> {
 public:
  // `detailed` false: a steady-state step, of which only the wall time and the fingerprint
  // (names, shapes, dtypes of the ops called from the top) are kept; its ops are not
  // recorded and no kernels are joined. Begun inside a detailed window, it records in detail.
  explicit Session(size_t max_ops, bool detailed = true);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Opens the window on the calling thread. Throws if this Session is already open.
  void begin();
  // Closes the window (must be the thread that began it) and returns the step.
  // `warning` receives a message when the window could not be closed cleanly.
  Step end(int64_t index, std::string* warning);

  size_t dropped() const { return recorder_ == nullptr ? 0 : recorder_->dropped(); }
  bool open() const { return open_; }
  bool detailed() const { return detailed_; }  // after begin(): as it records
  // After end(): the step's fingerprint (0 for a step without ops) and how many ops it hashed.
  uint64_t fingerprint() const { return fingerprint_; }
  uint64_t fingerprint_ops() const { return fingerprint_ops_; }
  // This session if it records, else the nearest enclosing one that does.
  Recorder* live_recorder();

 private:
  size_t max_ops_;
  bool detailed_;
  uint64_t fingerprint_ = 0;
  uint64_t fingerprint_ops_ = 0;
  std::unique_ptr<Recorder> recorder_;  // created by begin()
  double cupti_start_us_ = 0;           // CUPTI's clock at the step's start (0 without CUPTI)
  std::shared_ptr<Session> outer_;      // the session open on this thread when this one began
  bool open_ = false;
  bool finished_ = false;
  bool outermost_ = false;
};

// The innermost recording Session of the calling thread (or inherited by it), or null.
Recorder* active_recorder();
// Whether an op run now on this thread would be recorded.
bool recording_on_this_thread();

// Thread inclusion of kCaptureKey.
void include_key_on_this_thread();
void release_key_on_this_thread();
bool key_included_on_this_thread();

}  // namespace habitat::capture
