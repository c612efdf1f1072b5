#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "habitat/device.h"

namespace habitat {
namespace {

const std::string kDevicesPath = HABITAT_SOURCE_DIR "/python/habitat/data/devices.json";

std::string read_devices_text() {
  std::ifstream in(kDevicesPath);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const DeviceDatabase& database() {
  static const DeviceDatabase db = DeviceDatabase::load_file(kDevicesPath);
  return db;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceDatabase, ShipsAtLeastTwentyGpus) { EXPECT_GE(database().all().size(), 20u); }

TEST(DeviceDatabase, EveryDeviceIsCompleteAndCited) {
  const auto doc = nlohmann::json::parse(read_devices_text());
  std::set<std::string> tags;
  for (const auto& [tag, text] : doc.at("source_tags").items()) tags.insert(tag);
  const auto expect_known_tags = [&](const std::string& device, const std::string& field,
                                     const std::string& cited) {
    std::stringstream list(cited);
    std::string tag;
    int count = 0;
    while (std::getline(list, tag, ',')) {
      tag.erase(0, tag.find_first_not_of(' '));
      EXPECT_TRUE(tags.contains(tag)) << device << "." << field << " cites unknown tag " << tag;
      ++count;
    }
    EXPECT_GT(count, 0) << device << "." << field << " has no source";
  };
  for (const Device& d : database().all()) {
    SCOPED_TRACE(d.name);
    EXPECT_FALSE(d.display_name.empty());
    EXPECT_FALSE(d.aliases.empty());
    EXPECT_GE(d.cc_major, 6);
    EXPECT_GT(d.sms, 0);
    EXPECT_GT(d.boost_clock_mhz, 0);
    EXPECT_GT(d.memory_gb, 0);
    EXPECT_GT(d.memory_bandwidth_gbs, 0);
    EXPECT_GT(d.l2_mb, 0);
    EXPECT_GT(d.tdp_w, 0);
    EXPECT_GT(d.limits.max_warps, 0);
    EXPECT_GT(d.limits.shared_memory, 0);
    ASSERT_TRUE(d.peak_tflops.contains(Precision::Fp32Simt));
    std::vector<std::string> fields{"compute_capability",
                                    "sms",
                                    "boost_clock_mhz",
                                    "memory_gb",
                                    "memory_bandwidth_gbs",
                                    "l2_mb",
                                    "tdp_w"};
    for (const auto& [p, value] : d.peak_tflops) {
      EXPECT_GT(value, 0);
      fields.push_back("peak_tflops." + std::string(to_string(p)));
    }
    for (const auto& field : fields) {
      const auto it = d.sources.find(field);
      ASSERT_NE(it, d.sources.end()) << "no source for " << field;
      expect_known_tags(d.name, field, it->second);
    }
  }
  for (const auto& [cc, limits] : doc.at("sm_limits").items()) {
    expect_known_tags("sm_limits " + cc, "sources", limits.at("sources").get<std::string>());
  }
}

TEST(DeviceDatabase, FiguresFollowGpusMdNotes) {
  const Device& l4 = database().find("L4");
  EXPECT_EQ(l4.sms, 58);  // not NeuSight's 60
  EXPECT_EQ(l4.compute_capability(), 89);
  const Device& h100 = database().find("H100");
  EXPECT_EQ(h100.name, "H100-SXM5-80GB");
  EXPECT_DOUBLE_EQ(h100.peak_flops(Precision::Bf16Tensor), 989.4e12);
  EXPECT_DOUBLE_EQ(h100.boost_clock_mhz, 1980);
  // GeForce cards carry the FP32-accumulate tensor rate.
  EXPECT_DOUBLE_EQ(database().find("RTX 4090").peak_tflops.at(Precision::Bf16Tensor), 165.2);
  EXPECT_NE(database().find("L40S").notes.find("DISPUTED"), std::string::npos);
  EXPECT_EQ(database().find("B200").compute_capability(), 100);
}

TEST(DeviceDatabase, PerSmLimitsComeFromTheComputeCapabilityTable) {
  const SmLimits& a100 = database().find("A100").limits;
  EXPECT_EQ(a100.max_threads, 2048);
  EXPECT_EQ(a100.max_blocks, 32);
  EXPECT_EQ(a100.shared_memory, 164 * 1024);
  EXPECT_EQ(a100.shared_memory_per_block, 163 * 1024);
  EXPECT_EQ(a100.reserved_shared_per_block, 1024);
  const SmLimits& t4 = database().find("T4").limits;
  EXPECT_EQ(t4.max_warps, 32);
  EXPECT_EQ(t4.max_blocks, 16);
  EXPECT_EQ(t4.reserved_shared_per_block, 0);
  EXPECT_EQ(database().find("RTX 4090").limits.max_blocks, 24);
  EXPECT_EQ(database().find("P100").limits.warp_alloc_granularity, 2);
  EXPECT_EQ(database().find("H200").limits.shared_memory, 228 * 1024);
}

TEST(DeviceDatabase, ForgivingLookups) {
  const auto name_of = [](std::string_view query) { return database().find(query).name; };
  EXPECT_EQ(name_of("NVIDIA H100 80GB HBM3"), "H100-SXM5-80GB");
  EXPECT_EQ(name_of("h100"), "H100-SXM5-80GB");
  EXPECT_EQ(name_of("H100-SXM"), "H100-SXM5-80GB");
  EXPECT_EQ(name_of("NVIDIA H100 PCIe"), "H100-PCIE-80GB");
  EXPECT_EQ(name_of("A100"), "A100-SXM4-80GB");
  EXPECT_EQ(name_of("A100-80GB"), "A100-SXM4-80GB");
  EXPECT_EQ(name_of("nvidia a100-sxm4-80gb"), "A100-SXM4-80GB");
  EXPECT_EQ(name_of("a100 pcie 40gb"), "A100-PCIE-40GB");
  EXPECT_EQ(name_of("NVIDIA A100 80GB PCIe"), "A100-PCIE-80GB");
  EXPECT_EQ(name_of("V100"), "V100-SXM2-16GB");
  EXPECT_EQ(name_of("Tesla V100-SXM2-16GB"), "V100-SXM2-16GB");
  EXPECT_EQ(name_of("tesla p4"), "P4");
  EXPECT_EQ(name_of("NVIDIA GeForce RTX 4090"), "RTX-4090");
  EXPECT_EQ(name_of("rtx_3090"), "RTX-3090");
  EXPECT_EQ(name_of("NVIDIA H200"), "H200-SXM-141GB");
  EXPECT_EQ(name_of("NVIDIA B200"), "B200");
  EXPECT_EQ(name_of("NVIDIA A100 SXM4 80GB"), "A100-SXM4-80GB");  // display name
  // Cloud names: AWS g5's A10G has no datasheet of its own (devices.json's A10 notes).
  EXPECT_EQ(name_of("A10G"), "A10");
  EXPECT_EQ(name_of("NVIDIA A10G"), "A10");
  EXPECT_EQ(name_of("A100-40G"), "A100-SXM4-40GB");
  // Every NeuSight device-config and label name.
  for (const char* neusight :
       {"NVIDIA_A100-PCIE-40GB", "NVIDIA_A100-SXM4-40GB", "NVIDIA_A100_80GB_PCIe",
        "NVIDIA_H100_80GB_HBM3", "NVIDIA_L4", "Tesla_P100-PCIE-16GB", "Tesla_P4", "Tesla_T4",
        "Tesla_V100-PCIE-32GB"}) {
    EXPECT_NE(database().try_find(neusight), nullptr) << neusight;
  }
}

TEST(DeviceDatabase, UnknownNamesListCloseNamesAndTheFix) {
  EXPECT_EQ(database().try_find("A100-SXM4-96GB"), nullptr);
  EXPECT_EQ(database().try_find(""), nullptr);
  try {
    database().find("A100-SXM4-96GB");
    FAIL() << "expected UnknownDeviceError";
  } catch (const UnknownDeviceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("A100-SXM4-96GB"), std::string::npos);
    EXPECT_NE(message.find("A100-SXM4-80GB"), std::string::npos);
    EXPECT_NE(message.find("load_devices"), std::string::npos);
    EXPECT_EQ(message.find("compute_capability"), std::string::npos);  // no schema dump
  }
  const auto close = database().closest_names("A10X", 3);
  ASSERT_EQ(close.size(), 3u);
  EXPECT_EQ(close[0], "A10");
  const auto h = database().closest_names("H10", 5);
  EXPECT_NE(std::find(h.begin(), h.end(), "H100-SXM5-80GB"), h.end());
}

TEST(DeviceDatabase, PeakFlopsFallsBackToFp32Simt) {
  const Device& v100 = database().find("V100");
  EXPECT_DOUBLE_EQ(v100.peak_flops(Precision::Fp16Tensor), 125e12);
  EXPECT_DOUBLE_EQ(v100.peak_flops(Precision::Bf16Tensor), 15.7e12);
  EXPECT_DOUBLE_EQ(v100.peak_flops(Precision::Tf32Tensor), 15.7e12);
  EXPECT_DOUBLE_EQ(database().find("T4").peak_flops(Precision::Fp8Tensor), 8.1e12);
  EXPECT_DOUBLE_EQ(database().find("A100").peak_flops(Precision::Tf32Tensor), 156e12);
  EXPECT_DOUBLE_EQ(database().find("A100").bandwidth_bytes_per_s(), 2039e9);
}

TEST(DeviceDatabase, MergeUpdatesOnlyTheGivenFields) {
  DeviceDatabase db = database();
  db.merge_json(R"({"devices": [{"name": "A100", "memory_bandwidth_gbs": 1800,
                                 "peak_tflops": {"bf16": 280}}]})");
  const Device& a100 = db.find("A100-SXM4-80GB");
  EXPECT_DOUBLE_EQ(a100.memory_bandwidth_gbs, 1800);
  EXPECT_DOUBLE_EQ(a100.peak_tflops.at(Precision::Bf16Tensor), 280);
  EXPECT_DOUBLE_EQ(a100.peak_tflops.at(Precision::Fp16Tensor), 312);
  EXPECT_EQ(a100.sms, 108);
  EXPECT_EQ(db.all().size(), database().all().size());
}

