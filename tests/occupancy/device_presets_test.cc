#include <gtest/gtest.h>

#include <cuda_occupancy.h>
#include <set>
#include <string>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"

namespace cuflight::occupancy {
namespace {

TEST(DevicePresets, TheIssuesListIsThere) {
  for (const char* key : {"v100", "t4", "a100", "a100-80gb", "a10", "l4", "rtx3090", "rtx4090",
                          "h100-sxm", "h100-pcie", "h200", "b200", "rtx5090"}) {
    EXPECT_NE(FindDevicePreset(key), nullptr) << key;
  }
}

TEST(DevicePresets, KeysAndAliasesAreUniqueAndCaseInsensitive) {
  std::set<std::string> seen;
  for (const DevicePreset& p : DevicePresets()) {
    EXPECT_TRUE(seen.insert(std::string(p.key)).second) << p.key;
    EXPECT_EQ(FindDevicePreset(p.key), &p);
  }
  EXPECT_EQ(FindDevicePreset("H100"), FindDevicePreset("h100-sxm"));
  EXPECT_EQ(FindDevicePreset("A100-SXM4-80GB"), FindDevicePreset("a100-80gb"));
  EXPECT_EQ(FindDevicePreset("h10"), nullptr);
  EXPECT_EQ(FindDevicePreset(""), nullptr);
}

// The table's per-SM numbers must agree with the architecture tables inside cuda_occupancy.h
// (an independent source) and describe a device the engine accepts.
TEST(DevicePresets, ConsistentWithTheReferenceCalculator) {
  for (const DevicePreset& p : DevicePresets()) {
    SCOPED_TRACE(std::string(p.key));
    const DeviceLimits& d = p.limits;
    EXPECT_EQ(DeviceContext::Validate(d), Status::kOk);
    cudaOccDeviceProp prop;
    prop.computeMajor = d.cc_major;
    prop.computeMinor = d.cc_minor;
    int blocks = 0;
    ASSERT_EQ(cudaOccMaxBlocksPerMultiprocessor(&blocks, &prop), CUDA_OCC_SUCCESS);
    EXPECT_EQ(d.max_blocks_per_sm, blocks);
    // smem_per_sm is the largest carveout step of the architecture.
    size_t top = static_cast<size_t>(d.smem_per_sm);
    ASSERT_EQ(cudaOccAlignUpShmemSizeVoltaPlus(&top, &prop), CUDA_OCC_SUCCESS);
    EXPECT_EQ(top, static_cast<size_t>(d.smem_per_sm));
    size_t beyond = static_cast<size_t>(d.smem_per_sm) + 1;
    EXPECT_NE(cudaOccAlignUpShmemSizeVoltaPlus(&beyond, &prop), CUDA_OCC_SUCCESS);
    // Opt-in per block is the SM's shared memory less the reserved block (cc >= 8.0), or all of
    // it (Volta/Turing, nothing reserved).
    EXPECT_EQ(d.smem_per_block_optin, d.smem_per_sm - d.reserved_smem_per_block);
    EXPECT_EQ(d.reserved_smem_per_block, d.cc_major >= 8 ? 1024 : 0);
    EXPECT_EQ(d.smem_per_block, 48 * 1024);
    EXPECT_EQ(d.warp_size, 32);
    EXPECT_EQ(d.max_threads_per_sm % 32, 0);
    EXPECT_EQ(d.max_cluster_size, d.cc_major >= 9 ? 8 : 0);
    EXPECT_GT(d.sm_count, 0);
  }
}

}  // namespace
}  // namespace cuflight::occupancy
