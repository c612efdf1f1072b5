// Every input of the committed fuzz corpus (tests/fuzz/corpus), run through the fuzz targets'
// checks in the default build: what libFuzzer once found stays fixed without clang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../../fuzz/readers.h"

namespace habitat {
namespace {

namespace fs = std::filesystem;

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::size_t replay(const std::string& corpus, void (*run)(std::string_view)) {
  std::size_t inputs = 0;
  for (const auto& entry :
       fs::directory_iterator(HABITAT_SOURCE_DIR "/tests/fuzz/corpus/" + corpus)) {
    if (!entry.is_regular_file()) continue;
    SCOPED_TRACE(entry.path().string());
    run(bytes_of(entry.path()));
    ++inputs;
  }
  return inputs;
}

TEST(FuzzCorpus, TraceReaderKeepsItsInvariants) {
  EXPECT_GE(replay("trace", [](std::string_view text) { fuzz::trace_reader(text); }), 5u);
}

TEST(FuzzCorpus, DeviceReaderKeepsItsInvariants) {
  static const DeviceDatabase packaged =
      DeviceDatabase::load_file(HABITAT_SOURCE_DIR "/python/habitat/data/devices.json");
  EXPECT_GE(replay("devices", [](std::string_view text) { fuzz::device_reader(text, packaged); }),
            5u);
}

}  // namespace
}  // namespace habitat
