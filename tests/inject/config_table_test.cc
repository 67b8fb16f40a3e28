// The sender thread's table of described configurations (libinject/src/config_table.h): a
// configuration is found again by every member of its description, those of a green context
// (sm_count) and of its wave (wave_size, wave_of_clusters) included, so that each configuration is
// described once.
#include "config_table.h"

#include <gtest/gtest.h>

#include "cuflight/schema/config_expander.h"

namespace cuflight::inject {
namespace {

schema::KernelConfigEvent Config(std::optional<int32_t> sm_count, schema::WaveShape wave) {
  schema::KernelEvent k;
  k.api = "cuLaunchKernel";
  k.name = "_Z4gemmv";
  k.demangled = "gemm()";
  k.block = {128, 1, 1};
  k.sm_count = sm_count;
  schema::KernelConfigEvent config;
  schema::LaunchEvent launch;
  schema::Split(k, 0, &config, &launch, wave);
  return config;
}

TEST(ConfigTable, FindsEveryMemberOfADescriptionAgain) {
  ConfigTable table;
  const schema::KernelConfigEvent green = Config(16, {256, false});
  const schema::KernelConfigEvent whole = Config(std::nullopt, {2112, false});
  const schema::KernelConfigEvent clusters = Config(std::nullopt, {8, true});
  EXPECT_EQ(table.Find(green), 0u);
  table.Add(green, 1);
  table.Add(whole, 2);
  table.Add(clusters, 3);
  EXPECT_EQ(table.Find(green), 1u);  // sm_count 16 kept
  EXPECT_EQ(table.Find(whole), 2u);
  EXPECT_EQ(table.Find(clusters), 3u);
  EXPECT_EQ(table.Find(green), 1u);  // after another was found last
  EXPECT_EQ(table.Find(Config(16, {256, true})), 0u);  // another wave: another configuration
  EXPECT_EQ(table.Find(Config(32, {256, false})), 0u);
  EXPECT_EQ(table.size(), 3u);
}

}  // namespace
}  // namespace cuflight::inject
