// The boxed fallback on kCaptureKey: records each op of a recording window, then runs it
// unchanged by redispatching below the key.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/function.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "capture/capture_args.h"
#include "capture/capture_key.h"
#include "capture/capture_state.h"
#include "capture/torch_compat.h"
#include "cupti/cupti_tracer.h"
#include "cupti/nvtx_range.h"

namespace habitat::capture {
namespace {

// A tracing mode (FakeTensorMode, make_fx's proxy mode, functionalization) is active: ops
// build graphs instead of doing work, even on plain inputs (factory ops).
bool tracing_mode_active() {
  using c10::impl::TorchDispatchModeKey;
  using c10::impl::TorchDispatchModeTLS;
  if (!TorchDispatchModeTLS::any_modes_set()) return false;
  return TorchDispatchModeTLS::get_mode(TorchDispatchModeKey::FAKE).has_value() ||
         TorchDispatchModeTLS::get_mode(TorchDispatchModeKey::PROXY).has_value() ||
         TorchDispatchModeTLS::get_mode(TorchDispatchModeKey::FUNCTIONAL).has_value();
}

// Phase and context of an op from where it runs: inside an autograd Node (backward),
// optimizer.step(), an nn.Module forward, or plain code building the autograd graph.
void label(OpRecord& rec, ThreadState& ts, bool requires_grad) {
  if (const auto node = torch::autograd::get_current_node()) {
    rec.phase = Phase::Backward;
    const uint64_t seq = node->sequence_nr();
    if (ts.node != node.get() || ts.node_sequence != seq) {
      ts.node = node.get();
      ts.node_sequence = seq;
      ts.node_name = node->name();
    }
    rec.autograd_node = ts.node_name;
    // Only a region entered on this thread during backward (a compiled backward graph, or a
    // module re-run by activation checkpointing) names backward ops.
    if (!ts.modules.empty()) rec.module_path = ts.modules.back();
    return;
  }
  if (ts.optimizer_depth > 0) {
    rec.phase = Phase::Optimizer;
    if (!ts.modules.empty()) rec.module_path = ts.modules.back();  // a compiled step's region
  } else if (!ts.modules.empty()) {
    rec.phase = Phase::Forward;
    rec.module_path = ts.modules.back();
  } else if (requires_grad && c10::GradMode::is_enabled()) {
    rec.phase = Phase::Forward;  // e.g. a loss computed outside any module
  }
}

PrecisionFlags precision_flags(const compat::PrecisionState& s) {
  static constexpr const char* kMatmulPrecision[] = {"highest", "high", "medium"};
  PrecisionFlags flags;
  flags.matmul_allow_tf32 = s.matmul_tf32;
  flags.cudnn_allow_tf32 = s.cudnn_tf32;
  flags.float32_matmul_precision = kMatmulPrecision[s.matmul_precision];
  if (s.autocast >= 0) flags.autocast_dtype = dtype_name(static_cast<c10::ScalarType>(s.autocast));
  return flags;
}

// The op takes Habitat's time on its thread since the previous record (module hooks, the
// previous commit): the timeline removes it before the op's start.
void take_own_time_before(OpRecord& rec, ThreadState& ts) {
  rec.own_before_us = ts.own_pending_us;
  ts.own_pending_us = 0;
}

// Leaves an unrecorded op however its redispatch ends.
struct UnrecordedScope {
  int& depth;
  ~UnrecordedScope() { --depth; }
};

// Pops the op's frame however the redispatch ends, so an exception leaves the thread's
// stack as it was; the exception itself propagates untouched.
struct FramePop {
  std::vector<OpenOp>& open;
  ~FramePop() { open.pop_back(); }
};

void capture_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                      torch::jit::Stack* stack) {
  const auto below = ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kCaptureKey);
  Recorder* recorder = active_recorder();
  if (recorder == nullptr) return op.redispatchBoxed(below, stack);
  const OpInfo& info = op_info(op);
  if (info.skip || info.num_arguments > stack->size()) return op.redispatchBoxed(below, stack);
  const c10::IValue* args = stack->data() + (stack->size() - info.num_arguments);
  const TensorScan scan = scan_tensors(args, info.num_arguments);
  if (!scan.plain || tracing_mode_active()) return op.redispatchBoxed(below, stack);
  ThreadState& ts = thread_state();
  if (ts.suspended > 0) return op.redispatchBoxed(below, stack);
  // The fingerprint hashes the ops called from the top (Python, autograd, the optimizer),
  // not the calls their kernels make: those follow from the outer op and its shapes. The
  // same rule in detailed and steady steps, so the two compare on equal terms.
  if (ts.open.empty() && ts.unrecorded == 0) {
    recorder->add_fingerprint(hash_mix(info.name_hash, scan.shape_hash));
  }
  if (!recorder->detailed()) {
    // A steady-state step stops here, and the op's inner calls skip this fallback altogether
    // (no boxing, no lookups): a fingerprinted step pays per top-level op only.
    const c10::impl::ExcludeDispatchKeyGuard inner_calls_skip_capture(kCaptureKey);
    return op.redispatchBoxed(below, stack);
  }
  if (!recorder->admit()) {
    // Over the step's op limit: not recorded, and its inner calls are not top-level ops.
    ++ts.unrecorded;
    const UnrecordedScope scope{ts.unrecorded};
    return op.redispatchBoxed(below, stack);
  }
  // Habitat's own time around the op (reading arguments and outputs, labels, the record):
  // the timeline model removes it from the traced cadence (OpRecord::overhead_us).
  const auto entry = Clock::now();
  OpenOp& frame = ts.open.emplace_back();
  FramePop pop{ts.open};
  frame.recorder = recorder;
  OpRecord& rec = frame.record;
  rec.id = Recorder::next_sequence();
  if (ts.open.size() >= 2) {
    const OpenOp& parent = ts.open[ts.open.size() - 2];
    if (parent.recorder == recorder) {
      rec.parent = parent.record.id;
      rec.depth = parent.record.depth + 1;
    }
  }
  rec.name = info.name;
  rec.overload = info.overload;
  {
    const StorageSink sink(ts.storages);
    read_arguments(info, args, rec.args);
  }
  label(rec, ts, scan.requires_grad);
  // Autocast regions and flag changes inside the window: the op keeps the switches it ran under.
  // The global switches (hash-table lookups in torch) are read per top-level op: nothing
  // changes them while an op runs, so its inner calls reuse them. Autocast is per op (an
  // autocast wrapper runs its inner calls with autocast excluded).
  if (ts.open.size() == 1) compat::read_global_switches(ts.switches);
  compat::PrecisionState precision = ts.switches;
  compat::read_autocast(precision);
  if (!(precision == recorder->precision_baseline())) rec.precision = precision_flags(precision);
  rec.thread = recorder->thread_number();
  take_own_time_before(rec, ts);
  const size_t depth = ts.open.size();

