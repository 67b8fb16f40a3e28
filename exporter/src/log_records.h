// cuflight's events as OTLP logs: a stream's process_start and first device make its Resource,
// each exported event one LogRecord, and the roll-ups records of their own. Every name is listed
// in docs/fleet.md ("What a record says"); OpenTelemetry's semantic conventions name what they
// have a name for (host.name, process.pid, k8s.pod.uid, container.id, ...), everything else is
// under cuflight.*.
#ifndef CUFLIGHT_EXPORTER_LOG_RECORDS_H_
#define CUFLIGHT_EXPORTER_LOG_RECORDS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "cuflight/schema/events.h"
#include "cuflight/schema/log_layout.h"
#include "opentelemetry/proto/logs/v1/logs.pb.h"
#include "opentelemetry/proto/resource/v1/resource.pb.h"

namespace cuflight::exporter {

namespace otlp_logs = opentelemetry::proto::logs::v1;
namespace otlp_common = opentelemetry::proto::common::v1;

// What the exporter knows of a stream's process and GPUs.
struct StreamIdentity {
  std::string stream;  // the base name (docs/fleet.md: the stream of the dedup key)
  std::optional<schema::OwnedProcessStartEvent> start;
  struct Gpu {
    std::string uuid;
    std::string pci_bus_id;
    std::string name;
  };
  std::map<int32_t, Gpu> gpus;  // by CUDA ordinal, from device events
  // The ordinal of the first device event: its GPU names the Resource.
  std::optional<int32_t> first_device;

  // The UUID of `device`'s GPU, or "" when no device event named it.
  std::string_view GpuUuid(int32_t device) const;
};

// The Resource: the process (host.name, process.*, service.name), its attribution (cuflight.job,
// cuflight.rank, ..., k8s.*, container.id, cuflight.attribution.<NAME>), the first GPU
// (cuflight.gpu.uuid, cuflight.gpu.pci_bus_id) and cuflight.stream. Without a process_start
// (its segment removed by retention before it was read), the pid of the stream's name.
void FillResource(const StreamIdentity& identity, opentelemetry::proto::resource::v1::Resource* out);

// Why a launch record is sent besides every_launch: the event that made its stream's last
// launches interesting.
enum class LaunchTrigger : uint8_t { kNone, kCrash, kStall, kLost };
std::string_view LaunchTriggerName(LaunchTrigger trigger);

// One event as a LogRecord: time_unix_nano the event's ts_ns, observed_time_unix_nano
// `observed_ns`, event_name "cuflight.<type>", a severity (docs/fleet.md), the line itself as the
// body (a string), and attributes: cuflight.stream, cuflight.seq, cuflight.type and the event's
// own (cuflight.kernel.*, cuflight.gpu.uuid, ...). `kernel_name`: for a kernel_time event, the
// name of its launch when known.
void FillRecord(const schema::OwnedEvent& event, std::string_view line,
                const StreamIdentity& identity, int64_t observed_ns, std::string_view kernel_name,
                LaunchTrigger trigger, otlp_logs::LogRecord* out);

// One kernel's launches in a roll-up window of one stream.
struct RollupKey {
  std::string name;  // demangled when known, else mangled; "other" past kMaxRollupKernels
  std::string limiter;
  int32_t device = 0;
  auto operator<=>(const RollupKey&) const = default;
};
struct RollupValue {
  uint64_t first_seq = 0;  // the seq of its first launch in the window (the dedup key's seq)
  int64_t first_ts_ns = 0;
  int64_t last_ts_ns = 0;
  uint64_t launches = 0;
  uint64_t timed = 0;          // kernel_time events joined to a launch of this key
  uint64_t gpu_time_ns = 0;    // their durations, summed (saturating)
  double occupancy_sum = 0;
  double occupancy_min = 1;
  int32_t registers = 0;       // of the last launch
  uint64_t launches_recovered = 0;
};

// A roll-up record: event_name "cuflight.kernel_rollup", time the window's last launch (or
// kernel_time), attributes cuflight.kernel.name, cuflight.kernel.limiter, cuflight.device,
// cuflight.gpu.uuid, cuflight.rollup.* and cuflight.stream / cuflight.seq (first_seq).
void FillRollupRecord(const RollupKey& key, const RollupValue& value,
                      const StreamIdentity& identity, int64_t window_start_ns,
                      int64_t window_end_ns, int64_t observed_ns, otlp_logs::LogRecord* out);

}  // namespace cuflight::exporter

#endif  // CUFLIGHT_EXPORTER_LOG_RECORDS_H_
