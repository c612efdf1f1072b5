// The one JSON reader (trace/json_reader.h): its errors name the path to the bad value, for
// traces, device databases and learned-model metadata alike.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "habitat/device.h"
#include "habitat/learned_models.h"
#include "learned/mlp.h"
#include "trace/json_reader.h"

namespace habitat {
namespace {

namespace fs = std::filesystem;
using namespace json_reader;

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const DecodeError& e) {
    return e.message;
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonReader, NamesThePathToTheBadValue) {
  const json doc = parse(R"({"steps": [{"ops": [{"shape": [4, -1]}]}]})");
  const Loc root;
  const Loc steps = root.child("steps");
  const Loc step0 = steps.at(0);
  const Loc ops = step0.child("ops");
  const Loc op0{&ops, {}, 0, "aten::mm"};
  const Loc shape = op0.child("shape");
  EXPECT_EQ(message_of([&] { read_ints(doc["steps"][0]["ops"][0]["shape"], shape, true); }),
            "steps[0].ops[0] (aten::mm).shape[1]: must be >= 0, got -1");
  EXPECT_EQ(message_of([&] { required(doc, root, "origin"); }), "origin: missing required field");
  EXPECT_EQ(message_of([&] { read_string(doc["steps"], steps); }),
            "steps: expected a string, got array");
  EXPECT_NE(message_of([&] { parse("{\"a\": "); }).find("not valid JSON"), std::string::npos);
}

TEST(JsonReader, DeviceDatabaseErrorsNameTheEntryAndField) {
  const std::string text = R"({"devices": [{"name": "T4", "sms": "forty"}]})";
  DeviceDatabase db = DeviceDatabase::load_file(std::string(HABITAT_SOURCE_DIR) +
                                                "/python/habitat/data/devices.json");
  const std::string m = message_of([&] { db.merge_json(text); });
  EXPECT_NE(m.find("device database: devices[0] (\"T4\").sms: must be a positive integer up to "
                   "16777216, got \"forty\""),
            std::string::npos)
      << m;
}

TEST(JsonReader, LearnedMetadataErrorsNameTheFileAndField) {
  const fs::path dir = fs::temp_directory_path() / "habitat_json_reader_meta";
  fs::create_directories(dir);
  std::ofstream(dir / "gemm.safetensors") << "not read: the metadata fails first";
  std::ofstream(dir / "gemm.json") << R"({"layers": "two", "features": []})";
  const std::string m = message_of([&] { LearnedModels::load(dir.string()); });
  EXPECT_NE(m.find((dir / "gemm.json").string() + ": layers: expected an integer, got string"),
            std::string::npos)
      << m;
  fs::remove_all(dir);
}

TEST(JsonReader, SafetensorsHeaderErrorsNameTheTensorField) {
  const std::string header = R"({"w": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 0]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header;
  EXPECT_EQ(message_of([&] { parse_safetensors(bytes, "w.safetensors"); }),
            "w.safetensors: w.shape[1]: must be >= 0, got -3");
}

}  // namespace
}  // namespace habitat
