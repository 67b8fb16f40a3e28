#include "cuflight/metrics/metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuflight/schema/events.h"
#include "cuflight/schema/occupancy_fields.h"
#include "exposition.h"
#include "join_table.h"
#include "label_table.h"

namespace cuflight::collector {

namespace {

using Counter = std::atomic<uint64_t>;

// Devices 0..63 have their own label value; any other ordinal (negative included) is "other".
// 64 is beyond any single host today (NVIDIA's largest nodes have 8 or 16 GPUs).
constexpr int kMaxDevices = 64;
constexpr int kDeviceSlots = kMaxDevices + 1;
constexpr int kOtherDevice = kMaxDevices;

// The schema's resources, then "unknown" for any other string.
constexpr int kResourceSlots = schema::kResourceCount + 1;
constexpr int kUnknownResource = schema::kResourceCount;

// The schema's event types, then "other".
constexpr int kTypeSlots = schema::kEventTypeCount + 1;
constexpr int kOtherType = schema::kEventTypeCount;

// Occupancy histogram: upper bounds 1/8, 2/8, ..., 8/8. Occupancy is active warps over the
// SM's warp slots, so eighths separate the usual steps (64 warp slots: 8 warps per eighth).
constexpr int kOccupancyBuckets = 8;
constexpr std::array<std::string_view, kOccupancyBuckets> kBucketBounds = {
    "0.125", "0.25", "0.375", "0.5", "0.625", "0.75", "0.875", "1"};

constexpr size_t kMaxRejectReasons = 32;
constexpr size_t kMaxDropReasons = 16;
// CUDA error names: cuda.h has about 100 CUresult values, of which a node sees a handful; the
// names beyond the first 32 seen are summed as "other".
constexpr size_t kMaxApiErrorNames = 32;
constexpr size_t kMaxBlackboxReasons = 16;
constexpr size_t kMaxRefusedCounts = 8;
constexpr size_t kMaxReasonBytes = 64;

// Series of the kernel-name table's reserved value "unknown" (LabelTable::kOther is "other").
constexpr uint32_t kUnknownName = 1;

constexpr int kMaxTopKernelNames = 10000;

void Add(Counter& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
// For the counts producers give (deltas of their counters, seq gaps, durations): stops at
// 2^64-1 instead of wrapping, which Prometheus would read as a counter reset.
void AddSaturating(Counter& c, uint64_t n) {
  uint64_t old = c.load(std::memory_order_relaxed);
  uint64_t sum = 0;
  do {
    sum = n > UINT64_MAX - old ? UINT64_MAX : old + n;
  } while (sum != old && !c.compare_exchange_weak(old, sum, std::memory_order_relaxed));
}
uint64_t Get(const Counter& c) { return c.load(std::memory_order_relaxed); }

int DeviceSlot(int32_t device) {
  return device >= 0 && device < kMaxDevices ? device : kOtherDevice;
}

int ResourceSlot(std::string_view name) {
  const std::optional<schema::Resource> r = schema::ResourceFromName(name);
  return r ? static_cast<int>(*r) : kUnknownResource;
}

std::string_view ResourceLabel(int slot) {
  return slot == kUnknownResource ? "unknown"
                                  : schema::ResourceName(static_cast<schema::Resource>(slot));
}

int TypeSlot(std::string_view type) {
  const std::optional<schema::EventType> t = schema::EventTypeFromName(type);
  return t ? static_cast<int>(*t) : kOtherType;
}

std::string_view TypeLabel(int slot) {
  return slot == kOtherType ? "other" : schema::EventTypeName(static_cast<schema::EventType>(slot));
}

// Index of the first bucket whose upper bound holds `occupancy` (in [0, 1]).
int BucketOf(double occupancy) {
  const int k = static_cast<int>(std::ceil(occupancy * kOccupancyBuckets));
  return std::clamp(k, 1, kOccupancyBuckets) - 1;
}

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

struct DeviceSeries {
  std::atomic<bool> seen{false};  // a launch or a kernel_time named this device
  Counter launches[kResourceSlots] = {};
  Counter occupancy_buckets[kOccupancyBuckets] = {};  // per bucket, not cumulative
  std::atomic<double> occupancy_sum{0};
  Counter gpu_ns{0};
};

// A stalled process (design point 5).
struct StalledProcess {
  std::string hostname;  // label values, sanitized
  std::string pid;
  std::string exe;
  std::string stream;                        // empty: no label
  std::vector<std::pair<int, double>> ages;  // device slot, seconds at `received`
  std::chrono::steady_clock::time_point received;
};

// The label value of a producer-given string: valid UTF-8, at most `max` bytes.
std::string LabelValue(std::string_view raw, size_t max) {
  return LabelTable::SanitizeUtf8(LabelTable::CutUtf8(raw, max));
}

struct NameSeries {
  Counter launches[kResourceSlots] = {};
  Counter occupancy_count{0};  // launches with an occupancy (not NaN)
  std::atomic<double> occupancy_sum{0};
  Counter gpu_ns{0};
};

}  // namespace

struct Metrics::State {
  State(int top_kernel_names, size_t join_capacity)
      : top_names(static_cast<size_t>(std::clamp(top_kernel_names, 0, kMaxTopKernelNames))),
        rejected_reasons({"other"}, kMaxRejectReasons, kMaxReasonBytes),
        dropped_reasons({"other"}, kMaxDropReasons, kMaxReasonBytes),
        api_error_names({"other", "unknown"}, kMaxApiErrorNames, kMaxReasonBytes, kUnknownName),
        blackbox_reasons({"other"}, kMaxBlackboxReasons, kMaxReasonBytes),
        refused_counts({"other"}, kMaxRefusedCounts, kMaxReasonBytes),
        kernel_names({"other", "unknown"}, top_names, kMaxKernelNameBytes, kUnknownName),
        rejected(std::make_unique<Counter[]>(rejected_reasons.capacity())),
        dropped(std::make_unique<Counter[]>(dropped_reasons.capacity())),
        api_errors(std::make_unique<Counter[]>(api_error_names.capacity())),
        blackbox_errors(std::make_unique<Counter[]>(blackbox_reasons.capacity())),
        counts_refused(std::make_unique<Counter[]>(refused_counts.capacity())),
        names(std::make_unique<NameSeries[]>(kernel_names.capacity())),
        join(join_capacity) {
    for (int d = 0; d < kMaxDevices; ++d) device_labels[d] = std::to_string(d);
    device_labels[kOtherDevice] = "other";
  }

