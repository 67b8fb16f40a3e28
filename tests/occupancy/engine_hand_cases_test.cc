// Occupancy cases worked out by hand from the CUDA Programming Guide's rules, with the
// arithmetic written next to each expectation. None of these numbers come from the engine.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"

namespace cuflight::occupancy {
namespace {

Result Occ(std::string_view device, const LaunchConfig& launch) {
  const DevicePreset* preset = FindDevicePreset(device);
  EXPECT_NE(preset, nullptr) << device;
  auto ctx = DeviceContext::Make(preset->limits);
  EXPECT_TRUE(ctx.has_value());
  Result r;
  EXPECT_EQ(Compute(*ctx, launch, &r), Status::kOk);
  return r;
}

LaunchConfig Launch(int regs, uint32_t threads, int64_t dyn = 0, int64_t stat = 0) {
  LaunchConfig l;
  l.regs_per_thread = regs;
  l.block = {threads, 1, 1};
  l.dyn_smem = dyn;
  l.static_smem = stat;
  return l;
}

TEST(EngineHandCases, A100RegistersBind) {
  // 40 regs * 32 lanes = 1280 regs/warp (already a multiple of the 256 granularity).
  // Each of 4 sub-partitions has 65536/4 = 16384 regs -> 16384/1280 = 12 warps -> 48 warps/SM.
  // 256 threads = 8 warps/block -> 48/8 = 6 blocks. Warps: 64/8 = 8. Slots: 32.
  // Occupancy 6*8/64 = 0.75, registers bind.
  Result r = Occ("a100", Launch(40, 256));
  EXPECT_EQ(r.fields.max_active_blocks, 6);
  EXPECT_EQ(r.fields.active_warps, 48);
  EXPECT_EQ(r.fields.max_warps, 64);
  EXPECT_DOUBLE_EQ(r.fields.occupancy, 0.75);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kRegisters);
  EXPECT_EQ(r.fields.limiting_resources, schema::MaskOf(Resource::kRegisters));
  EXPECT_EQ(r.blocks_per_sm[static_cast<int>(Resource::kWarps)], 8);
  EXPECT_EQ(r.blocks_per_sm[static_cast<int>(Resource::kBlocks)], 32);
  // No shared memory, yet every block holds the 1 KiB the driver reserves: 167936/1024 = 164.
  EXPECT_EQ(r.blocks_per_sm[static_cast<int>(Resource::kSharedMem)], 164);
  EXPECT_EQ(r.fields.allocated_smem_per_block, 1024);
  EXPECT_DOUBLE_EQ(r.fields.warp_occupancy, 1.0);
  EXPECT_DOUBLE_EQ(r.fields.smem_occupancy, 1.0);
  // 1280 regs/warp * 8 warps = 10240 regs/block.
  EXPECT_EQ(r.fields.allocated_regs_per_block, 10240);
  // One more block (7 = 56 warps = 14 per sub-partition): 16384/14 = 1170 -> round down to the
  // 256 granularity = 1024 regs/warp = 32 regs/thread. 33 regs -> 1056 -> 1280 -> 6 blocks.
  EXPECT_EQ(r.fields.regs_for_next_block, 32);
  // Shared memory is not what limits, so a smaller or larger footprint alone cannot add a block.
  EXPECT_EQ(r.fields.smem_for_next_block, -1);
}

TEST(EngineHandCases, H100RegisterGranularity) {
  // 33 regs * 32 = 1056 -> rounded up to 256 -> 1280 regs/warp (the 23 extra regs/lane are
  // allocation waste). 16384/1280 = 12 warps per sub-partition -> 48/SM; 128 threads = 4 warps
  // -> 12 blocks; warps 64/4 = 16, slots 32 -> 12 blocks, 48/64 = 0.75.
  Result r = Occ("h100-sxm", Launch(33, 128));
  EXPECT_EQ(r.fields.max_active_blocks, 12);
  EXPECT_EQ(r.fields.allocated_regs_per_block, 1280 * 4);
  EXPECT_DOUBLE_EQ(r.fields.occupancy, 0.75);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kRegisters);
  // 13 blocks = 52 warps = 13 per sub-partition: 16384/13 = 1260 -> 1024 -> 32 regs/thread.
  EXPECT_EQ(r.fields.regs_for_next_block, 32);
  // One block barrier per block; Hopper has 2 per block slot: 2*32/1 = 64, never binding.
  EXPECT_EQ(r.blocks_per_sm[static_cast<int>(Resource::kBarriers)], 64);
}

