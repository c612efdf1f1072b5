// libFuzzer target: the device reader (tests/fuzz/readers.h), merging into the packaged
// database. Built with -DHABITAT_FUZZ=ON and clang; run by .ci/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const habitat::DeviceDatabase packaged =
      habitat::DeviceDatabase::load_file(HABITAT_SOURCE_DIR "/python/habitat/data/devices.json");
  habitat::fuzz::device_reader(std::string_view(reinterpret_cast<const char*>(data), size),
                               packaged);
  return 0;
}
