// Agreement with NVIDIA's reference calculator (cuda_occupancy.h) on random launches across
// every device preset. The reference is driven here directly, with the function described the
// way cudaFuncGetAttributes + the header's cudaFuncAttributes conversion describe it.
#include <gtest/gtest.h>

#include <climits>
#include <cuda_occupancy.h>
#include <random>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"
#include "reference_device.h"

namespace cuflight::occupancy {
namespace {

using testing::FakeCudaFuncAttributes;
using testing::RefDevice;

constexpr int kConfigsPerPreset = 8000;  // 27 presets -> 216,000 configurations

struct Case {
  LaunchConfig launch;
  cudaOccFuncAttributes attrs;
  cudaOccDeviceState state;
};

Case RandomCase(const DeviceLimits& d, std::mt19937_64& rng) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Case c;
  LaunchConfig& l = c.launch;
  l.regs_per_thread = static_cast<int>(uniform(0, 3) == 0 ? uniform(0, 255) : uniform(0, 96));
  const int64_t threads = uniform(0, 9) == 0 ? uniform(1, 32) * 32 : uniform(1, 1024);
  switch (uniform(0, 3)) {
    case 0: l.block = {static_cast<uint32_t>(threads), 1, 1}; break;
    case 1: l.block = {32, static_cast<uint32_t>((threads + 31) / 32), 1}; break;
    case 2: l.block = {16, 16, static_cast<uint32_t>(uniform(1, 4))}; break;
    default: l.block = {static_cast<uint32_t>(uniform(1, 64)), static_cast<uint32_t>(uniform(1, 32)), 1};
  }
  l.static_smem = uniform(0, 2) == 0 ? 0 : uniform(0, 48 * 1024);
  if (uniform(0, 3) == 0) l.static_smem = l.static_smem / 1024 * 1024;  // round sizes too
  const bool opted_in = uniform(0, 2) == 0;
  if (opted_in) l.func_max_dyn_smem = uniform(0, d.smem_per_block_optin);
  const int64_t dyn_cap = opted_in ? l.func_max_dyn_smem + 4096 : d.smem_per_block + 4096;
  l.dyn_smem = uniform(0, 3) == 0 ? 0 : uniform(0, dyn_cap);
  l.carveout = uniform(0, 2) == 0 ? static_cast<int>(uniform(0, 100)) : -1;
  if (uniform(0, 4) == 0) l.func_max_threads_per_block = static_cast<int>(uniform(1, 32) * 32);
  l.grid = {static_cast<uint32_t>(uniform(1, 100000)), 1, 1};

  FakeCudaFuncAttributes fa{
      l.func_max_threads_per_block > 0 ? l.func_max_threads_per_block : d.max_threads_per_block,
      l.regs_per_thread, static_cast<size_t>(l.static_smem),
      opted_in ? static_cast<size_t>(l.func_max_dyn_smem)
               : static_cast<size_t>(std::max<int64_t>(0, d.smem_per_block - l.static_smem))};
  c.attrs = cudaOccFuncAttributes(fa);  // the header's own conversion: opt-in config, 1 barrier
  c.state.carveoutConfig = l.carveout;
  return c;
}

unsigned RefMaskToOurs(unsigned factors) {
  unsigned m = 0;
  if (factors & OCC_LIMIT_REGISTERS) m |= schema::MaskOf(Resource::kRegisters);
  if (factors & OCC_LIMIT_SHARED_MEMORY) m |= schema::MaskOf(Resource::kSharedMem);
  if (factors & OCC_LIMIT_WARPS) m |= schema::MaskOf(Resource::kWarps);
  if (factors & OCC_LIMIT_BLOCKS) m |= schema::MaskOf(Resource::kBlocks);
  if (factors & OCC_LIMIT_BARRIERS) m |= schema::MaskOf(Resource::kBarriers);
  return m;
}

int RefBlocks(const cudaOccDeviceProp& p, const cudaOccFuncAttributes& a,
              const cudaOccDeviceState& s, int block, size_t dyn) {
  cudaOccResult r{};
  EXPECT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, block, dyn), CUDA_OCC_SUCCESS);
  return r.activeBlocksPerMultiprocessor;
}

