// The fixed-size record the CUPTI callback copies into the launch ring for each recorded launch:
// everything the sender thread needs to build the kernel event, nothing that must be freed. The
// ring lives in the producer's black box (region_layout.h), so this layout is part of the
// contract between the injected library and the collector: pinned below, field by field.
#ifndef CUFLIGHT_BLACKBOX_LAUNCH_RECORD_H_
#define CUFLIGHT_BLACKBOX_LAUNCH_RECORD_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace cuflight::blackbox {

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

// LaunchRecord::launch_flags.
inline constexpr uint8_t kLaunchCooperative = 1;  // a cooperative launch
// Launched with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION non-0 (programmatic
// dependent launch; cuda.h: the grid's execution may "overlap with the previous kernel in the
// stream").
inline constexpr uint8_t kLaunchProgrammaticSerialization = 2;
// Under the sampled timing policy: made entirely inside a timing window (kernel activity enabled
// from the launch call's entry to its exit), so a kernel activity record will come for it.
inline constexpr uint8_t kLaunchInTimingWindow = 4;
// Under the sampled timing policy: made while kernel activity was being enabled or disabled (it
// may or may not get a record; the producer sends no kernel_time for it).
inline constexpr uint8_t kLaunchAtTimingWindowEdge = 8;
inline constexpr uint8_t kLaunchFlagsKnown = kLaunchCooperative |
                                             kLaunchProgrammaticSerialization |
                                             kLaunchInTimingWindow | kLaunchAtTimingWindowEdge;

// What a ring record holds.
enum class RecordKind : uint8_t {
  kLaunch = 0,  // a recorded kernel launch
  kApiError,    // a driver call that failed: cbid, result, context, stream, correlation_id
};

// The function descriptor index of a record whose function the black box does not describe (its
// descriptor table was full, or there is no black box).
inline constexpr uint32_t kNoFunctionDescriptor = UINT32_MAX;

// `FunctionRef` is how the producer's sender thread finds the function's facts: in the injected
// library a `const FunctionInfo*`; in the black box's wire view (WireLaunchRecord) the same 8 bytes
// as an integer the collector never uses. The collector finds the function through
// `function_desc`, an index into the black box's function descriptors.
template <typename FunctionRef>
struct BasicLaunchRecord {
  static_assert(sizeof(FunctionRef) == 8 && std::is_trivially_copyable_v<FunctionRef>);

  int64_t ts_ns = 0;  // host CLOCK_REALTIME at the callback
  uint64_t context = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;
  // The injected library: immutable, and alive until the sender thread has handled the record
  // (FunctionTable frees a retired one only after that: function_table.h, design point 5).
  FunctionRef function{};
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
  // kLaunch: the function's descriptor in the black box (region_layout.h), or
  // kNoFunctionDescriptor.
  uint32_t function_desc = kNoFunctionDescriptor;
  // The device ordinal, [0, kMaxDevices) (64); -1: not known (an api_error on a context not seen).
  int8_t device = 0;
  LaunchApi api = LaunchApi::kLaunchKernel;
  uint8_t launch_flags = 0;  // kLaunchCooperative | kLaunchProgrammaticSerialization | ...
  RecordKind kind = RecordKind::kLaunch;
  // kApiError: the CUPTI driver callback id of the call (below CUPTI_DRIVER_TRACE_CBID_SIZE, 807
  // in CUDA 13.0's cupti_driver_cbid.h: 16 bits hold it).
  uint16_t cbid = 0;
  // kLaunch: the SMs of the launch's context (cuCtxGetDevResource, CU_DEV_RESOURCE_TYPE_SM; a
  // green context's), when fewer than its device's; 0: the device's (kernel event's sm_count).
  uint16_t sm_count = 0;
  int32_t result = 0;  // kApiError: the CUresult it returned
};

using WireLaunchRecord = BasicLaunchRecord<uint64_t>;

// The pinned layout (docs/protocol.md, "The black box"): 120 bytes, so that a ring slot (an
// 8-byte turn word and the record) is two cache lines.
inline constexpr size_t kLaunchRecordBytes = 120;
static_assert(std::is_trivially_copyable_v<WireLaunchRecord>);
static_assert(std::is_standard_layout_v<WireLaunchRecord>);
static_assert(sizeof(WireLaunchRecord) == kLaunchRecordBytes);
static_assert(offsetof(WireLaunchRecord, ts_ns) == 0);
static_assert(offsetof(WireLaunchRecord, context) == 8);
static_assert(offsetof(WireLaunchRecord, stream) == 16);
static_assert(offsetof(WireLaunchRecord, correlation_id) == 24);
static_assert(offsetof(WireLaunchRecord, function) == 32);
static_assert(offsetof(WireLaunchRecord, grid) == 40);
static_assert(offsetof(WireLaunchRecord, block) == 52);
static_assert(offsetof(WireLaunchRecord, cluster) == 64);
static_assert(offsetof(WireLaunchRecord, dyn_smem) == 76);
static_assert(offsetof(WireLaunchRecord, carveout) == 80);
static_assert(offsetof(WireLaunchRecord, func_max_dyn_smem) == 84);
static_assert(offsetof(WireLaunchRecord, func_carveout) == 88);
static_assert(offsetof(WireLaunchRecord, max_active_clusters) == 92);
static_assert(offsetof(WireLaunchRecord, driver_max_active_blocks) == 96);
static_assert(offsetof(WireLaunchRecord, max_cluster_size) == 98);
static_assert(offsetof(WireLaunchRecord, tid) == 100);
static_assert(offsetof(WireLaunchRecord, function_desc) == 104);
static_assert(offsetof(WireLaunchRecord, device) == 108);
static_assert(offsetof(WireLaunchRecord, api) == 109);
static_assert(offsetof(WireLaunchRecord, launch_flags) == 110);
static_assert(offsetof(WireLaunchRecord, kind) == 111);
static_assert(offsetof(WireLaunchRecord, cbid) == 112);
static_assert(offsetof(WireLaunchRecord, sm_count) == 114);
static_assert(offsetof(WireLaunchRecord, result) == 116);

}  // namespace cuflight::blackbox

#endif  // CUFLIGHT_BLACKBOX_LAUNCH_RECORD_H_