TEST(EngineHandCases, A100ReservedSharedMemoryDecides) {
  // 41 KiB dynamic + 1 KiB reserved = 43008 B (336 * 128, already aligned).
  // Default carveout -> 164 KiB = 167936 B per SM -> 167936/43008 = 3.9 -> 3 blocks.
  // Without the reserved KiB it would be 167936/41984 = 4. 32 regs, 256 threads: regs allow
  // 16384/1024 = 16 warps per sub-partition = 64 warps = 8 blocks.
  Result r = Occ("a100", Launch(32, 256, 41 * 1024));
  EXPECT_EQ(r.fields.max_active_blocks, 3);
  EXPECT_EQ(r.fields.allocated_smem_per_block, 43008);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kSharedMem);
  EXPECT_DOUBLE_EQ(r.fields.occupancy, 3.0 * 8 / 64);
  EXPECT_DOUBLE_EQ(r.fields.reg_occupancy, 1.0);
  // 4 blocks: 167936/4 = 41984 per block (aligned), minus the reserved 1024 = 40960 B usable.
  EXPECT_EQ(r.fields.smem_for_next_block, 40960);
  EXPECT_EQ(r.fields.regs_for_next_block, -1);
  EXPECT_EQ(r.smem_config_bytes, 167936);
}

TEST(EngineHandCases, A100CarveoutPreference) {
  // Carveout 50% of 167936 = 83968 B -> the next carveout step up is 100 KiB = 102400 B.
  // 30 KiB dynamic + 1 KiB reserved = 31744 B -> 102400/31744 = 3 blocks (5 with the default
  // 164 KiB carveout: 167936/31744 = 5.29).
  LaunchConfig l = Launch(32, 256, 30 * 1024);
  l.carveout = 50;
  Result r = Occ("a100", l);
  EXPECT_EQ(r.fields.max_active_blocks, 3);
  EXPECT_EQ(r.smem_config_bytes, 102400);
  l.carveout = -1;
  EXPECT_EQ(Occ("a100", l).fields.max_active_blocks, 5);
}

TEST(EngineHandCases, A100BlockSlotsBind) {
  // 32 threads = 1 warp/block, 16 regs -> 512 regs/warp -> 32 warps per sub-partition (128/SM,
  // capped by warps). Warps allow 64 blocks, slots 32 -> 32 blocks, 32/64 = 0.5.
  Result r = Occ("a100", Launch(16, 32));
  EXPECT_EQ(r.fields.max_active_blocks, 32);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kBlocks);
  EXPECT_DOUBLE_EQ(r.fields.occupancy, 0.5);
  EXPECT_DOUBLE_EQ(r.fields.block_occupancy, 0.5);
  EXPECT_DOUBLE_EQ(r.fields.warp_occupancy, 1.0);
  // Best block size: from 1024 down, 1024 threads fit 2 blocks (warps 64/32) = 2048 threads,
  // full occupancy, so the search stops there.
  EXPECT_EQ(r.fields.best_block_size, 1024);
}

TEST(EngineHandCases, TooLargeBlocks) {
  // 2048 threads > 1024 per block on A100: no block can launch, the warp limit is 0.
  Result r = Occ("a100", Launch(16, 2048));
  EXPECT_EQ(r.fields.max_active_blocks, 0);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kWarps);
  EXPECT_DOUBLE_EQ(r.fields.occupancy, 0.0);
  // 512 threads with __launch_bounds__(256): the function cannot launch with this block.
  LaunchConfig l = Launch(16, 512);
  l.func_max_threads_per_block = 256;
  r = Occ("a100", l);
  EXPECT_EQ(r.fields.max_active_blocks, 0);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kWarps);
  EXPECT_LE(r.fields.best_block_size, 256);
  // 3-D block of 16x16x8 = 2048 threads.
  l = Launch(16, 16);
  l.block = {16, 16, 8};
  EXPECT_EQ(Occ("a100", l).fields.max_active_blocks, 0);
}

