#include "cuflight/metrics/metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuflight/schema/events.h"
#include "cuflight/schema/occupancy_fields.h"
#include "cuflight/schema/sticky_errors.h"
#include "exposition.h"
#include "join_table.h"
#include "label_table.h"

namespace cuflight::collector {

namespace {

using Counter = std::atomic<uint64_t>;

// Ordinals 0..63 of a process map to GPUs (design point 8); any other ordinal is a GPU unknown.
// 64 is beyond any single host today (NVIDIA's largest nodes have 8 or 16 GPUs, 56 MIG
// instances at 7 per GPU).
constexpr int kMaxDevices = 64;
// GPU series: LabelTable::kOther ("other": UUIDs past Metrics::kMaxGpus), kUnknownGpu (no device
// event for the ordinal, or an empty UUID), then one per UUID.
constexpr uint32_t kUnknownGpu = 1;
constexpr size_t kMaxUuidBytes = 64;  // "MIG-" and 36 characters is 40
constexpr size_t kMaxPciBusIdBytes = 32;  // "00000000:19:00.0" is 16
constexpr size_t kMaxModelBytes = 128;

// Workload series: index `workloads` is the overflow block (every label "other").
constexpr uint32_t kNoWorkload = UINT32_MAX;
// API errors by workload: the sticky errors by name, then every other error.
constexpr int kStickyCount = static_cast<int>(std::size(schema::kStickyErrorNames));
constexpr int kApiErrorSlots = kStickyCount + 1;
constexpr int kNonSticky = kStickyCount;

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
constexpr size_t kMaxConnectionReasons = 16;
constexpr size_t kMaxRefusedCounts = 8;
constexpr size_t kMaxReasonBytes = 64;

// Series of the kernel-name table's reserved value "unknown" (LabelTable::kOther is "other").
constexpr uint32_t kUnknownName = 1;

constexpr int kMaxTopKernelNames = 10000;

void Add(Counter& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
// For the series only the join-table thread writes (design points 6 and 11: the launch and
// timing counts of GPUs, workloads and kernel names, the join's counters): a relaxed load and
// store, which Render's loads still see whole, without a locked read-modify-write (about ten
// of them per launch, and a compare-and-swap loop for each occupancy sum).
void AddOwned(Counter& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
// `x` added `n` times, one addition after another: the double that `n` additions of `x` one
// launch at a time leave (floating-point addition is not associative, so n * x could differ in
// the last bits).
void AddOwnedTimes(std::atomic<double>& d, double x, uint64_t n) {
  double sum = d.load(std::memory_order_relaxed);
  for (uint64_t i = 0; i < n; ++i) sum += x;
  d.store(sum, std::memory_order_relaxed);
}
void AddSaturatingOwned(Counter& c, uint64_t n) {
  const uint64_t old = c.load(std::memory_order_relaxed);
  c.store(n > UINT64_MAX - old ? UINT64_MAX : old + n, std::memory_order_relaxed);
}
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

int ResourceSlot(schema::Resource r) {
  const auto slot = static_cast<int>(r);
  return slot < schema::kResourceCount ? slot : kUnknownResource;
}

int ResourceSlot(std::string_view name) {
  const std::optional<schema::Resource> r = schema::ResourceFromName(name);
  return r ? ResourceSlot(*r) : kUnknownResource;
}

std::string_view ResourceLabel(int slot) {
  return slot == kUnknownResource ? "unknown"
                                  : schema::ResourceName(static_cast<schema::Resource>(slot));
}

int TypeSlot(schema::EventType type) {
  const auto slot = static_cast<int>(type);
  return slot < schema::kEventTypeCount ? slot : kOtherType;
}

int TypeSlot(std::string_view type) {
  const std::optional<schema::EventType> t = schema::EventTypeFromName(type);
  return t ? TypeSlot(*t) : kOtherType;
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

// The launches, occupancy and timing of a GPU or of a workload. Written by the join-table thread
// only (AddOwned).
struct KernelSeries {
  Counter launches[kResourceSlots] = {};
  Counter occupancy_buckets[kOccupancyBuckets] = {};  // per bucket, not cumulative
  std::atomic<double> occupancy_sum{0};
  Counter gpu_ns{0};  // measured: the sum of kernel_time durations
  Counter timed{0};   // the kernel_time events gpu_ns sums (timed launches)

  // `n` launches of one kernel (Metrics::Launches).
  void Launch(int resource, double occupancy, uint64_t n) {
    AddOwned(launches[resource], n);
    if (!std::isnan(occupancy)) {
      const double occ = std::clamp(occupancy, 0.0, 1.0);
      AddOwned(occupancy_buckets[BucketOf(occ)], n);
      AddOwnedTimes(occupancy_sum, occ, n);
    }
  }
  void Timed(uint64_t duration_ns) {
    AddSaturatingOwned(gpu_ns, duration_ns);
    AddOwned(timed);
  }
  void Reset() {
    for (Counter& c : launches) c.store(0, std::memory_order_relaxed);
    for (Counter& c : occupancy_buckets) c.store(0, std::memory_order_relaxed);
    occupancy_sum.store(0, std::memory_order_relaxed);
    gpu_ns.store(0, std::memory_order_relaxed);
    timed.store(0, std::memory_order_relaxed);
  }
};

struct GpuSeries {
  std::atomic<bool> seen{false};  // a launch or a kernel_time was on this GPU
  KernelSeries kernels;
  // Set once, by the first device event naming the UUID, before `described` (release).
  std::atomic<bool> described{false};
  std::string pci_bus_id;
  std::string model;
};

// The processes of one workload (design point 9). Counters are atomics; the rest is guarded by
// State::workload_mu.
struct WorkloadSeries {
  std::string hpc_job, namespace_, pod, container;  // label values
  std::string key;                                  // State::workload_slots' key
  bool in_use = false;
  int processes = 0;  // registered processes not gone
  std::chrono::steady_clock::time_point idle_since;
  Counter started{0};
  Counter crashes{0};
  Counter lost{0};
  Counter api_errors[kApiErrorSlots] = {};
  KernelSeries kernels;

  void Reset() {
    started.store(0, std::memory_order_relaxed);
    crashes.store(0, std::memory_order_relaxed);
    lost.store(0, std::memory_order_relaxed);
    for (Counter& c : api_errors) c.store(0, std::memory_order_relaxed);
    kernels.Reset();
  }
};

// What the join-table thread knows of a registered process (design point 11).
struct ProcessEntry {
  bool registered = false;  // Process() was called
  uint32_t workload = kNoWorkload;
  Metrics::TimingPolicy timing = Metrics::TimingPolicy::kAll;
  std::array<uint8_t, kMaxDevices> gpu;  // ordinal -> GPU series (< 66)
  ProcessEntry() { gpu.fill(static_cast<uint8_t>(kUnknownGpu)); }
};

// A stalled process (design point 5).
struct StalledProcess {
  std::string hostname;  // label values, sanitized
  std::string pid;
  std::string exe;
  std::string stream;  // empty: no label
  std::string hpc_job, namespace_, pod, container;
  std::vector<std::pair<uint32_t, double>> ages;  // GPU series, seconds at `received`
  std::chrono::steady_clock::time_point received;
};

// The label value of a producer-given string: valid UTF-8, at most `max` bytes.
std::string LabelValue(std::string_view raw, size_t max) {
  return LabelTable::SanitizeUtf8(LabelTable::CutUtf8(raw, max));
}

// Written by the join-table thread only (AddOwned).
struct NameSeries {
  Counter launches[kResourceSlots] = {};
  Counter occupancy_count{0};  // launches with an occupancy (not NaN)
  std::atomic<double> occupancy_sum{0};
  Counter gpu_ns{0};
  Counter timed{0};  // kernel_time events joined to this name
};

// Labels: a fixed array filled in order, given to the writer as a span.
class Labels {
 public:
  Labels& Add(std::string_view name, std::string_view value) {
    labels_[size_++] = {name, value};
    return *this;
  }
  operator std::span<const Label>() const { return {labels_.data(), size_}; }

 private:
  std::array<Label, 12> labels_{};
  size_t size_ = 0;
};

// The occupancy histogram of `k` under `labels` (then le). One read per bucket: the cumulative
// counts, +Inf and _count all come from these reads, so they agree within a scrape even while
// launches are being added.
void RenderHistogram(ExpositionWriter& w, std::string_view name, const KernelSeries& k,
                     const Labels& labels) {
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (int b = 0; b < kOccupancyBuckets; ++b) {
    cumulative += Get(k.occupancy_buckets[b]);
    Labels l = labels;
    l.Add("le", kBucketBounds[b]);
    w.Sample(bucket, l, cumulative);
  }
  Labels inf = labels;
  inf.Add("le", "+Inf");
  w.Sample(bucket, inf, cumulative);
  w.Sample(std::string(name) + "_sum", labels, k.occupancy_sum.load(std::memory_order_relaxed));
  w.Sample(std::string(name) + "_count", labels, cumulative);
}

}  // namespace

struct Metrics::State {
  State(int top_kernel_names, size_t join_capacity, size_t workload_count,
        std::chrono::seconds ttl)
      : top_names(static_cast<size_t>(std::clamp(top_kernel_names, 0, kMaxTopKernelNames))),
        workload_limit(workload_count),
        workload_ttl(ttl),
        rejected_reasons({"other"}, kMaxRejectReasons, kMaxReasonBytes),
        dropped_reasons({"other"}, kMaxDropReasons, kMaxReasonBytes),
        api_error_names({"other", "unknown"}, kMaxApiErrorNames, kMaxReasonBytes, kUnknownName),
        blackbox_reasons({"other"}, kMaxBlackboxReasons, kMaxReasonBytes),
        refused_counts({"other"}, kMaxRefusedCounts, kMaxReasonBytes),
        refused_connections({"other"}, kMaxConnectionReasons, kMaxReasonBytes),
        closed_connections({"other"}, kMaxConnectionReasons, kMaxReasonBytes),
        kernel_names({"other", "unknown"}, top_names, kMaxKernelNameBytes, kUnknownName),
        gpu_uuids({"other", "unknown"}, Metrics::kMaxGpus, kMaxUuidBytes, kUnknownGpu),
        rejected(std::make_unique<Counter[]>(rejected_reasons.capacity())),
        dropped(std::make_unique<Counter[]>(dropped_reasons.capacity())),
        api_errors(std::make_unique<Counter[]>(api_error_names.capacity())),
        blackbox_errors(std::make_unique<Counter[]>(blackbox_reasons.capacity())),
        counts_refused(std::make_unique<Counter[]>(refused_counts.capacity())),
        connections_refused(std::make_unique<Counter[]>(refused_connections.capacity())),
        connections_closed(std::make_unique<Counter[]>(closed_connections.capacity())),
        names(std::make_unique<NameSeries[]>(kernel_names.capacity())),
        gpus(std::make_unique<GpuSeries[]>(gpu_uuids.capacity())),
        workloads(std::make_unique<WorkloadSeries[]>(workload_count + 1)),
        join(join_capacity) {
    WorkloadSeries& overflow = workloads[workload_limit];
    overflow.hpc_job = overflow.namespace_ = overflow.pod = overflow.container = "other";
    overflow.key = WorkloadKey("other", "other", "other", "other");
  }

  const size_t top_names;
  const size_t workload_limit;
  const std::chrono::steady_clock::duration workload_ttl;

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
  LabelTable refused_connections;
  LabelTable closed_connections;
  LabelTable kernel_names;
  LabelTable gpu_uuids;
  std::unique_ptr<Counter[]> rejected;  // by rejected_reasons series
  std::unique_ptr<Counter[]> dropped;   // by dropped_reasons series
  std::unique_ptr<Counter[]> api_errors;  // by api_error_names series
  std::unique_ptr<Counter[]> blackbox_errors;  // by blackbox_reasons series
  std::unique_ptr<Counter[]> counts_refused;   // by refused_counts series
  std::unique_ptr<Counter[]> connections_refused;  // by refused_connections series
  std::unique_ptr<Counter[]> connections_closed;   // by closed_connections series
  std::unique_ptr<NameSeries[]> names;  // by kernel_names series
  std::unique_ptr<GpuSeries[]> gpus;    // by gpu_uuids series
  std::mutex gpu_mu;                    // serialises the writes of pci_bus_id and model
  Counter launches_by_timing[Metrics::kTimingPolicies] = {};

  // Workloads (design point 9): `workload_limit` blocks, then the overflow block.
  std::unique_ptr<WorkloadSeries[]> workloads;
  mutable std::mutex workload_mu;  // the blocks' labels, keys, process counts; workload_slots
  std::unordered_map<std::string, uint32_t> workload_slots;

  // Registered processes (design point 11): the join-table thread's only.
  std::unordered_map<uint64_t, ProcessEntry> processes;
  uint64_t cached_id = Metrics::kNoProcess;
  ProcessEntry* cached = nullptr;

  // Join state: written by the ingest thread only (see the header); the counters are read by
  // Render.
  JoinTable join;
  Counter time_unmatched{0};
  Counter join_evicted{0};
  std::atomic<uint64_t> join_pending{0};

  // Stalled processes by process id; written by Stall and ProcessGone, read by Render.
  mutable std::mutex stall_mu;
  std::map<uint64_t, StalledProcess> stalled;

  static std::string WorkloadKey(std::string_view job, std::string_view ns, std::string_view pod,
                                 std::string_view container) {
    std::string key;
    key.reserve(job.size() + ns.size() + pod.size() + container.size() + 3);
    key.append(job).push_back('\0');
    key.append(ns).push_back('\0');
    key.append(pod).push_back('\0');
    key.append(container);
    return key;
  }

  ProcessEntry* FindProcess(uint64_t process_id) {
    if (process_id == Metrics::kNoProcess) return nullptr;
    if (process_id == cached_id) return cached;
    auto it = processes.find(process_id);
    if (it == processes.end()) return nullptr;
    cached_id = process_id;
    cached = &it->second;
    return cached;
  }

  // The GPU series of ordinal `device` of `p` (null: a process never registered).
  static uint32_t GpuOf(const ProcessEntry* p, int32_t device) {
    if (p == nullptr || device < 0 || device >= kMaxDevices) return kUnknownGpu;
    return p->gpu[static_cast<size_t>(device)];
  }

  GpuSeries& Gpu(uint32_t series) {
    GpuSeries& g = gpus[series];
    if (!g.seen.load(std::memory_order_relaxed)) g.seen.store(true, std::memory_order_relaxed);
    return g;
  }

  WorkloadSeries* WorkloadOf(const ProcessEntry* p) {
    return p == nullptr || p->workload == kNoWorkload ? nullptr : &workloads[p->workload];
  }

  // Whether block `w` is shown at `now`: it has processes, or its last one went less than the
  // TTL ago. workload_mu held.
  bool Visible(const WorkloadSeries& w, std::chrono::steady_clock::time_point now) const {
    return w.in_use && (w.processes > 0 || now - w.idle_since < workload_ttl);
  }

  // The block of a workload, for one more process: its own, a free or expired one, else the
  // overflow block.
  uint32_t AcquireWorkload(const Metrics::Workload& raw, std::chrono::steady_clock::time_point now);

  void Render(std::string* out, std::chrono::steady_clock::time_point now) const;
  void RenderGpus(ExpositionWriter& w) const;
  void RenderWorkloads(ExpositionWriter& w, std::chrono::steady_clock::time_point now) const;
  void RenderStalls(ExpositionWriter& w, std::chrono::steady_clock::time_point now) const;
  // Appends the UUID, pci_bus_id and modelName labels of GPU series `series`.
  void GpuLabels(uint32_t series, Labels* labels) const {
    const GpuSeries& g = gpus[series];
    const bool described = g.described.load(std::memory_order_acquire);
    labels->Add("UUID", gpu_uuids.label(series))
        .Add("pci_bus_id", described ? std::string_view(g.pci_bus_id) : std::string_view())
        .Add("modelName", described ? std::string_view(g.model) : std::string_view());
  }

};

uint32_t Metrics::State::AcquireWorkload(const Metrics::Workload& raw,
                                         std::chrono::steady_clock::time_point now) {
  std::string job = LabelValue(raw.hpc_job, kMaxWorkloadLabelBytes);
  std::string ns = LabelValue(raw.namespace_, kMaxWorkloadLabelBytes);
  std::string pod = LabelValue(raw.pod, kMaxWorkloadLabelBytes);
  std::string container = LabelValue(raw.container, kMaxWorkloadLabelBytes);
  std::string key = WorkloadKey(job, ns, pod, container);
  const std::lock_guard<std::mutex> lock(workload_mu);
  uint32_t slot = static_cast<uint32_t>(workload_limit);  // the overflow block
  if (key != workloads[workload_limit].key) {
    if (auto it = workload_slots.find(key); it != workload_slots.end()) {
      slot = it->second;
    } else {
      // A slot never used, else the one whose last process went longest ago, if past the TTL.
      uint32_t expired = kNoWorkload;
      for (uint32_t i = 0; i < workload_limit; ++i) {
        const WorkloadSeries& w = workloads[i];
        if (!w.in_use) {
          expired = i;
          break;
        }
        if (!Visible(w, now) &&
            (expired == kNoWorkload || w.idle_since < workloads[expired].idle_since)) {
          expired = i;
        }
      }
      if (expired != kNoWorkload) {
        WorkloadSeries& w = workloads[expired];
        if (w.in_use) workload_slots.erase(w.key);
        w.Reset();
        w.hpc_job = std::move(job);
        w.namespace_ = std::move(ns);
        w.pod = std::move(pod);
        w.container = std::move(container);
        w.key = key;
        w.in_use = true;
        w.processes = 0;
        workload_slots.emplace(std::move(key), expired);
        slot = expired;
      }
    }
  }
  WorkloadSeries& w = workloads[slot];
  w.in_use = true;
  ++w.processes;
  return slot;
}

Metrics::Metrics(int top_kernel_names, size_t join_capacity, size_t workloads,
                 std::chrono::seconds workload_ttl)
    : state_(std::make_unique<State>(top_kernel_names, join_capacity, workloads, workload_ttl)) {}

Metrics::~Metrics() = default;

void Metrics::ProducerConnected() {
  state_->producers_connected.fetch_add(1, std::memory_order_relaxed);
  Add(state_->producer_connections);
}

void Metrics::ProducerDisconnected() {
  state_->producers_connected.fetch_sub(1, std::memory_order_relaxed);
}

void Metrics::EventReceived(std::string_view type) { Add(state_->received[TypeSlot(type)]); }

void Metrics::EventReceived(schema::EventType type, uint64_t n) {
  Add(state_->received[TypeSlot(type)], n);
}

void Metrics::EventStored(std::string_view type) { Add(state_->stored[TypeSlot(type)]); }

void Metrics::EventStored(schema::EventType type, uint64_t n) {
  Add(state_->stored[TypeSlot(type)], n);
}

void Metrics::Rejected(std::string_view reason) {
  Add(state_->rejected[state_->rejected_reasons.Index(reason)]);
}

void Metrics::ConnectionRefused(std::string_view reason) {
  Add(state_->connections_refused[state_->refused_connections.Index(reason)]);
}

void Metrics::ConnectionClosed(std::string_view reason) {
  Add(state_->connections_closed[state_->closed_connections.Index(reason)]);
}

void Metrics::Lost(uint64_t n) { AddSaturating(state_->lost, n); }

void Metrics::ProducerDropped(std::string_view reason, uint64_t delta) {
  AddSaturating(state_->dropped[state_->dropped_reasons.Index(reason)], delta);
}

void Metrics::ApiError(std::string_view error_name, uint64_t process_id) {
  State& s = *state_;
  Add(s.api_errors[s.api_error_names.Index(error_name)]);
  if (process_id == kNoProcess) return;
  if (WorkloadSeries* w = s.WorkloadOf(s.FindProcess(process_id))) {
    const int sticky = schema::StickyErrorIndex(error_name);
    Add(w->api_errors[sticky < 0 ? kNonSticky : sticky]);
  }
}

Metrics::TimingPolicy Metrics::TimingPolicyFromConfig(std::string_view value) {
  if (value == "sampled") return TimingPolicy::kSampled;
  if (value == "off" || value == "false" || value == "0") return TimingPolicy::kOff;
  return TimingPolicy::kAll;
}

std::string_view Metrics::TimingPolicyName(TimingPolicy policy) {
  switch (policy) {
    case TimingPolicy::kSampled:
      return "sampled";
    case TimingPolicy::kOff:
      return "off";
    default:
      return "all";
  }
}

std::string_view Metrics::Version() { return CUFLIGHT_VERSION; }

void Metrics::Process(uint64_t process_id, const Workload& workload, TimingPolicy timing) {
  if (process_id == kNoProcess) return;
  State& s = *state_;
  ProcessEntry& p = s.processes[process_id];
  if (p.registered) return;
  p.registered = true;
  p.timing = timing;
  p.workload = s.AcquireWorkload(workload, std::chrono::steady_clock::now());
  Add(s.workloads[p.workload].started);
}

void Metrics::Device(uint64_t process_id, int32_t device, std::string_view uuid,
                     std::string_view pci_bus_id, std::string_view model) {
  if (process_id == kNoProcess) return;
  State& s = *state_;
  const uint32_t series = s.gpu_uuids.Index(uuid);
  GpuSeries& g = s.gpus[series];
  if (series > kUnknownGpu && !g.described.load(std::memory_order_acquire)) {
    const std::lock_guard<std::mutex> lock(s.gpu_mu);
    if (!g.described.load(std::memory_order_relaxed)) {
      g.pci_bus_id = LabelValue(pci_bus_id, kMaxPciBusIdBytes);
      g.model = LabelValue(model, kMaxModelBytes);
      g.described.store(true, std::memory_order_release);
    }
  }
  if (device < 0 || device >= kMaxDevices) return;
  auto [it, inserted] = s.processes.try_emplace(process_id);
  it->second.gpu[static_cast<size_t>(device)] = static_cast<uint8_t>(series);
}

void Metrics::ProcessCrashed(uint64_t process_id) {
  State& s = *state_;
  if (WorkloadSeries* w = s.WorkloadOf(s.FindProcess(process_id))) Add(w->crashes);
}

void Metrics::ProcessLost(uint64_t process_id) {
  State& s = *state_;
  if (WorkloadSeries* w = s.WorkloadOf(s.FindProcess(process_id))) Add(w->lost);
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
                     uint64_t graph_node_id, bool remember) {
  const KernelLabels labels{state_->kernel_names.Index(name),
                            static_cast<uint8_t>(ResourceSlot(limiting_resource))};
  Kernel(process_id, correlation_id, labels, device, occupancy, graph_node_id, remember);
}

Metrics::KernelLabels Metrics::LabelsOf(std::string_view name,
                                        schema::Resource limiting_resource) {
  return {state_->kernel_names.Index(name), static_cast<uint8_t>(ResourceSlot(limiting_resource))};
}

void Metrics::Kernel(uint64_t process_id, uint64_t correlation_id, KernelLabels labels,
                     int32_t device, double occupancy, uint64_t graph_node_id, bool remember) {
  Launches(process_id, labels, device, occupancy, 1);
  if (remember) RememberLaunch(process_id, correlation_id, labels.name_series, device, graph_node_id);
}

void Metrics::Launches(uint64_t process_id, KernelLabels labels, int32_t device,
                       double occupancy, uint64_t n) {
  if (n == 0) return;
  State& s = *state_;
  const ProcessEntry* p = s.FindProcess(process_id);
  const int resource = labels.resource;
  s.Gpu(State::GpuOf(p, device)).kernels.Launch(resource, occupancy, n);
  if (WorkloadSeries* w = s.WorkloadOf(p)) w->kernels.Launch(resource, occupancy, n);
  const TimingPolicy timing = p != nullptr ? p->timing : TimingPolicy::kAll;
  AddOwned(s.launches_by_timing[static_cast<int>(timing)], n);
  NameSeries& name = s.names[labels.name_series];
  AddOwned(name.launches[resource], n);
  if (!std::isnan(occupancy)) {
    AddOwned(name.occupancy_count, n);
    AddOwnedTimes(name.occupancy_sum, std::clamp(occupancy, 0.0, 1.0), n);
  }
}

bool Metrics::RemembersLaunches(uint64_t process_id) const {
  const ProcessEntry* p = state_->FindProcess(process_id);
  return p == nullptr || p->timing != TimingPolicy::kOff;
}

void Metrics::RememberLaunch(uint64_t process_id, uint64_t correlation_id, uint32_t name_series,
                             int32_t device, uint64_t graph_node_id) {
  State& s = *state_;
  // No kernel_time comes for a process with timing off (CUFLIGHT_TIMING=off: no activity at all,
  // schema/env/README.md): remembering its launches would only evict others' from the table.
  if (!RemembersLaunches(process_id)) return;
  if (s.join.Insert(process_id, {correlation_id, graph_node_id, device}, name_series)) {
    AddOwned(s.join_evicted);
  }
  s.join_pending.store(s.join.size(), std::memory_order_relaxed);
}

void Metrics::PrefetchJoin(uint64_t process_id, uint64_t correlation_id, int32_t device,
                           uint64_t graph_node_id) const {
  if (!RemembersLaunches(process_id)) return;
  state_->join.Prefetch(process_id, {correlation_id, graph_node_id, device});
}

void Metrics::KernelTime(uint64_t process_id, uint64_t correlation_id, int32_t device,
                         uint64_t duration_ns, uint64_t graph_node_id) {
  State& s = *state_;
  const ProcessEntry* p = s.FindProcess(process_id);
  s.Gpu(State::GpuOf(p, device)).kernels.Timed(duration_ns);
  if (WorkloadSeries* w = s.WorkloadOf(p)) w->kernels.Timed(duration_ns);
  const std::optional<uint32_t> name_series =
      s.join.Take(process_id, {correlation_id, graph_node_id, device});
  if (!name_series) AddOwned(s.time_unmatched);
  NameSeries& n = s.names[name_series.value_or(kUnknownName)];
  AddSaturatingOwned(n.gpu_ns, duration_ns);
  AddOwned(n.timed);
  s.join_pending.store(s.join.size(), std::memory_order_relaxed);
}

void Metrics::ProcessGone(uint64_t process_id, std::chrono::steady_clock::time_point now) {
  State& s = *state_;
  s.join.ForgetProcess(process_id);
  s.join_pending.store(s.join.size(), std::memory_order_relaxed);
  if (auto it = s.processes.find(process_id); it != s.processes.end()) {
    if (it->second.workload != kNoWorkload) {
      const std::lock_guard<std::mutex> lock(s.workload_mu);
      WorkloadSeries& w = s.workloads[it->second.workload];
      if (--w.processes <= 0) {
        w.processes = 0;
        w.idle_since = now;
      }
    }
    s.processes.erase(it);
    if (s.cached_id == process_id) {
      s.cached_id = kNoProcess;
      s.cached = nullptr;
    }
  }
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
  const ProcessEntry* entry = s.FindProcess(process_id);
  if (const WorkloadSeries* w = s.WorkloadOf(entry)) {
    const std::lock_guard<std::mutex> lock(s.workload_mu);
    p.hpc_job = w->hpc_job;
    p.namespace_ = w->namespace_;
    p.pod = w->pod;
    p.container = w->container;
  }
  for (const StallAge& a : ages) {
    const uint32_t slot = State::GpuOf(entry, a.device);
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
    uint32_t gpu;
    double seconds;
  };
  std::vector<Series> series;
  size_t stalled_processes = 0;
  {
    const std::lock_guard<std::mutex> lock(stall_mu);
    stalled_processes = stalled.size();
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
      const StalledProcess& p = *a.process;
      const StalledProcess& q = *b.process;
      return a.gpu == b.gpu && p.pid == q.pid && p.exe == q.exe && p.stream == q.stream &&
             p.hostname == q.hostname && p.hpc_job == q.hpc_job && p.namespace_ == q.namespace_ &&
             p.pod == q.pod && p.container == q.container;
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
    w.Sample("cuflight_processes_stalled", {}, static_cast<uint64_t>(stalled_processes));
    w.Family("cuflight_kernel_oldest_unfinished_seconds", "gauge",
             "Age of the oldest unfinished kernel of a stalled process, by GPU; present only "
             "while the process is stalled.");
    for (size_t i = 0; i < series.size() && i < Metrics::kMaxStallSeries; ++i) {
      const Series& e = series[i];
      const StalledProcess& p = *e.process;
      Labels labels;
      labels.Add("hostname", p.hostname).Add("pid", p.pid).Add("exe", p.exe);
      labels.Add("stream", p.stream);  // left out when empty
      GpuLabels(e.gpu, &labels);
      labels.Add("hpc_job", p.hpc_job)
          .Add("namespace", p.namespace_)
          .Add("pod", p.pod)
          .Add("container", p.container);
      w.Sample("cuflight_kernel_oldest_unfinished_seconds", labels, e.seconds);
    }
    if (series.size() > Metrics::kMaxStallSeries) {
      w.Sample("cuflight_kernel_oldest_unfinished_seconds",
               {{"hostname", "other"}, {"pid", "other"}, {"exe", "other"}, {"UUID", "other"}},
               series[Metrics::kMaxStallSeries].seconds);
    }
  }
}

void Metrics::State::Render(std::string* out, std::chrono::steady_clock::time_point now) const {
  ExpositionWriter w(out);

  w.Family("cuflight_build_info", "gauge",
           "The collector's version and the event schema it reads; always 1.");
  w.Sample("cuflight_build_info", {{"version", Metrics::Version()}, {"schema", "v1"}},
           uint64_t{1});

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
           "Event lines the collector did not store, by reason.");
  for (size_t i = 0, n = rejected_reasons.size(); i < n; ++i) {
    const uint64_t v = Get(rejected[i]);
    if (i < rejected_reasons.reserved_count() && v == 0) continue;
    w.Sample("cuflight_events_rejected_total", {{"reason", rejected_reasons.label(i)}}, v);
  }

  w.Family("cuflight_connections_refused_total", "counter",
           "Producer connections refused at accept, and processes refused a lingering slot "
           "when their connection ended, by reason.");
  for (size_t i = 0, n = refused_connections.size(); i < n; ++i) {
    const uint64_t v = Get(connections_refused[i]);
    if (i < refused_connections.reserved_count() && v == 0) continue;
    w.Sample("cuflight_connections_refused_total", {{"reason", refused_connections.label(i)}}, v);
  }

  w.Family("cuflight_connections_closed_total", "counter",
           "Producer connections the collector closed, by reason.");
  for (size_t i = 0, n = closed_connections.size(); i < n; ++i) {
    const uint64_t v = Get(connections_closed[i]);
    if (i < closed_connections.reserved_count() && v == 0) continue;
    w.Sample("cuflight_connections_closed_total", {{"reason", closed_connections.label(i)}}, v);
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

  RenderGpus(w);

  w.Family("cuflight_kernel_launches_by_timing_total", "counter",
           "Kernel launches by the timing policy of their process (all: every launch is timed; "
           "sampled: those in a timing window; off: none).");
  for (int t = 0; t < Metrics::kTimingPolicies; ++t) {
    w.Sample("cuflight_kernel_launches_by_timing_total",
             {{"timing", Metrics::TimingPolicyName(static_cast<Metrics::TimingPolicy>(t))}},
             Get(launches_by_timing[t]));
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
           "Measured GPU execution time of kernels by kernel name (\"unknown\": no launch event "
           "joined).");
  for (size_t i = 0; i < name_count; ++i) {
    const uint64_t ns = Get(names[i].gpu_ns);
    if (i < reserved_names && ns == 0) continue;
    w.Sample("cuflight_kernel_name_gpu_seconds_total", {{"kernel", kernel_names.label(i)}},
             Seconds(ns));
  }

  w.Family("cuflight_kernel_name_timed_launches_total", "counter",
           "Launches whose GPU time was measured (kernel_time events), by kernel name: the "
           "launches cuflight_kernel_name_gpu_seconds_total sums.");
  for (size_t i = 0; i < name_count; ++i) {
    const uint64_t n = Get(names[i].timed);
    if (i < reserved_names && n == 0) continue;
    w.Sample("cuflight_kernel_name_timed_launches_total", {{"kernel", kernel_names.label(i)}}, n);
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

  RenderWorkloads(w, now);
  RenderStalls(w, now);
}

void Metrics::State::RenderGpus(ExpositionWriter& w) const {
  // Each family lists the GPUs seen, in series order.
  const size_t count = gpu_uuids.size();
  w.Family("cuflight_kernel_launches_total", "counter",
           "Kernel launches, by GPU (UUID, pci_bus_id, modelName as dcgm-exporter labels them) "
           "and the per-SM resource that limits their occupancy.");
  for (size_t i = 0; i < count; ++i) {
    const KernelSeries& k = gpus[i].kernels;
    if (!gpus[i].seen.load(std::memory_order_relaxed)) continue;
    Labels gpu;
    GpuLabels(static_cast<uint32_t>(i), &gpu);
    for (int r = 0; r < kResourceSlots; ++r) {
      const uint64_t v = Get(k.launches[r]);
      if (r == kUnknownResource && v == 0) continue;
      Labels l = gpu;
      l.Add("limiting_resource", ResourceLabel(r));
      w.Sample("cuflight_kernel_launches_total", l, v);
    }
  }

  w.Family("cuflight_kernel_occupancy_ratio", "histogram",
           "Theoretical occupancy of kernel launches (active warps / warp slots per SM), by GPU.");
  for (size_t i = 0; i < count; ++i) {
    if (!gpus[i].seen.load(std::memory_order_relaxed)) continue;
    Labels gpu;
    GpuLabels(static_cast<uint32_t>(i), &gpu);
    RenderHistogram(w, "cuflight_kernel_occupancy_ratio", gpus[i].kernels, gpu);
  }

  w.Family("cuflight_kernel_gpu_seconds_total", "counter",
           "Measured GPU execution time of kernels (the sum of kernel_time durations, CUPTI "
           "activity), by GPU.");
  for (size_t i = 0; i < count; ++i) {
    if (!gpus[i].seen.load(std::memory_order_relaxed)) continue;
    Labels gpu;
    GpuLabels(static_cast<uint32_t>(i), &gpu);
    w.Sample("cuflight_kernel_gpu_seconds_total", gpu, Seconds(Get(gpus[i].kernels.gpu_ns)));
  }

  w.Family("cuflight_kernel_timed_launches_total", "counter",
           "Launches whose GPU time was measured (kernel_time events), by GPU: the launches "
           "cuflight_kernel_gpu_seconds_total sums.");
  for (size_t i = 0; i < count; ++i) {
    if (!gpus[i].seen.load(std::memory_order_relaxed)) continue;
    Labels gpu;
    GpuLabels(static_cast<uint32_t>(i), &gpu);
    w.Sample("cuflight_kernel_timed_launches_total", gpu, Get(gpus[i].kernels.timed));
  }
}

void Metrics::State::RenderWorkloads(ExpositionWriter& w,
                                     std::chrono::steady_clock::time_point now) const {
  const std::lock_guard<std::mutex> lock(workload_mu);
  std::vector<uint32_t> shown;
  for (uint32_t i = 0; i <= workload_limit; ++i) {
    if (Visible(workloads[i], now)) shown.push_back(i);
  }
  const auto labels_of = [this](uint32_t i) {
    const WorkloadSeries& s = workloads[i];
    Labels l;
    l.Add("hpc_job", s.hpc_job)
        .Add("namespace", s.namespace_)
        .Add("pod", s.pod)
        .Add("container", s.container);
    return l;
  };

  w.Family("cuflight_workload_processes_started_total", "counter",
           "Recorded processes first seen, by workload (hpc_job, namespace, pod, container).");
  for (const uint32_t i : shown) {
    w.Sample("cuflight_workload_processes_started_total", labels_of(i), Get(workloads[i].started));
  }
  w.Family("cuflight_workload_process_crashes_total", "counter",
           "Recorded processes that crashed (process_crash events), by workload.");
  for (const uint32_t i : shown) {
    w.Sample("cuflight_workload_process_crashes_total", labels_of(i), Get(workloads[i].crashes));
  }
  w.Family("cuflight_workload_processes_lost_total", "counter",
           "Recorded processes that ended without process_end (process_lost), by workload.");
  for (const uint32_t i : shown) {
    w.Sample("cuflight_workload_processes_lost_total", labels_of(i), Get(workloads[i].lost));
  }
  w.Family("cuflight_workload_api_errors_total", "counter",
           "Failed CUDA calls the producers reported (api_error events), by workload and error: "
           "the sticky errors by name, \"other\" for any other.");
  for (const uint32_t i : shown) {
    for (int e = 0; e < kApiErrorSlots; ++e) {
      const uint64_t v = Get(workloads[i].api_errors[e]);
      if (v == 0) continue;
      Labels l = labels_of(i);
      l.Add("error", e == kNonSticky ? std::string_view("other") : schema::kStickyErrorNames[e]);
      w.Sample("cuflight_workload_api_errors_total", l, v);
    }
  }
  w.Family("cuflight_workload_kernel_launches_total", "counter",
           "Kernel launches, by workload and limiting resource.");
  for (const uint32_t i : shown) {
    const KernelSeries& k = workloads[i].kernels;
    for (int r = 0; r < kResourceSlots; ++r) {
      const uint64_t v = Get(k.launches[r]);
      if (v == 0) continue;
      Labels l = labels_of(i);
      l.Add("limiting_resource", ResourceLabel(r));
      w.Sample("cuflight_workload_kernel_launches_total", l, v);
    }
  }
  // The kernel series of a workload that has launched or timed nothing yet are left out.
  const auto active = [this](uint32_t i) {
    const KernelSeries& k = workloads[i].kernels;
    for (const Counter& c : k.launches) {
      if (Get(c) != 0) return true;
    }
    return Get(k.timed) != 0;
  };
  w.Family("cuflight_workload_kernel_occupancy_ratio", "histogram",
           "Theoretical occupancy of kernel launches, by workload.");
  for (const uint32_t i : shown) {
    if (active(i)) {
      RenderHistogram(w, "cuflight_workload_kernel_occupancy_ratio", workloads[i].kernels,
                      labels_of(i));
    }
  }
  w.Family("cuflight_workload_kernel_gpu_seconds_total", "counter",
           "Measured GPU execution time of kernels (kernel_time durations), by workload.");
  for (const uint32_t i : shown) {
    if (active(i)) {
      w.Sample("cuflight_workload_kernel_gpu_seconds_total", labels_of(i),
               Seconds(Get(workloads[i].kernels.gpu_ns)));
    }
  }
  w.Family("cuflight_workload_kernel_timed_launches_total", "counter",
           "Launches whose GPU time was measured (kernel_time events), by workload.");
  for (const uint32_t i : shown) {
    if (active(i)) {
      w.Sample("cuflight_workload_kernel_timed_launches_total", labels_of(i),
               Get(workloads[i].kernels.timed));
    }
  }
}

}  // namespace cuflight::collector
