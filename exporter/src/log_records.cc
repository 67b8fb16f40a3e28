#include "log_records.h"

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>

namespace cuflight::exporter {
namespace {

using google::protobuf::RepeatedPtrField;
using Attributes = RepeatedPtrField<otlp_common::KeyValue>;

// Scope of every record: the instrumentation that made it.
constexpr std::string_view kScopeName = "cuflight";

void AddString(Attributes* a, std::string_view key, std::string_view value) {
  otlp_common::KeyValue* kv = a->Add();
  kv->set_key(std::string(key));
  kv->mutable_value()->set_string_value(std::string(value));
}

void AddInt(Attributes* a, std::string_view key, int64_t value) {
  otlp_common::KeyValue* kv = a->Add();
  kv->set_key(std::string(key));
  kv->mutable_value()->set_int_value(value);
}

// OTLP's integers are int64; counters past 2^63-1 (none in practice) are clamped.
void AddUnsigned(Attributes* a, std::string_view key, uint64_t value) {
  AddInt(a, key, static_cast<int64_t>(
                     std::min<uint64_t>(value, std::numeric_limits<int64_t>::max())));
}

void AddDouble(Attributes* a, std::string_view key, double value) {
  otlp_common::KeyValue* kv = a->Add();
  kv->set_key(std::string(key));
  kv->mutable_value()->set_double_value(value);
}

void AddBool(Attributes* a, std::string_view key, bool value) {
  otlp_common::KeyValue* kv = a->Add();
  kv->set_key(std::string(key));
  kv->mutable_value()->set_bool_value(value);
}

std::string DimText(const schema::Dim3& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

// The numbers of the attribution that are numbers (docs/fleet.md: decimal, no leading zeros,
// [0, 2^31-1]) as ints, so that a sink can compare and sort them.
bool IsSmallNumber(std::string_view s) {
  if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void AddDevice(Attributes* a, const StreamIdentity& identity, int32_t device) {
  AddInt(a, "cuflight.device", device);
  const std::string_view uuid = identity.GpuUuid(device);
  if (!uuid.empty()) AddString(a, "cuflight.gpu.uuid", uuid);
}

void AddKernelName(Attributes* a, std::string_view name, std::string_view demangled) {
  AddString(a, "cuflight.kernel.name", demangled.empty() ? name : demangled);
  if (!name.empty()) AddString(a, "cuflight.kernel.mangled", name);
}

// SeverityNumber by what the event means for the application (logs.proto, SeverityNumber;
// the data model's ranges: INFO 9-12, WARN 13-16, ERROR 17-20, FATAL 21-24).
otlp_logs::SeverityNumber SeverityOf(const schema::OwnedEvent& event) {
  switch (schema::TypeOf(event)) {
    case schema::EventType::kProcessCrash:
      return otlp_logs::SEVERITY_NUMBER_FATAL;
    case schema::EventType::kApiError:
      return otlp_logs::SEVERITY_NUMBER_ERROR;
    case schema::EventType::kProcessLost:
      return otlp_logs::SEVERITY_NUMBER_WARN;
    case schema::EventType::kStall:
      return std::get<schema::OwnedStallEvent>(event).state == schema::StallState::kStalled
                 ? otlp_logs::SEVERITY_NUMBER_WARN
                 : otlp_logs::SEVERITY_NUMBER_INFO;
    default:
      return otlp_logs::SEVERITY_NUMBER_INFO;
  }
}

std::string_view SeverityText(otlp_logs::SeverityNumber s) {
  if (s >= otlp_logs::SEVERITY_NUMBER_FATAL) return "FATAL";
  if (s >= otlp_logs::SEVERITY_NUMBER_ERROR) return "ERROR";
  if (s >= otlp_logs::SEVERITY_NUMBER_WARN) return "WARN";
  return "INFO";
}

template <class E>
void AddEndCounters(Attributes* a, const E& e) {
  AddUnsigned(a, "cuflight.events.emitted", e.emitted);
  AddUnsigned(a, "cuflight.events.dropped", e.dropped);
  AddUnsigned(a, "cuflight.launches", e.launches);
}

void AddEventAttributes(const schema::OwnedEvent& event, const StreamIdentity& identity,
                        std::string_view kernel_name, Attributes* a) {
  std::visit(
      [&](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, schema::OwnedProcessStartEvent>) {
          AddString(a, "cuflight.version", e.cuflight_version);
          if (e.cuda_driver_version != 0) {
            AddInt(a, "cuflight.cuda.driver_version", e.cuda_driver_version);
          }
        } else if constexpr (std::is_same_v<T, schema::OwnedDeviceEvent>) {
          AddInt(a, "cuflight.device", e.device);
          if (!e.uuid.empty()) AddString(a, "cuflight.gpu.uuid", e.uuid);
          if (!e.pci_bus_id.empty()) AddString(a, "cuflight.gpu.pci_bus_id", e.pci_bus_id);
          AddString(a, "cuflight.gpu.name", e.name);
          AddString(a, "cuflight.gpu.compute_capability",
                    std::to_string(e.cc_major) + "." + std::to_string(e.cc_minor));
          if (e.recovered) AddBool(a, "cuflight.recovered", true);
        } else if constexpr (std::is_same_v<T, schema::OwnedKernelEvent>) {
          AddKernelName(a, e.name, e.demangled);
          AddDevice(a, identity, e.device);
          AddString(a, "cuflight.kernel.limiter",
                    schema::ResourceName(e.occupancy.limiting_resource));
          AddDouble(a, "cuflight.kernel.occupancy", e.occupancy.occupancy);
          AddInt(a, "cuflight.kernel.registers", e.num_regs);
          AddString(a, "cuflight.kernel.grid", DimText(e.grid));
          AddString(a, "cuflight.kernel.block", DimText(e.block));
          AddUnsigned(a, "cuflight.kernel.correlation_id", e.correlation_id);
          AddUnsigned(a, "cuflight.kernel.stream", e.stream);
          if (e.recovered) AddBool(a, "cuflight.recovered", true);
        } else if constexpr (std::is_same_v<T, schema::OwnedKernelTimeEvent>) {
          if (!kernel_name.empty()) AddString(a, "cuflight.kernel.name", kernel_name);
          AddDevice(a, identity, e.device);
          AddUnsigned(a, "cuflight.kernel.correlation_id", e.correlation_id);
          AddUnsigned(a, "cuflight.kernel.duration_ns", e.duration_ns);
        } else if constexpr (std::is_same_v<T, schema::OwnedApiErrorEvent>) {
          AddString(a, "cuflight.api", e.api);
          AddString(a, "cuflight.error.name", e.error_name);
          AddInt(a, "cuflight.error.code", e.code);
          AddString(a, "cuflight.error.message", e.message);
          if (e.device >= 0) AddDevice(a, identity, e.device);
        } else if constexpr (std::is_same_v<T, schema::OwnedStatsEvent>) {
          AddUnsigned(a, "cuflight.events.emitted", e.emitted);
          AddUnsigned(a, "cuflight.events.dropped", e.dropped);
        } else if constexpr (std::is_same_v<T, schema::OwnedProcessEndEvent>) {
          if (e.exit_code) AddInt(a, "cuflight.exit_code", *e.exit_code);
          AddEndCounters(a, e);
        } else if constexpr (std::is_same_v<T, schema::OwnedProcessLostEvent>) {
          AddString(a, "cuflight.lost.reason", schema::LostReasonName(e.reason));
          AddUnsigned(a, "cuflight.lost.events_lost", e.events_lost);
          AddUnsigned(a, "cuflight.lost.events_stored", e.events_stored);
        } else if constexpr (std::is_same_v<T, schema::OwnedProcessCrashEvent>) {
          AddString(a, "cuflight.signal.name", e.signal_name);
          AddInt(a, "cuflight.signal.number", e.signal);
          AddEndCounters(a, e);
        } else if constexpr (std::is_same_v<T, schema::OwnedStallEvent>) {
          AddString(a, "cuflight.stall.state", schema::StallStateName(e.state));
          AddInt(a, "cuflight.stall.stalled_ms", e.stalled_ms);
          AddInt(a, "cuflight.stall.streams", e.streams_stalled);
          if (!e.streams.empty() && !e.streams[0].launches.empty()) {
            const auto& waited = e.streams[0].launches[0];
            AddKernelName(a, waited.name, waited.demangled);
            AddDevice(a, identity, e.streams[0].device);
          }
        }
      },
      event);
}

void SetBody(std::string_view line, otlp_logs::LogRecord* out) {
  out->mutable_body()->set_string_value(std::string(line));
}

}  // namespace

std::string_view StreamIdentity::GpuUuid(int32_t device) const {
  const auto it = gpus.find(device);
  return it == gpus.end() ? std::string_view() : std::string_view(it->second.uuid);
}

std::string_view LaunchTriggerName(LaunchTrigger trigger) {
  switch (trigger) {
    case LaunchTrigger::kCrash:
      return "process_crash";
    case LaunchTrigger::kStall:
      return "stall";
    case LaunchTrigger::kLost:
      return "process_lost";
    case LaunchTrigger::kNone:
      break;
  }
  return "";
}

void FillResource(const StreamIdentity& identity,
                  opentelemetry::proto::resource::v1::Resource* out) {
  Attributes* a = out->mutable_attributes();
  AddString(a, "cuflight.stream", identity.stream);
  if (identity.start) {
    const schema::OwnedProcessStartEvent& s = *identity.start;
    const std::string_view exe_name = schema::ExeBaseName(s.exe);
    AddString(a, "service.name", exe_name.empty() ? std::string_view("cuflight") : exe_name);
    AddString(a, "host.name", s.hostname);
    AddInt(a, "process.pid", s.header.pid);
    if (s.ppid != 0) AddInt(a, "process.parent_pid", s.ppid);
    AddString(a, "process.executable.name", exe_name);
    AddString(a, "process.executable.path", s.exe);
    if (!s.argv.empty()) {
      otlp_common::KeyValue* kv = a->Add();
      kv->set_key("process.command_args");
      otlp_common::ArrayValue* array = kv->mutable_value()->mutable_array_value();
      for (const std::string& arg : s.argv) array->add_values()->set_string_value(arg);
    }
    if (s.uid >= 0) AddInt(a, "process.user.id", s.uid);
    if (s.start_ns > 0) AddInt(a, "cuflight.process.start_ns", s.start_ns);
    for (const auto& [name, value] : s.attribution) {
      if (name == "job") {
        AddString(a, "cuflight.job", value);
      } else if (name == "rank" || name == "local_rank" || name == "world_size") {
        const std::string key = "cuflight." + name;
        if (IsSmallNumber(value)) {
          AddInt(a, key, std::stoll(value));
        } else {
          AddString(a, key, value);
        }
      } else if (name == "pod_uid") {
        AddString(a, "k8s.pod.uid", value);
      } else if (name == "pod_name") {
        AddString(a, "k8s.pod.name", value);
      } else if (name == "pod_namespace") {
        AddString(a, "k8s.namespace.name", value);
      } else if (name == "container_id") {
        AddString(a, "container.id", value);
      } else {
        AddString(a, "cuflight.attribution." + name, value);
      }
    }
  } else {
    schema::StreamNameParts parts;
    if (schema::ParseStreamBaseName(identity.stream, &parts)) {
      AddInt(a, "process.pid", parts.pid);
    }
    AddString(a, "service.name", "cuflight");
  }
  if (identity.first_device) {
    const auto it = identity.gpus.find(*identity.first_device);
    if (it != identity.gpus.end()) {
      if (!it->second.uuid.empty()) AddString(a, "cuflight.gpu.uuid", it->second.uuid);
      if (!it->second.pci_bus_id.empty()) {
        AddString(a, "cuflight.gpu.pci_bus_id", it->second.pci_bus_id);
      }
      AddString(a, "cuflight.gpu.name", it->second.name);
    }
  }
}

void FillRecord(const schema::OwnedEvent& event, std::string_view line,
                const StreamIdentity& identity, int64_t observed_ns, std::string_view kernel_name,
                LaunchTrigger trigger, otlp_logs::LogRecord* out) {
  const schema::Header& h = schema::HeaderOf(event);
  const std::string_view type = schema::EventTypeName(schema::TypeOf(event));
  out->set_time_unix_nano(static_cast<uint64_t>(std::max<int64_t>(h.ts_ns, 0)));
  out->set_observed_time_unix_nano(static_cast<uint64_t>(std::max<int64_t>(observed_ns, 0)));
  const otlp_logs::SeverityNumber severity = SeverityOf(event);
  out->set_severity_number(severity);
  out->set_severity_text(std::string(SeverityText(severity)));
  out->set_event_name("cuflight." + std::string(type));
  SetBody(line, out);
  Attributes* a = out->mutable_attributes();
  AddString(a, "cuflight.stream", identity.stream);
  AddUnsigned(a, "cuflight.seq", h.seq);
  AddString(a, "cuflight.type", type);
  if (trigger != LaunchTrigger::kNone) {
    AddString(a, "cuflight.last_launch.trigger", LaunchTriggerName(trigger));
  }
  AddEventAttributes(event, identity, kernel_name, a);
}

void FillRollupRecord(const RollupKey& key, const RollupValue& value,
                      const StreamIdentity& identity, int64_t window_start_ns,
                      int64_t window_end_ns, int64_t observed_ns, otlp_logs::LogRecord* out) {
  out->set_time_unix_nano(static_cast<uint64_t>(std::max<int64_t>(value.last_ts_ns, 0)));
  out->set_observed_time_unix_nano(static_cast<uint64_t>(std::max<int64_t>(observed_ns, 0)));
  out->set_severity_number(otlp_logs::SEVERITY_NUMBER_INFO);
  out->set_severity_text("INFO");
  out->set_event_name("cuflight.kernel_rollup");
  Attributes* a = out->mutable_attributes();
  AddString(a, "cuflight.stream", identity.stream);
  AddUnsigned(a, "cuflight.seq", value.first_seq);
  AddString(a, "cuflight.type", "kernel_rollup");
  AddString(a, "cuflight.kernel.name", key.name);
  AddString(a, "cuflight.kernel.limiter", key.limiter);
  AddDevice(a, identity, key.device);
  AddUnsigned(a, "cuflight.rollup.launches", value.launches);
  AddUnsigned(a, "cuflight.rollup.timed_launches", value.timed);
  AddUnsigned(a, "cuflight.rollup.gpu_time_ns", value.gpu_time_ns);
  if (value.launches > 0) {
    AddDouble(a, "cuflight.rollup.occupancy_mean",
              value.occupancy_sum / static_cast<double>(value.launches));
    AddDouble(a, "cuflight.rollup.occupancy_min", value.occupancy_min);
    AddInt(a, "cuflight.kernel.registers", value.registers);
  }
  if (value.launches_recovered > 0) {
    AddUnsigned(a, "cuflight.rollup.launches_recovered", value.launches_recovered);
  }
  AddInt(a, "cuflight.rollup.window_start_ns", window_start_ns);
  AddInt(a, "cuflight.rollup.window_end_ns", window_end_ns);
  // A body for sinks that show only it (Loki's line): one line a person reads.
  out->mutable_body()->set_string_value(
      key.name + ": " + std::to_string(value.launches) + " launches, " +
      std::to_string(value.gpu_time_ns) + " ns GPU time, limited by " + key.limiter);
}

}  // namespace cuflight::exporter