TEST(EngineHandCases, T4RegistersPerBlockExceeded) {
  // 255 regs * 32 = 8160 -> 8192 regs/warp; 1024 threads = 32 warps -> 262144 regs > 65536
  // per block: the launch cannot run.
  Result r = Occ("t4", Launch(255, 1024));
  EXPECT_EQ(r.fields.max_active_blocks, 0);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kRegisters);
  // One block of 32 warps within 65536 regs (16384 per sub-partition for 8 warps each):
  // 16384/8 = 2048 regs/warp = 64 regs/thread.
  EXPECT_EQ(r.fields.regs_for_next_block, 64);
}

TEST(EngineHandCases, SharedMemoryAboveFunctionLimit) {
  // 64 KiB dynamic without cudaFuncAttributeMaxDynamicSharedMemorySize: the default limit is
  // 48 KiB - static, so the launch fails -> 0 blocks, shared memory.
  Result r = Occ("h100-sxm", Launch(32, 128, 64 * 1024));
  EXPECT_EQ(r.fields.max_active_blocks, 0);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kSharedMem);
  // Opted in to 200 KiB: 64 KiB + 1 KiB reserved = 66560 -> 233472/66560 = 3.5 -> 3 blocks.
  LaunchConfig l = Launch(32, 128, 64 * 1024);
  l.func_max_dyn_smem = 200 * 1024;
  r = Occ("h100-sxm", l);
  EXPECT_EQ(r.fields.max_active_blocks, 3);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kSharedMem);
}

TEST(EngineHandCases, TieRuleNamesFirstInOrder) {
  // A100, 64 regs, 256 threads: regs 2048/warp -> 8 warps per sub-partition -> 32 warps -> 4
  // blocks. 40 KiB + 1 KiB reserved = 41984 -> 167936/41984 = 4 blocks. Both bind at 4:
  // the tie rule names registers (first in the documented order); both are listed.
  Result r = Occ("a100", Launch(64, 256, 40 * 1024));
  EXPECT_EQ(r.fields.max_active_blocks, 4);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kRegisters);
  EXPECT_EQ(r.fields.limiting_resources,
            schema::MaskOf(Resource::kRegisters) | schema::MaskOf(Resource::kSharedMem));
  // Neither alone can admit a fifth block.
  EXPECT_EQ(r.fields.regs_for_next_block, -1);
  EXPECT_EQ(r.fields.smem_for_next_block, -1);
}

TEST(EngineHandCases, WavesAndTail) {
  // H100 SXM, 12 blocks/SM (the granularity case) * 132 SMs = 1584 blocks per wave.
  // 2000 blocks -> 1.2626 waves; the last wave holds 416 blocks -> 416/1584 of the GPU.
  LaunchConfig l = Launch(33, 128);
  l.grid = {2000, 1, 1};
  Result r = Occ("h100-sxm", l);
  EXPECT_DOUBLE_EQ(r.fields.waves, 2000.0 / 1584.0);
  EXPECT_DOUBLE_EQ(r.fields.tail_utilization, 416.0 / 1584.0);
  l.grid = {1584 * 2, 1, 1};
  r = Occ("h100-sxm", l);
  EXPECT_DOUBLE_EQ(r.fields.waves, 2.0);
  EXPECT_DOUBLE_EQ(r.fields.tail_utilization, 1.0);
}

