// The kernel event of a recorded launch: a launch record, the facts of its function and the
// device's occupancy context -> schema::KernelEvent, with occupancy from the engine through a
// cache. One definition for the two places that make it: the injected library's sender thread
// (every launch it sends) and the collector (the launches it recovers from a dead producer's black
// box), so that a recovered event carries exactly the numbers the producer would have sent.
//
// Allocation-free after construction; one thread per builder.
#ifndef CUFLIGHT_BLACKBOX_KERNEL_EVENT_H_
#define CUFLIGHT_BLACKBOX_KERNEL_EVENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cuflight/blackbox/launch_record.h"
#include "cuflight/occupancy/device_limits.h"
#include "cuflight/occupancy/engine.h"
#include "cuflight/occupancy/occupancy_cache.h"
#include "cuflight/schema/events.h"

namespace cuflight::blackbox {

// What the kernel event needs of the launched function (the attributes the driver reported at its
// first launch on the device, and its names). The views must outlive the event's encoding.
struct FunctionFacts {
  // Unique among the functions one builder sees (the injected library's FunctionInfo::id, never
  // reused; the collector's descriptor index): the occupancy cache's key.
  uint64_t key = 0;
  bool attributes_ok = false;         // false: no occupancy can be computed (Build returns false)
  int32_t num_regs = 0;               // CU_FUNC_ATTRIBUTE_NUM_REGS
  int64_t static_smem = 0;            // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
  int64_t local_bytes = 0;            // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
  int64_t const_bytes = 0;            // CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES
  int32_t max_threads_per_block = 0;  // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
  bool non_portable_cluster_allowed = false;  // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
  std::string_view name;                      // mangled
  std::string_view demangled;                 // "" when not a C++ mangled name
};

class KernelEventBuilder {
 public:
  explicit KernelEventBuilder(size_t cache_capacity = 4096) : cache_(cache_capacity) {}

  // Fills *out (whose header the caller sets) for the launch `record` of `function` on the device
  // `engine` describes (record.device). The string views point into `function`. Returns false when
  // occupancy cannot be computed (the function's attributes are unknown, or the engine refuses the
  // configuration). *wave (when not null): the wave `waves` and `tail_utilization` were counted
  // in (occupancy::ComputeWaves), what an interned launch's kernel_config says of it
  // (schema::Split).
  template <typename FunctionRef>
  bool Build(const BasicLaunchRecord<FunctionRef>& record, const FunctionFacts& function,
             const occupancy::DeviceContext& engine, schema::KernelEvent* out,
             schema::WaveShape* wave = nullptr) noexcept {
    return BuildFrom(LaunchFields::Of(record), function, engine, out, wave);
  }

  // Occupancy of `launch` on `engine` (device ordinal `device`), through the cache keyed by
  // `function_key`; waves for its grid, counted in *wave (when not null). False when the engine
  // refuses the launch.
  bool Occupancy(uint64_t function_key, int32_t device, const occupancy::DeviceContext& engine,
                 const occupancy::LaunchConfig& launch, schema::OccupancyFields* out,
                 schema::WaveShape* wave = nullptr) noexcept;

  uint64_t cache_hits() const { return hits_; }
  uint64_t cache_misses() const { return misses_; }
  // Kernel events built whose driver block count differed from the engine's. Any thread.
  uint64_t disagreements() const { return disagreements_.load(std::memory_order_relaxed); }

 private:
  // The record's fields the event is made of, whatever its FunctionRef.
  struct LaunchFields {
    template <typename R>
    static LaunchFields Of(const R& r) {
      return {r.ts_ns,
              r.context,
              r.stream,
              r.correlation_id,
              {r.grid[0], r.grid[1], r.grid[2]},
              {r.block[0], r.block[1], r.block[2]},
              {r.cluster[0], r.cluster[1], r.cluster[2]},
              r.dyn_smem,
              r.carveout,
              r.func_max_dyn_smem,
              r.func_carveout,
              r.max_active_clusters,
              r.driver_max_active_blocks,
              r.max_cluster_size,
              r.tid,
              r.device,
              r.api,
              (r.launch_flags & kLaunchCooperative) != 0,
              r.sm_count};
    }
    int64_t ts_ns;
    uint64_t context;
    uint64_t stream;
    uint64_t correlation_id;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t cluster[3];
    uint32_t dyn_smem;
    int32_t carveout;
    int32_t func_max_dyn_smem;
    int32_t func_carveout;
    int32_t max_active_clusters;
    int16_t driver_max_active_blocks;
    uint16_t max_cluster_size;
    int32_t tid;
    int32_t device;
    LaunchApi api;
    bool cooperative;
    uint16_t sm_count;  // the launch's context's SMs when fewer than the device's; 0: the device's
  };

  bool BuildFrom(const LaunchFields& record, const FunctionFacts& function,
                 const occupancy::DeviceContext& engine, schema::KernelEvent* out,
                 schema::WaveShape* wave) noexcept;
  // Makes the driver's block count (`driver_blocks` >= 0) the event's: max_active_blocks,
  // active_warps, occupancy and waves; the engine's count goes to engine_max_active_blocks and
  // limiting_resource becomes "other" when the two differ. driver_blocks < 0: the engine's.
  void ApplyDriver(int32_t driver_blocks, const occupancy::DeviceLimits& limits,
                   const occupancy::LaunchConfig& launch, schema::KernelEvent* out,
                   schema::WaveShape* wave) noexcept;

  occupancy::OccupancyCache cache_;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
  std::atomic<uint64_t> disagreements_{0};
};

// The device event of `ordinal` (the header is the caller's).
void BuildDeviceEvent(int32_t ordinal, std::string_view name, std::string_view uuid,
                      const occupancy::DeviceLimits& limits, schema::DeviceEvent* out) noexcept;

}  // namespace cuflight::blackbox

#endif  // CUFLIGHT_BLACKBOX_KERNEL_EVENT_H_
