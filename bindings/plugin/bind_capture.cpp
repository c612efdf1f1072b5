// habitat._C capture names: the recording window (_CaptureSession) and the hooks Python
// calls to tell the capture where ops run (module paths, optimizer steps).
#include <pybind11/stl.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>

#include "bindings.h"
#include "bindings/trace_capsule.h"
#include "capture/capture_key.h"
#include "capture/capture_state.h"
#include "cupti/cupti_tracer.h"
#include "habitat/trace.h"

namespace py = pybind11;

namespace habitat::python {
namespace {

// Frees captured steps on a background thread. A detailed step's records are thousands of
// small allocations (0.2-0.4 us per op to free): freed where the last Python reference
// drops, that is the training thread or predict_on's worker holding the GIL. At most
// kMaxQueued steps wait; beyond that the caller frees inline (a bound on memory).
class StepReaper {
 public:
  static StepReaper& instance() {
    // Never destroyed (as KernelTracer): the thread may still wait on it at process exit.
    alignas(StepReaper) static std::byte storage[sizeof(StepReaper)];
    static StepReaper* const reaper = ::new (static_cast<void*>(storage)) StepReaper();
    return *reaper;
  }

  void release(std::shared_ptr<const Trace> trace) {
    {
      std::lock_guard lock(mu_);
      if (queue_.size() < kMaxQueued && start_thread()) {
        queue_.push_back(std::move(trace));
      }
    }
    cv_.notify_one();
    trace.reset();  // still ours when the queue was full or no thread could start: inline
  }

 private:
  static constexpr size_t kMaxQueued = 4;

  bool start_thread() {  // under mu_
    if (started_) return true;
    try {
      std::thread([this] { run(); }).detach();
      started_ = true;
    } catch (const std::system_error&) {
      return false;
    }
    return true;
  }

  void run() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return !queue_.empty(); });
      std::shared_ptr<const Trace> trace = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      trace.reset();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<const Trace>> queue_;
  bool started_ = false;
};

// A trace holding the one step, so encoding it needs no copy.
struct CapturedStep {
  static constexpr size_t kFreeElsewhereOps = 256;

  std::shared_ptr<const Trace> trace;
  const Step& step() const { return trace->steps.front(); }

  explicit CapturedStep(std::shared_ptr<const Trace> t) : trace(std::move(t)) {}
  CapturedStep(CapturedStep&&) = default;
  CapturedStep& operator=(CapturedStep&&) = default;
  ~CapturedStep() {
    if (trace != nullptr && trace.use_count() == 1 && !trace->steps.empty() &&
        trace->steps.front().ops.size() >= kFreeElsewhereOps) {
      StepReaper::instance().release(std::move(trace));
    }
  }
};

}  // namespace

