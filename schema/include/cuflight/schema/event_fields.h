// The fields of every event type, written once: one X-macro table per type (and per nested object
// of the stall event), in the order of the schema file, which is the order the encoder writes and
// the order Decode and Validate check (the first fault of a line is the first in this order).
//
// 1. A table is CUFLIGHT_SCHEMA_<TYPE>(F, R). Each F(kind, name, member, args...) is one member:
//      kind    the JSON form and whether the member is required (kinds starting with Optional
//              may be absent); see the list below;
//      name    the JSON name, also the name of the member in the struct (events.h);
//      member  the struct member it maps to, relative to the event (`occupancy.waves`);
//      args    the kind's parameters: an IntRange below for integers, the bounds for numbers,
//              the item tag for arrays of objects.
//    Each R(name, trigger): `name` is required when `trigger` is present (JSON Schema
//    dependentRequired), checked at that point of the order.
// 2. Users expand a table with their own F and R: the validator over the slots of its own scanner,
//    filling Decode's event as it checks (validator.cc), the validator's fast path over the
//    encoder's layout (validator_fast_path.h), the encoder (encoder.cc), and the tests' reference
//    decoder over nlohmann's DOM (tests/support/reference_decoder.cc).
//    tests/schema/event_fields_test.cc checks every table against schema/v1/*.schema.json (names,
//    order, kinds, ranges, required set, enums, dependentRequired).
// 3. Adding a field: schema/README.md ("Adding a field").
//
// Kinds:
//   Int(range) OptionalInt(range)              integer in range (a number with zero fraction
//                                              counts, as in JSON Schema)
//   IntOrNull(range) OptionalIntOrNull(range)  integer in range or null (a T member reads null as
//                                              -1, an std::optional member as nullopt)
//   Number(lo, hi) OptionalNumber(lo, hi)      number in [lo, hi] (integers; hi kNoMaximum: none)
//   Bool OptionalBool                          boolean (absent: false; an std::optional<bool>
//                                              member: nullopt, and unset it is not written)
//   String OptionalString                      string (absent: "")
//   Strings OptionalStrings                    array of strings
//   Ids                                        array of uint64
//   Dim OptionalDim                            array of 3 uint32 (dim3)
//   OneResource                                one resource name (ResourceName, occupancy_fields.h)
//   ResourceSet                                array of distinct resource names
//   OptionalStringMap                          object of strings
//   OptionalOccupancySource OptionalTimingStoppedReason OptionalTimingPolicy OneLostReason
//   OneStallState
//                                              one of the enum's wire names (events.h)
//   Objects(tag)                               array of objects, each checked by the table of tag
#ifndef CUFLIGHT_SCHEMA_EVENT_FIELDS_H_
#define CUFLIGHT_SCHEMA_EVENT_FIELDS_H_

#include <cstdint>
#include <iterator>
#include <limits>
#include <string_view>

