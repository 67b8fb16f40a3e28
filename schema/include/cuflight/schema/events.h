// Event schema v1: the typed form of every line cuflight writes.
//
// 1. One event is one JSON object on one line, ending in '\n' (newline-delimited JSON).
// 2. The JSON Schema files in schema/v1/ are the contract; these structs mirror them field for
//    field, with the JSON names as member names.
// 3. Each struct is a template over its string storage: View (std::string_view / std::span, the
//    caller owns the bytes; what the injector encodes from, without allocating) and Owned
//    (std::string / std::vector; what Decode returns). The aliases below name both.
#ifndef CUFLIGHT_SCHEMA_EVENTS_H_
#define CUFLIGHT_SCHEMA_EVENTS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "cuflight/schema/timing_policy.h"

#include "cuflight/schema/occupancy_fields.h"

namespace cuflight::schema {

// The `version` every event carries. It changes only on an incompatible change (a field removed,
// renamed, retyped or given a narrower range); new event types and new fields keep it.
inline constexpr int kSchemaVersion = 1;

enum class EventType : uint8_t {
  kProcessStart = 0,
  kDevice = 1,
  kKernel = 2,
  kKernelTime = 3,
  kApiError = 4,
  kStats = 5,
  kProcessEnd = 6,
  kProcessLost = 7,
  kProcessCrash = 8,
  kStall = 9,
  kKernelConfig = 10,
  kLaunch = 11,
};
inline constexpr int kEventTypeCount = 12;

// Wire names (`type`), indexed by EventType.
inline constexpr std::array<std::string_view, kEventTypeCount> kEventTypeNames = {
    "process_start", "device",      "kernel",       "kernel_time",   "api_error",
    "stats",         "process_end", "process_lost", "process_crash", "stall",
    "kernel_config", "launch"};

// Wire name of `type`, which must be one of the enumerators.
constexpr std::string_view EventTypeName(EventType type) {
  return kEventTypeNames[static_cast<size_t>(type)];
}

// Inverse of EventTypeName; nullopt for a name this build does not know.
constexpr std::optional<EventType> EventTypeFromName(std::string_view name) {
  for (int i = 0; i < kEventTypeCount; ++i) {
    if (kEventTypeNames[static_cast<size_t>(i)] == name) return static_cast<EventType>(i);
  }
  return std::nullopt;
}

// Fields every event carries besides `type` and `version`.
struct Header {
  int64_t ts_ns = 0;  // host CLOCK_REALTIME when the event was built, ns since the Unix epoch
  int32_t pid = 0;
  // Per process, from 0, one per event of any type in the order the process built them. Events
  // dropped before reaching the collector still used their number, so a gap means loss.
  uint64_t seq = 0;

  bool operator==(const Header&) const = default;
};

struct Dim3 {
  uint32_t x = 1;
  uint32_t y = 1;
  uint32_t z = 1;

