#include "line_validator.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <exception>
#include <variant>

namespace cuflight::collector {
namespace {

using schema::Fact;

// A string fact: a view into the line, or unescaped into `scratch` (empty when it does not fit).
std::string_view TextOf(const schema::LineInfo& info, Fact f, char* scratch, size_t cap) {
  std::string_view text;
  return info.Text(f, scratch, cap, &text) ? text : std::string_view();
}

// A number fact (occupancy): its text converted; 0 when absent.
double DoubleOf(std::string_view raw) {
  double value = 0;
  if (raw.empty()) return 0;
  std::from_chars(raw.data(), raw.data() + raw.size(), value);
  return value;
}

// A string fact in full, into `storage` (a long or escaped exe path is never cut).
std::string_view FullTextOf(const schema::LineInfo& info, Fact f, std::string* storage) {
  storage->resize(info.Raw(f).size());  // the unescaped text is never longer than the raw one
  std::string_view text;
  if (!info.Text(f, storage->data(), storage->size(), &text)) text = {};
  if (text.data() != storage->data()) storage->assign(text);
  storage->resize(text.size());
  return *storage;
}

// A stall event (rare: at most one a second per process) is read whole, from the check's pass.
void ReadStall(const schema::OwnedEvent& event, LineFacts* facts) {
  facts->stall_ages.clear();
  const auto* stall = std::get_if<schema::OwnedStallEvent>(&event);
  if (stall == nullptr || stall->state != schema::StallState::kStalled) return;
  for (const schema::OwnedStallStream& s : stall->streams) {
    const int64_t ms = s.launches.empty() ? s.waiting_ms : s.launches.front().age_ms;
    const double seconds = static_cast<double>(ms) / 1000.0;
    auto it = std::find_if(facts->stall_ages.begin(), facts->stall_ages.end(),
                           [&s](const Metrics::StallAge& a) { return a.device == s.device; });
    if (it == facts->stall_ages.end()) {
      facts->stall_ages.push_back({s.device, seconds});
    } else {
      it->seconds = std::max(it->seconds, seconds);
    }
  }
}

// The value of `key` in a decoded string map, or "".
std::string_view Find(const std::vector<std::pair<std::string, std::string>>& map,
                      std::string_view key) {
  for (const auto& [k, v] : map) {
    if (k == key) return v;
  }
  return {};
}

// The workload labels and timing policy of a process_start (docs/metrics.md, Workload labels):
// the attribution's derived fields (schema/v1/process_start.schema.json), the pod by name when
// the downward API gave it, else by UID (from the cgroup); the container by the allow-listed
// CONTAINER_NAME when the pod spec sets it.
void ReadProcessStart(const schema::OwnedEvent& event, LineFacts* facts) {
  facts->workload = {};
  facts->timing = Metrics::TimingPolicy::kAll;
  const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&event);
  if (start == nullptr) return;
  const auto& a = start->attribution;
  facts->workload.hpc_job = Find(a, "job");
  facts->workload.namespace_ = Find(a, "pod_namespace");
  facts->workload.pod = Find(a, "pod_name");
  if (facts->workload.pod.empty()) facts->workload.pod = Find(a, "pod_uid");
  facts->workload.container = Find(a, "CONTAINER_NAME");
  facts->timing = Metrics::TimingPolicyFromConfig(Find(start->config, "timing"));
}

void ReadDevice(const schema::OwnedEvent& event, LineFacts* facts) {
  facts->uuid = facts->pci_bus_id = facts->device_name = {};
  const auto* device = std::get_if<schema::OwnedDeviceEvent>(&event);
  if (device == nullptr) return;
  facts->device = device->device;
  facts->uuid = device->uuid;
  facts->pci_bus_id = device->pci_bus_id;
  facts->device_name = device->name;
}

}  // namespace