TEST(DeviceDatabase, MergeAddsACompleteNewDevice) {
  DeviceDatabase db = database();
  db.merge_json(R"({"devices": [{"name": "RTX-A6000", "aliases": ["NVIDIA RTX A6000"],
      "compute_capability": "8.6", "sms": 84, "boost_clock_mhz": 1800, "memory_gb": 48,
      "memory_bandwidth_gbs": 768, "l2_mb": 6, "tdp_w": 300,
      "peak_tflops": {"fp32": 38.7, "bf16": 154.8}}]})");
  const Device& a6000 = db.find("nvidia rtx a6000");
  EXPECT_EQ(a6000.name, "RTX-A6000");
  EXPECT_EQ(a6000.limits.max_warps, 48);  // inherited from the cc 8.6 table
  EXPECT_EQ(db.all().size(), database().all().size() + 1);
}

TEST(DeviceDatabase, MergeErrorsNameTheDeviceAndFieldAndChangeNothing) {
  DeviceDatabase db = database();
  const std::string incomplete =
      error_of([&] { db.merge_json(R"({"devices": [{"name": "MyGPU", "sms": 10}]})"); });
  EXPECT_NE(incomplete.find("MyGPU"), std::string::npos);
  EXPECT_NE(incomplete.find("memory_gb"), std::string::npos);

  const std::string bad_type =
      error_of([&] { db.merge_json(R"({"devices": [{"name": "T4", "sms": "forty"}]})"); });
  EXPECT_NE(bad_type.find("\"T4\""), std::string::npos);
  EXPECT_NE(bad_type.find("sms"), std::string::npos);

  const std::string typo = error_of(
      [&] { db.merge_json(R"({"devices": [{"name": "T4", "memory_bandwith_gbs": 300}]})"); });
  EXPECT_NE(typo.find("memory_bandwith_gbs"), std::string::npos);

  const std::string precision = error_of(
      [&] { db.merge_json(R"({"devices": [{"name": "T4", "peak_tflops": {"int8": 130}}]})"); });
  EXPECT_NE(precision.find("int8"), std::string::npos);

  const std::string clash =
      error_of([&] { db.merge_json(R"({"devices": [{"name": "L4", "aliases": ["T4"]}]})"); });
  EXPECT_NE(clash.find("\"T4\""), std::string::npos);

  const std::string new_cc = error_of([&] {
    db.merge_json(R"({"devices": [{"name": "RTX 5090", "compute_capability": "12.0",
        "sms": 170, "boost_clock_mhz": 2407, "memory_gb": 32, "memory_bandwidth_gbs": 1792,
        "l2_mb": 96, "tdp_w": 575, "peak_tflops": {"fp32": 104.8}}]})");
  });
  EXPECT_NE(new_cc.find("12.0"), std::string::npos);
  EXPECT_NE(new_cc.find("sm_limits"), std::string::npos);

  // A failed merge leaves the database as it was, even after a good first entry.
  error_of([&] {
    db.merge_json(R"({"devices": [{"name": "T4", "sms": 41}, {"name": "L4", "sms": -1}]})");
  });
  EXPECT_EQ(db.find("T4").sms, 40);
  EXPECT_EQ(db.find("L4").sms, 58);
  EXPECT_EQ(db.find("L4").aliases, database().find("L4").aliases);
}