  bool operator==(const Dim3&) const = default;
};

struct View {
  using String = std::string_view;
  using StringList = std::span<const std::string_view>;
  using IdList = std::span<const uint64_t>;
  using StringMap = std::span<const std::pair<std::string_view, std::string_view>>;
  template <class T>
  using List = std::span<const T>;
};

struct Owned {
  using String = std::string;
  using StringList = std::vector<std::string>;
  using IdList = std::vector<uint64_t>;
  using StringMap = std::vector<std::pair<std::string, std::string>>;
  template <class T>
  using List = std::vector<T>;
};

// Why the collector wrote a process_lost event (wire names "disconnected", "collector_shutdown").
enum class LostReason : uint8_t {
  kDisconnected = 0,       // the producer's connection ended without a process_end
  kCollectorShutdown = 1,  // the collector stopped while the producer was still connected
};
inline constexpr int kLostReasonCount = 2;

constexpr std::string_view LostReasonName(LostReason reason) {
  switch (reason) {
    case LostReason::kDisconnected:
      return "disconnected";
    case LostReason::kCollectorShutdown:
      return "collector_shutdown";
  }
  return "unknown";
}

// What a stall event reports (wire names "stalled", "resolved").
enum class StallState : uint8_t {
  kStalled = 0,   // launched kernels have not finished for the stall threshold (or still do not)
  kResolved = 1,  // the stall reported before is over: every stream it named made progress
};
inline constexpr int kStallStateCount = 2;

constexpr std::string_view StallStateName(StallState state) {
  switch (state) {
    case StallState::kStalled:
      return "stalled";
    case StallState::kResolved:
      return "resolved";
  }
  return "unknown";
}

// Inverse of StallStateName; nullopt for any other string.
constexpr std::optional<StallState> StallStateFromName(std::string_view name) {
  if (name == "stalled") return StallState::kStalled;
  if (name == "resolved") return StallState::kResolved;
  return std::nullopt;
}

// Who computed a kernel event's block count (wire names "driver", "engine"; kUnknown is not
// encoded: lines written before occupancy_source existed).
enum class OccupancySource : uint8_t {
  kUnknown = 0,
  kDriver = 1,
  kEngine = 2,
};

constexpr std::string_view OccupancySourceName(OccupancySource source) {
  switch (source) {
    case OccupancySource::kDriver:
      return "driver";
    case OccupancySource::kEngine:
      return "engine";
    case OccupancySource::kUnknown:
      break;
  }
  return "unknown";
}

// Inverse of OccupancySourceName for "driver" and "engine"; nullopt for any other string.
constexpr std::optional<OccupancySource> OccupancySourceFromName(std::string_view name) {
  if (name == "driver") return OccupancySource::kDriver;
  if (name == "engine") return OccupancySource::kEngine;
  return std::nullopt;
}

// Why kernel timing stopped in a process (stats, process_end, process_crash: the wire's
// timing_stopped_reason, "records_stopped" or "unavailable"; kNone is not encoded).
//   kRecordsStopped: kernel activity records stopped arriving while launches went on (another
//                    CUPTI client took over the activity buffers or disabled kernel records, or
//                    the GPU stopped completing kernels);
//   kUnavailable:    kernel activity could not be enabled (another CUPTI tool holds it).
enum class TimingStoppedReason : uint8_t {
  kNone = 0,
  kRecordsStopped = 1,
  kUnavailable = 2,
};

constexpr std::string_view TimingStoppedReasonName(TimingStoppedReason reason) {
  switch (reason) {
    case TimingStoppedReason::kRecordsStopped:
      return "records_stopped";
    case TimingStoppedReason::kUnavailable:
      return "unavailable";
    case TimingStoppedReason::kNone:
      break;
  }
  return "";
}

// Inverse of TimingStoppedReasonName for the two wire names; nullopt for any other string.
constexpr std::optional<TimingStoppedReason> TimingStoppedReasonFromName(std::string_view name) {
  if (name == "records_stopped") return TimingStoppedReason::kRecordsStopped;
  if (name == "unavailable") return TimingStoppedReason::kUnavailable;
  return std::nullopt;
}

// Inverse of LostReasonName; nullopt for any other string.
constexpr std::optional<LostReason> LostReasonFromName(std::string_view name) {
  for (int i = 0; i < kLostReasonCount; ++i) {
    if (LostReasonName(static_cast<LostReason>(i)) == name) return static_cast<LostReason>(i);
  }
  return std::nullopt;
}

// The longest process_start line a producer sends, '\n' included: it shortens argv (then exe and
// the config values) to fit and says so in `truncated`. The collector accepts a
// connection's first line up to this length even when its --max-line-bytes is lower, so no
// process is lost to one long field.
inline constexpr size_t kMaxProcessStartBytes = 16 * 1024;
// Ends every string a producer shortened (process_start's `truncated` names the fields).
inline constexpr std::string_view kTruncationMarker = "...[truncated]";

// First event of a process.
template <class S>
struct BasicProcessStartEvent {
  static constexpr EventType kType = EventType::kProcessStart;
  Header header;
  typename S::String exe;  // path of the executable
  typename S::StringList argv;
  typename S::String hostname;
  int64_t start_ns = 0;  // when the process started, host CLOCK_REALTIME ns; 0 if unknown
  typename S::String cuflight_version;
  int32_t cuda_driver_version = 0;  // cuDriverGetVersion (e.g. 12040); 0 if unknown
  int32_t cupti_version = 0;        // cuptiGetVersion; 0 if unknown
  int32_t ppid = 0;                 // parent process id; 0 if unknown
  int64_t uid = -1;                 // real user id (0..2^32-1); -1 if unknown (JSON null)
  // The effective CUFLIGHT_* configuration, variable name -> value. Encode writes the pairs in
  // the order given (names should be unique); Decode returns them sorted by name (bytewise), a
  // repeated name keeping its last value, as JSON object semantics say.
  typename S::StringMap config;
  // Random, drawn (getrandom) once per process image: a fork()ed child and a process after
  // exec() have their own. Names the process's stream together with what the collector verified
  // (docs/protocol.md, "Process identity"). 0: not reported (a producer older than the field).
  uint64_t instance_id = 0;
  // Inode of /proc/self/ns/pid: the pid namespace in which `header.pid` and `ppid` are the
  // process's ids. 0 if unknown.
  uint64_t pid_ns = 0;
  // Who the process is to a scheduler (schema/v1/process_start.schema.json, docs/fleet.md):
  // lower-case names are the derived fields (job, rank, local_rank, world_size, pod_uid,
  // container_id, pod_name, pod_namespace), upper-case names the allow-listed environment
  // variables as read. Encode writes the pairs in the order given (no member when empty); Decode
  // returns them sorted by name, as `config`.
  typename S::StringMap attribution;
  // The CUPTI API family in use: "subscriber" (the _v2 calls, several CUPTI tools in one
  // process) or "global" (the unversioned calls). Empty: unknown (a producer older than the
  // field); Encode then writes no member.
  typename S::String cupti_activity_api;
  // Names of the fields the producer shortened so that the line stays within
  // kMaxProcessStartBytes ("argv", "exe", "config", "attribution"), in that order. A shortened argv keeps its
  // leading arguments, the last one kept ending with kTruncationMarker; a shortened exe keeps
  // the end of the path after the marker; a shortened config value ends with the marker.
  // Empty: nothing was cut (Encode then writes no member).
  typename S::StringList truncated;

