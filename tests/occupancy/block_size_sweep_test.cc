// The calculator's answers to "which block size" and "what does __launch_bounds__ do", held
// against NVIDIA's reference calculator (cuda_occupancy.h) driven directly here, and against hand
// calculations from the CUDA C++ Programming Guide ("Launch Bounds", "Hardware Multithreading").
#include <cuda_occupancy.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"
#include "reference_device.h"

namespace cuflight::occupancy {
namespace {

using testing::FakeCudaFuncAttributes;
using testing::RefDevice;

cudaOccFuncAttributes RefFunction(const DeviceLimits& d, int max_threads, int regs,
                                  int64_t static_smem) {
  FakeCudaFuncAttributes fa{
      max_threads, regs, static_cast<size_t>(static_smem),
      static_cast<size_t>(std::max<int64_t>(0, d.smem_per_block - static_smem))};
  return cudaOccFuncAttributes(fa);
}

// Blocks per SM the reference gives for `threads`, and its register limit alone.
cudaOccResult Reference(const DeviceLimits& d, int max_threads, int regs, int64_t static_smem,
                        int threads, int64_t dyn_smem) {
  const cudaOccDeviceProp p = RefDevice(d);
  const cudaOccFuncAttributes a = RefFunction(d, max_threads, regs, static_smem);
  cudaOccDeviceState s;
  cudaOccResult r{};
  EXPECT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads,
                                                    static_cast<size_t>(dyn_smem)),
            CUDA_OCC_SUCCESS);
  return r;
}

// Every preset, random functions: each sweep point is the reference's answer at that size, and
// the named size is the smallest reaching the highest of the reference's occupancies. The
// reference's own search (cudaOccMaxPotentialOccupancyBlockSize) reaches the same occupancy with
// the largest such size.
TEST(BlockSizeSweep, AgreesWithTheReferenceAtEverySize) {
  std::mt19937_64 rng(36);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (const DevicePreset& preset : DevicePresets()) {
    const DeviceLimits& d = preset.limits;
    const auto context = DeviceContext::Make(d);
    ASSERT_TRUE(context.has_value()) << preset.key;
    for (int i = 0; i < 40; ++i) {
      LaunchConfig l;
      l.regs_per_thread = static_cast<int>(uniform(16, 255));
      l.static_smem = uniform(0, 1) ? 0 : uniform(0, 48 * 1024);
      l.dyn_smem = uniform(0, 1) ? 0 : uniform(0, d.smem_per_block - l.static_smem);
      if (uniform(0, 3) == 0) l.func_max_threads_per_block = static_cast<int>(uniform(1, 1024));
      const int limit =
          l.func_max_threads_per_block > 0 ? l.func_max_threads_per_block : d.max_threads_per_block;
      SCOPED_TRACE(std::string(preset.key) + " regs " + std::to_string(l.regs_per_thread) +
                   " smem " + std::to_string(l.static_smem) + "+" + std::to_string(l.dyn_smem) +
                   " limit " + std::to_string(limit));

      std::array<SweepPoint, kMaxSweepPoints> points;
      const int n = SweepBlockSizes(*context, l, points.data(), kMaxSweepPoints);
      ASSERT_EQ(n, (limit + 31) / 32);  // 32, 64, ... and the limit itself

      double best = 0;
      int smallest = 0;
      for (int k = 0; k < n; ++k) {
        const int threads = std::min(32 * (k + 1), limit);
        ASSERT_EQ(points[k].threads, threads);
        const cudaOccResult r =
            Reference(d, limit, l.regs_per_thread, l.static_smem, threads, l.dyn_smem);
        EXPECT_EQ(points[k].max_active_blocks, r.activeBlocksPerMultiprocessor) << threads;
        const double occupancy = static_cast<double>(r.activeBlocksPerMultiprocessor) *
                                 ((threads + 31) / 32) / (d.max_threads_per_sm / 32);
        EXPECT_DOUBLE_EQ(points[k].occupancy, std::min(1.0, occupancy)) << threads;
        if (occupancy > best) {
          best = occupancy;
          smallest = threads;
        }
      }
      EXPECT_EQ(SmallestBestBlockSize(points.data(), n), smallest);

      const cudaOccDeviceProp p = RefDevice(d);
      const cudaOccFuncAttributes a = RefFunction(d, limit, l.regs_per_thread, l.static_smem);
      cudaOccDeviceState s;
      int min_grid = 0, ref_best = 0;
      ASSERT_EQ(cudaOccMaxPotentialOccupancyBlockSize(&min_grid, &ref_best, &p, &a, &s, nullptr,
                                                      static_cast<size_t>(l.dyn_smem)),
                CUDA_OCC_SUCCESS);
      // The reference's search counts threads, the sweep warps: they differ only where the
      // limit leaves a partial warp, so compare where it does not.
      if (smallest > 0 && limit % 32 == 0) {
        EXPECT_LE(smallest, ref_best);
        const cudaOccResult at_ref =
            Reference(d, limit, l.regs_per_thread, l.static_smem, ref_best, l.dyn_smem);
        EXPECT_DOUBLE_EQ(std::min(1.0, static_cast<double>(at_ref.activeBlocksPerMultiprocessor) *
                                           ((ref_best + 31) / 32) / (d.max_threads_per_sm / 32)),
                         std::min(1.0, best));
      }
    }
  }
}

