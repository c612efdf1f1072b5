// read_file: the engine's one whole-file read, and the callers' errors that come from it.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "habitat/device.h"
#include "habitat/file_io.h"
#include "habitat/trace.h"

namespace habitat {
namespace {

namespace fs = std::filesystem;

TEST(ReadFile, ReadsBytesAndNamesWhatFailed) {
  const fs::path path = fs::temp_directory_path() / "habitat_read_file_test.bin";
  const std::string bytes("a\0b\nc", 5);
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(read_file(path.string(), "test file"), bytes);
  fs::remove(path);

  try {
    read_file(path.string(), "test file");
    FAIL() << "expected an error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("cannot read test file '" + path.string() + "'"),
              std::string::npos);
  }
  try {
    read_file(fs::temp_directory_path().string(), "test file");
    FAIL() << "expected an error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EISDIR);
  }
}

TEST(ReadFile, EveryLoaderReportsAMissingFileTheSameWay) {
  const std::string missing = (fs::temp_directory_path() / "habitat_no_such_file.json").string();
  for (const auto& [what, load] :
       std::initializer_list<std::pair<const char*, void (*)(const std::string&)>>{
           {"habitat trace", [](const std::string& p) { load_trace(p); }},
           {"device database", [](const std::string& p) { DeviceDatabase::load_file(p); }}}) {
    try {
      load(missing);
      FAIL() << what << ": expected an error";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(
          std::string(e.what()).find(std::string("cannot read ") + what + " '" + missing + "'"),
          std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace habitat
