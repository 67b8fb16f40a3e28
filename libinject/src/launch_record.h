// The fixed-size record the CUPTI callback copies into the ring for each recorded launch: all the
// sender thread needs to build the kernel event, nothing that must be freed.
#ifndef CUFLIGHT_LIBINJECT_SRC_LAUNCH_RECORD_H_
#define CUFLIGHT_LIBINJECT_SRC_LAUNCH_RECORD_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace cuflight::inject {

struct FunctionInfo;

// The driver entry point that launched the kernel; runtime launches arrive through these too.
enum class LaunchApi : uint8_t {
  kLaunchKernel = 0,
  kLaunchKernelPtsz,
  kLaunchKernelEx,
  kLaunchKernelExPtsz,
  kLaunchCooperativeKernel,
  kLaunchCooperativeKernelPtsz,
  kLaunchCooperativeKernelMultiDevice,
  kLaunch,
  kLaunchGrid,
  kLaunchGridAsync,
  kGraphLaunch,  // a kernel node of a graph, seen through its activity record
};
inline constexpr int kLaunchApiCount = 11;

inline constexpr std::array<std::string_view, kLaunchApiCount> kLaunchApiNames = {
    "cuLaunchKernel",
    "cuLaunchKernel_ptsz",
    "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz",
    "cuLaunchCooperativeKernel",
    "cuLaunchCooperativeKernel_ptsz",
    "cuLaunchCooperativeKernelMultiDevice",
    "cuLaunch",
    "cuLaunchGrid",
    "cuLaunchGridAsync",
    "cuGraphLaunch",
};

constexpr std::string_view LaunchApiName(LaunchApi api) {
  return kLaunchApiNames[static_cast<size_t>(api)];
}

// What a ring record holds.
enum class RecordKind : uint8_t {
  kLaunch = 0,  // a recorded kernel launch
  kApiError,    // a driver call that failed: cbid, result, context, stream, correlation_id
};

struct LaunchRecord {
  int64_t ts_ns = 0;  // host CLOCK_REALTIME at the callback
  uint64_t context = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;
  // Immutable, and alive until the sender thread has handled the record (FunctionTable frees a
  // retired one only after that: function_table.h, design point 5).
  const FunctionInfo* function = nullptr;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t cluster[3] = {0, 0, 0};  // all 0: not a cluster launch
  uint32_t dyn_smem = 0;
  int32_t carveout = -1;  // the launch's own carveout preference; -1: the function's applies
  // The function's dynamic shared memory limit and carveout preference at this launch (they can
  // be set between launches without a new FunctionInfo).
  int32_t func_max_dyn_smem = -1;
  int32_t func_carveout = -1;
  // A cluster launch: what cuOccupancyMaxActiveClusters says for its configuration; 0: unknown.
  int32_t max_active_clusters = 0;
  // What cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags says for the configuration (the
  // kernel event's max_active_blocks); -1: the driver could not say (the engine's figure holds).
  int16_t driver_max_active_blocks = -1;
  // A cluster launch: the largest cluster the function may have, as the driver says
  // (cuOccupancyMaxPotentialClusterSize), at least the launch's own (it ran); 0: unknown.
  uint16_t max_cluster_size = 0;
  int32_t tid = 0;
  int32_t device = 0;
  LaunchApi api = LaunchApi::kLaunchKernel;
  bool cooperative = false;
  RecordKind kind = RecordKind::kLaunch;
  uint32_t cbid = 0;   // kApiError: the CUPTI driver callback id of the call
  int32_t result = 0;  // kApiError: the CUresult it returned
};
static_assert(std::is_trivially_copyable_v<LaunchRecord>);
static_assert(sizeof(LaunchRecord) <= 128);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_LAUNCH_RECORD_H_