TEST(EngineAgreement, MatchesReferenceOnRandomLaunchesForEveryPreset) {
  std::mt19937_64 rng(20261121);
  int compared = 0, nonzero = 0, brute_forced = 0;
  for (const DevicePreset& preset : DevicePresets()) {
    SCOPED_TRACE(std::string(preset.key));
    const DeviceLimits& d = preset.limits;
    auto ctx = DeviceContext::Make(d);
    ASSERT_TRUE(ctx.has_value());
    const cudaOccDeviceProp prop = RefDevice(d);
    for (int i = 0; i < kConfigsPerPreset; ++i) {
      const Case c = RandomCase(d, rng);
      const LaunchConfig& l = c.launch;
      const int block = static_cast<int>(l.block.count());
      Result ours;
      ASSERT_EQ(Compute(*ctx, l, &ours), Status::kOk);
      cudaOccResult ref{};
      ASSERT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(&ref, &prop, &c.attrs, &c.state, block,
                                                        static_cast<size_t>(l.dyn_smem)),
                CUDA_OCC_SUCCESS);
      const bool over_func_limit = block > c.attrs.maxThreadsPerBlock;
      const int expected = over_func_limit ? 0 : ref.activeBlocksPerMultiprocessor;
      ASSERT_EQ(ours.fields.max_active_blocks, expected)
          << "regs=" << l.regs_per_thread << " block=" << block << " static=" << l.static_smem
          << " dyn=" << l.dyn_smem << " carveout=" << l.carveout;
      ++compared;
      nonzero += expected > 0;
      ASSERT_EQ(ours.blocks_per_sm[static_cast<int>(Resource::kRegisters)], ref.blockLimitRegs);
      ASSERT_EQ(ours.blocks_per_sm[static_cast<int>(Resource::kSharedMem)], ref.blockLimitSharedMem);
      ASSERT_EQ(ours.blocks_per_sm[static_cast<int>(Resource::kBlocks)], ref.blockLimitBlocks);
      ASSERT_EQ(ours.blocks_per_sm[static_cast<int>(Resource::kBarriers)], ref.blockLimitBarriers);
      if (!over_func_limit) {
        ASSERT_EQ(ours.blocks_per_sm[static_cast<int>(Resource::kWarps)], ref.blockLimitWarps);
        ASSERT_EQ(ours.fields.limiting_resources, RefMaskToOurs(ref.limitingFactors));
      }
      ASSERT_EQ(ours.fields.allocated_regs_per_block, ref.allocatedRegistersPerBlock);
      ASSERT_EQ(ours.fields.allocated_smem_per_block,
                static_cast<int64_t>(ref.allocatedSharedMemPerBlock));
      const int warps_per_block = (block + d.warp_size - 1) / d.warp_size;
      ASSERT_EQ(ours.fields.active_warps, expected * warps_per_block);
      ASSERT_DOUBLE_EQ(ours.fields.occupancy,
                       static_cast<double>(expected * warps_per_block) / d.max_warps_per_sm());

      // best_block_size: the reference's own search.
      int min_grid = 0, best = 0;
      ASSERT_EQ(cudaOccMaxPotentialOccupancyBlockSize(&min_grid, &best, &prop, &c.attrs, &c.state,
                                                      static_cast<size_t>(l.dyn_smem)),
                CUDA_OCC_SUCCESS);
      ASSERT_EQ(ours.fields.best_block_size, best);

      // regs_for_next_block: R admits one more block, R + 1 does not.
      const int target = expected + 1;
      if (ours.fields.regs_for_next_block >= 0) {
        cudaOccFuncAttributes a = c.attrs;
        a.numRegs = ours.fields.regs_for_next_block;
        ASSERT_GE(RefBlocks(prop, a, c.state, block, static_cast<size_t>(l.dyn_smem)), target);
        a.numRegs += 1;
        if (a.numRegs <= 255) {
          ASSERT_LT(RefBlocks(prop, a, c.state, block, static_cast<size_t>(l.dyn_smem)), target);
        }
      }
      // smem_for_next_block: S (opted in, as static) admits one more block, and no larger size
      // does (checked exhaustively at the allocation granularity on a sample).
      if (ours.fields.smem_for_next_block >= 0) {
        cudaOccFuncAttributes a = c.attrs;
        a.maxDynamicSharedSizeBytes = 0;
        a.sharedSizeBytes = static_cast<size_t>(ours.fields.smem_for_next_block);
        ASSERT_GE(RefBlocks(prop, a, c.state, block, 0), target);
        if (i % 40 == 0) {
          ++brute_forced;
          const int64_t top = std::max(d.smem_per_block, d.smem_per_block_optin);
          for (int64_t s = ours.fields.smem_for_next_block + 128; s <= top; s += 128) {
            a.sharedSizeBytes = static_cast<size_t>(s);
            ASSERT_LT(RefBlocks(prop, a, c.state, block, 0), target) << "larger size " << s;
          }
        }
      }
    }
  }
  EXPECT_GE(compared, 100000);
  EXPECT_GT(nonzero, compared / 2);  // the sample is mostly runnable launches
  EXPECT_GT(brute_forced, 100);
}

}  // namespace
}  // namespace cuflight::occupancy