  bool operator==(const BasicProcessStartEvent&) const = default;
};

// One per device the process uses, before its first kernel event. The limits mirror
// cuflight::occupancy::DeviceLimits, name for name.
template <class S>
struct BasicDeviceEvent {
  static constexpr EventType kType = EventType::kDevice;
  Header header;
  int32_t device = 0;  // CUDA device ordinal in the process
  typename S::String name;
  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" as nvidia-smi prints ("MIG-..." for a MIG
  // instance the environment names as such), or "".
  typename S::String uuid;
  // "00000000:19:00.0" as nvidia-smi prints (domain:bus:device.function, upper-case hex), or ""
  // (Encode then writes no member).
  typename S::String pci_bus_id;
  int32_t cc_major = 0;
  int32_t cc_minor = 0;
  int32_t sm_count = 0;
  int32_t max_threads_per_block = 0;
  int32_t max_threads_per_sm = 0;
  int32_t max_blocks_per_sm = 0;
  int32_t regs_per_sm = 0;
  int32_t regs_per_block = 0;
  int64_t smem_per_sm = 0;  // bytes, like every smem_* field
  int64_t smem_per_block = 0;
  int64_t smem_per_block_optin = 0;
  int64_t reserved_smem_per_block = 0;
  int32_t warp_size = 32;
  int32_t max_cluster_size = 0;  // largest portable cluster, blocks; 0 without clusters (< sm_90)
  // Made by the collector from the producer's black box after the process died without sending
  // it (docs/protocol.md, "The black box"); written only when true.
  bool recovered = false;

  bool operator==(const BasicDeviceEvent&) const = default;
};

// One per kernel launch.
template <class S>
struct BasicKernelEvent {
  static constexpr EventType kType = EventType::kKernel;
  Header header;
  int32_t tid = 0;               // launching thread (gettid)
  int32_t device = 0;            // CUDA device ordinal
  // CUPTI's ids (cuptiGetContextId, cuptiGetStreamIdEx), the contextId / streamId of CUPTI's
  // activity records: one identity per context and stream across event types. 0xffffffff: CUPTI
  // could not say. (Lines of earlier versions held the CUcontext / CUstream handles.)
  uint64_t context = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;   // CUPTI correlation id; joins the kernel_time event
  typename S::String api;        // launch API, e.g. "cuLaunchKernel", "cudaLaunchKernel"
  typename S::String name;       // mangled
  typename S::String demangled;  // "" when demangling failed
  Dim3 grid;
  Dim3 block;
  std::optional<Dim3> cluster;  // set for launches that set a cluster dimension
  int32_t num_regs = 0;         // registers per thread
  int64_t static_shared_bytes = 0;
  int64_t dyn_shared_bytes = 0;
  int64_t local_bytes = 0;  // per thread
  int64_t const_bytes = 0;
  int32_t max_threads_per_block = 0;  // the function's limit (__launch_bounds__ or the device's)
  int32_t carveout = -1;              // preferred smem carveout percent 0..100; -1: no preference
  bool cooperative = false;           // a cooperative launch (cuLaunchCooperativeKernel, ...)
  // Set only for a kernel executed as a node of a CUDA graph (CUPTI's graphId/graphNodeId): both
  // or neither; a line with one of them alone is rejected.
  std::optional<uint64_t> graph_id;
  std::optional<uint64_t> graph_node_id;
  // Encoded at the top level of the object, not nested. `cluster_occupancy` is written only when
  // `cluster` is set and occupancy.has_cluster is true.
  OccupancyFields occupancy;
  // Who gave max_active_blocks, active_warps and occupancy: the CUDA driver
  // (cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags for the launch's configuration) or the
  // engine alone (graph nodes, a launch carveout the driver's call cannot express, a driver that
  // could not say). kUnknown: a line written before the field existed (not encoded).
  OccupancySource occupancy_source = OccupancySource::kUnknown;
  // The engine's max_active_blocks, only when it differs from the driver's (occupancy_source
  // driver; limiting_resource is then "other"). The per-resource figures are the engine's.
  std::optional<int32_t> engine_max_active_blocks;
  // The SMs waves and tail_utilization were computed with: the launch's context's
  // (cuCtxGetDevResource, or a green context's cuGreenCtxGetDevResource), set only when it is
  // fewer than its device's sm_count (a green context, an MPS client). nullopt (absent): the
  // device event's sm_count.
  std::optional<int32_t> sm_count;
  // Made by the collector from the producer's black box (the launch was recorded, the process
  // died before sending it): the same numbers the producer would have sent. Written only when
  // true.
  bool recovered = false;
  // Set only when the process's timing policy is `sampled` (timing_policy.h): true when the
  // launch was made while a timing window was open (a kernel_time event is expected for it),
  // false when not (none will come). nullopt (absent): follow the policy (`all`: timed, `off`:
  // not).
  std::optional<bool> timing_window;

