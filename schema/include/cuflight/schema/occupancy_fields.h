// Occupancy fields as they travel on the wire. Shared by the engine (which fills them), the
// injector and the CLI (which encode them), and the collector and reports (which decode them).
// Field names here are the JSON names of the `kernel` event, one for one.
#ifndef CUFLIGHT_SCHEMA_OCCUPANCY_FIELDS_H_
#define CUFLIGHT_SCHEMA_OCCUPANCY_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace cuflight::schema {

// A per-SM resource that can bound the number of resident blocks. The enumerator order is the
// tie rule for `limiting_resource`: when several resources allow the same (smallest) block count,
// the first in this order is named. Registers and shared memory come first because they are what a
// developer can change in the kernel; the fixed hardware slots (warps, blocks, barriers) come
// after, and the cluster placement limit last.
//
// kOther is never computed by the engine: a kernel event names it when the CUDA driver's block
// count differs from the engine's, so that no resource is named as the limit when it is not (the
// driver knows something no function attribute exposes, e.g. named barriers).
enum class Resource : uint8_t {
  kRegisters = 0,
  kSharedMem = 1,
  kWarps = 2,
  kBlocks = 3,
  kBarriers = 4,
  kCluster = 5,
  kOther = 6,
};
inline constexpr int kResourceCount = 7;

// Bit set of resources: bit i is Resource(i).
using ResourceMask = uint8_t;
constexpr ResourceMask MaskOf(Resource r) { return static_cast<ResourceMask>(1u << static_cast<int>(r)); }

// Wire name of a resource: "registers", "shared_mem", "warps", "blocks", "barriers", "cluster",
// "other".
constexpr std::string_view ResourceName(Resource r) {
  switch (r) {
    case Resource::kRegisters: return "registers";
    case Resource::kSharedMem: return "shared_mem";
    case Resource::kWarps: return "warps";
    case Resource::kBlocks: return "blocks";
    case Resource::kBarriers: return "barriers";
    case Resource::kCluster: return "cluster";
    case Resource::kOther: return "other";
  }
  return "unknown";
}

// Inverse of ResourceName; nullopt for any other string.
constexpr std::optional<Resource> ResourceFromName(std::string_view name) {
  for (int i = 0; i < kResourceCount; ++i) {
    if (ResourceName(static_cast<Resource>(i)) == name) return static_cast<Resource>(i);
  }
  return std::nullopt;
}

// The occupancy part of a `kernel` event. Plain data, fixed size, trivially copyable.
struct OccupancyFields {
  int32_t max_active_blocks = 0;  // resident blocks per SM (0: the launch cannot run)
  int32_t active_warps = 0;       // max_active_blocks * warps per block
  int32_t max_warps = 0;          // warps per SM the device can hold
  double occupancy = 0;           // active_warps / max_warps, in [0, 1]
  // Occupancy "if only this constraint existed": min(1, blocks * warps_per_block / max_warps).
  double reg_occupancy = 0;
  double smem_occupancy = 0;
  double warp_occupancy = 0;
  double block_occupancy = 0;
  double barrier_occupancy = 0;
  bool has_cluster = false;    // cluster_occupancy is meaningful (a cluster launch)
  double cluster_occupancy = 0;
  Resource limiting_resource = Resource::kWarps;
  ResourceMask limiting_resources = 0;  // every resource tied at the binding block count
  int32_t allocated_regs_per_block = 0;   // after the register allocation granularity
  int64_t allocated_smem_per_block = 0;   // static + dynamic + reserved, after granularity
  double waves = 0;               // grid blocks / (SMs * max_active_blocks); 0 when unknown
  double tail_utilization = 0;    // fraction of the SM block slots the last wave fills, (0, 1]
  // What-if. -1 means "no value" (encoded as JSON null).
  int32_t regs_for_next_block = -1;  // most regs/thread that still fits max_active_blocks + 1
  int64_t smem_for_next_block = -1;  // most static+dynamic smem bytes/block that fits one more
  int32_t best_block_size = 0;       // multiple of 32 (or the limit) maximising occupancy; 0: none

  bool operator==(const OccupancyFields&) const = default;
};

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_OCCUPANCY_FIELDS_H_