schema::Reason ValidateLine(std::string_view line, LineFacts* facts, bool metrics_fields) noexcept {
  schema::LineInfo& info = facts->info;
  // The events the metrics read whole (rare ones: one process_start per connection, one device
  // event per GPU, at most a stall a second) come out of the same check.
  // kernel_config lines always (rare: one per configuration): the collector keeps them to check
  // and store each launch that names one.
  const uint32_t decode = (metrics_fields ? schema::TypeBit(schema::EventType::kStall) |
                                                schema::TypeBit(schema::EventType::kProcessStart) |
                                                schema::TypeBit(schema::EventType::kDevice)
                                          : 0) |
                          schema::TypeBit(schema::EventType::kKernelConfig);
  const schema::Reason reason = schema::Validate(line, &info, &facts->error, decode, &facts->event);
  if (info.header_valid) {
    facts->header = info.header;
  } else {
    facts->header.reset();
  }
  if (reason != schema::Reason::kOk) {
    try {
      facts->message.assign(facts->error.message());
    } catch (const std::exception&) {
      facts->message.clear();
    }
    return reason;
  }
  facts->type = info.type;
  try {
    if (info.type == schema::EventType::kProcessStart) {
      facts->hostname = FullTextOf(info, Fact::hostname, &facts->hostname_storage);
      facts->exe = FullTextOf(info, Fact::exe, &facts->exe_storage);
      facts->start_ns = static_cast<int64_t>(info.Uint(Fact::start_ns));
      facts->instance_id = info.Uint(Fact::instance_id);
      facts->pid_ns = info.Uint(Fact::pid_ns);
      if (metrics_fields) ReadProcessStart(facts->event, facts);
      return schema::Reason::kOk;
    }
  } catch (const std::exception&) {
    return schema::Reason::kInternalError;
  }
  if (info.type == schema::EventType::kLaunch) {
    // The rest (name, device, occupancy) is its configuration's: the collector fills it.
    facts->config = info.Uint(Fact::config);
    facts->correlation_id = info.Uint(Fact::correlation_id);
    facts->graph_node_id = info.Uint(Fact::graph_node_id);
    facts->untimed = info.Raw(Fact::timing_window) == "false";
    return schema::Reason::kOk;
  }
  if (!metrics_fields) return schema::Reason::kOk;
  switch (info.type) {
    case schema::EventType::kKernel: {
      facts->correlation_id = info.Uint(Fact::correlation_id);
      facts->device = static_cast<int32_t>(info.Uint(Fact::device));
      char* scratch = facts->name_scratch.data();
      const size_t cap = facts->name_scratch.size();
      std::string_view name = TextOf(info, Fact::demangled, scratch, cap);
      if (name.empty()) name = TextOf(info, Fact::name, scratch, cap);
      facts->kernel_name = name;
      facts->limiting_resource = TextOf(info, Fact::limiting_resource,
                                        facts->resource_scratch.data(),
                                        facts->resource_scratch.size());
      facts->occupancy = DoubleOf(info.Raw(Fact::occupancy));
      facts->graph_node_id = info.Uint(Fact::graph_node_id);
      facts->untimed = info.Raw(Fact::timing_window) == "false";
      break;
    }
    case schema::EventType::kKernelTime:
      facts->correlation_id = info.Uint(Fact::correlation_id);
      facts->device = static_cast<int32_t>(info.Uint(Fact::device));
      facts->duration_ns = info.Uint(Fact::duration_ns);
      facts->graph_node_id = info.Uint(Fact::graph_node_id);
      break;
    case schema::EventType::kApiError:
      facts->error_name = TextOf(info, Fact::error_name, facts->error_name_scratch.data(),
                                 facts->error_name_scratch.size());
      break;
    case schema::EventType::kStats:
    case schema::EventType::kProcessEnd:
      facts->emitted = info.Uint(Fact::emitted);
      facts->dropped = info.Uint(Fact::dropped);
      facts->dropped_ring_full = info.Uint(Fact::dropped_ring_full);
      facts->dropped_disconnected = info.Uint(Fact::dropped_disconnected);
      facts->timing_dropped = info.Uint(Fact::timing_dropped);
      facts->dropped_backpressure = info.Uint(Fact::dropped_backpressure);
      facts->occupancy_disagreements = info.Uint(Fact::occupancy_disagreements);
      break;
    case schema::EventType::kDevice:
      ReadDevice(facts->event, facts);
      break;
    case schema::EventType::kStall:
      try {
        ReadStall(facts->event, facts);
      } catch (const std::exception&) {
        return schema::Reason::kInternalError;
      }
      break;
    default:
      break;
  }
  return schema::Reason::kOk;
}

}  // namespace cuflight::collector