  bool operator==(const BasicKernelEvent&) const = default;
};

// GPU execution time of one kernel execution (CUPTI activity), joined to its kernel event by
// (correlation_id, graph_node_id, device): join_key.h. Timestamps are CUPTI's GPU timestamps in
// ns.
template <class S>
struct BasicKernelTimeEvent {
  static constexpr EventType kType = EventType::kKernelTime;
  Header header;
  uint64_t correlation_id = 0;
  int32_t device = 0;
  uint64_t context = 0;
  uint64_t stream = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t duration_ns = 0;  // end_ns - start_ns
  // Set only for a kernel executed as a node of a CUDA graph, as in the kernel event: both or
  // neither. Every node of one graph launch shares the launch's correlation_id.
  std::optional<uint64_t> graph_id;
  std::optional<uint64_t> graph_node_id;

  bool operator==(const BasicKernelTimeEvent&) const = default;
};

// A CUDA driver or runtime call that returned an error.
template <class S>
struct BasicApiErrorEvent {
  static constexpr EventType kType = EventType::kApiError;
  Header header;
  typename S::String api;                   // e.g. "cuLaunchKernel"
  int32_t code = 0;                         // CUresult or cudaError_t value
  typename S::String error_name;            // e.g. "CUDA_ERROR_INVALID_VALUE"
  typename S::String message;               // the driver's description
  int32_t device = -1;                      // -1 if unknown
  uint64_t context = 0;                     // CUPTI's id, as in kernel events
  uint64_t stream = 0;                      // the failed launch's stream; 0xffffffff: none
  // correlation_id of the latest recorded launches on the same context, oldest first
  typename S::IdList last_correlation_ids;

  bool operator==(const BasicApiErrorEvent&) const = default;
};

// Periodic health of the event pipeline in the process. Counters are cumulative from process
// start and do not count this event. The fields after interval_ns are optional on the wire (lines
// written before they existed lack them): Decode gives 0 for an absent one.
template <class S>
struct BasicStatsEvent {
  static constexpr EventType kType = EventType::kStats;
  Header header;
  uint64_t emitted = 0;        // events handed to the transport and not dropped there
  // events lost: dropped_ring_full + dropped_disconnected + dropped_backpressure
  uint64_t dropped = 0;
  uint64_t ring_capacity = 0;  // event slots in the ring
  int64_t interval_ns = 0;     // period between stats events
  uint64_t launches = 0;       // kernel launches seen, sent or not (sampling, name filters)
  uint64_t filtered = 0;       // launches not sent because of sampling or name filters
  uint64_t dropped_ring_full = 0;     // events lost because the ring was full
  uint64_t dropped_disconnected = 0;  // events lost because the collector was unreachable
  uint64_t dropped_backpressure = 0;  // events lost because the connected collector was behind
  uint64_t ring_high_water = 0;       // most ring slots ever in use at once
  uint64_t cpu_ns = 0;                // CPU time of the library's own threads, ns
  // Kernel timing records lost (no kernel_time event for them; not counted in dropped): CUPTI
  // had no buffer, dropped records, or records incomplete at a forced flush.
  uint64_t timing_dropped = 0;
  // Of timing_dropped: records the forced flushes that confirmed stalls handed over incomplete.
  uint64_t timing_dropped_stall_flush = 0;
  // Launches whose occupancy the driver and the engine computed differently (kernel events with
  // engine_max_active_blocks); optional on the wire, 0 when absent.
  uint64_t occupancy_disagreements = 0;
  // Failed driver calls counted instead of sent as api_error (optional on the wire, 0 when
  // absent): routine failures (cuflight/schema/routine_failures.h), and repeats of one (call,
  // CUresult) beyond the first 10, past one a second.
  uint64_t api_errors_routine = 0;
  uint64_t api_errors_suppressed = 0;
  // Launches recorded while kernel timing was stopped, and why (optional on the wire, together:
  // 0 and kNone when absent). 0 again once records arrive again after a kRecordsStopped.
  uint64_t timing_stopped = 0;
  TimingStoppedReason timing_stopped_reason = TimingStoppedReason::kNone;
  // The kernel timing policy (optional on the wire: kUnknown when absent) and, with kSampled, its
  // windows: how many were opened, how long they were open in all (ns), and the recorded launches
  // made inside one (kernel events with timing_window true). Cumulative; 0 when absent.
  TimingPolicy timing_policy = TimingPolicy::kUnknown;
  uint64_t timing_windows = 0;
  uint64_t timing_window_ns = 0;
  uint64_t launches_in_window = 0;
  // Taking turns with other CUPTI tools (docs/profilers.md; optional on the wire, 0 and false
  // when absent): how often the library handed CUPTI over (cuptiUnsubscribe) since process start,
  // how long it was off CUPTI in all (ns; an ongoing yield counts up to now), the launches its
  // callback saw while yielding and did not record (those between a yield request and the
  // unsubscribe; launches made while unsubscribed are not seen at all), and whether it is off
  // CUPTI now.
  uint64_t yields = 0;
  uint64_t yielded_ns = 0;
  uint64_t launches_yielded = 0;
  bool yielded = false;