// The case, by hand: RTX 4090 (cc 8.9: 48 warps and 24 blocks per SM, 64 Ki registers in
// 4 sub-partitions of 16 Ki), 72 regs/thread: a warp takes 72 x 32 = 2304 registers, rounded up
// to 256s: 2304; 16384 / 2304 = 7 warps per sub-partition, 28 per SM. 64 threads (2 warps):
// 14 blocks, 28 warps = 58.3%; 128 (4 warps): 7 blocks, 28 warps, the same; 32 threads: 24
// blocks (the slot limit), 50%. The reference's search names 896 (28 warps, 1 block).
TEST(BlockSizeSweep, Rtx4090With72RegistersIsBestAt64Threads) {
  const DevicePreset* p = FindDevicePreset("rtx4090");
  ASSERT_NE(p, nullptr);
  const auto context = DeviceContext::Make(p->limits);
  ASSERT_TRUE(context.has_value());
  LaunchConfig l;
  l.regs_per_thread = 72;
  std::array<SweepPoint, kMaxSweepPoints> points;
  const int n = SweepBlockSizes(*context, l, points.data(), kMaxSweepPoints);
  ASSERT_EQ(n, 32);
  EXPECT_EQ(points[0].max_active_blocks, 24);
  EXPECT_EQ(points[1].max_active_blocks, 14);
  EXPECT_EQ(points[3].max_active_blocks, 7);
  EXPECT_DOUBLE_EQ(points[1].occupancy, 28.0 / 48.0);
  EXPECT_EQ(SmallestBestBlockSize(points.data(), n), 64);
  Result r;
  l.block = {256, 1, 1};
  ASSERT_EQ(Compute(*context, l, &r), Status::kOk);
  EXPECT_EQ(r.fields.best_block_size, 896);  // the reference's pick, kept on the wire
}

// Registers per thread ptxas targets under __launch_bounds__(MAX, MIN), by hand: MIN blocks of
// MAX threads get 65536 registers; per warp they are allocated in units of 256 (8 per thread),
// per sub-partition of 16384 registers and MAX/32/4 warps of each block:
//   (256, 2):  16 warps, 4 per sub-partition: 16384 / 4 = 4096 per warp -> 128 per thread.
//   (1024, 1): 32 warps, 8 per sub-partition: 2048 per warp -> 64.
//   (384, 2):  24 warps, 6 per sub-partition: 2730 per warp, down to 256s 2560 -> 80.
//   (1024, 2): 16 per sub-partition: 1024 per warp -> 32.
//   (128, 1):  4 warps, 1 per sub-partition: 16384 per warp, above the 255-per-thread cap -> 255.
//   (96, 4):   3 warps a block, 12 in all, 3 per sub-partition: 5461 -> 5376 -> 168.
TEST(LaunchBounds, RegisterLimitByHand) {
  for (const char* key : {"a100", "h100-sxm", "rtx4090", "l40", "orin", "b300", "gb10"}) {
    SCOPED_TRACE(key);
    const auto context = DeviceContext::Make(FindDevicePreset(key)->limits);
    ASSERT_TRUE(context.has_value());
    EXPECT_EQ(LaunchBoundsRegisterLimit(*context, 256, 2), 128);
    EXPECT_EQ(LaunchBoundsRegisterLimit(*context, 1024, 1), 64);
    EXPECT_EQ(LaunchBoundsRegisterLimit(*context, 384, 2), 80);
    EXPECT_EQ(LaunchBoundsRegisterLimit(*context, 1024, 2), 32);
    EXPECT_EQ(LaunchBoundsRegisterLimit(*context, 128, 1), 255);
    EXPECT_EQ(LaunchBoundsRegisterLimit(*context, 96, 4), 168);
    EXPECT_EQ(LaunchBoundsRegisterLimit(*context, 0, 1), -1);
    EXPECT_EQ(LaunchBoundsRegisterLimit(*context, 256, 0), -1);
  }
}

// And against the reference for every MAX (multiple of 32) and MIN up to 8 on each preset: the
// limit is the largest register count whose register limit (blockLimitRegs) still allows MIN
// blocks, and one more register does not.
TEST(LaunchBounds, RegisterLimitAgreesWithTheReference) {
  for (const DevicePreset& preset : DevicePresets()) {
    const DeviceLimits& d = preset.limits;
    const auto context = DeviceContext::Make(d);
    ASSERT_TRUE(context.has_value());
    for (int max_threads = 32; max_threads <= d.max_threads_per_block; max_threads += 32) {
      for (int min_blocks = 1; min_blocks <= 8; ++min_blocks) {
        auto regs_allow = [&](int regs) {
          return Reference(d, max_threads, regs, 0, max_threads, 0).blockLimitRegs >= min_blocks;
        };
        int expected = -1;
        for (int regs = 0; regs <= 255; ++regs) {  // 255: the most a thread may use
          if (regs_allow(regs)) expected = regs;
        }
        EXPECT_EQ(LaunchBoundsRegisterLimit(*context, max_threads, min_blocks), expected)
            << preset.key << " __launch_bounds__(" << max_threads << ", " << min_blocks << ")";
      }
    }
  }
}

}  // namespace
}  // namespace cuflight::occupancy