namespace cuflight::schema {

// An integer range [lo, hi]: the $defs of schema/v1/common.schema.json, and the few inline ones.
struct IntRange {
  int64_t lo;
  uint64_t hi;
};
inline constexpr IntRange kUint64{0, std::numeric_limits<uint64_t>::max()};
inline constexpr IntRange kUint32{0, std::numeric_limits<uint32_t>::max()};
inline constexpr IntRange kInt32{std::numeric_limits<int32_t>::min(),
                                 std::numeric_limits<int32_t>::max()};
inline constexpr IntRange kCount32{0, std::numeric_limits<int32_t>::max()};
inline constexpr IntRange kCount64{0, std::numeric_limits<int64_t>::max()};
inline constexpr IntRange kDeviceOrUnknown{-1, std::numeric_limits<int32_t>::max()};
inline constexpr IntRange kCarveout{-1, 100};
inline constexpr IntRange kSignal{1, 64};  // Linux signal numbers, real-time ones included
inline constexpr double kInfinity = std::numeric_limits<double>::infinity();
// A Number's hi when it has no maximum (bounds are integers: they are template arguments of the
// validator's fast path, and clang before 18 takes no double there).
inline constexpr int kNoMaximum = -1;
// A Number's hi as a double bound.
constexpr double MaximumOf(int hi) { return hi == kNoMaximum ? kInfinity : hi; }

// Item tags of Objects: which table checks each object of the array.
struct StallStreamItem {};
struct StallLaunchItem {};

// The common fields after `type` and `version` (checked by hand first: type, then version).
#define CUFLIGHT_SCHEMA_HEADER(F, R) \
  F(Int, ts_ns, ts_ns, kCount64)     \
  F(Int, pid, pid, kCount32)         \
  F(Int, seq, seq, kUint64)

#define CUFLIGHT_SCHEMA_PROCESS_START(F, R)              \
  F(String, exe, exe)                                    \
  F(Strings, argv, argv)                                 \
  F(String, hostname, hostname)                          \
  F(Int, start_ns, start_ns, kCount64)                   \
  F(String, cuflight_version, cuflight_version)          \
  F(Int, cuda_driver_version, cuda_driver_version, kCount32) \
  F(Int, cupti_version, cupti_version, kCount32)         \
  F(OptionalInt, ppid, ppid, kCount32)                   \
  F(OptionalIntOrNull, uid, uid, kUint32)                \
  F(OptionalStringMap, config, config)                   \
  F(OptionalInt, instance_id, instance_id, kUint64)      \
  F(OptionalInt, pid_ns, pid_ns, kUint64)                \
  F(OptionalStringMap, attribution, attribution)         \
  F(OptionalString, cupti_activity_api, cupti_activity_api) \
  F(OptionalStrings, truncated, truncated)

#define CUFLIGHT_SCHEMA_DEVICE(F, R)                                 \
  F(Int, device, device, kCount32)                                   \
  F(String, name, name)                                              \
  F(String, uuid, uuid)                                              \
  F(OptionalString, pci_bus_id, pci_bus_id)                          \
  F(Int, cc_major, cc_major, kCount32)                               \
  F(Int, cc_minor, cc_minor, kCount32)                               \
  F(Int, sm_count, sm_count, kCount32)                               \
  F(Int, max_threads_per_block, max_threads_per_block, kCount32)     \
  F(Int, max_threads_per_sm, max_threads_per_sm, kCount32)           \
  F(Int, max_blocks_per_sm, max_blocks_per_sm, kCount32)             \
  F(Int, regs_per_sm, regs_per_sm, kCount32)                         \
  F(Int, regs_per_block, regs_per_block, kCount32)                   \
  F(Int, smem_per_sm, smem_per_sm, kCount64)                         \
  F(Int, smem_per_block, smem_per_block, kCount64)                   \
  F(Int, smem_per_block_optin, smem_per_block_optin, kCount64)       \
  F(Int, reserved_smem_per_block, reserved_smem_per_block, kCount64) \
  F(Int, warp_size, warp_size, kCount32)                             \
  F(Int, max_cluster_size, max_cluster_size, kCount32)               \
  F(OptionalBool, recovered, recovered)

// The occupancy figures (OccupancyFields, occupancy_fields.h), written at the top level of the
// kernel event: P(member) names a member of OccupancyFields where the table is expanded (in the
// kernel event, `occupancy.member`).
#define CUFLIGHT_SCHEMA_IN_OCCUPANCY(member) occupancy.member
// In two parts around the per-grid figures, `waves` and `tail_utilization`: a kernel_config
// carries the two parts (CUFLIGHT_SCHEMA_CONFIG_OCCUPANCY), each launch the per-grid figures.
#define CUFLIGHT_SCHEMA_OCCUPANCY(F, R, P)                       \
  CUFLIGHT_SCHEMA_OCCUPANCY_PER_CONFIG(F, R, P)                  \
  F(Number, waves, P(waves), 0, kNoMaximum)                      \
  F(Number, tail_utilization, P(tail_utilization), 0, 1)         \
  CUFLIGHT_SCHEMA_OCCUPANCY_WHAT_IF(F, R, P)
#define CUFLIGHT_SCHEMA_CONFIG_OCCUPANCY(F, R, P) \
  CUFLIGHT_SCHEMA_OCCUPANCY_PER_CONFIG(F, R, P)   \
  CUFLIGHT_SCHEMA_OCCUPANCY_WHAT_IF(F, R, P)
#define CUFLIGHT_SCHEMA_OCCUPANCY_PER_CONFIG(F, R, P)                     \
  F(Int, max_active_blocks, P(max_active_blocks), kCount32)               \
  F(Int, active_warps, P(active_warps), kCount32)                         \
  F(Int, max_warps, P(max_warps), kCount32)                               \
  F(Number, occupancy, P(occupancy), 0, 1)                                \
  F(Number, reg_occupancy, P(reg_occupancy), 0, 1)                        \
  F(Number, smem_occupancy, P(smem_occupancy), 0, 1)                      \
  F(Number, warp_occupancy, P(warp_occupancy), 0, 1)                      \
  F(Number, block_occupancy, P(block_occupancy), 0, 1)                    \
  F(Number, barrier_occupancy, P(barrier_occupancy), 0, 1)                \
  F(OptionalNumber, cluster_occupancy, P(cluster_occupancy), 0, 1)        \
  R(cluster, cluster_occupancy)                                           \
  F(OneResource, limiting_resource, P(limiting_resource))                 \
  F(ResourceSet, limiting_resources, P(limiting_resources))               \
  F(Int, allocated_regs_per_block, P(allocated_regs_per_block), kCount32) \
  F(Int, allocated_smem_per_block, P(allocated_smem_per_block), kCount64)
#define CUFLIGHT_SCHEMA_OCCUPANCY_WHAT_IF(F, R, P)                        \
  F(IntOrNull, regs_for_next_block, P(regs_for_next_block), kCount32)     \
  F(IntOrNull, smem_for_next_block, P(smem_for_next_block), kCount64)     \
  F(Int, best_block_size, P(best_block_size), kCount32)

#define CUFLIGHT_SCHEMA_KERNEL(F, R)                                                        \
  F(Int, tid, tid, kCount32)                                                                \
  F(Int, device, device, kCount32)                                                          \
  F(Int, context, context, kUint64)                                                         \
  F(Int, stream, stream, kUint64)                                                           \
  F(Int, correlation_id, correlation_id, kUint64)                                           \
  F(String, api, api)                                                                       \
  F(String, name, name)                                                                     \
  F(String, demangled, demangled)                                                           \
  F(Dim, grid, grid)                                                                        \
  F(Dim, block, block)                                                                      \
  F(OptionalDim, cluster, cluster)                                                          \
  F(Int, num_regs, num_regs, kCount32)                                                      \
  F(Int, static_shared_bytes, static_shared_bytes, kCount64)                                \
  F(Int, dyn_shared_bytes, dyn_shared_bytes, kCount64)                                      \
  F(Int, local_bytes, local_bytes, kCount64)                                                \
  F(Int, const_bytes, const_bytes, kCount64)                                                \
  F(Int, max_threads_per_block, max_threads_per_block, kCount32)                            \
  F(Int, carveout, carveout, kCarveout)                                                     \
  F(OptionalBool, cooperative, cooperative)                                                 \
  F(OptionalInt, graph_id, graph_id, kUint64)                                               \
  F(OptionalInt, graph_node_id, graph_node_id, kUint64)                                     \
  R(graph_node_id, graph_id)                                                                \
  R(graph_id, graph_node_id)                                                                \
  CUFLIGHT_SCHEMA_OCCUPANCY(F, R, CUFLIGHT_SCHEMA_IN_OCCUPANCY)                              \
  F(OptionalOccupancySource, occupancy_source, occupancy_source)                            \
  F(OptionalInt, engine_max_active_blocks, engine_max_active_blocks, kCount32)              \
  F(OptionalInt, sm_count, sm_count, kCount32)                                              \
  F(OptionalBool, recovered, recovered)                                                     \
  F(OptionalBool, timing_window, timing_window)

// A kernel event's launch-invariant members (interned configurations): see events.h.
#define CUFLIGHT_SCHEMA_KERNEL_CONFIG(F, R)                                                 \
  F(Int, config, config, kUint64)                                                           \
  F(Int, device, device, kCount32)                                                          \
  F(Int, context, context, kUint64)                                                         \
  F(Int, stream, stream, kUint64)                                                           \
  F(String, api, api)                                                                       \
  F(String, name, name)                                                                     \
  F(String, demangled, demangled)                                                           \
  F(Dim, block, block)                                                                      \
  F(OptionalDim, cluster, cluster)                                                          \
  F(Int, num_regs, num_regs, kCount32)                                                      \
  F(Int, static_shared_bytes, static_shared_bytes, kCount64)                                \
  F(Int, dyn_shared_bytes, dyn_shared_bytes, kCount64)                                      \
  F(Int, local_bytes, local_bytes, kCount64)                                                \
  F(Int, const_bytes, const_bytes, kCount64)                                                \
  F(Int, max_threads_per_block, max_threads_per_block, kCount32)                            \
  F(Int, carveout, carveout, kCarveout)                                                     \
  F(OptionalBool, cooperative, cooperative)                                                 \
  CUFLIGHT_SCHEMA_CONFIG_OCCUPANCY(F, R, CUFLIGHT_SCHEMA_IN_OCCUPANCY)                       \
  F(OptionalOccupancySource, occupancy_source, occupancy_source)                            \
  F(OptionalInt, engine_max_active_blocks, engine_max_active_blocks, kCount32)              \
  F(OptionalInt, sm_count, sm_count, kCount32)                                              \
  F(OptionalInt, wave_size, wave_size, kUint64)                                             \
  F(OptionalBool, wave_of_clusters, wave_of_clusters)

// A kernel launch that names its kernel_config: the kernel event's per-launch members.
#define CUFLIGHT_SCHEMA_LAUNCH(F, R)                          \
  F(Int, tid, tid, kCount32)                                  \
  F(Int, correlation_id, correlation_id, kUint64)             \
  F(Int, config, config, kUint64)                             \
  F(Dim, grid, grid)                                          \
  F(OptionalInt, graph_id, graph_id, kUint64)                 \
  F(OptionalInt, graph_node_id, graph_node_id, kUint64)       \
  R(graph_node_id, graph_id)                                  \
  R(graph_id, graph_node_id)                                  \
  F(OptionalNumber, waves, waves, 0, kNoMaximum)              \
  F(OptionalNumber, tail_utilization, tail_utilization, 0, 1) \
  R(tail_utilization, waves)                                  \
  R(waves, tail_utilization)                                  \
  F(OptionalBool, recovered, recovered)                       \
  F(OptionalBool, timing_window, timing_window)

#define CUFLIGHT_SCHEMA_KERNEL_TIME(F, R)               \
  F(Int, correlation_id, correlation_id, kUint64)       \
  F(Int, device, device, kCount32)                      \
  F(Int, context, context, kUint64)                     \
  F(Int, stream, stream, kUint64)                       \
  F(Int, start_ns, start_ns, kUint64)                   \
  F(Int, end_ns, end_ns, kUint64)                       \
  F(Int, duration_ns, duration_ns, kUint64)             \
  F(OptionalInt, graph_id, graph_id, kUint64)           \
  F(OptionalInt, graph_node_id, graph_node_id, kUint64) \
  R(graph_node_id, graph_id)                            \
  R(graph_id, graph_node_id)

#define CUFLIGHT_SCHEMA_API_ERROR(F, R)         \
  F(String, api, api)                           \
  F(Int, code, code, kInt32)                    \
  F(String, error_name, error_name)             \
  F(String, message, message)                   \
  F(Int, device, device, kDeviceOrUnknown)      \
  F(Int, context, context, kUint64)             \
  F(Int, stream, stream, kUint64)               \
  F(Ids, last_correlation_ids, last_correlation_ids)

// The counters stats, process_end and process_crash share after `dropped` (optional: added in
// minor versions).
#define CUFLIGHT_SCHEMA_LAUNCH_COUNTERS(F, R)                                   \
  F(OptionalInt, launches, launches, kUint64)                                   \
  F(OptionalInt, filtered, filtered, kUint64)                                   \
  F(OptionalInt, dropped_ring_full, dropped_ring_full, kUint64)                 \
  F(OptionalInt, dropped_disconnected, dropped_disconnected, kUint64)           \
  F(OptionalInt, dropped_backpressure, dropped_backpressure, kUint64)           \
  F(OptionalInt, timing_dropped, timing_dropped, kUint64)                       \
  F(OptionalInt, timing_dropped_stall_flush, timing_dropped_stall_flush, kUint64) \
  F(OptionalInt, occupancy_disagreements, occupancy_disagreements, kUint64)     \
  F(OptionalInt, api_errors_routine, api_errors_routine, kUint64)               \
  F(OptionalInt, api_errors_suppressed, api_errors_suppressed, kUint64)         \
  F(OptionalInt, timing_stopped, timing_stopped, kUint64)                       \
  F(OptionalTimingStoppedReason, timing_stopped_reason, timing_stopped_reason)  \
  R(timing_stopped, timing_stopped_reason)                                      \
  R(timing_stopped_reason, timing_stopped)                                      \
  F(OptionalTimingPolicy, timing_policy, timing_policy)                         \
  F(OptionalInt, timing_windows, timing_windows, kUint64)                       \
  F(OptionalInt, timing_window_ns, timing_window_ns, kUint64)                   \
  F(OptionalInt, launches_in_window, launches_in_window, kUint64)                \
  F(OptionalInt, yields, yields, kUint64)                                       \
  F(OptionalInt, yielded_ns, yielded_ns, kUint64)                               \
  F(OptionalInt, launches_yielded, launches_yielded, kUint64)                   \
  F(OptionalBool, yielded, yielded)

#define CUFLIGHT_SCHEMA_STATS(F, R)                     \
  F(Int, emitted, emitted, kUint64)                     \
  F(Int, dropped, dropped, kUint64)                     \
  F(Int, ring_capacity, ring_capacity, kUint64)         \
  F(Int, interval_ns, interval_ns, kCount64)            \
  CUFLIGHT_SCHEMA_LAUNCH_COUNTERS(F, R)                 \
  F(OptionalInt, ring_high_water, ring_high_water, kUint64) \
  F(OptionalInt, cpu_ns, cpu_ns, kUint64)

#define CUFLIGHT_SCHEMA_PROCESS_END(F, R)     \
  F(IntOrNull, exit_code, exit_code, kInt32)  \
  F(Int, emitted, emitted, kUint64)           \
  F(Int, dropped, dropped, kUint64)           \
  CUFLIGHT_SCHEMA_LAUNCH_COUNTERS(F, R)

#define CUFLIGHT_SCHEMA_PROCESS_LOST(F, R)               \
  F(IntOrNull, last_seq, last_seq, kUint64)              \
  F(OneLostReason, reason, reason)                       \
  F(Int, events_stored, events_stored, kUint64)          \
  F(Int, events_lost, events_lost, kUint64)              \
  F(OptionalInt, events_recovered, events_recovered, kUint64)

#define CUFLIGHT_SCHEMA_PROCESS_CRASH(F, R) \
  F(Int, signal, signal, kSignal)           \
  F(String, signal_name, signal_name)       \
  F(Int, code, code, kInt32)                \
  F(Int, addr, addr, kUint64)               \
  F(Int, tid, tid, kInt32)                  \
  F(Bool, app_handler, app_handler)         \
  F(Int, emitted, emitted, kUint64)         \
  F(Int, dropped, dropped, kUint64)         \
  CUFLIGHT_SCHEMA_LAUNCH_COUNTERS(F, R)

#define CUFLIGHT_SCHEMA_STALL_LAUNCH(F, R)        \
  F(Int, correlation_id, correlation_id, kUint64) \
  F(String, name, name)                           \
  F(String, demangled, demangled)                 \
  F(Dim, grid, grid)                              \
  F(Dim, block, block)                            \
  F(Number, occupancy, occupancy, 0, 1)           \
  F(Int, age_ms, age_ms, kCount64)                \
  F(OptionalBool, graph_launch, graph_launch)     \
  F(OptionalInt, graph_exec_id, graph_exec_id, kUint64) \
  F(OptionalInt, graph_id, graph_id, kUint64)     \
  F(OptionalInt, graph_node_id, graph_node_id, kUint64) \
  R(graph_node_id, graph_id)                      \
  R(graph_id, graph_node_id)

#define CUFLIGHT_SCHEMA_STALL_STREAM(F, R)  \
  F(Int, device, device, kCount32)          \
  F(Int, context, context, kUint64)         \
  F(Int, stream, stream, kUint64)           \
  F(Int, waiting_ms, waiting_ms, kCount64)  \
  F(Int, unfinished, unfinished, kCount64)  \
  F(Objects, launches, launches, StallLaunchItem{}) \
  F(OptionalString, evidence, evidence)     \
  F(OptionalString, launches_from, launches_from) \
  F(OptionalString, sync_api, sync_api)     \
  F(OptionalInt, sync_tid, sync_tid, kCount32) \
  F(OptionalInt, sync_waited_ms, sync_waited_ms, kCount64)

#define CUFLIGHT_SCHEMA_STALL(F, R)                     \
  F(OneStallState, state, state)                        \
  F(Int, stall_ms, stall_ms, kCount64)                  \
  F(Int, stalled_ms, stalled_ms, kCount64)              \
  F(Int, completed, completed, kUint64)                 \
  F(Int, streams_stalled, streams_stalled, kCount32)    \
  F(Objects, streams, streams, StallStreamItem{})               \
  F(OptionalInt, flush_incomplete, flush_incomplete, kUint64)   \
  F(OptionalInt, flush_incomplete_streams, flush_incomplete_streams, kCount32)

// The members the collector acts on (collector/daemon/line_validator.h): Validate records where
// each is and, for an integer, its value, in its one pass (LineInfo::fact_*). X(name).
#define CUFLIGHT_SCHEMA_FACTS(X)                                                              \
  X(correlation_id) X(device) X(graph_node_id) X(name) X(demangled) X(limiting_resource)     \
  X(occupancy) X(duration_ns) X(error_name) X(emitted) X(dropped) X(dropped_ring_full)       \
  X(dropped_disconnected) X(dropped_backpressure) X(timing_dropped)                          \
  X(occupancy_disagreements) X(hostname) X(exe) X(start_ns) X(instance_id) X(pid_ns)     \
  X(config) X(timing_window)

#define CUFLIGHT_SCHEMA_FACT_ENUM(name) name,
enum class Fact : uint8_t { CUFLIGHT_SCHEMA_FACTS(CUFLIGHT_SCHEMA_FACT_ENUM) };
#undef CUFLIGHT_SCHEMA_FACT_ENUM
#define CUFLIGHT_SCHEMA_FACT_NAME(name) #name,
inline constexpr std::string_view kFactNames[] = {CUFLIGHT_SCHEMA_FACTS(CUFLIGHT_SCHEMA_FACT_NAME)};
#undef CUFLIGHT_SCHEMA_FACT_NAME
inline constexpr int kFactCount = static_cast<int>(std::size(kFactNames));
static_assert(kFactCount <= 32, "LineInfo's fact bit sets have 32 bits");

// The Fact named `name`, or -1.
constexpr int FactIndex(std::string_view name) {
  for (int f = 0; f < kFactCount; ++f) {
    if (kFactNames[f] == name) return f;
  }
  return -1;
}

// Every event type's table, with its EventType enumerator and its Owned struct: X(type, table).
#define CUFLIGHT_SCHEMA_EVENT_TABLES(X)             \
  X(kProcessStart, CUFLIGHT_SCHEMA_PROCESS_START)   \
  X(kDevice, CUFLIGHT_SCHEMA_DEVICE)                \
  X(kKernel, CUFLIGHT_SCHEMA_KERNEL)                \
  X(kKernelTime, CUFLIGHT_SCHEMA_KERNEL_TIME)       \
  X(kApiError, CUFLIGHT_SCHEMA_API_ERROR)           \
  X(kStats, CUFLIGHT_SCHEMA_STATS)                  \
  X(kProcessEnd, CUFLIGHT_SCHEMA_PROCESS_END)       \
  X(kProcessLost, CUFLIGHT_SCHEMA_PROCESS_LOST)     \
  X(kProcessCrash, CUFLIGHT_SCHEMA_PROCESS_CRASH)   \
  X(kStall, CUFLIGHT_SCHEMA_STALL)                  \
  X(kKernelConfig, CUFLIGHT_SCHEMA_KERNEL_CONFIG)   \
  X(kLaunch, CUFLIGHT_SCHEMA_LAUNCH)

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_EVENT_FIELDS_H_