  bool operator==(const BasicStatsEvent&) const = default;
};

// Last event of a process that exits normally. Counters as in stats (the six after `dropped`
// optional on the wire, 0 when absent).
template <class S>
struct BasicProcessEndEvent {
  static constexpr EventType kType = EventType::kProcessEnd;
  Header header;
  std::optional<int32_t> exit_code;  // nullopt (JSON null) if unknown
  uint64_t emitted = 0;
  uint64_t dropped = 0;
  uint64_t launches = 0;
  uint64_t filtered = 0;
  uint64_t dropped_ring_full = 0;
  uint64_t dropped_disconnected = 0;
  uint64_t dropped_backpressure = 0;
  uint64_t timing_dropped = 0;
  uint64_t timing_dropped_stall_flush = 0;
  uint64_t occupancy_disagreements = 0;
  // Failed driver calls counted instead of sent as api_error (optional on the wire, 0 when
  // absent): routine failures (cuflight/schema/routine_failures.h), and repeats of one (call,
  // CUresult) beyond the first 10, past one a second.
  uint64_t api_errors_routine = 0;
  uint64_t api_errors_suppressed = 0;
  // Launches recorded while kernel timing was stopped, and why (optional on the wire, together:
  // 0 and kNone when absent). 0 again once records arrive again after a kRecordsStopped.
  uint64_t timing_stopped = 0;
  TimingStoppedReason timing_stopped_reason = TimingStoppedReason::kNone;
  // The kernel timing policy (optional on the wire: kUnknown when absent) and, with kSampled, its
  // windows: how many were opened, how long they were open in all (ns), and the recorded launches
  // made inside one (kernel events with timing_window true). Cumulative; 0 when absent.
  TimingPolicy timing_policy = TimingPolicy::kUnknown;
  uint64_t timing_windows = 0;
  uint64_t timing_window_ns = 0;
  uint64_t launches_in_window = 0;
  // Taking turns with other CUPTI tools (docs/profilers.md; optional on the wire, 0 and false
  // when absent): how often the library handed CUPTI over (cuptiUnsubscribe) since process start,
  // how long it was off CUPTI in all (ns; an ongoing yield counts up to now), the launches its
  // callback saw while yielding and did not record (those between a yield request and the
  // unsubscribe; launches made while unsubscribed are not seen at all), and whether it is off
  // CUPTI now.
  uint64_t yields = 0;
  uint64_t yielded_ns = 0;
  uint64_t launches_yielded = 0;
  bool yielded = false;

  bool operator==(const BasicProcessEndEvent&) const = default;
};

// Written by the collector, not the process: the producer's connection ended without a
// process_end. header.ts_ns is when the collector wrote it, header.pid the producer's pid and
// header.seq its last_seq (0 when none was seen).
template <class S>
struct BasicProcessLostEvent {
  static constexpr EventType kType = EventType::kProcessLost;
  Header header;
  std::optional<uint64_t> last_seq;  // highest seq received from the process; nullopt (null): none
  LostReason reason = LostReason::kDisconnected;
  uint64_t events_stored = 0;  // events of the process the collector stored
  // Events missing from the log: gaps in the seq numbers the collector saw and, when the
  // producer's black box was read, the seqs it used after the last one stored.
  uint64_t events_lost = 0;
  // Events the collector recovered from the producer's black box (included in events_stored);
  // set only when a black box was read.
  std::optional<uint64_t> events_recovered;

