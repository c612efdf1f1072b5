// The process-wide device database that habitat.devices fills at import
// (packaged devices.json plus the user's files); bind_devices.cpp owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "habitat/device.h"

namespace habitat::python {

// The loaded database. The object stays the same for the life of the process (later
// loads and merges update it in place), so a ForecastEngine may keep the reference; a
// Device reference may move after a merge. It is changed only from Python, under the
// GIL, by habitat.devices: do not merge while forecasts run on other threads.
// Throws std::runtime_error when habitat.devices has not loaded it yet.
const DeviceDatabase& device_database();
// Changes whenever the database does (a load or a merge): what was computed from the
// database before (memos of forecasts) is stale once it changed.
uint64_t device_database_generation();

// The device a (forgiving) name refers to: in the database file `devices_json` when given
// (read once per path, then cached), else in the loaded database. Throws UnknownDeviceError.
const Device& find_device(const std::string& name, const std::optional<std::string>& devices_json);

}  // namespace habitat::python
