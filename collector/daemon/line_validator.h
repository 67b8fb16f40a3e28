// Validation of one received line: the schema's verdict plus the few fields the collector acts on
// (identity, sequence numbers, drop counters) and the metrics need (kernel names, occupancy,
// durations). The one place the collector calls the schema's validator.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_LINE_VALIDATOR_H_
#define CUFLIGHT_COLLECTOR_DAEMON_LINE_VALIDATOR_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/metrics/metrics.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/validator.h"

namespace cuflight::collector {

struct LineFacts {
  // Set when the common fields were valid: always for kOk, and also for kUnknownType and faults
  // in type-specific fields, so that the line's seq can still be accounted for.
  std::optional<schema::Header> header;
  // Meaningful only for kOk.
  schema::EventType type = schema::EventType::kProcessStart;
  // For a rejected line: one line naming the field (may be empty when not known).
  std::string message;

  // process_start: the producer's identity.
  std::string_view hostname;
  std::string_view exe;
  int64_t start_ns = 0;
  uint64_t instance_id = 0;  // 0 when the line has none
  uint64_t pid_ns = 0;       // 0 when the line has none
  // process_start, when metrics_fields: who the process is (from its attribution: docs/metrics.md,
  // Workload labels) and its timing policy (config.timing). Views into `event`.
  Metrics::Workload workload;
  Metrics::TimingPolicy timing = Metrics::TimingPolicy::kAll;
  // device, when metrics_fields (`device` below is its ordinal). Views into `event`.
  std::string_view uuid;
  std::string_view pci_bus_id;
  std::string_view device_name;
  // kernel and kernel_time: what joins them (cuflight/schema/join_key.h).
  uint64_t correlation_id = 0;
  int32_t device = 0;
  uint64_t graph_node_id = 0;  // 0 when the line has none (not a graph node)
  uint64_t config = 0;  // launch: the kernel_config it names (its figures fill the kernel's above)
  // kernel and launch: `timing_window` is false (made outside a timing window of
  // CUFLIGHT_TIMING=sampled, schema/README.md): no kernel_time will come for it.
  bool untimed = false;
  // kernel.
  std::string_view kernel_name;  // the demangled name when known, else the mangled one
  std::string_view limiting_resource;
  double occupancy = 0;
  // kernel_time.
  uint64_t duration_ns = 0;
  // api_error.
  std::string_view error_name;
  // stats and process_end: the producer's cumulative counters.
  uint64_t emitted = 0;
  uint64_t dropped = 0;               // all drops
  uint64_t dropped_ring_full = 0;     // of which the ring was full (0 when not reported)
  uint64_t dropped_disconnected = 0;  // of which no collector was reachable (0 when not reported)
  uint64_t dropped_backpressure = 0;  // of which the collector was behind (0 when not reported)
  uint64_t timing_dropped = 0;        // kernel timing records lost (not events; 0 when absent)
  uint64_t occupancy_disagreements = 0;  // launches the driver and the engine disagreed on
  // stall: per device, the age of the oldest unfinished kernel the event lists (the first launch
  // of each stream, or the stream's waiting time when it lists none); empty when resolved.
  std::vector<Metrics::StallAge> stall_ages;

  // Storage the views above may point into (besides the line itself). Reuse one LineFacts per
  // thread: after the first lines nothing is allocated on the path of a valid line.
  schema::LineInfo info;
  schema::ValidateError error;
  schema::OwnedEvent event;  // a stall, process_start or device line's event (decoded whole)
  std::string hostname_storage;
  std::string exe_storage;
  std::array<char, 1024> name_scratch{};
  std::array<char, 32> resource_scratch{};
  std::array<char, 128> error_name_scratch{};
};

// Validates one line (with or without its '\n') with schema::Validate (the verdicts of
// schema::Decode, without allocating on the path of a kernel or kernel_time line). Returns kOk and
// fills *facts, or the reason the line is rejected with facts->header and facts->message as far
// as known. The header, the type and the process_start identity are always filled; the
// workload, timing policy, device, kernel, kernel_time, api_error, stats, process_end and stall
// fields only when `metrics_fields` (they feed the metrics only). Views in *facts are
// valid while both `line` and *facts are, until the next call. Never throws.
schema::Reason ValidateLine(std::string_view line, LineFacts* facts,
                            bool metrics_fields = true) noexcept;

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_LINE_VALIDATOR_H_