  bool operator==(const BasicProcessLostEvent&) const = default;
};

// Sent by the process from its handler of a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT), after every event recorded before it. Counters as in process_end (the six after
// `dropped` optional on the wire, 0 when absent).
template <class S>
struct BasicProcessCrashEvent {
  static constexpr EventType kType = EventType::kProcessCrash;
  Header header;
  int32_t signal = 0;              // the signal number
  typename S::String signal_name;  // e.g. "SIGSEGV"
  int32_t code = 0;                // siginfo si_code (> 0: raised by the kernel for a fault)
  uint64_t addr = 0;               // si_addr for SIGSEGV, SIGBUS, SIGFPE, SIGILL; 0 otherwise
  int32_t tid = 0;                 // the thread that received the signal
  // The application had its own handler for the signal, which ran first and gave the signal back
  // to the default action (or returned into abort()): the process ends next. False: no handler of
  // the application's; the default action (termination) followed.
  bool app_handler = false;
  uint64_t emitted = 0;
  uint64_t dropped = 0;
  uint64_t launches = 0;
  uint64_t filtered = 0;
  uint64_t dropped_ring_full = 0;
  uint64_t dropped_disconnected = 0;
  uint64_t dropped_backpressure = 0;
  uint64_t timing_dropped = 0;
  uint64_t timing_dropped_stall_flush = 0;
  uint64_t occupancy_disagreements = 0;
  // Failed driver calls counted instead of sent as api_error (optional on the wire, 0 when
  // absent): routine failures (cuflight/schema/routine_failures.h), and repeats of one (call,
  // CUresult) beyond the first 10, past one a second.
  uint64_t api_errors_routine = 0;
  uint64_t api_errors_suppressed = 0;
  // Launches recorded while kernel timing was stopped, and why (optional on the wire, together:
  // 0 and kNone when absent). 0 again once records arrive again after a kRecordsStopped.
  uint64_t timing_stopped = 0;
  TimingStoppedReason timing_stopped_reason = TimingStoppedReason::kNone;
  // The kernel timing policy (optional on the wire: kUnknown when absent) and, with kSampled, its
  // windows: how many were opened, how long they were open in all (ns), and the recorded launches
  // made inside one (kernel events with timing_window true). Cumulative; 0 when absent.
  TimingPolicy timing_policy = TimingPolicy::kUnknown;
  uint64_t timing_windows = 0;
  uint64_t timing_window_ns = 0;
  uint64_t launches_in_window = 0;
  // Taking turns with other CUPTI tools (docs/profilers.md; optional on the wire, 0 and false
  // when absent): how often the library handed CUPTI over (cuptiUnsubscribe) since process start,
  // how long it was off CUPTI in all (ns; an ongoing yield counts up to now), the launches its
  // callback saw while yielding and did not record (those between a yield request and the
  // unsubscribe; launches made while unsubscribed are not seen at all), and whether it is off
  // CUPTI now.
  uint64_t yields = 0;
  uint64_t yielded_ns = 0;
  uint64_t launches_yielded = 0;
  bool yielded = false;

  bool operator==(const BasicProcessCrashEvent&) const = default;
};

// One unfinished launch named by a stall event: the facts of its kernel event (joined to it by
// correlation_id and the stream's device) and how long ago it was launched.
template <class S>
struct BasicStallLaunch {
  uint64_t correlation_id = 0;
  // As in the kernel event, each cut to kMaxStallNameBytes (then ending in kTruncationMarker).
  typename S::String name;
  typename S::String demangled;
  Dim3 grid;
  Dim3 block;
  double occupancy = 0;  // the kernel event's occupancy, in [0, 1]
  int64_t age_ms = 0;    // since the launch (host clock)
  // A CUDA graph launch (cuGraphLaunch): correlation_id is the graph launch's, which its kernel
  // nodes' events carry; name, demangled, grid, block and occupancy are those of the node shown
  // running (graph_node_id), else empty and 0.
  bool graph_launch = false;
  std::optional<uint64_t> graph_exec_id;  // cuptiGetGraphExecId, when CUPTI said
  std::optional<uint64_t> graph_id;       // the running node's record's, with graph_node_id
  std::optional<uint64_t> graph_node_id;  // the node a forced flush showed running