  const size_t top_names;

  std::atomic<int64_t> producers_connected{0};
  Counter producer_connections{0};
  Counter received[kTypeSlots] = {};
  Counter stored[kTypeSlots] = {};
  Counter lost{0};
  Counter timing_dropped{0};
  Counter occupancy_disagreements{0};
  Counter bytes_written{0};
  Counter unstored{0};
  Counter recovered{0};
  Counter log_write_errors{0};
  std::atomic<uint64_t> log_pending_bytes{0};
  Counter log_fsync_skipped{0};
  Counter log_recovery_failures{0};

  LabelTable rejected_reasons;
  LabelTable dropped_reasons;
  LabelTable api_error_names;
  LabelTable blackbox_reasons;
  LabelTable refused_counts;
  LabelTable kernel_names;
  std::unique_ptr<Counter[]> rejected;  // by rejected_reasons series
  std::unique_ptr<Counter[]> dropped;   // by dropped_reasons series
  std::unique_ptr<Counter[]> api_errors;  // by api_error_names series
  std::unique_ptr<Counter[]> blackbox_errors;  // by blackbox_reasons series
  std::unique_ptr<Counter[]> counts_refused;   // by refused_counts series
  std::unique_ptr<NameSeries[]> names;  // by kernel_names series

  DeviceSeries devices[kDeviceSlots];
  std::string device_labels[kDeviceSlots];

  // Join state: written by the ingest thread only (see the header); the counters are read by
  // Render.
  JoinTable join;
  Counter time_unmatched{0};
  Counter join_evicted{0};
  std::atomic<uint64_t> join_pending{0};

  // Stalled processes by process id; written by Stall and ProcessGone, read by Render.
  mutable std::mutex stall_mu;
  std::map<uint64_t, StalledProcess> stalled;

  DeviceSeries& Device(int32_t device) {
    DeviceSeries& d = devices[DeviceSlot(device)];
    if (!d.seen.load(std::memory_order_relaxed)) d.seen.store(true, std::memory_order_relaxed);
    return d;
  }

