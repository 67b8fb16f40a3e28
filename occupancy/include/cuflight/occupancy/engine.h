// Occupancy engine: how many blocks of a launch fit on one SM, which resource binds, and what
// change would fit one more. Pure arithmetic, no CUDA runtime or driver calls; the per-SM
// arithmetic is NVIDIA's reference calculator (cuda_occupancy.h), so the numbers equal
// cudaOccMaxActiveBlocksPerMultiprocessor / cuOccupancyMaxActiveBlocksPerMultiprocessor.
//
// Thread safety: DeviceContext is immutable after Make(); Compute() is reentrant and
// allocation-free, so any number of threads may call it on a shared context.
#ifndef CUFLIGHT_OCCUPANCY_ENGINE_H_
#define CUFLIGHT_OCCUPANCY_ENGINE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "cuflight/occupancy/device_limits.h"
#include "cuflight/schema/occupancy_fields.h"
#include "cuflight/schema/waves.h"

namespace cuflight::occupancy {

using schema::Resource;
using schema::kResourceCount;

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  // x * y * z, saturating at UINT64_MAX.
  uint64_t count() const { return schema::DimCount(x, y, z); }
};

// One launch of one function. Function attributes are the values cuFuncGetAttribute reports.
struct LaunchConfig {
  int regs_per_thread = 0;              // CU_FUNC_ATTRIBUTE_NUM_REGS
  int64_t static_smem = 0;              // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
  int64_t dyn_smem = 0;                 // dynamic shared memory of the launch
  Dim3 block;
  // Grid dimensions; any 0 = unknown (no waves, and the cluster divisibility rule is skipped).
  Dim3 grid{0, 0, 0};
  // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (__launch_bounds__); 0 = the device's limit.
  int func_max_threads_per_block = 0;
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; -1 = the driver's default,
  // sharedMemPerBlock - static_smem.
  int64_t func_max_dyn_smem = -1;
  // CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: -1 (no preference) or 0..100 percent.
  int carveout = -1;
  // Cluster dimensions; all 1 (or any 0) = not a cluster launch.
  Dim3 cluster{0, 0, 0};
  bool non_portable_cluster_size_allowed = false;
  // cuOccupancyMaxActiveClusters for this launch when the caller has it (a GPU is present);
  // 0 = unknown. Cluster placement across GPCs cannot be derived from device properties alone.
  int max_active_clusters = 0;
  // The largest cluster this function may launch with, as the driver says
  // (cuOccupancyMaxPotentialClusterSize, or CUPTI's maxPotentialClusterSize of a kernel that
  // ran); it replaces the device's (non-)portable maximum. 0 = unknown: the device's apply.
  int max_cluster_size = 0;

  bool is_cluster() const {
    return cluster.x && cluster.y && cluster.z && cluster.count() > 1;
  }
};

enum class Status : uint8_t {
  kOk = 0,
  kUnsupportedDevice,  // compute capability the reference calculator does not know
  kInvalidDevice,      // a device limit is zero, negative, or beyond any device by far
                       // (kMaxDeviceLimits)
  kInvalidSmemPerSm,   // shared memory per SM above the architecture's largest carveout
  kInvalidLaunch,      // a block dimension is 0, a count or size is negative, or a size is
                       // beyond any device (regs/thread > kMaxRegsPerThread, smem > kMaxSmemBytes)
};
std::string_view StatusMessage(Status s);

// Input bounds beyond every GPU, which keep the reference's int arithmetic from overflowing.
inline constexpr int kMaxRegsPerThread = 65536;
inline constexpr int64_t kMaxSmemBytes = int64_t{1} << 30;
// Device limits far beyond every GPU (the largest today in parentheses), so that limits that do
// not come from a driver (a dead producer's black box, read by the collector) cannot overflow the
// reference's int arithmetic either: with a block of at most kMaxThreadsPerBlock threads and
// kMaxRegsPerThread registers each, a block's registers stay below 2^31.
struct MaxDeviceLimits {
  int cc = 99;                          // compute capability major and minor (12)
  int sm_count = 1 << 16;               // (170)
  int warp_size = 128;                  // (32)
  int max_threads_per_block = 1 << 14;  // (1024)
  int max_threads_per_sm = 1 << 16;     // (2048)
  int max_blocks_per_sm = 1 << 12;      // (32)
  int regs = 1 << 24;                   // per SM and per block (65536)
  int max_cluster_size = 1 << 12;       // portable or not (16)
};
inline constexpr MaxDeviceLimits kMaxDeviceLimits{};

// Blocks per SM when a resource places no limit at all (e.g. a kernel with no shared memory).
inline constexpr int32_t kUnlimited = INT32_MAX;