  bool operator==(const BasicStallLaunch&) const = default;
};

// A stream that has made no progress for the stall threshold: its oldest unfinished launches.
template <class S>
struct BasicStallStream {
  int32_t device = 0;
  uint64_t context = 0;  // CUPTI's ids, as in kernel events
  uint64_t stream = 0;
  // Since the stream last made progress: its oldest unfinished launch was launched, or the launch
  // before it on the stream was seen finishing, whichever is later. Kernels queued behind a long
  // one wait from when it finished, not from their own launch.
  int64_t waiting_ms = 0;
  int64_t unfinished = 0;  // launches on the stream not seen finishing, listed or not
  // The oldest unfinished launches, oldest first (at most kMaxStallLaunches from the injector).
  // The first is what the stream waits on; the others are queued behind it.
  typename S::template List<BasicStallLaunch<S>> launches;
  // Why the stream is taken as stalled (wire "evidence"; "" when absent, read as
  // kStallEvidenceTimingRecords) and what `launches` lists (wire "launches_from"; "" read as
  // kStallLaunchesFromTimingRecords): the values below.
  typename S::String evidence;
  typename S::String launches_from;
  // With evidence kStallEvidenceSyncCall: the call the application's thread waits in, the thread,
  // and how long it has waited.
  typename S::String sync_api;
  std::optional<int32_t> sync_tid;
  std::optional<int64_t> sync_waited_ms;

  bool operator==(const BasicStallStream&) const = default;
};

// The longest kernel name a stall event carries, in bytes, the truncation marker included; and the
// most streams and launches per stream the injector lists (docs/protocol.md, "Stalls").
inline constexpr size_t kMaxStallNameBytes = 256;
inline constexpr size_t kMaxStallStreams = 8;
inline constexpr size_t kMaxStallLaunches = 4;
// The values of a stall stream's `evidence` and `launches_from` (schema/v1/stall.schema.json).
inline constexpr std::string_view kStallEvidenceTimingRecords = "timing_records";
inline constexpr std::string_view kStallEvidenceSyncCall = "sync_call";
inline constexpr std::string_view kStallLaunchesFromTimingRecords = "timing_records";
inline constexpr std::string_view kStallLaunchesFromRecent = "recent";

// Sent by the process while launched kernels do not finish (CUFLIGHT_STALL_MS): state stalled
// when a stream has made no progress for stall_ms, again at a bounded rate while one has not, and
// state resolved (no streams) once every stream has.
template <class S>
struct BasicStallEvent {
  static constexpr EventType kType = EventType::kStall;
  Header header;
  StallState state = StallState::kStalled;
  int64_t stall_ms = 0;  // the threshold in force (CUFLIGHT_STALL_MS)
  // stalled: the longest waiting_ms of the stalled streams; resolved: how long the stall lasted,
  // from the start of the first stalled stream's wait to the progress that ended it.
  int64_t stalled_ms = 0;
  // Kernels the process saw finish, on any stream, since the previous stall event of this stall
  // (in the first: since the stall began). 0 while stalled: the whole process made no progress.
  uint64_t completed = 0;
  int32_t streams_stalled = 0;  // streams stalled now, listed or not; 0 when resolved
  // The stalled streams, longest waiting first (at most kMaxStallStreams from the injector);
  // empty when resolved.
  typename S::template List<BasicStallStream<S>> streams;
  // What confirming the stall cost: kernel records the forced flush made for it handed over
  // incomplete, and on how many streams (the first stalled event after such a flush only).
  std::optional<uint64_t> flush_incomplete;
  std::optional<int32_t> flush_incomplete_streams;

  bool operator==(const BasicStallEvent&) const = default;
};

// What every launch of one kernel configuration on one stream shares (docs/protocol.md,
// "Interned configurations"): the launch-invariant members of a kernel event, described once per
// sequence (a connection, a spill file, a log segment) before the first `launch` that names it.
// `config` is the producer's id for it: unique in the process and never reused. The occupancy
// figures are the kernel event's but `waves` and `tail_utilization`, which depend on the grid
// (they are 0 here): a reader computes them for each launch from `wave_size` and the launch's
// grid (waves.h), unless the launch carries them.
template <class S>
struct BasicKernelConfigEvent {
  static constexpr EventType kType = EventType::kKernelConfig;
  Header header;
  uint64_t config = 0;
  // Where the launches run: a configuration is per (device, context, stream), so that a launch
  // line need not say them.
  int32_t device = 0;
  uint64_t context = 0;
  uint64_t stream = 0;
  typename S::String api;
  typename S::String name;
  typename S::String demangled;
  Dim3 block;
  std::optional<Dim3> cluster;
  int32_t num_regs = 0;
  int64_t static_shared_bytes = 0;
  int64_t dyn_shared_bytes = 0;
  int64_t local_bytes = 0;
  int64_t const_bytes = 0;
  int32_t max_threads_per_block = 0;
  int32_t carveout = -1;
  bool cooperative = false;
  OccupancyFields occupancy;
  OccupancySource occupancy_source = OccupancySource::kUnknown;
  std::optional<int32_t> engine_max_active_blocks;
  // The SMs of the launch's context when fewer than the device's (kernel.sm_count): a context's,
  // like `context`, so the configuration's.
  std::optional<int32_t> sm_count;
  // One wave of the configuration's launches (waves.h, WaveShape): the units all resident at once
  // (blocks: SMs x max_active_blocks; clusters: max_active_clusters when wave_of_clusters).
  // nullopt (absent): not said; each launch then carries its waves and tail_utilization.
  std::optional<uint64_t> wave_size;
  bool wave_of_clusters = false;  // written only when true