TEST(DeviceDatabase, MergeSmLimitTableUpdatesItsDevices) {
  DeviceDatabase db = database();
  db.merge_json(R"({"sm_limits": {"8.9": {"max_blocks": 20}}})");
  EXPECT_EQ(db.find("L4").limits.max_blocks, 20);
  EXPECT_EQ(db.find("L4").limits.max_warps, 48);
  EXPECT_EQ(db.find("A100").limits.max_blocks, 32);
}

TEST(DeviceDatabase, MalformedDocumentsAreRejectedWithAReason) {
  EXPECT_NE(error_of([] { DeviceDatabase::from_json("{\"devices\": [}"); }).find("malformed JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] { DeviceDatabase::from_json("[]"); }).find("top level"), std::string::npos);
  EXPECT_NE(error_of([] { DeviceDatabase::from_json("{}"); }).find("devices"), std::string::npos);
  EXPECT_NE(error_of([] {
              DeviceDatabase::from_json(R"({"format": "yaml", "devices": []})");
            }).find("format"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              DeviceDatabase::from_json(R"({"version": 7, "devices": []})");
            }).find("version"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              DeviceDatabase::load_file("/nonexistent/devices.json");
            }).find("/nonexistent/devices.json"),
            std::string::npos);
  // A device without a compute-capability table entry and no limits of its own.
  EXPECT_NE(error_of([] {
              DeviceDatabase::from_json(R"({"devices": [{"name": "X", "compute_capability": "8.0",
                  "sms": 1, "boost_clock_mhz": 1, "memory_gb": 1, "memory_bandwidth_gbs": 1,
                  "l2_mb": 1, "tdp_w": 1, "peak_tflops": {"fp32": 1}}]})");
            }).find("\"X\""),
            std::string::npos);
}

}  // namespace
}  // namespace habitat

