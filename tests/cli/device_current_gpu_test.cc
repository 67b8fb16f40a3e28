// GPU-only (CTest label `gpu`): reads the real device through `cuflight occupancy --device
// current` and compares it with the preset of the same GPU, so the preset table is checked
// against what the driver reports.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "subprocess.h"

namespace cuflight {
namespace {

using nlohmann::json;

json RunJson(const std::vector<std::string>& args) {
  const testing::ProcessResult r =
      testing::RunProcess(testing::PathFromEnv("CUFLIGHT_TEST_CLI", CUFLIGHT_CLI_PATH), args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

// Preset key for a driver device name; first match wins, so the more specific names come first.
std::string PresetFor(const std::string& name) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"H100 PCIe", "h100-pcie"}, {"H100", "h100-sxm"}, {"H200", "h200"},
      {"A100-SXM4-80GB", "a100-80gb"}, {"A100 80GB", "a100-80gb"}, {"A100", "a100"},
      {"B200", "b200"}, {"L40S", "l40s"}, {"L4", "l4"}, {"A10", "a10"}, {"T4", "t4"},
      {"V100", "v100"}, {"RTX 3090", "rtx3090"}, {"RTX 4090", "rtx4090"}, {"RTX 5090", "rtx5090"}};
  for (const auto& [needle, key] : kNames) {
    if (name.find(needle) != std::string::npos) return key;
  }
  return "";
}

TEST(DeviceCurrentGpu, MatchesItsPreset) {
  const json current =
      RunJson({"occupancy", "--device", "current", "--regs", "32", "--threads", "256", "--json"});
  const json& dev = current.at("device");
  ASSERT_GT(dev.at("sm_count").get<int>(), 0);
  const std::string key = PresetFor(dev.at("name").get<std::string>());
  if (key.empty()) GTEST_SKIP() << "no preset for " << dev.at("name");
  const json presets = RunJson({"occupancy", "--list-devices", "--json"});
  const json* preset = nullptr;
  for (const json& p : presets) {
    if (p.at("key") == key) preset = &p;
  }
  ASSERT_NE(preset, nullptr) << key;
  for (const char* field : {"cc_major", "cc_minor", "sm_count", "max_threads_per_block",
                            "max_threads_per_sm", "max_blocks_per_sm", "regs_per_sm",
                            "regs_per_block", "smem_per_sm", "smem_per_block",
                            "smem_per_block_optin", "reserved_smem_per_block", "warp_size"}) {
    EXPECT_EQ(dev.at(field), preset->at(field)) << field << " on " << dev.at("name");
  }
}

}  // namespace
}  // namespace cuflight