  bool operator==(const BasicKernelConfigEvent&) const = default;
};

// One kernel launch whose configuration a kernel_config described: the per-launch members of a
// kernel event and the configuration's id. A reader expands it into the kernel event it stands
// for (config_expander.h); the expansion is the kernel event the producer would have sent.
template <class S>
struct BasicLaunchEvent {
  static constexpr EventType kType = EventType::kLaunch;
  Header header;
  int32_t tid = 0;
  uint64_t correlation_id = 0;
  uint64_t config = 0;
  Dim3 grid;
  std::optional<uint64_t> graph_id;
  std::optional<uint64_t> graph_node_id;
  // As the kernel event's (they depend on the grid). nullopt (absent): the configuration's
  // wave_size gives them with the grid (waves.h; Expand computes them); both or neither.
  std::optional<double> waves;
  std::optional<double> tail_utilization;
  bool recovered = false;
  std::optional<bool> timing_window;

  bool operator==(const BasicLaunchEvent&) const = default;
};

using ProcessStartEvent = BasicProcessStartEvent<View>;
using DeviceEvent = BasicDeviceEvent<View>;
using KernelEvent = BasicKernelEvent<View>;
using KernelTimeEvent = BasicKernelTimeEvent<View>;
using ApiErrorEvent = BasicApiErrorEvent<View>;
using StatsEvent = BasicStatsEvent<View>;
using ProcessEndEvent = BasicProcessEndEvent<View>;
using ProcessLostEvent = BasicProcessLostEvent<View>;
using ProcessCrashEvent = BasicProcessCrashEvent<View>;
using StallLaunch = BasicStallLaunch<View>;
using StallStream = BasicStallStream<View>;
using StallEvent = BasicStallEvent<View>;
using KernelConfigEvent = BasicKernelConfigEvent<View>;
using LaunchEvent = BasicLaunchEvent<View>;

using OwnedProcessStartEvent = BasicProcessStartEvent<Owned>;
using OwnedDeviceEvent = BasicDeviceEvent<Owned>;
using OwnedKernelEvent = BasicKernelEvent<Owned>;
using OwnedKernelTimeEvent = BasicKernelTimeEvent<Owned>;
using OwnedApiErrorEvent = BasicApiErrorEvent<Owned>;
using OwnedStatsEvent = BasicStatsEvent<Owned>;
using OwnedProcessEndEvent = BasicProcessEndEvent<Owned>;
using OwnedProcessLostEvent = BasicProcessLostEvent<Owned>;
using OwnedProcessCrashEvent = BasicProcessCrashEvent<Owned>;
using OwnedStallLaunch = BasicStallLaunch<Owned>;
using OwnedStallStream = BasicStallStream<Owned>;
using OwnedStallEvent = BasicStallEvent<Owned>;
using OwnedKernelConfigEvent = BasicKernelConfigEvent<Owned>;
using OwnedLaunchEvent = BasicLaunchEvent<Owned>;

// Any event; the alternative index is the EventType.
template <class S>
using BasicEvent = std::variant<BasicProcessStartEvent<S>, BasicDeviceEvent<S>, BasicKernelEvent<S>,
                                BasicKernelTimeEvent<S>, BasicApiErrorEvent<S>, BasicStatsEvent<S>,
                                BasicProcessEndEvent<S>, BasicProcessLostEvent<S>,
                                BasicProcessCrashEvent<S>, BasicStallEvent<S>,
                                BasicKernelConfigEvent<S>, BasicLaunchEvent<S>>;
using Event = BasicEvent<View>;
using OwnedEvent = BasicEvent<Owned>;
static_assert(std::variant_size_v<Event> == kEventTypeCount);

// Type of the event held; `event` must not be valueless.
template <class S>
constexpr EventType TypeOf(const BasicEvent<S>& event) {
  return static_cast<EventType>(event.index());
}

// Common fields of the event held; `event` must not be valueless.
template <class S>
constexpr const Header& HeaderOf(const BasicEvent<S>& event) {
  return std::visit([](const auto& e) -> const Header& { return e.header; }, event);
}

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_EVENTS_H_
