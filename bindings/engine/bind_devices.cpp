// habitat._C device names: the Device type, the process-wide database habitat.devices
// loads at import, and the occupancy calculator.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bindings.h"
#include "device_registry.h"
#include "habitat/file_io.h"
#include "habitat/occupancy.h"

namespace habitat::python {

namespace py = pybind11;

namespace {

struct Registry {
  DeviceDatabase db;
  bool loaded = false;
  uint64_t generation = 0;  // bumped by every change, so memos of forecasts start afresh
};

Registry& registry() {
  static Registry r;
  return r;
}

// The packaged database plus the user's files, in order; replaces what was loaded
// only when every file is good.
void load_device_database(const std::string& path, const std::vector<std::string>& user_files) {
  DeviceDatabase db = DeviceDatabase::load_file(path);
  for (const auto& file : user_files) {
    try {
      db.merge_json(read_file(file, "device file"));
    } catch (const UnknownDeviceError&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string(e.what()) + " (in " + file + ")");
    }
  }
  registry().db = std::move(db);  // the object stays put: predictors may hold a reference
  registry().loaded = true;
  ++registry().generation;
}

std::string compute_capability(const Device& d) {
  return std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
}

py::dict peak_tflops(const Device& d) {
  py::dict out;
  for (const auto& [precision, tflops] : d.peak_tflops) out[py::str(to_string(precision))] = tflops;
  return out;
}

py::dict sm_limits(const Device& d) {
  const SmLimits& l = d.limits;
  py::dict out;
  out["max_threads"] = l.max_threads;
  out["max_warps"] = l.max_warps;
  out["max_blocks"] = l.max_blocks;
  out["registers"] = l.registers;
  out["max_registers_per_thread"] = l.max_registers_per_thread;
  out["register_alloc_unit"] = l.register_alloc_unit;
  out["warp_alloc_granularity"] = l.warp_alloc_granularity;
  out["shared_memory"] = l.shared_memory;
  out["shared_memory_per_block"] = l.shared_memory_per_block;
  out["shared_alloc_unit"] = l.shared_alloc_unit;
  out["reserved_shared_per_block"] = l.reserved_shared_per_block;
  return out;
}

Precision parse_precision(const std::string& name) {
  const auto p = precision_from_string(name);
  if (!p) {
    throw py::value_error("unknown precision \"" + name +
                          "\": use fp32, tf32, fp16, bf16, fp8 or fp64");
  }
  return *p;
}

std::string repr(const Device& d) {
  std::ostringstream out;
  out << "Device(name='" << d.name << "', compute_capability='" << compute_capability(d)
      << "', sms=" << d.sms << ", memory_gb=" << d.memory_gb
      << ", memory_bandwidth_gbs=" << d.memory_bandwidth_gbs << ")";
  return out.str();
}

py::dict occupancy(const Device& d, int threads, int registers, int shared_bytes) {
  const Occupancy o = compute_occupancy(d, threads, registers, shared_bytes);
  py::dict out;
  out["active_blocks_per_sm"] = o.active_blocks_per_sm;
  out["active_warps_per_sm"] = o.active_warps_per_sm;
  out["fraction"] = o.fraction;
  out["limit"] = to_string(o.limit);
  return out;
}

}  // namespace

const DeviceDatabase& device_database() {
  if (!registry().loaded) {
    throw std::runtime_error(
        "the device database is not loaded: import habitat (habitat.devices loads the packaged "
        "devices.json) before forecasting");
  }
  return registry().db;
}

uint64_t device_database_generation() { return registry().generation; }

const Device& find_device(const std::string& name, const std::optional<std::string>& devices_json) {
  if (!devices_json) return device_database().find(name);
  static std::mutex mutex;
  static std::map<std::string, DeviceDatabase> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(*devices_json);
  if (it == cache.end())
    it = cache.emplace(*devices_json, DeviceDatabase::load_file(*devices_json)).first;
  return it->second.find(name);
}

void bind_devices(py::module_& m) {
  py::register_local_exception<UnknownDeviceError>(m, "UnknownDeviceError", PyExc_ValueError);

  py::class_<Device>(m, "Device", "A GPU of the device database (read-only).")
      .def_readonly("name", &Device::name)
      .def_readonly("display_name", &Device::display_name)
      .def_readonly("aliases", &Device::aliases)
      .def_property_readonly("compute_capability", &compute_capability, "e.g. \"8.0\"")
      .def_readonly("cc_major", &Device::cc_major)
      .def_readonly("cc_minor", &Device::cc_minor)
      .def_readonly("sms", &Device::sms)
      .def_readonly("boost_clock_mhz", &Device::boost_clock_mhz)
      .def_readonly("memory_gb", &Device::memory_gb)
      .def_readonly("memory_bandwidth_gbs", &Device::memory_bandwidth_gbs)
      .def_readonly("l2_mb", &Device::l2_mb)
      .def_readonly("tdp_w", &Device::tdp_w)
      .def_property_readonly("peak_tflops", &peak_tflops,
                             "Dense peaks by precision (fp32, tf32, fp16, bf16, fp8, fp64)")
      .def_property_readonly("sm_limits", &sm_limits, "Per-SM occupancy limits")
      .def_readonly("sources", &Device::sources)
      .def_readonly("notes", &Device::notes)
      .def(
          "peak_flops",
          [](const Device& d, const std::string& precision) {
            return d.peak_flops(parse_precision(precision));
          },
          py::arg("precision"),
          "Peak FLOP/s for a precision; the fp32 SIMT peak where the GPU has no faster units")
      .def("occupancy", &occupancy, py::arg("threads_per_block"), py::arg("registers_per_thread"),
           py::arg("shared_bytes_per_block") = 0,
           "Theoretical occupancy of a kernel launch (CUDA occupancy calculator rules)")
      .def("__eq__", [](const Device& a, const Device& b) { return a.name == b.name; })
      .def("__hash__", [](const Device& d) { return py::hash(py::str(d.name)); })
      .def("__repr__", &repr);

  m.def("load_device_database", &load_device_database, py::arg("path"),
        py::arg("user_files") = std::vector<std::string>{},
        "Load the device database from `path`, then merge each user file in order.");
  m.def(
      "merge_devices_json",
      [](const std::string& text) {
        device_database();  // merging into nothing would hide a missing packaged database
        registry().db.merge_json(text);
        ++registry().generation;
      },
      py::arg("text"), "Add or update devices from a JSON document in the devices.json layout.");
  m.def("device_database_loaded", [] { return registry().loaded; });
  m.def(
      "find_device",
      [](const std::string& name, const std::optional<std::string>& devices_json) {
        return find_device(name, devices_json);
      },
      py::arg("name"), py::arg("devices_json") = py::none(),
      "The device a (forgiving) name refers to, in the loaded database or in the database file "
      "devices_json (read once per path); raises UnknownDeviceError.");
  m.def("device_name_key", &device_name_key, py::arg("name"),
        "The form under which find_device matches names (lower case, no separators, no vendor "
        "words); empty matches nothing.");
  m.def(
      "closest_device_names",
      [](const std::string& name, std::size_t n) {
        return device_database().closest_names(name, n);
      },
      py::arg("name"), py::arg("n") = 5);
  m.def("all_devices", [] { return device_database().all(); });
}

}  // namespace habitat::python