  Clock::time_point start;
  {
    // Nsight shows the op over its kernels; CUPTI tags the kernels launched inside with the
    // op's id (the innermost op when ops nest), which Session::end joins back.
    const NvtxRange range(rec.name, rec.module_path);
    const cupti::ScopedKernelAttribution attribution(rec.id);
    start = Clock::now();
    op.redispatchBoxed(below, stack);
  }
  const auto stop = Clock::now();

  // Children may have grown the vector: find the frame again by its position.
  OpenOp& done = ts.open[depth - 1];
  OpRecord& out = done.record;
  out.start_us = recorder->micros_since_start(start);
  out.wall_us = std::chrono::duration<double, std::micro>(stop - start).count();
  const size_t num_returns = info.num_returns;
  if (num_returns <= stack->size()) {
    const c10::IValue* rets = stack->data() + (stack->size() - num_returns);
    // Results that are not real tensors (a Python kernel returned a subclass) mean the op
    // did no eager work of its own.
    if (!scan_tensors(rets, num_returns).plain) return;
    const StorageSink sink(ts.storages);
    read_outputs(rets, num_returns, out.outputs);
  }
  if (depth >= 2) {
    OpenOp& parent = ts.open[depth - 2];
    if (out.parent && parent.record.id == *out.parent) parent.record.has_children = true;
  }
  const auto recorded = Clock::now();
  out.overhead_us =
      std::chrono::duration<double, std::micro>((start - entry) + (recorded - stop)).count();
  ts.last_op_id = out.id;
  ts.last_op_is_compiled_graph = info.compiled_graph;
  // The buffer may also hold an enclosing op's storages: the same step keeps them all.
  recorder->commit(std::move(out), ts.storages);
  add_own_time_us(ts, std::chrono::duration<double, std::micro>(Clock::now() - recorded).count());
}

std::mutex g_install_mutex;
std::unique_ptr<torch::Library> g_library;  // keeps the fallback registered for the process

}  // namespace

std::string check_capture_key() {
  // The enum value compiled in must name the same key in the running torch: a mismatch
  // means the extension was built against another torch release.
  const std::string running = c10::toString(kCaptureKey);
  if (running != kCaptureKeyName) {
    return "habitat._C was built against a torch whose dispatch key numbering differs from "
           "the installed torch (key " +
           std::string(kCaptureKeyName) + " now reads as '" + running +
           "'). Rebuild habitat against the installed torch: pip install --no-build-isolation "
           "--force-reinstall --no-deps habitat";
  }
  return {};
}

void install_fallback() {
  std::lock_guard lock(g_install_mutex);
  if (g_library != nullptr) return;
  if (const std::string problem = check_capture_key(); !problem.empty()) {
    throw std::runtime_error(problem);
  }
  if (c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(kCaptureKey)) {
    throw std::runtime_error(
        std::string("habitat cannot capture ops: another library already registered a fallback "
                    "on the dispatch key ") +
        kCaptureKeyName +
        " (only one is allowed per process). Import habitat in a process without that "
        "library, or unregister its fallback first.");
  }
  try {
    auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "_", kCaptureKey,
                                                    __FILE__, __LINE__);
    library->fallback(torch::CppFunction::makeFromBoxedFunction<&capture_fallback>());
    g_library = std::move(library);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("habitat could not register its op capture on the "
                                         "dispatch key ") +
                             kCaptureKeyName + ": " + e.what());
  }
  if (!c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(kCaptureKey)) {
    throw std::runtime_error(std::string("habitat registered its op capture on ") +
                             kCaptureKeyName +
                             " but torch does not report it: this torch release does not "
                             "support a fallback on that key; use a supported torch (2.4+)");
  }
}

}  // namespace habitat::capture
