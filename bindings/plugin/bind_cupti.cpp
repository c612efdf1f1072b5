// habitat._C's CUPTI functions: start/stop kernel tracing, flush a step's kernels as JSON.
#include <pybind11/stl.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bindings.h"
#include "cupti/cupti_tracer.h"
#include "cupti/nvtx_range.h"

namespace habitat::python {
namespace {

namespace py = pybind11;
using cupti::KernelTracer;
using nlohmann::json;

json kernel_json(const KernelLaunch& k) {
  return {{"name", k.name},
          {"grid", {k.grid[0], k.grid[1], k.grid[2]}},
          {"block", {k.block[0], k.block[1], k.block[2]}},
          {"registers_per_thread", k.registers_per_thread},
          {"static_shared_bytes", k.static_shared_bytes},
          {"dynamic_shared_bytes", k.dynamic_shared_bytes},
          {"duration_us", k.duration_us},
          {"stream", k.stream}};
}

json counts_json(const std::map<uint32_t, int64_t>& counts) {
  json out = json::object();
  for (const auto& [key, n] : counts) out[std::to_string(key)] = n;
  return out;
}

// {"ok", "message", "ops": {"<op id>": [kernel, ...]}, "stats": {...}, "nvtx_ranges",
// "orphan_kernels", "nvtx_sample"}. Kernel fields are the trace format's, so they drop into a
// step's ops.
std::string step_json(const cupti::StepResult& r) {
  json ops = json::object();
  for (const auto& [op, kernels] : r.kernels.by_op) {
    json list = json::array();
    for (const auto& k : kernels) list.push_back(kernel_json(k));
    ops[std::to_string(op)] = std::move(list);
  }
  const CorrelationStats& s = r.kernels.stats;
  json stats = {{"kernels", s.kernels},
                {"attributed", s.attributed},
                {"unattributed", s.unattributed},
                {"stale", s.stale},
                {"incomplete", s.incomplete},
                {"attributed_us", s.attributed_us},
                {"unattributed_us", s.unattributed_us},
                {"dropped", s.dropped},
                {"overflow", s.overflow},
                {"lossless", s.lossless()},
                {"unattributed_by_thread", counts_json(s.unattributed_by_thread)},
                {"unattributed_by_stream", counts_json(s.unattributed_by_stream)}};
  return json{
      {"ok", r.status.ok},         {"message", r.status.message},  {"ops", std::move(ops)},
      {"stats", std::move(stats)}, {"nvtx_ranges", r.nvtx_ranges}, {"nvtx_sample", r.nvtx_sample}}
      .dump();
}

// What the capture fallback does around each op, for Python callers and GPU tests:
// an NVTX range plus the op's external correlation id while the block runs.
class OpScope {
 public:
  OpScope(uint64_t op_id, std::string name, std::string module_path)
      : op_id_(op_id), name_(std::move(name)), module_path_(std::move(module_path)) {}
  void enter() {
    range_.emplace(name_, module_path_);
    attribution_.emplace(op_id_);
  }
  void exit() {
    attribution_.reset();
    range_.reset();
  }

 private:
  uint64_t op_id_;
  std::string name_;
  std::string module_path_;
  std::optional<NvtxRange> range_;
  std::optional<cupti::ScopedKernelAttribution> attribution_;
};

}  // namespace

void bind_cupti(py::module_& m) {
  m.def("cupti_compiled", &cupti::compiled_in, "Whether this build has CUPTI support.");
  m.def(
      "cupti_available", [] { return KernelTracer::instance().usable(); },
      "False when CUPTI is not compiled in or the last start failed (see cupti_status()).");
  m.def(
      "cupti_status", [] { return KernelTracer::instance().status(); },
      "'tracing', 'not started', 'stopped', or why kernel tracing is off.");
  m.def(
      "cupti_active", [] { return KernelTracer::instance().active(); },
      "Whether kernels are being traced now.");
  m.def(
      "cupti_start",
      [](bool record_nvtx) {
        const cupti::Status s = KernelTracer::instance().start({record_nvtx});
        return py::make_tuple(s.ok, s.message);
      },
      py::arg("record_nvtx") = false,
      "Starts kernel tracing; returns (ok, message). Never raises on a CUPTI error.");
  m.def(
      "cupti_stop",
      [] {
        const cupti::Status s = KernelTracer::instance().stop();
        return py::make_tuple(s.ok, s.message);
      },
      "Disables the activity kinds and forces every buffer lent to CUPTI back; returns "
      "(ok, message).");
  m.def(
      "cupti_buffers",
      [] {
        const cupti::BufferStats b = KernelTracer::instance().buffers();
        return py::make_tuple(b.outstanding, b.foreign);
      },
      "(buffers lent to CUPTI and not back, other clients' buffers completed into ours).");
  m.def(
      "cupti_detach", [](const std::string& reason) { KernelTracer::instance().detach(reason); },
      py::arg("reason"),
      "Stops tracing without touching CUPTI (another client such as torch.profiler took it).");
  m.def(
      "cupti_flush",
      [] {
        cupti::StepResult r;
        {
          py::gil_scoped_release release;
          r = KernelTracer::instance().flush_step();
        }
        return step_json(r);
      },
      "Ends the step: returns its kernels per op id and the record counts as a JSON string. "
      "Synchronise the device first.");
  m.def(
      "cupti_last_step", [] { return step_json(KernelTracer::instance().last_step()); },
      "The counts and status of the latest flush (e.g. the one the capture made at step end), "
      "as cupti_flush's JSON without kernels.");
  m.def(
      "cupti_set_launch_overhead",
      [](double us) { KernelTracer::instance().set_launch_overhead_us(us); }, py::arg("us"),
      "CUPTI's measured host time per kernel launch (us), written into every traced step "
      "(launch_overhead_us); negative: unset.");
  m.def(
      "cupti_launch_overhead", [] { return KernelTracer::instance().launch_overhead_us(); },
      "CUPTI's measured host time per kernel launch (us), or None before it was measured.");
  m.def("nvtx_requested", &nvtx_requested,
        "Whether NVTX ranges per op were asked for (HABITAT_NVTX=1 or nvtx_request(True)).");
  m.def("nvtx_request", &set_nvtx_requested, py::arg("on"),
        "Asks for (or stops) an NVTX range per captured op; they cost per op, so off by default.");
  m.def("nvtx_enabled", &nvtx_enabled,
        "Whether NVTX ranges are emitted (an NVTX tool such as Nsight Systems is attached).");
  // A test hook, private (underscored, in no __all__): lets the CUPTI tests open an op's
  // scope without a capture session. Not part of Habitat's API.
  py::class_<OpScope>(m, "_OpScope",
                      "Private test hook (tests/python/capture/test_cupti.py), not Habitat API: "
                      "the NVTX range + kernel attribution of one op, as the capture does it.")
      .def(py::init<uint64_t, std::string, std::string>(), py::arg("op_id"), py::arg("name"),
           py::arg("module_path") = "")
      .def("__enter__",
           [](OpScope& s) -> OpScope& {
             s.enter();
             return s;
           })
      .def("__exit__", [](OpScope& s, const py::args&) { s.exit(); });
}

}  // namespace habitat::python