  void Render(std::string* out, std::chrono::steady_clock::time_point now) const;
  void RenderStalls(ExpositionWriter& w, std::chrono::steady_clock::time_point now) const;
};

Metrics::Metrics(int top_kernel_names, size_t join_capacity)
    : state_(std::make_unique<State>(top_kernel_names, join_capacity)) {}

Metrics::~Metrics() = default;

void Metrics::ProducerConnected() {
  state_->producers_connected.fetch_add(1, std::memory_order_relaxed);
  Add(state_->producer_connections);
}

void Metrics::ProducerDisconnected() {
  state_->producers_connected.fetch_sub(1, std::memory_order_relaxed);
}

void Metrics::EventReceived(std::string_view type) { Add(state_->received[TypeSlot(type)]); }

void Metrics::EventStored(std::string_view type) { Add(state_->stored[TypeSlot(type)]); }

void Metrics::Rejected(std::string_view reason) {
  Add(state_->rejected[state_->rejected_reasons.Index(reason)]);
}

void Metrics::Lost(uint64_t n) { AddSaturating(state_->lost, n); }

void Metrics::ProducerDropped(std::string_view reason, uint64_t delta) {
  AddSaturating(state_->dropped[state_->dropped_reasons.Index(reason)], delta);
}

void Metrics::ApiError(std::string_view error_name) {
  Add(state_->api_errors[state_->api_error_names.Index(error_name)]);
}

void Metrics::ProducerTimingDropped(uint64_t delta) {
  AddSaturating(state_->timing_dropped, delta);
}
void Metrics::OccupancyDisagreements(uint64_t delta) {
  AddSaturating(state_->occupancy_disagreements, delta);
}

void Metrics::CountRefused(std::string_view counter) {
  Add(state_->counts_refused[state_->refused_counts.Index(counter)]);
}

void Metrics::BytesWritten(uint64_t n) { AddSaturating(state_->bytes_written, n); }

void Metrics::Unstored(uint64_t n) { AddSaturating(state_->unstored, n); }

void Metrics::Recovered(uint64_t n) { AddSaturating(state_->recovered, n); }

void Metrics::BlackboxError(std::string_view reason) {
  Add(state_->blackbox_errors[state_->blackbox_reasons.Index(reason)]);
}

void Metrics::SetLogTotals(const LogTotals& totals) {
  State& s = *state_;
  s.log_write_errors.store(totals.write_errors, std::memory_order_relaxed);
  s.log_pending_bytes.store(totals.pending_bytes, std::memory_order_relaxed);
  s.log_fsync_skipped.store(totals.fsync_rounds_skipped, std::memory_order_relaxed);
  s.log_recovery_failures.store(totals.recovery_failures, std::memory_order_relaxed);
}

void Metrics::Kernel(uint64_t process_id, uint64_t correlation_id, std::string_view name,
                     int32_t device, std::string_view limiting_resource, double occupancy,
                     uint64_t graph_node_id) {
  State& s = *state_;
  DeviceSeries& d = s.Device(device);
  const int resource = ResourceSlot(limiting_resource);
  const uint32_t name_series = s.kernel_names.Index(name);
  NameSeries& n = s.names[name_series];
  Add(d.launches[resource]);
  Add(n.launches[resource]);
  if (!std::isnan(occupancy)) {
    const double occ = std::clamp(occupancy, 0.0, 1.0);
    Add(d.occupancy_buckets[BucketOf(occ)]);
    d.occupancy_sum.fetch_add(occ, std::memory_order_relaxed);
    Add(n.occupancy_count);
    n.occupancy_sum.fetch_add(occ, std::memory_order_relaxed);
  }
  if (s.join.Insert(process_id, {correlation_id, graph_node_id, device}, name_series)) {
    Add(s.join_evicted);
  }
  s.join_pending.store(s.join.size(), std::memory_order_relaxed);
}

void Metrics::PrefetchJoin(uint64_t process_id, uint64_t correlation_id, int32_t device,
                           uint64_t graph_node_id) const {
  state_->join.Prefetch(process_id, {correlation_id, graph_node_id, device});
}

void Metrics::KernelTime(uint64_t process_id, uint64_t correlation_id, int32_t device,
                         uint64_t duration_ns, uint64_t graph_node_id) {
  State& s = *state_;
  AddSaturating(s.Device(device).gpu_ns, duration_ns);
  const std::optional<uint32_t> name_series =
      s.join.Take(process_id, {correlation_id, graph_node_id, device});
  if (!name_series) Add(s.time_unmatched);
  AddSaturating(s.names[name_series.value_or(kUnknownName)].gpu_ns, duration_ns);
  s.join_pending.store(s.join.size(), std::memory_order_relaxed);
}

void Metrics::ProcessGone(uint64_t process_id) {
  State& s = *state_;
  s.join.ForgetProcess(process_id);
  s.join_pending.store(s.join.size(), std::memory_order_relaxed);
  const std::lock_guard<std::mutex> lock(s.stall_mu);
  s.stalled.erase(process_id);
}

void Metrics::Stall(uint64_t process_id, std::string_view hostname, int32_t pid,
                    std::string_view exe, std::span<const StallAge> ages,
                    std::chrono::steady_clock::time_point received, std::string_view stream) {
  State& s = *state_;
  if (ages.empty()) {
    const std::lock_guard<std::mutex> lock(s.stall_mu);
    s.stalled.erase(process_id);
    return;
  }
  StalledProcess p;
  p.hostname = LabelValue(hostname, kMaxKernelNameBytes);
  p.pid = std::to_string(pid);
  const size_t slash = exe.rfind('/');
  p.exe = LabelValue(slash == std::string_view::npos ? exe : exe.substr(slash + 1),
                     kMaxKernelNameBytes);
  p.stream = LabelValue(stream, kMaxKernelNameBytes);
  for (const StallAge& a : ages) {
    const int slot = DeviceSlot(a.device);
    const double seconds = std::isfinite(a.seconds) && a.seconds > 0 ? a.seconds : 0;
    auto it = std::find_if(p.ages.begin(), p.ages.end(),
                           [slot](const auto& e) { return e.first == slot; });
    if (it == p.ages.end()) {
      p.ages.emplace_back(slot, seconds);
    } else {
      it->second = std::max(it->second, seconds);  // several ordinals as "other"
    }
  }
  p.received = received;
  const std::lock_guard<std::mutex> lock(s.stall_mu);
  s.stalled[process_id] = std::move(p);
}

std::string Metrics::Render() const { return Render(std::chrono::steady_clock::now()); }

std::string Metrics::Render(std::chrono::steady_clock::time_point now) const {
  std::string out;
  out.reserve(16384);
  state_->Render(&out, now);
  return out;
}

void Metrics::State::RenderStalls(ExpositionWriter& w,
                                  std::chrono::steady_clock::time_point now) const {
  struct Series {
    const StalledProcess* process;
    int device;
    double seconds;
  };
  std::vector<Series> series;
  size_t processes = 0;
  {
    const std::lock_guard<std::mutex> lock(stall_mu);
    processes = stalled.size();
    for (const auto& [id, p] : stalled) {
      const double since = std::chrono::duration<double>(now - p.received).count();
      for (const auto& [device, seconds] : p.ages) {
        series.push_back({&p, device, seconds + std::max(0.0, since)});
      }
    }
    // The oldest first; the pairs past kMaxStallSeries become one "other" series.
    std::sort(series.begin(), series.end(),
              [](const Series& a, const Series& b) { return a.seconds > b.seconds; });
    // Two processes whose labels are all equal (producers that report no instance id, in two
    // containers where both are pid 1 of one exe) are one series, with the larger age: a scrape
    // never holds two samples of one series. The oldest of equals comes first, so later ones go.
    const auto same_labels = [](const Series& a, const Series& b) {
      return a.device == b.device && a.process->pid == b.process->pid &&
             a.process->exe == b.process->exe && a.process->stream == b.process->stream &&
             a.process->hostname == b.process->hostname;
    };
    std::vector<Series> unique;
    unique.reserve(Metrics::kMaxStallSeries + 1);
    for (const Series& e : series) {
      if (unique.size() > Metrics::kMaxStallSeries) break;  // the rest are "other" (its age)
      if (std::none_of(unique.begin(), unique.end(),
                       [&](const Series& u) { return same_labels(u, e); })) {
        unique.push_back(e);
      }
    }
    series.swap(unique);
    w.Family("cuflight_processes_stalled", "gauge",
             "Processes whose latest stall event says stalled: kernels they launched have not "
             "finished for CUFLIGHT_STALL_MS.");
    w.Sample("cuflight_processes_stalled", {}, static_cast<uint64_t>(processes));
    w.Family("cuflight_kernel_oldest_unfinished_seconds", "gauge",
             "Age of the oldest unfinished kernel of a stalled process, by device; present only "
             "while the process is stalled.");
    for (size_t i = 0; i < series.size() && i < Metrics::kMaxStallSeries; ++i) {
      const Series& e = series[i];
      if (e.process->stream.empty()) {
        w.Sample("cuflight_kernel_oldest_unfinished_seconds",
                 {{"hostname", e.process->hostname},
                  {"pid", e.process->pid},
                  {"exe", e.process->exe},
                  {"device", device_labels[e.device]}},
                 e.seconds);
      } else {
        w.Sample("cuflight_kernel_oldest_unfinished_seconds",
                 {{"hostname", e.process->hostname},
                  {"pid", e.process->pid},
                  {"exe", e.process->exe},
                  {"stream", e.process->stream},
                  {"device", device_labels[e.device]}},
                 e.seconds);
      }
    }
    if (series.size() > Metrics::kMaxStallSeries) {
      w.Sample("cuflight_kernel_oldest_unfinished_seconds",
               {{"hostname", "other"}, {"pid", "other"}, {"exe", "other"}, {"device", "other"}},
               series[Metrics::kMaxStallSeries].seconds);
    }
  }
}

void Metrics::State::Render(std::string* out, std::chrono::steady_clock::time_point now) const {
  ExpositionWriter w(out);

  w.Family("cuflight_producers_connected", "gauge", "Producer connections open now.");
  w.Sample("cuflight_producers_connected", {}, producers_connected.load(std::memory_order_relaxed));

  w.Family("cuflight_producer_connections_total", "counter", "Producer connections accepted.");
  w.Sample("cuflight_producer_connections_total", {}, Get(producer_connections));

  w.Family("cuflight_events_received_total", "counter",
           "Event lines that passed validation, by event type.");
  for (int t = 0; t < kTypeSlots; ++t) {
    if (t == kOtherType && Get(received[t]) == 0) continue;
    w.Sample("cuflight_events_received_total", {{"type", TypeLabel(t)}}, Get(received[t]));
  }

  w.Family("cuflight_events_stored_total", "counter",
           "Event lines written to the event log, by event type.");
  for (int t = 0; t < kTypeSlots; ++t) {
    if (t == kOtherType && Get(stored[t]) == 0) continue;
    w.Sample("cuflight_events_stored_total", {{"type", TypeLabel(t)}}, Get(stored[t]));
  }

  w.Family("cuflight_events_rejected_total", "counter",
           "Lines refused by the collector, by reason.");
  for (size_t i = 0, n = rejected_reasons.size(); i < n; ++i) {
    const uint64_t v = Get(rejected[i]);
    if (i < rejected_reasons.reserved_count() && v == 0) continue;
    w.Sample("cuflight_events_rejected_total", {{"reason", rejected_reasons.label(i)}}, v);
  }

  w.Family("cuflight_events_lost_total", "counter",
           "Events the collector never received: gaps in the producers' sequence numbers.");
  w.Sample("cuflight_events_lost_total", {}, Get(lost));

  w.Family("cuflight_events_unstored_total", "counter",
           "Events the collector received but could not store (its log buffers were full, e.g. "
           "a full disk) and that their producer did not send again before its process_lost.");
  w.Sample("cuflight_events_unstored_total", {}, Get(unstored));

  w.Family("cuflight_events_recovered_total", "counter",
           "Events the collector recovered from the black box of a producer that died without "
           "sending them (stored, marked recovered).");
  w.Sample("cuflight_events_recovered_total", {}, Get(recovered));

  w.Family("cuflight_blackbox_errors_total", "counter",
           "Producers' black boxes the collector refused or could not read, by reason.");
  for (size_t i = 0, n = blackbox_reasons.size(); i < n; ++i) {
    const uint64_t v = Get(blackbox_errors[i]);
    if (i < blackbox_reasons.reserved_count() && v == 0) continue;
    w.Sample("cuflight_blackbox_errors_total", {{"reason", blackbox_reasons.label(i)}}, v);
  }

  w.Family("cuflight_counts_refused_total", "counter",
           "Producers' claims refused: a seq or a count beyond what the process could have made "
           "by then (docs/collector.md, Counts a producer cannot inflate), not added to the "
           "counter named.");
  for (size_t i = 0, n = refused_counts.size(); i < n; ++i) {
    const uint64_t v = Get(counts_refused[i]);
    if (i < refused_counts.reserved_count() && v == 0) continue;
    w.Sample("cuflight_counts_refused_total", {{"counter", refused_counts.label(i)}}, v);
  }

  w.Family("cuflight_events_dropped_total", "counter",
           "Events the producers report they dropped before sending, by reason.");
  for (size_t i = 0, n = dropped_reasons.size(); i < n; ++i) {
    const uint64_t v = Get(dropped[i]);
    if (i < dropped_reasons.reserved_count() && v == 0) continue;
    w.Sample("cuflight_events_dropped_total", {{"reason", dropped_reasons.label(i)}}, v);
  }

  w.Family("cuflight_api_errors_total", "counter",
           "Failed CUDA calls the producers reported (api_error events), by error name.");
  for (size_t i = 0, n = api_error_names.size(); i < n; ++i) {
    const uint64_t v = Get(api_errors[i]);
    if (i < api_error_names.reserved_count() && v == 0) continue;
    w.Sample("cuflight_api_errors_total", {{"error", api_error_names.label(i)}}, v);
  }

  w.Family("cuflight_kernel_timing_dropped_total", "counter",
           "Kernel timing records the producers report they lost before making kernel_time "
           "events (CUPTI had no buffer, dropped records, or records incomplete at a forced "
           "flush).");
  w.Sample("cuflight_kernel_timing_dropped_total", {}, Get(timing_dropped));

  w.Family("cuflight_occupancy_disagreements_total", "counter",
           "Kernel launches whose resident blocks per SM the CUDA driver and cuflight's "
           "calculator computed differently (the events report the driver's; their "
           "engine_max_active_blocks gives the calculator's).");
  w.Sample("cuflight_occupancy_disagreements_total", {}, Get(occupancy_disagreements));

  w.Family("cuflight_log_written_bytes_total", "counter", "Bytes written to the event log.");
  w.Sample("cuflight_log_written_bytes_total", {}, Get(bytes_written));

  w.Family("cuflight_log_write_errors_total", "counter",
           "Failed open, write, rename, fsync or compression calls on the event log (a full "
           "disk, I/O errors); the data stays buffered and is retried.");
  w.Sample("cuflight_log_write_errors_total", {}, Get(log_write_errors));

  w.Family("cuflight_log_pending_bytes", "gauge",
           "Bytes received and not yet written to the event log (the disk refuses writes).");
  w.Sample("cuflight_log_pending_bytes", {}, log_pending_bytes.load(std::memory_order_relaxed));

  w.Family("cuflight_log_fsync_skipped_total", "counter",
           "Periodic fdatasync rounds skipped because the previous round had not finished (a "
           "disk slower than --fsync-interval).");
  w.Sample("cuflight_log_fsync_skipped_total", {}, Get(log_fsync_skipped));

  w.Family("cuflight_log_recovery_failures_total", "counter",
           "Producer connections refused because the highest stored seq of their process could "
           "not be read from its log (EMFILE, EIO, a corrupt segment).");
  w.Sample("cuflight_log_recovery_failures_total", {}, Get(log_recovery_failures));

  w.Family("cuflight_kernel_launches_total", "counter",
           "Kernel launches, by device and the per-SM resource that limits their occupancy.");
  for (int d = 0; d < kDeviceSlots; ++d) {
    const DeviceSeries& dev = devices[d];
    if (!dev.seen.load(std::memory_order_relaxed)) continue;
    for (int r = 0; r < kResourceSlots; ++r) {
      const uint64_t v = Get(dev.launches[r]);
      if (r == kUnknownResource && v == 0) continue;
      w.Sample("cuflight_kernel_launches_total",
               {{"device", device_labels[d]}, {"limiting_resource", ResourceLabel(r)}}, v);
    }
  }

  w.Family("cuflight_kernel_occupancy_ratio", "histogram",
           "Theoretical occupancy of kernel launches (active warps / warp slots per SM), by "
           "device.");
  for (int d = 0; d < kDeviceSlots; ++d) {
    const DeviceSeries& dev = devices[d];
    if (!dev.seen.load(std::memory_order_relaxed)) continue;
    // One read per bucket; the cumulative counts, +Inf and _count all come from these reads,
    // so they agree within a scrape even while launches are being added.
    uint64_t cumulative = 0;
    for (int b = 0; b < kOccupancyBuckets; ++b) {
      cumulative += Get(dev.occupancy_buckets[b]);
      w.Sample("cuflight_kernel_occupancy_ratio_bucket",
               {{"device", device_labels[d]}, {"le", kBucketBounds[b]}}, cumulative);
    }
    w.Sample("cuflight_kernel_occupancy_ratio_bucket",
             {{"device", device_labels[d]}, {"le", "+Inf"}}, cumulative);
    w.Sample("cuflight_kernel_occupancy_ratio_sum", {{"device", device_labels[d]}},
             dev.occupancy_sum.load(std::memory_order_relaxed));
    w.Sample("cuflight_kernel_occupancy_ratio_count", {{"device", device_labels[d]}}, cumulative);
  }

  w.Family("cuflight_kernel_gpu_seconds_total", "counter",
           "GPU execution time of kernels (CUPTI activity), by device.");
  for (int d = 0; d < kDeviceSlots; ++d) {
    const DeviceSeries& dev = devices[d];
    if (!dev.seen.load(std::memory_order_relaxed)) continue;
    w.Sample("cuflight_kernel_gpu_seconds_total", {{"device", device_labels[d]}},
             Seconds(Get(dev.gpu_ns)));
  }

  const size_t name_count = kernel_names.size();
  const size_t reserved_names = kernel_names.reserved_count();
  w.Family("cuflight_kernel_name_launches_total", "counter",
           "Kernel launches by kernel name (the first N distinct names; later names as "
           "\"other\") and limiting resource.");
  for (size_t i = 0; i < name_count; ++i) {
    for (int r = 0; r < kResourceSlots; ++r) {
      const uint64_t v = Get(names[i].launches[r]);
      if (v == 0) continue;
      w.Sample("cuflight_kernel_name_launches_total",
               {{"kernel", kernel_names.label(i)}, {"limiting_resource", ResourceLabel(r)}}, v);
    }
  }

  w.Family("cuflight_kernel_name_occupancy_ratio", "summary",
           "Theoretical occupancy of kernel launches by kernel name: _sum / _count is the mean.");
  for (size_t i = 0; i < name_count; ++i) {
    const uint64_t count = Get(names[i].occupancy_count);
    if (count == 0) continue;
    w.Sample("cuflight_kernel_name_occupancy_ratio_sum", {{"kernel", kernel_names.label(i)}},
             names[i].occupancy_sum.load(std::memory_order_relaxed));
    w.Sample("cuflight_kernel_name_occupancy_ratio_count", {{"kernel", kernel_names.label(i)}},
             count);
  }

  w.Family("cuflight_kernel_name_gpu_seconds_total", "counter",
           "GPU execution time of kernels by kernel name (\"unknown\": no launch event joined).");
  for (size_t i = 0; i < name_count; ++i) {
    const uint64_t ns = Get(names[i].gpu_ns);
    if (i < reserved_names && ns == 0) continue;
    w.Sample("cuflight_kernel_name_gpu_seconds_total", {{"kernel", kernel_names.label(i)}},
             Seconds(ns));
  }

  w.Family("cuflight_kernel_names_tracked", "gauge",
           "Distinct kernel names with their own label value.");
  w.Sample("cuflight_kernel_names_tracked", {}, static_cast<uint64_t>(name_count - reserved_names));

  w.Family("cuflight_kernel_names_limit", "gauge",
           "Most kernel names with their own label value; later names count as \"other\".");
  w.Sample("cuflight_kernel_names_limit", {}, static_cast<uint64_t>(top_names));

  w.Family("cuflight_kernel_time_unmatched_total", "counter",
           "kernel_time events with no launch to join (lost, evicted or never sent).");
  w.Sample("cuflight_kernel_time_unmatched_total", {}, Get(time_unmatched));

  w.Family("cuflight_kernel_join_evicted_total", "counter",
           "Launches forgotten before their kernel_time arrived (join table set full).");
  w.Sample("cuflight_kernel_join_evicted_total", {}, Get(join_evicted));

  w.Family("cuflight_kernel_join_pending", "gauge", "Launches waiting for their kernel_time.");
  w.Sample("cuflight_kernel_join_pending", {}, join_pending.load(std::memory_order_relaxed));

  RenderStalls(w, now);
}

}  // namespace cuflight::collector
