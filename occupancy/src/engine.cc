#include "cuflight/occupancy/engine.h"

#include <algorithm>
#include <climits>

#include <cuda_occupancy.h>

namespace cuflight::occupancy {
namespace {

using schema::MaskOf;

// The driver's view of a function that did not call cuFuncSetAttribute: what the reference
// calculator's cudaFuncAttributes conversion builds (opt-in limit config, one block barrier,
// partitioned global caching off).
cudaOccFuncAttributes MakeFuncAttributes(const DeviceLimits& d, const LaunchConfig& l) {
  cudaOccFuncAttributes a;
  a.maxThreadsPerBlock =
      l.func_max_threads_per_block > 0 ? l.func_max_threads_per_block : d.max_threads_per_block;
  a.numRegs = l.regs_per_thread;
  a.sharedSizeBytes = static_cast<size_t>(l.static_smem);
  a.partitionedGCConfig = PARTITIONED_GC_OFF;
  a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
  int64_t max_dyn = l.func_max_dyn_smem;
  if (max_dyn < 0) max_dyn = std::max<int64_t>(0, d.smem_per_block - l.static_smem);
  a.maxDynamicSharedSizeBytes = static_cast<size_t>(max_dyn);
  a.numBlockBarriers = 1;
  a.virtualResourceCount = 0;
  return a;
}

cudaOccDeviceProp MakeDeviceProp(const DeviceLimits& d) {
  cudaOccDeviceProp p;
  p.computeMajor = d.cc_major;
  p.computeMinor = d.cc_minor;
  p.maxThreadsPerBlock = d.max_threads_per_block;
  p.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  p.regsPerBlock = d.regs_per_block;
  p.regsPerMultiprocessor = d.regs_per_sm;
  p.warpSize = d.warp_size;
  p.sharedMemPerBlock = static_cast<size_t>(d.smem_per_block);
  p.sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  p.numSms = d.sm_count;
  p.sharedMemPerBlockOptin = static_cast<size_t>(d.smem_per_block_optin);
  p.reservedSharedMemPerBlock = static_cast<size_t>(d.reserved_smem_per_block);
  return p;
}

cudaOccDeviceState MakeState(const LaunchConfig& l) {
  cudaOccDeviceState s;
  s.carveoutConfig = l.carveout;
  return s;
}

double OccupancyOf(int32_t blocks, int32_t warps_per_block, int32_t max_warps) {
  if (max_warps <= 0) return 0;
  if (blocks == kUnlimited) return 1.0;
  double occ = static_cast<double>(blocks) * warps_per_block / max_warps;
  return std::min(1.0, occ);
}

// Per-SM limits that depend on the block size (registers and warps), as the reference computes
// them, including its GP100 rule. Returns min(regs, warps) and stores both.
struct SizeDependent {
  int regs = 0;
  int warps = 0;
  int allocated_regs_per_block = 0;
};

SizeDependent BlockSizeLimits(const cudaOccDeviceProp& p, const cudaOccFuncAttributes& a,
                              int block_size) {
  SizeDependent out;
  cudaOccResult r{};
  cudaOccPartitionedGCConfig gc = cudaOccPartitionedGCExpected(&p, &a);
  cudaOccMaxBlocksPerSMRegsLimit(&out.regs, &gc, &r, &p, &a, block_size);
  out.allocated_regs_per_block = r.allocatedRegistersPerBlock;
  if (p.computeMajor == 6 && p.computeMinor == 0 && out.regs) {
    cudaOccDeviceProp gp10x = p;
    gp10x.computeMinor = 1;
    cudaOccPartitionedGCConfig gc10x = gc;
    int regs10x = 0;
    cudaOccResult r10x{};
    cudaOccMaxBlocksPerSMRegsLimit(&regs10x, &gc10x, &r10x, &gp10x, &a, block_size);
    if (regs10x == 0) out.regs = 0;
  }
  cudaOccMaxBlocksPerSMWarpsLimit(&out.warps, gc, &p, &a, block_size);
  return out;
}

// Blocks per SM the shared-memory limit alone allows for a function whose whole footprint is
// static (no dynamic shared memory); -1 when the reference rejects the input.
int SmemBlocks(const cudaOccDeviceProp& p, const cudaOccFuncAttributes& a,
               const cudaOccDeviceState& s, int block_size) {
  int limit = 0;
  cudaOccResult r{};
  if (cudaOccMaxBlocksPerSMSmemLimit(&limit, &r, &p, &a, &s, block_size, 0) != CUDA_OCC_SUCCESS) {
    return -1;
  }
  return limit;
}

// Largest registers/thread r such that the register limit alone allows `target` blocks.
// The register limit never grows with r, so a binary search over [0, max] is exact.
int32_t RegsForBlocks(const cudaOccDeviceProp& p, cudaOccFuncAttributes a, int block_size,
                      int target) {
  int max_regs = 0;
  cudaOccRegAllocationMaxPerThread(&max_regs, &p);
  auto fits = [&](int regs) {
    a.numRegs = regs;
    return BlockSizeLimits(p, a, block_size).regs >= target;
  };
  if (!fits(0)) return -1;
  int lo = 0, hi = max_regs;  // invariant: fits(lo)
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace

schema::WaveShape WaveShapeOf(int sm_count, const LaunchConfig& launch,
                              const schema::OccupancyFields& f) noexcept {
  // A wave is every resident block slot on the GPU; a launch whose clusters bind fills waves of
  // max_active_clusters clusters instead.
  if (f.limiting_resource == Resource::kCluster && launch.max_active_clusters > 0 &&
      launch.is_cluster()) {
    return {static_cast<uint64_t>(launch.max_active_clusters), true};
  }
  return {static_cast<uint64_t>(std::max(0, sm_count)) *
              static_cast<uint64_t>(std::max(0, f.max_active_blocks)),
          false};
}

schema::WaveShape ComputeWaves(int sm_count, const LaunchConfig& launch,
                               schema::OccupancyFields* f) noexcept {
  const schema::WaveShape shape = WaveShapeOf(sm_count, launch, *f);
  const schema::GridWaves w = schema::WavesOf(launch.grid.count(), launch.cluster.count(), shape);
  f->waves = w.waves;
  f->tail_utilization = w.tail_utilization;
  return shape;
}

std::string_view StatusMessage(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kUnsupportedDevice: return "compute capability not known to the occupancy calculator";
    case Status::kInvalidDevice: return "device limits must all be positive";
    case Status::kInvalidSmemPerSm:
      return "shared memory per SM is above the architecture's largest carveout";
    case Status::kInvalidLaunch: return "launch has a zero block dimension or a negative size";
  }
  return "unknown status";
}

Status DeviceContext::Validate(const DeviceLimits& d) {
  if (d.sm_count <= 0 || d.max_threads_per_block <= 0 || d.max_threads_per_sm <= 0 ||
      d.max_blocks_per_sm <= 0 || d.regs_per_sm <= 0 || d.regs_per_block <= 0 ||
      d.smem_per_sm <= 0 || d.smem_per_block <= 0 || d.smem_per_block_optin < 0 ||
      d.reserved_smem_per_block < 0 || d.warp_size <= 0 || d.max_cluster_size < 0 ||
      d.max_threads_per_sm < d.warp_size || d.smem_per_sm > kMaxSmemBytes ||
      d.smem_per_block > kMaxSmemBytes || d.smem_per_block_optin > kMaxSmemBytes ||
      d.reserved_smem_per_block > kMaxSmemBytes) {
    return Status::kInvalidDevice;
  }
  const MaxDeviceLimits& m = kMaxDeviceLimits;
  if (d.cc_major < 0 || d.cc_major > m.cc || d.cc_minor < 0 || d.cc_minor > m.cc ||
      d.sm_count > m.sm_count || d.warp_size > m.warp_size ||
      d.max_threads_per_block > m.max_threads_per_block ||
      d.max_threads_per_sm > m.max_threads_per_sm || d.max_blocks_per_sm > m.max_blocks_per_sm ||
      d.regs_per_sm > m.regs || d.regs_per_block > m.regs ||
      d.max_cluster_size > m.max_cluster_size || d.max_cluster_size_non_portable < 0 ||
      d.max_cluster_size_non_portable > m.max_cluster_size) {
    return Status::kInvalidDevice;
  }
  cudaOccDeviceProp p = MakeDeviceProp(d);
  int value = 0;
  size_t smem = 1;
  if (cudaOccSMemAllocationGranularity(&value, &p) != CUDA_OCC_SUCCESS ||
      cudaOccMaxBlocksPerMultiprocessor(&value, &p) != CUDA_OCC_SUCCESS ||
      (d.cc_major >= 7 && cudaOccAlignUpShmemSizeVoltaPlus(&smem, &p) != CUDA_OCC_SUCCESS)) {
    return Status::kUnsupportedDevice;
  }
  cudaOccDeviceState s;
  if (cudaOccSMemPerMultiprocessor(&smem, &p, &s) != CUDA_OCC_SUCCESS) {
    return Status::kInvalidSmemPerSm;
  }
  return Status::kOk;
}

std::optional<DeviceContext> DeviceContext::Make(const DeviceLimits& limits) {
  if (Validate(limits) != Status::kOk) return std::nullopt;
  DeviceContext ctx;
  ctx.limits_ = limits;
  cudaOccDeviceProp p = MakeDeviceProp(limits);
  if (limits.cc_major >= 7) {
    // Walk the architecture's carveout steps: align 1 byte up, then one past each step.
    size_t next = 1;
    while (ctx.smem_config_count_ < static_cast<int>(ctx.smem_configs_.size())) {
      size_t size = next;
      if (cudaOccAlignUpShmemSizeVoltaPlus(&size, &p) != CUDA_OCC_SUCCESS) break;
      ctx.smem_configs_[ctx.smem_config_count_++] = static_cast<int64_t>(size);
      next = size + 1;
    }
  } else {
    ctx.smem_configs_[ctx.smem_config_count_++] = limits.smem_per_sm;
  }
  return ctx;
}

Status Compute(const DeviceContext& device, const LaunchConfig& l, Result* out) noexcept {
  *out = Result{};
  const DeviceLimits& d = device.limits();
  if (l.block.x == 0 || l.block.y == 0 || l.block.z == 0 || l.regs_per_thread < 0 ||
      l.static_smem < 0 || l.dyn_smem < 0 || l.func_max_threads_per_block < 0 ||
      l.carveout < -1 || l.carveout > 100 || l.max_active_clusters < 0 ||
      l.max_cluster_size < 0 ||
      l.regs_per_thread > kMaxRegsPerThread || l.static_smem > kMaxSmemBytes ||
      l.dyn_smem > kMaxSmemBytes || l.func_max_dyn_smem > kMaxSmemBytes) {
    return Status::kInvalidLaunch;
  }
  const cudaOccDeviceProp p = MakeDeviceProp(d);
  const cudaOccFuncAttributes a = MakeFuncAttributes(d, l);
  const cudaOccDeviceState s = MakeState(l);
  const uint64_t threads = l.block.count();
  // A block larger than the device allows gets warp limit 0 from the reference. Its size is
  // clamped to twice the device's limit first (still too large), so the reference's int
  // arithmetic (round-ups, registers x threads) cannot overflow.
  const uint64_t too_large = 2 * static_cast<uint64_t>(std::clamp(d.max_threads_per_block, 1, 1 << 16));
  const int block_size = static_cast<int>(std::min<uint64_t>(threads, too_large));

  cudaOccResult ref{};
  if (cudaOccMaxActiveBlocksPerMultiprocessor(&ref, &p, &a, &s, block_size,
                                              static_cast<size_t>(l.dyn_smem)) !=
      CUDA_OCC_SUCCESS) {
    return Status::kUnsupportedDevice;
  }

  const int32_t max_warps = d.max_warps_per_sm();
  const int32_t wpb =
      static_cast<int32_t>((int64_t{block_size} + d.warp_size - 1) / d.warp_size);
  auto& blocks = out->blocks_per_sm;
  blocks[static_cast<int>(Resource::kRegisters)] = ref.blockLimitRegs;
  blocks[static_cast<int>(Resource::kSharedMem)] = ref.blockLimitSharedMem;
  blocks[static_cast<int>(Resource::kWarps)] = ref.blockLimitWarps;
  blocks[static_cast<int>(Resource::kBlocks)] = ref.blockLimitBlocks;
  blocks[static_cast<int>(Resource::kBarriers)] = ref.blockLimitBarriers;
  blocks[static_cast<int>(Resource::kCluster)] = kUnlimited;
  blocks[static_cast<int>(Resource::kOther)] = kUnlimited;  // only the driver can name it

  // The device's reported block-slot count wins when it is lower than the architecture's (an
  // override on the command line); the barrier count scales with the slots.
  if (d.max_blocks_per_sm < ref.blockLimitBlocks) {
    blocks[static_cast<int>(Resource::kBlocks)] = d.max_blocks_per_sm;
    if (ref.blockLimitBarriers != INT_MAX) {
      int bars = INT_MAX;
      cudaOccMaxBlocksPerSMBlockBarrierLimit(&bars, d.max_blocks_per_sm, &p, &a);
      blocks[static_cast<int>(Resource::kBarriers)] = bars;
    }
  }
  // A block above the function's own limit (__launch_bounds__) cannot launch at all.
  if (threads > static_cast<uint64_t>(a.maxThreadsPerBlock)) {
    blocks[static_cast<int>(Resource::kWarps)] = 0;
  }

  // Thread block clusters: a device that has them, size within the driver's (or else the
  // device's, non-)portable maximum, grid a multiple of the cluster. A violation makes the launch
  // fail, so no block is resident.
  const bool cluster = l.is_cluster();
  int32_t cluster_size = 0;
  if (cluster) {
    cluster_size = static_cast<int32_t>(std::min<uint64_t>(l.cluster.count(), INT32_MAX));
    const int device_max =
        l.non_portable_cluster_size_allowed ? std::max(d.max_cluster_size_non_portable,
                                                       d.max_cluster_size)
                                            : d.max_cluster_size;
    // The driver's figure for this function, when known, replaces the device's.
    const int max_size = l.max_cluster_size > 0 ? l.max_cluster_size : device_max;
    const bool grid_known = l.grid.count() > 0;
    const bool placeable = max_size > 0 && cluster_size <= max_size &&
                           (!grid_known || (l.grid.x % l.cluster.x == 0 &&
                                            l.grid.y % l.cluster.y == 0 &&
                                            l.grid.z % l.cluster.z == 0));
    if (!placeable) blocks[static_cast<int>(Resource::kCluster)] = 0;
  }

  int32_t bound = kUnlimited;
  for (int r = 0; r < kResourceCount; ++r) bound = std::min(bound, blocks[r]);

  auto& f = out->fields;
  f.max_active_blocks = bound;
  f.active_warps = bound * wpb;
  f.max_warps = max_warps;
  f.occupancy = OccupancyOf(bound, wpb, max_warps);
  f.reg_occupancy = OccupancyOf(blocks[static_cast<int>(Resource::kRegisters)], wpb, max_warps);
  f.smem_occupancy = OccupancyOf(blocks[static_cast<int>(Resource::kSharedMem)], wpb, max_warps);
  f.warp_occupancy = OccupancyOf(blocks[static_cast<int>(Resource::kWarps)], wpb, max_warps);
  f.block_occupancy = OccupancyOf(blocks[static_cast<int>(Resource::kBlocks)], wpb, max_warps);
  f.barrier_occupancy = OccupancyOf(blocks[static_cast<int>(Resource::kBarriers)], wpb, max_warps);
  for (int r = 0; r < kResourceCount; ++r) {
    if (blocks[r] == bound) f.limiting_resources |= MaskOf(static_cast<Resource>(r));
  }
  for (int r = 0; r < kResourceCount; ++r) {
    if (blocks[r] == bound) {
      f.limiting_resource = static_cast<Resource>(r);
      break;
    }
  }
  // A block above the device's or the function's limit cannot launch whatever else it uses: the
  // block size itself is the cause, whichever other resources also come out at 0.
  if (threads > static_cast<uint64_t>(std::min(p.maxThreadsPerBlock, a.maxThreadsPerBlock))) {
    f.limiting_resource = Resource::kWarps;
  }

  // Cluster placement across GPCs: known only from the driver. When it yields fewer resident
  // blocks than the per-SM bound, the cluster is what limits the launch.
  if (cluster && bound > 0 && l.max_active_clusters > 0) {
    const double resident = static_cast<double>(l.max_active_clusters) * cluster_size;
    f.has_cluster = true;
    f.cluster_occupancy =
        std::min(1.0, resident * wpb / (static_cast<double>(d.sm_count) * max_warps));
    blocks[static_cast<int>(Resource::kCluster)] =
        static_cast<int32_t>(std::min<double>(resident / d.sm_count, kUnlimited));
    if (f.cluster_occupancy < f.occupancy) {
      f.limiting_resource = Resource::kCluster;
      f.limiting_resources = MaskOf(Resource::kCluster);
    }
  } else if (cluster && blocks[static_cast<int>(Resource::kCluster)] == 0) {
    f.has_cluster = true;
    f.cluster_occupancy = 0;
  }
  ComputeWaves(d.sm_count, l, &f);

  f.allocated_regs_per_block = ref.allocatedRegistersPerBlock;
  f.allocated_smem_per_block = static_cast<int64_t>(ref.allocatedSharedMemPerBlock);

  // Shared memory the SM gets in this launch's carveout, and the per-block ceiling.
  {
    size_t pref = 0;
    cudaOccSMemPerMultiprocessor(&pref, &p, &s);
    size_t alloc = ref.allocatedSharedMemPerBlock;
    size_t config = pref;
    if (alloc > pref) {
      config = alloc;
      if (d.cc_major >= 7) {
        cudaOccAlignUpShmemSizeVoltaPlus(&config, &p);
      } else {
        config = p.sharedMemPerMultiprocessor;
      }
    }
    out->smem_config_bytes = static_cast<int64_t>(config);
    size_t per_block = 0;
    cudaOccSMemPerBlock(&per_block, &p, a.shmemLimitConfig,
                        a.sharedSizeBytes + p.reservedSharedMemPerBlock + a.maxDynamicSharedSizeBytes);
    out->smem_limit_per_block = static_cast<int64_t>(per_block);
  }
  out->warps_per_block = wpb;

  // What-if: one more block. Only meaningful while every other resource would admit it.
  const int32_t target = bound == kUnlimited ? kUnlimited : bound + 1;
  auto others_min = [&](Resource skip) {
    int32_t m = kUnlimited;
    for (int r = 0; r < kResourceCount; ++r) {
      if (r != static_cast<int>(skip)) m = std::min(m, blocks[r]);
    }
    return m;
  };
  if (target != kUnlimited && others_min(Resource::kRegisters) >= target) {
    f.regs_for_next_block = RegsForBlocks(p, a, block_size, target);
  }
  if (target != kUnlimited && others_min(Resource::kSharedMem) >= target) {
    // Largest total (static + dynamic) per-block size S whose allocation lets `target` blocks
    // share one carveout. The carveout the SM picks grows with the allocation, so blocks(S) is
    // not monotonic; the maximum lies at floor(config / target) for one of the candidate
    // configs (the preferred carveout or an architecture step), each checked by the reference.
    size_t pref = 0;
    cudaOccSMemPerMultiprocessor(&pref, &p, &s);
    int gran = 0;
    cudaOccSMemAllocationGranularity(&gran, &p);
    cudaOccFuncAttributes probe = a;
    probe.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
    probe.maxDynamicSharedSizeBytes = 0;
    const size_t reserved = p.reservedSharedMemPerBlock;
    const size_t per_block_max =
        std::max<size_t>(p.sharedMemPerBlock, p.sharedMemPerBlockOptin);  // excluding reserved
    int64_t best = -1;
    auto consider = [&](size_t config) {
      size_t alloc = config / static_cast<size_t>(target);
      alloc -= alloc % static_cast<size_t>(gran);
      if (alloc < reserved) return;
      size_t total = std::min(alloc - reserved, per_block_max);
      probe.sharedSizeBytes = total;
      if (SmemBlocks(p, probe, s, block_size) >= target) {
        best = std::max(best, static_cast<int64_t>(total));
      }
    };
    consider(pref);
    for (int i = 0; i < device.smem_config_count(); ++i) {
      consider(static_cast<size_t>(device.smem_configs()[i]));
    }
    f.smem_for_next_block = best;
  }

  // Best block size: the reference's search (largest size wins ties, stop at full occupancy),
  // with the block-size-independent limits computed once instead of per candidate.
  {
    const int limit = std::min(p.maxThreadsPerBlock, a.maxThreadsPerBlock);
    const int gran = p.warpSize;
    const int fixed = std::min({blocks[static_cast<int>(Resource::kSharedMem)],
                                blocks[static_cast<int>(Resource::kBlocks)],
                                blocks[static_cast<int>(Resource::kBarriers)], ref.blockLimitVirtual});
    int best_size = 0, best_threads = 0;
    for (int aligned = (limit + gran - 1) / gran * gran; aligned > 0; aligned -= gran) {
      const int size = std::min(limit, aligned);
      SizeDependent sd = BlockSizeLimits(p, a, size);
      const int b = std::min({sd.regs, sd.warps, fixed});
      const int t = size * b;
      if (t > best_threads) {
        best_threads = t;
        best_size = size;
      }
      if (best_threads == p.maxThreadsPerMultiprocessor) break;
    }
    f.best_block_size = best_size;
  }
  return Status::kOk;
}

int SweepBlockSizes(const DeviceContext& device, const LaunchConfig& launch, SweepPoint* out,
                    int capacity) noexcept {
  const DeviceLimits& d = device.limits();
  int limit = d.max_threads_per_block;
  if (launch.func_max_threads_per_block > 0) {
    limit = std::min(limit, launch.func_max_threads_per_block);
  }
  if (d.warp_size <= 0 || limit <= 0) return 0;
  int count = 0;
  LaunchConfig l = launch;
  Result r;
  for (int size = d.warp_size;; size += d.warp_size) {
    const int threads = std::min(size, limit);
    if (count >= capacity) break;
    l.block = {static_cast<uint32_t>(threads), 1, 1};
    if (Compute(device, l, &r) != Status::kOk) return 0;
    SweepPoint& p = out[count++];
    p.threads = threads;
    p.max_active_blocks = r.fields.max_active_blocks;
    p.active_warps = r.fields.active_warps;
    p.occupancy = r.fields.occupancy;
    p.limiting_resource = r.fields.limiting_resource;
    if (threads == limit) break;
  }
  return count;
}

int32_t SmallestBestBlockSize(const SweepPoint* points, int count) noexcept {
  int32_t best = 0;
  double best_occupancy = 0;
  for (int i = 0; i < count; ++i) {
    if (points[i].max_active_blocks > 0 && points[i].occupancy > best_occupancy) {
      best_occupancy = points[i].occupancy;
      best = points[i].threads;
    }
  }
  return best;
}

int32_t LaunchBoundsRegisterLimit(const DeviceContext& device, int max_threads,
                                  int min_blocks) noexcept {
  if (max_threads < 1 || min_blocks < 1) return -1;
  const DeviceLimits& d = device.limits();
  LaunchConfig l;
  l.block = {static_cast<uint32_t>(max_threads), 1, 1};
  l.func_max_threads_per_block = max_threads;
  const cudaOccDeviceProp p = MakeDeviceProp(d);
  const cudaOccFuncAttributes a = MakeFuncAttributes(d, l);
  // cuda_occupancy.h allocates up to 256 registers per thread from cc 7.0
  // (cudaOccRegAllocationMaxPerThread), but a thread may use at most 255 (Programming Guide,
  // "Technical Specifications per Compute Capability"), and that is the most ptxas assigns.
  constexpr int32_t kMaxRegistersPerThread = 255;
  const int32_t regs = RegsForBlocks(p, a, max_threads, min_blocks);
  return regs < 0 ? regs : std::min(regs, kMaxRegistersPerThread);
}

}  // namespace cuflight::occupancy
