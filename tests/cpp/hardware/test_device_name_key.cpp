// device_name_key: the one forgiving form of a GPU name (habitat.learned.devices uses it too).
#include <gtest/gtest.h>

#include "habitat/device.h"

namespace habitat {
namespace {

TEST(DeviceNameKey, IgnoresCaseSeparatorsAndVendorWords) {
  EXPECT_EQ(device_name_key("NVIDIA Tesla T4"), "t4");
  EXPECT_EQ(device_name_key("tesla_t4"), "t4");
  EXPECT_EQ(device_name_key("NVIDIA A100-PCIE-40GB"), device_name_key("a100 pcie 40gb"));
  EXPECT_EQ(device_name_key("NVIDIA"), "");
}

TEST(DeviceNameKey, IsWhatFindMatches) {
  const auto db = DeviceDatabase::load_file(std::string(HABITAT_SOURCE_DIR) +
                                            "/python/habitat/data/devices.json");
  for (const Device& d : db.all()) {
    EXPECT_EQ(db.find(d.name).name, d.name);
    for (const std::string& alias : d.aliases) {
      EXPECT_EQ(device_name_key(alias).empty() ? d.name : db.find(alias).name, d.name) << alias;
    }
  }
}

}  // namespace
}  // namespace habitat
