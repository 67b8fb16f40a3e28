// Collector events -> a Chrome trace-event JSON document (the "JSON trace format" the Perfetto UI
// and chrome://tracing open).
//
// Layout:
//  1. One trace process per GPU, named "GPU <ordinal>: <device name>" (process_name metadata from
//     the device events), and in it one thread per (recorded process, stream), named
//     "stream 0x<handle> (pid <pid>)" ("default stream" for handle 0). GPUs are told apart by
//     uuid, or by ordinal and name when a device event has no uuid; they get trace pids from
//     kGpuPidBase up, streams trace tids from kStreamTidBase up, in order of first appearance.
//  2. A kernel with a kernel_time (joined by pid and schema::JoinKey: correlation_id, graph node
//     and device, so each kernel node of a graph launch, and each device of a multi-device
//     cooperative launch, is its own event) is a complete event ("ph":"X") on its stream from
//     start_ns for duration_ns; its args carry the launch and the occupancy fields. A kernel
//     without one (timing off, or its kernel_time lost) is an instant event ("ph":"i", thread
//     scope) on its stream at its host timestamp, args "timed": false. A kernel_time whose kernel
//     is not in the logs is a complete event named "kernel (corr N)" ("kernel (corr N, node M)"
//     for a graph node).
//  3. Host side: one trace process per recorded process (its real pid, named "<exe> (pid N)"),
//     one thread per launching thread (its real tid), and an instant event per launch.
//  4. Timestamps are microseconds (the format's unit) relative to the earliest timestamp in the
//     trace, floored to a whole microsecond, so they keep nanosecond precision as doubles;
//     otherData.time_base_ns holds that base (ns since the Unix epoch). Host timestamps (ts_ns)
//     and GPU timestamps (kernel_time) are placed on one axis as they are: CUPTI's timestamps
//     follow the host's realtime clock.
#ifndef CUFLIGHT_COLLECTOR_RUN_PERFETTO_TRACE_H_
#define CUFLIGHT_COLLECTOR_RUN_PERFETTO_TRACE_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuflight/schema/events.h"
#include "cuflight/schema/join_key.h"

namespace cuflight::run {

inline constexpr int64_t kGpuPidBase = int64_t{1} << 30;
inline constexpr int64_t kStreamTidBase = int64_t{1} << 30;

struct PerfettoCounts {
  uint64_t kernels = 0;         // kernel events
  uint64_t timed = 0;           // kernels joined to a kernel_time (complete events)
  uint64_t untimed = 0;         // kernels without one (instant events)
  uint64_t orphan_times = 0;    // kernel_time events without their kernel
};

class PerfettoTraceBuilder {
 public:
  // Takes one event; any order of events and of files.
  void Add(const schema::OwnedEvent& event);

  // The trace: {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}, the
  // events sorted by (ts, pid, tid), metadata first.
  nlohmann::json Build() const;

  PerfettoCounts counts() const;

 private:
  using PidKey = std::pair<int32_t, schema::JoinKey>;
  struct Device {
    std::string name;
    std::string uuid;
  };

  std::map<int32_t, std::string> process_names_;         // pid -> exe basename
  std::map<std::pair<int32_t, int32_t>, Device> devices_;  // (pid, ordinal) -> device
  std::map<PidKey, schema::OwnedKernelEvent> kernels_;
  std::map<PidKey, schema::OwnedKernelTimeEvent> times_;
  std::vector<schema::OwnedKernelEvent> uncorrelated_;  // kernels with correlation_id 0
};

}  // namespace cuflight::run

#endif  // CUFLIGHT_COLLECTOR_RUN_PERFETTO_TRACE_H_