namespace habitat {
namespace {

// Every GPU lists the dense tensor-core peaks its architecture has (each cited, as checked
// above): FP16 from Volta (7.0), TF32 and BF16 from Ampere (8.0), FP8 from Ada/Hopper (8.9).
TEST(DeviceDatabase, EveryGpuListsTheTensorPeaksOfItsArchitecture) {
  for (const Device& d : database().all()) {
    SCOPED_TRACE(d.name);
    const int cc = d.compute_capability();
    const double fp32 = d.peak_tflops.at(Precision::Fp32Simt);
    auto has = [&](Precision p) { return d.peak_tflops.contains(p) && d.peak_tflops.at(p) > 0; };
    if (cc >= 70) {
      ASSERT_TRUE(has(Precision::Fp16Tensor));
      EXPECT_GT(d.peak_tflops.at(Precision::Fp16Tensor), fp32);
    }
    if (cc >= 80) {
      ASSERT_TRUE(has(Precision::Tf32Tensor) && has(Precision::Bf16Tensor));
      EXPECT_GE(d.peak_tflops.at(Precision::Tf32Tensor), fp32);  // GeForce Ampere: TF32 = FP32 rate
      EXPECT_DOUBLE_EQ(d.peak_tflops.at(Precision::Bf16Tensor),
                       d.peak_tflops.at(Precision::Fp16Tensor));
    } else {
      EXPECT_FALSE(has(Precision::Tf32Tensor) || has(Precision::Bf16Tensor));  // no such units
    }
    EXPECT_EQ(has(Precision::Fp8Tensor), cc >= 89);
  }
}

TEST(DeviceDatabase, AtLeastAsGoodComparesEveryFigureThatBoundsAnOp) {
  const Device& a80 = database().find("A100-SXM4-80GB");
  const Device& a40 = database().find("A100-SXM4-40GB");
  EXPECT_TRUE(at_least_as_good(a80, a40, Precision::Bf16Tensor));  // same chip, more bandwidth
  EXPECT_FALSE(at_least_as_good(a40, a80, Precision::Bf16Tensor));
  EXPECT_TRUE(at_least_as_good(a40, a40, Precision::Fp32Simt));
  EXPECT_TRUE(
      at_least_as_good(database().find("H200"), database().find("H100"), Precision::Bf16Tensor));
  // L4 has more L2 and a higher clock than an A100 but far less bandwidth: neither dominates.
  const Device& l4 = database().find("L4");
  EXPECT_FALSE(at_least_as_good(a40, l4, Precision::Fp32Simt));
  EXPECT_FALSE(at_least_as_good(l4, a40, Precision::Fp32Simt));
  EXPECT_TRUE(at_least_as_good(database().find("H100"), a80, Precision::Tf32Tensor));
  // The A100's boost clock (1410 MHz) is below the V100's (1530): no dominance either way.
  EXPECT_FALSE(at_least_as_good(a40, database().find("V100-SXM2-16GB"), Precision::Tf32Tensor));
}

}  // namespace
}  // namespace habitat
