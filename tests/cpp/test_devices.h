// The project's device database (python/habitat/data/devices.json), loaded once for every test
// that forecasts on real GPUs.
#pragma once

#include "habitat/device.h"

namespace habitat::test {

inline const DeviceDatabase& db() {
  static const DeviceDatabase instance =
      DeviceDatabase::load_file(HABITAT_SOURCE_DIR "/python/habitat/data/devices.json");
  return instance;
}

}  // namespace habitat::test