void bind_capture(py::module_& m) {
  using capture::Session;
  using capture::thread_state;
  using capture::ThreadState;
  try {
    capture::install_fallback();
  } catch (const std::exception& e) {
    throw py::import_error(e.what());
  }
  m.attr("CAPTURE_KEY") = capture::kCaptureKeyName;

  py::class_<Session, std::shared_ptr<Session>>(m, "_CaptureSession",
                                                "One recording window (one training step).")
      .def(py::init<size_t, bool>(), py::arg("max_ops"), py::arg("detailed") = true,
           "detailed=False: a steady-state step (only its wall time and fingerprint are kept).")
      .def("begin", &Session::begin,
           "Opens the window on this thread (includes the capture key on it for good).")
      .def(
          "end",
          [](Session& s, int64_t index) {
            std::string warning;
            auto trace = std::make_shared<Trace>();
            {
              py::gil_scoped_release release;
              trace->steps.push_back(s.end(index, &warning));
            }
            return py::make_tuple(CapturedStep{std::move(trace)}, warning);
          },
          py::arg("index"), "Closes the window; returns (the captured step, warning or '').")
      .def_property_readonly("dropped", &Session::dropped,
                             "Ops not recorded because the step reached max_ops.")
      .def_property_readonly("open", &Session::open)
      .def_property_readonly("detailed", &Session::detailed)
      .def_property_readonly("fingerprint", &Session::fingerprint,
                             "After end(): a hash of the step's op names, tensor shapes and "
                             "dtypes (0 for a step without ops).")
      .def_property_readonly("fingerprint_ops", &Session::fingerprint_ops,
                             "After end(): how many ops the fingerprint covers.");

  // The step stays in C++: encoding it and forecasting it are the costly parts, and
  // predict_on runs them off the training thread, without the GIL, in habitat._engine.
  py::class_<CapturedStep>(m, "_CapturedStep", "A captured step, held in C++.")
      .def_property_readonly("num_ops", [](const CapturedStep& c) { return c.step().ops.size(); })
      .def_property_readonly("wall_ms", [](const CapturedStep& c) { return c.step().wall_ms; })
      .def_property_readonly("dropped_ops",
                             [](const CapturedStep& c) { return c.step().dropped_ops; })
      .def_property_readonly(
          "capsule", [](const CapturedStep& c) { return make_trace_capsule(c.trace); },
          "The step for habitat._engine (forecast_captured, captured_trace_json).");

  // hook_ns: the Python module hook's own time before this call, added to the step's
  // Habitat overhead outside ops (Step::hook_overhead_us) for the timeline.
  m.def(
      "_capture_enter_module",
      [](std::string path, uint64_t hook_ns) {
        thread_state().modules.emplace_back(path);
        if (capture::Recorder* r = capture::active_recorder(); r != nullptr && hook_ns > 0) {
          r->add_hook_ns(hook_ns);
          capture::add_own_time_us(thread_state(), static_cast<double>(hook_ns) / 1000.0);
        }
      },
      py::arg("path"), py::arg("hook_ns") = 0);
  m.def(
      "_capture_exit_module",
      [](uint64_t hook_ns) {
        auto& modules = thread_state().modules;
        if (!modules.empty()) modules.pop_back();
        if (capture::Recorder* r = capture::active_recorder(); r != nullptr && hook_ns > 0) {
          r->add_hook_ns(hook_ns);
          capture::add_own_time_us(thread_state(), static_cast<double>(hook_ns) / 1000.0);
        }
      },
      py::arg("hook_ns") = 0);
  m.def("_capture_enter_optimizer", [] { ++thread_state().optimizer_depth; });
  m.def("_capture_exit_optimizer", [] {
    auto& depth = thread_state().optimizer_depth;
    if (depth > 0) --depth;
  });
  // torch.compile's tracing and autotuning run real ops (on fake tensors, or benchmarks):
  // habitat.compile suspends the capture around them. Nests; counted per thread.
  m.def("_capture_suspend", [] { ++thread_state().suspended; });
  m.def("_capture_resume", [] {
    auto& suspended = thread_state().suspended;
    if (suspended > 0) --suspended;
  });
  // Kernels launched outside any op (a compiled graph's generated kernels) go to the graph's
  // habitat::compiled_graph record, when it is the op this thread recorded last, until the
  // matching end call.
  m.def(
      "_capture_attribute_kernels_to_last_op",
      [] {
        const ThreadState& ts = thread_state();
        return ts.last_op_is_compiled_graph && cupti::KernelTracer::instance().push(ts.last_op_id);
      },
      "Starts attributing kernels to the compiled-graph op just recorded; False when nothing "
      "was started (not recorded, or no kernel tracing).");
  m.def("_capture_end_kernel_attribution", [] { cupti::KernelTracer::instance().pop(); });
  m.def("_capture_active", &capture::recording_on_this_thread,
        "Whether an op run now on this thread would be recorded.");
  m.def("_capture_include_key", &capture::include_key_on_this_thread,
        "Routes this thread's ops through the capture key (a pass-through outside a window).");
  m.def("_capture_key_included", &capture::key_included_on_this_thread,
        "Whether this thread routes ops through the capture key.");
  m.def("_capture_release_thread", &capture::release_key_on_this_thread,
        "Removes the capture key from this thread (ops skip the capture entirely).");
}

}  // namespace habitat::python