struct Result {
  schema::OccupancyFields fields;
  // Blocks per SM each resource alone allows, indexed by Resource; kUnlimited when unconstrained.
  // For kCluster it is the GPU-wide average max_active_clusters * cluster_size / sm_count.
  std::array<int32_t, kResourceCount> blocks_per_sm{};
  int32_t warps_per_block = 0;
  int64_t smem_config_bytes = 0;    // shared memory per SM in the carveout the launch gets
  int64_t smem_limit_per_block = 0; // per-block shared memory ceiling for this function
};

// Immutable per-device data: the reference calculator's device description plus values the
// engine derives once (the shared-memory carveout steps), so Compute() does no repeated setup.
class DeviceContext {
 public:
  // Returns nullopt when the limits are unusable (see Validate()).
  static std::optional<DeviceContext> Make(const DeviceLimits& limits);
  // kOk, kInvalidDevice or kUnsupportedDevice.
  static Status Validate(const DeviceLimits& limits);

  const DeviceLimits& limits() const { return limits_; }
  // Shared-memory carveout sizes (bytes per SM) the architecture offers, ascending.
  const int64_t* smem_configs() const { return smem_configs_.data(); }
  int smem_config_count() const { return smem_config_count_; }

 private:
  DeviceContext() = default;
  DeviceLimits limits_{};
  std::array<int64_t, 16> smem_configs_{};
  int smem_config_count_ = 0;
};

// Computes the full result for one launch. Never allocates, never throws.
// On a non-kOk status `out` is left zeroed apart from its defaults.
Status Compute(const DeviceContext& device, const LaunchConfig& launch, Result* out) noexcept;

// One block size of a sweep: what Compute() gives for `launch` with a 1-D block of `threads`.
struct SweepPoint {
  int32_t threads = 0;
  int32_t max_active_blocks = 0;
  int32_t active_warps = 0;
  double occupancy = 0;
  Resource limiting_resource = Resource::kOther;
};
inline constexpr int kMaxSweepPoints = 1024;  // warp-size steps up to kMaxDeviceLimits' block

// "What block size should I use?": `launch` with 1-D blocks of warp_size, 2 * warp_size, ... up to
// the lower of the device's and the function's (func_max_threads_per_block) thread limit, and the
// limit itself when it is not a multiple of the warp size (cudaOccMaxPotentialOccupancyBlockSize
// tries the same sizes). Dynamic shared memory stays launch.dyn_smem at every size. Writes at
// most `capacity` points in ascending order and returns how many; 0 on an invalid device or
// launch. Never allocates.
int SweepBlockSizes(const DeviceContext& device, const LaunchConfig& launch, SweepPoint* out,
                    int capacity) noexcept;

// The smallest block size among `points` whose occupancy is the highest of them, or 0 when no
// size fits a block (every occupancy 0). The reference's search (Result::fields.best_block_size)
// keeps the largest size of a tie instead; the smallest leaves the most blocks for a grid of a
// given thread count and is what a person asking "which block size" wants.
int32_t SmallestBestBlockSize(const SweepPoint* points, int count) noexcept;

// The registers per thread ptxas targets for __launch_bounds__(max_threads, min_blocks): the
// CUDA C++ Programming Guide ("Launch Bounds") says the compiler derives from the bounds the upper
// limit L on registers per thread that lets `min_blocks` blocks of `max_threads` threads reside
// on the multiprocessor, using the register allocation rules of "Hardware Multithreading". This
// computes that L with the allocation rules of cuda_occupancy.h (registers per warp in units of
// 256, per sub-partition), capped at the architecture's 255. An estimate: ptxas applies the rule
// for the architecture it compiles for (-arch), and the kernel may need fewer registers than L.
// Returns -1 when no register count lets `min_blocks` such blocks share the register file, or
// on invalid input (max_threads < 1, min_blocks < 1). Never allocates.
int32_t LaunchBoundsRegisterLimit(const DeviceContext& device, int max_threads,
                                  int min_blocks) noexcept;

// One wave of `launch` on `sm_count` SMs, its resident blocks per SM being f.max_active_blocks
// (schema/waves.h, point 1): max_active_clusters clusters when f.limiting_resource is the cluster
// and launch.max_active_clusters is known, else sm_count x max_active_blocks blocks.
schema::WaveShape WaveShapeOf(int sm_count, const LaunchConfig& launch,
                              const schema::OccupancyFields& f) noexcept;

// Fills f->waves and f->tail_utilization for `launch.grid` (schema::WavesOf over WaveShapeOf:
// the arithmetic every reader of an interned launch repeats) and returns the wave it counted in.
// Both are 0 when nothing can be resident. Separate from Compute() because waves depend on the
// grid, which occupancy caches leave out.
schema::WaveShape ComputeWaves(int sm_count, const LaunchConfig& launch,
                               schema::OccupancyFields* f) noexcept;

}  // namespace cuflight::occupancy

#endif  // CUFLIGHT_OCCUPANCY_ENGINE_H_