TEST(EngineHandCases, Clusters) {
  LaunchConfig l = Launch(32, 128);
  l.grid = {132, 1, 1};
  l.cluster = {16, 1, 1};
  // 16 blocks exceeds the portable maximum of 8 on H100: the launch fails.
  Result r = Occ("h100-sxm", l);
  EXPECT_EQ(r.fields.max_active_blocks, 0);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kCluster);
  // Allowed with the non-portable attribute; grid 132 is not a multiple of 16 though.
  l.non_portable_cluster_size_allowed = true;
  EXPECT_EQ(Occ("h100-sxm", l).fields.max_active_blocks, 0);
  l.grid = {128, 1, 1};
  r = Occ("h100-sxm", l);
  // 32 regs, 4 warps/block: regs allow 16 warps per sub-partition = 16 blocks, warps 16.
  EXPECT_EQ(r.fields.max_active_blocks, 16);
  EXPECT_FALSE(r.fields.has_cluster);  // placement across GPCs unknown without the driver
  // The driver says 7 clusters of 16 fit at once: 112 blocks over 132 SMs -> 0.85 blocks per SM
  // -> 112*4 warps / (132*64) = 0.053 occupancy, below the per-SM bound of 1.0: cluster binds.
  l.max_active_clusters = 7;
  r = Occ("h100-sxm", l);
  EXPECT_TRUE(r.fields.has_cluster);
  EXPECT_DOUBLE_EQ(r.fields.cluster_occupancy, 112.0 * 4 / (132.0 * 64));
  EXPECT_EQ(r.fields.limiting_resource, Resource::kCluster);
  // 128 blocks = 8 clusters over waves of 7 clusters.
  EXPECT_DOUBLE_EQ(r.fields.waves, 8.0 / 7.0);
  // Clusters do not exist before sm_90.
  l.max_active_clusters = 0;
  l.cluster = {2, 1, 1};
  EXPECT_EQ(Occ("a100", l).fields.max_active_blocks, 0);
}

TEST(EngineHandCases, InvalidInput) {
  auto ctx = DeviceContext::Make(FindDevicePreset("a100")->limits);
  ASSERT_TRUE(ctx);
  Result r;
  LaunchConfig l = Launch(32, 0);
  EXPECT_EQ(Compute(*ctx, l, &r), Status::kInvalidLaunch);
  l = Launch(-1, 32);
  EXPECT_EQ(Compute(*ctx, l, &r), Status::kInvalidLaunch);
  l = Launch(32, 32);
  l.carveout = 101;
  EXPECT_EQ(Compute(*ctx, l, &r), Status::kInvalidLaunch);

  // Sizes beyond any GPU are refused rather than fed to int arithmetic.
  l = Launch(70000, 32);
  EXPECT_EQ(Compute(*ctx, l, &r), Status::kInvalidLaunch);
  l = Launch(32, 32, int64_t{1} << 31);
  EXPECT_EQ(Compute(*ctx, l, &r), Status::kInvalidLaunch);
  // A block whose thread count overflows 64 bits is simply too large: 0 blocks, warps.
  l = Launch(32, 32);
  l.block = {UINT32_MAX, UINT32_MAX, UINT32_MAX};
  ASSERT_EQ(Compute(*ctx, l, &r), Status::kOk);
  EXPECT_EQ(r.fields.max_active_blocks, 0);
  EXPECT_EQ(r.fields.limiting_resource, Resource::kWarps);

  DeviceLimits bad = FindDevicePreset("a100")->limits;
  bad.cc_major = 2;
  EXPECT_EQ(DeviceContext::Validate(bad), Status::kUnsupportedDevice);
  bad = FindDevicePreset("a100")->limits;
  bad.sm_count = 0;
  EXPECT_EQ(DeviceContext::Validate(bad), Status::kInvalidDevice);
  EXPECT_FALSE(DeviceContext::Make(bad).has_value());
  // Limits no driver reports (a hostile black box): refused before the reference's int
  // arithmetic could overflow (50855968-thread warps times 1024 registers did).
  const DeviceLimits a100 = FindDevicePreset("a100")->limits;
  for (auto poke : std::initializer_list<void (*)(DeviceLimits&)>{
           [](DeviceLimits& d) { d.warp_size = 50855968; },
           [](DeviceLimits& d) { d.max_threads_per_block = 1 << 20; },
           [](DeviceLimits& d) { d.max_threads_per_sm = INT32_MAX; },
           [](DeviceLimits& d) { d.regs_per_sm = INT32_MAX; },
           [](DeviceLimits& d) { d.regs_per_block = 1 << 30; },
           [](DeviceLimits& d) { d.max_blocks_per_sm = 1 << 20; },
           [](DeviceLimits& d) { d.sm_count = INT32_MAX; },
           [](DeviceLimits& d) { d.cc_minor = -1; },
           [](DeviceLimits& d) { d.max_cluster_size_non_portable = -5; },
       }) {
    bad = a100;
    poke(bad);
    EXPECT_EQ(DeviceContext::Validate(bad), Status::kInvalidDevice);
  }
}

}  // namespace
}  // namespace cuflight::occupancy
