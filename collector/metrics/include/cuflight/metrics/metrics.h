// The collector's Prometheus metrics: counters the daemon updates as it ingests events, rendered
// in the Prometheus text exposition format 0.0.4 for GET /metrics. docs/metrics.md lists every
// series.
//
// Design:
//  1. Updates are cheap enough for millions of events/s on the daemon's ingest thread: fixed
//     arrays of relaxed atomics, no allocation and no lock, except the first sight of a new
//     kernel name or reason (a mutex, at most a bounded number of times per object's life; the
//     only place an update allocates, so the only one that can throw, std::bad_alloc). The
//     series only the join-table thread writes (point 6) take a relaxed load and store rather
//     than a locked read-modify-write; a launch of a kernel whose labels were resolved once
//     (LabelsOf) neither hashes its name nor matches its resource.
//  2. Every label has a bounded set of values, so the number of series is bounded whatever
//     producers send: devices 0..63 (others as "other"), the six limiting resources (others as
//     "unknown"), the schema's event types (others as "other"), at most 32 rejection reasons,
//     16 drop reasons, 32 CUDA error names and 16 black box error reasons (further ones as
//     "other"), and `top_kernel_names` kernel names.
//  3. Kernel names: the first `top_kernel_names` distinct names get their own label value for
//     the object's life; later names are summed under kernel="other". A series, once exported,
//     is never removed or moved, so every counter is monotonic (a sketch that evicted names
//     would have to drop or freeze series). Names are cut to kMaxKernelNameBytes at a UTF-8
//     boundary (the label then ends in "..."), invalid UTF-8 bytes become '?', a name equal to
//     a reserved value ("other", "unknown") is counted as "other" and an empty one as "unknown".
//  4. Kernel GPU time joins KernelTime to Kernel by process_id and schema::JoinKey
//     (correlation_id, graph node, device: each kernel node of a graph launch, and each device
//     of a multi-device cooperative launch, is its own launch) in a fixed-size set-associative
//     table; a full set evicts its oldest entry (counted). Only launches whose kernel_time will
//     come are kept: not those of a process with timing off, nor those its event says were
//     made outside a timing window (`timing_window: false`, most launches under `sampled`),
//     which would otherwise fill the sets and evict the launches whose time is on its way.
//     Time whose kernel is unknown (lost, evicted or never sent) is counted under its device and
//     kernel="unknown".
//  5. Stalls: the processes that report a GPU stall now (their latest stall event says stalled),
//     with the age of the oldest unfinished kernel per GPU. Series exist only while a process
//     is stalled; at most kMaxStallSeries (process, device) pairs get their own, the oldest
//     first, and the others are one series whose labels are all "other" (their largest age).
//     Updated at most once a second per process (the producer's rate), under a mutex.
//  6. Threads: Render() may run on any thread at any time. The counter-only updates (producer,
//     event, rejection, loss, drop, timing-drop, API-error and byte counts) may be called from
//     any thread. Kernel(), KernelTime(), ProcessGone() and the process-state methods (point 11)
//     share the join table and must be called from one thread at a time (the daemon's ingest
//     thread); they may run concurrently with every other method.
//  7. Counts producers give (their drop counters' deltas, seq gaps, kernel durations) are added
//     saturating at 2^64-1, so no input wraps a counter (Prometheus would read a reset); the
//     daemon bounds them first (CountRefused).
//  8. GPUs are labelled by identity, not by the CUDA ordinal inside a process (under
//     CUDA_VISIBLE_DEVICES every process calls its GPU 0): the ordinal of a process maps to the
//     GPU its device event names (Device), whose UUID, PCI bus id and name become the labels
//     UUID, pci_bus_id and modelName, dcgm-exporter's names (docs/metrics.md has the mapping).
//     At most kMaxGpus UUIDs get series of their own (later ones: UUID="other"); an ordinal
//     with no device event, or one with an empty UUID, is UUID="unknown".
//  9. Workloads: the processes of one (hpc_job, namespace, pod, container), from process_start's
//     attribution (Process), share a block of series: launches by limiting resource, the
//     occupancy histogram, measured GPU time and timed launches, processes started, crashed and
//     lost, API errors (sticky ones by name). At most `workloads` blocks hold labels at once
//     (later workloads: every label "other"); a block whose processes have all gone is dropped
//     from the exposition `workload_ttl` after the last one went (Prometheus sees its series
//     end, as for a finished pod), and its slot can then take another workload. So the series
//     follow the workloads running now, not every one since the collector started.
// 10. Kernel timing: the GPU seconds series are measured time only (the sum of kernel_time
//     durations). Each has a twin counting the launches those durations came from (timed
//     launches), and launches are counted by their process's timing policy, so that an estimate
//     (measured x launches / timed launches) can be computed and labelled as one in PromQL,
//     never exported as if it were measured (docs/metrics.md, Kernel timing policies).
// 11. Process state (the ordinal -> GPU map, the workload, the timing policy) is read and written
//     by the join-table thread only (Process, Device, Kernel, KernelTime, ApiError with a
//     process, ProcessCrashed, ProcessLost, Stall, ProcessGone); Render reads only the series.
// 12. Runs of launches: the counts of a launch (GPU, workload, name, timing policy, occupancy)
//     depend on its process and its kernel only, so a caller may add a run of launches of one
//     kernel at once (Launches) and remember each for the join as it comes (RememberLaunch).
//     The occupancy sums are doubles, whose value depends on the order of the additions: the
//     caller adds a run before any other launch's counts (and before Device, Process or
//     ProcessGone of its process), so every sum sees the same additions in the same order as
//     with one Kernel call per launch, and a scrape after the run reads the same text.
#ifndef CUFLIGHT_METRICS_METRICS_H_
#define CUFLIGHT_METRICS_METRICS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "cuflight/schema/events.h"

namespace cuflight::collector {

class Metrics {
 public:
  // Longest kernel name kept in a label value, in bytes (before the "..." mark of a cut name).
  static constexpr size_t kMaxKernelNameBytes = 256;
  // Join table entries when none is given: 2^18 launches awaiting their kernel_time (10 MiB).
  static constexpr size_t kDefaultJoinCapacity = size_t{1} << 18;

  // `top_kernel_names`: kernel names with their own label value, clamped to [0, 10000].
  // `join_capacity`: launches remembered while their kernel_time is pending, rounded up to a
  // power of two, at least 64.
  // Most GPUs (distinct UUIDs) with series of their own.
  static constexpr size_t kMaxGpus = 64;
  // Workload blocks with labels of their own when none is given, and how long a block stays
  // after its last process went.
  static constexpr size_t kDefaultWorkloads = 256;
  static constexpr std::chrono::seconds kDefaultWorkloadTtl{600};
  // Longest workload label value, in bytes (cut at a UTF-8 boundary, invalid bytes as '?').
  static constexpr size_t kMaxWorkloadLabelBytes = 128;
  // A process_id no process was registered under (Process).
  static constexpr uint64_t kNoProcess = 0;

  explicit Metrics(int top_kernel_names = 50, size_t join_capacity = kDefaultJoinCapacity,
                   size_t workloads = kDefaultWorkloads,
                   std::chrono::seconds workload_ttl = kDefaultWorkloadTtl);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // A producer connection was accepted / has closed (pairs with ProducerConnected).
  void ProducerConnected();
  void ProducerDisconnected();

  // One event line that passed validation, by its `type` (a schema event type name; "other"
  // when it is none).
  void EventReceived(std::string_view type);
  // `n` event lines of `type` (a caller that tallies a read's lines and adds them once).
  void EventReceived(schema::EventType type, uint64_t n = 1);
  // One event line written to the log, by its `type`.
  void EventStored(std::string_view type);
  // `n` event lines of `type` (as EventReceived).
  void EventStored(schema::EventType type, uint64_t n = 1);
  // One event line refused (not stored), by reason: schema::ReasonName(...) or a daemon reason
  // such as "line_too_long", "duplicate".
  void Rejected(std::string_view reason);
  // One connection refused at accept, or a lingering slot refused to a process whose connection
  // ended, by reason ("connection_limit", "uid_connection_limit", "peer_not_allowed",
  // "linger_limit"; at most 16 reasons, then "other").
  void ConnectionRefused(std::string_view reason);
  // One producer connection the collector closed, by reason ("idle_timeout",
  // "handshake_timeout", "fair_share"; at most 16 reasons, then "other").
  void ConnectionClosed(std::string_view reason);
  // `n` events the collector never received (gaps in a producer's seq).
  void Lost(uint64_t n);
  // `delta` events a producer reports it dropped itself (from stats / process_end deltas), by
  // reason such as "ring_full" or "disconnected".
  void ProducerDropped(std::string_view reason, uint64_t delta);
  // `delta` kernel timing records a producer reports it lost before they became kernel_time
  // events (from the deltas of its stats / process_end `timing_dropped`).
  void ProducerTimingDropped(uint64_t delta);
  // `delta` launches whose occupancy a producer's driver and engine computed differently (from
  // the deltas of its stats / process_end `occupancy_disagreements`).
  void OccupancyDisagreements(uint64_t delta);
  // One failed CUDA call a producer reported (an api_error event), by its `error_name` (e.g.
  // "CUDA_ERROR_ILLEGAL_ADDRESS"): the first 32 distinct names get their own label value, later
  // ones count as "other"; an empty name as "unknown". With a `process_id` (Process), also
  // counted for its workload (join-table thread rule); without, from any thread.
  void ApiError(std::string_view error_name, uint64_t process_id = kNoProcess);
  // `n` bytes written to the event log.
  void BytesWritten(uint64_t n);
  // `n` events a producer sent that the log could not store (its buffers were full, e.g. a full
  // disk) and that the producer did not send again before its process was written off
  // (process_lost).
  void Unstored(uint64_t n);
  // `n` events recovered from the black box of a producer that died without sending them.
  void Recovered(uint64_t n);
  // A producer's black box refused at receipt or unreadable at recovery, by reason (a
  // blackbox::RegionErrorName or a daemon reason such as "not_sealed"; at most 16 reasons, then
  // "other").
  void BlackboxError(std::string_view reason);

  // One claim of a producer for `counter` ("events_lost", "events_dropped",
  // "kernel_timing_dropped", "occupancy_disagreements") refused: more than it could have made
  // (docs/collector.md, "Counts a producer cannot inflate"), so not added to that counter. At
  // most 8 counter names, then "other".
  void CountRefused(std::string_view counter);

  // The event log's health: totals since the collector started, as its log sink counts them.
  struct LogTotals {
    uint64_t write_errors = 0;          // failed open/write/rename/fsync/compression calls
    uint64_t pending_bytes = 0;         // received, not yet written (now; a gauge)
    uint64_t fsync_rounds_skipped = 0;  // periodic fdatasync rounds skipped (a slow disk)
    uint64_t recovery_failures = 0;     // streams refused: their highest seq could not be read
  };
  // Replaces the exported values with `totals` (the counters among them must not decrease).
  // From one thread at a time (the daemon's).
  void SetLogTotals(const LogTotals& totals);

  // A process's timing policy (process_start config.timing: "all", "sampled", "off"; older
  // producers wrote "true"/"false").
  enum class TimingPolicy : uint8_t { kAll, kSampled, kOff };
  static constexpr int kTimingPolicies = 3;
  // The policy a process_start config.timing value names; absent or unknown: kAll (the readers'
  // rule of the contract, docs/protocol.md).
  static TimingPolicy TimingPolicyFromConfig(std::string_view value);
  static std::string_view TimingPolicyName(TimingPolicy policy);

  // Who a process is to its scheduler, as label values ("" where not known).
  struct Workload {
    std::string_view hpc_job;    // attribution.job
    std::string_view namespace_;  // attribution.pod_namespace
    std::string_view pod;        // attribution.pod_name, else attribution.pod_uid
    std::string_view container;  // the allow-listed CONTAINER_NAME, when set
  };
  // A process appeared (its process_start): its workload and timing policy. A second call for a
  // process_id changes nothing. `process_id` != kNoProcess. Join-table thread rule.
  void Process(uint64_t process_id, const Workload& workload, TimingPolicy timing);
  // Device `device` (the ordinal) of process `process_id` is the GPU `uuid` ("GPU-..." or
  // "MIG-..."; "" when unknown) at `pci_bus_id` ("" when unknown), named `model`. The first
  // device event naming a UUID gives its pci_bus_id and modelName labels. Join-table thread
  // rule.
  void Device(uint64_t process_id, int32_t device, std::string_view uuid,
              std::string_view pci_bus_id, std::string_view model);
  // The process sent a process_crash event / was written off (process_lost). Join-table thread
  // rule.
  void ProcessCrashed(uint64_t process_id);
  void ProcessLost(uint64_t process_id);

  // One kernel launch. `name`: the label for the kernel (the daemon passes the demangled name,
  // or the mangled one when demangling failed). `limiting_resource`: a schema resource name.
  // `occupancy`: in [0, 1]; a value outside [0, 1] is clamped, a NaN is left out of the
  // occupancy histogram and summary (the launch is still counted). `graph_node_id`: the kernel
  // event's, 0 when it has none (not a graph node).
  // Remembers (process_id, {correlation_id, graph_node_id, device}) for KernelTime. Join-table
  // thread rule (above).
  // A process whose timing policy is kOff sends no kernel_time: its launches are counted and
  // not remembered (they would only evict other processes' launches from the join table); nor is
  // a launch with `remember` false, one whose event says no kernel_time will come for it
  // (`timing_window: false`, made outside a window of CUFLIGHT_TIMING=sampled).
  void Kernel(uint64_t process_id, uint64_t correlation_id, std::string_view name, int32_t device,
              std::string_view limiting_resource, double occupancy, uint64_t graph_node_id = 0,
              bool remember = true);
  // The labels of one kernel resolved once, for a caller that counts many launches of it (the
  // collector's interned configurations, docs/protocol.md): its name's series and its limiting
  // resource's slot, as Kernel resolves `name` and `limiting_resource` on every call. A name not
  // seen before gets its series now, as at Kernel's first launch of it; a series is never
  // renumbered (design point 3), so the labels stay valid for the object's life. Any thread.
  struct KernelLabels {
    uint32_t name_series = 0;
    uint8_t resource = 0;
  };
  KernelLabels LabelsOf(std::string_view name, schema::Resource limiting_resource);
  // Kernel with its labels resolved (LabelsOf): the same counts as Kernel(name, limiting_resource)
  // for the name and resource `labels` came from. Join-table thread rule (above).
  void Kernel(uint64_t process_id, uint64_t correlation_id, KernelLabels labels, int32_t device,
              double occupancy, uint64_t graph_node_id = 0, bool remember = true);
  // Kernel in two halves, for a caller that counts a run of launches of one kernel
  // configuration at once (the collector, design point 12):
  // `n` launches of one kernel with its labels resolved, counted as `n` calls of Kernel(labels)
  // count them, without the join (RememberLaunch). Each occupancy sum takes `occupancy` `n`
  // times, one addition after another, so that it holds the same double as after `n` calls.
  void Launches(uint64_t process_id, KernelLabels labels, int32_t device, double occupancy,
                uint64_t n);
  // What Kernel remembers of one launch for its KernelTime (the name's series): nothing for a
  // process with timing off. Kernel(labels) is Launches(..., 1) and RememberLaunch.
  void RememberLaunch(uint64_t process_id, uint64_t correlation_id, uint32_t name_series,
                      int32_t device, uint64_t graph_node_id = 0);
  // Whether launches of `process_id` are remembered for a KernelTime (Kernel, RememberLaunch,
  // PrefetchJoin): not for a process whose timing policy is kOff. It changes only with
  // Process() and ProcessGone() of that process, so a caller may keep the answer until then.
  // Join-table thread rule (above).
  bool RemembersLaunches(uint64_t process_id) const;
  // A hint, no effect on the counts: Kernel or KernelTime for this key follows soon, so the
  // join table's entries for it are fetched into the cache now (the table is larger than the
  // caches: without the hint that call waits for memory); nothing for a process with timing
  // off. Join-table thread rule (above).
  void PrefetchJoin(uint64_t process_id, uint64_t correlation_id, int32_t device,
                    uint64_t graph_node_id) const;
  // The GPU execution time of one kernel execution: added to the device's GPU seconds and to the
  // kernel name's (joined by (process_id, {correlation_id, graph_node_id, device});
  // kernel="unknown" when no launch matches). `graph_node_id`: the kernel_time event's, 0 when
  // it has none. Join-table thread rule (above).
  void KernelTime(uint64_t process_id, uint64_t correlation_id, int32_t device,
                  uint64_t duration_ns, uint64_t graph_node_id = 0);
  // Forgets the join state of a process that has gone (its pending launches are dropped
  // without being counted as evicted; scans the join table: O(join_capacity)), its stall, its
  // GPU map, and its share of its workload (at `now`: the workload's series stay workload_ttl
  // after its last process went). Join-table thread rule (above).
  void ProcessGone(uint64_t process_id,
                   std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  // Most (process, device) pairs of stalled processes with series of their own (design point 5).
  static constexpr size_t kMaxStallSeries = 64;
  // One device of a stalled process: the age of its oldest unfinished kernel when the stall event
  // was built.
  struct StallAge {
    int32_t device = 0;
    double seconds = 0;
  };
  // A process's latest stall event, received at `received` (steady clock): stalled with `ages`
  // per device ordinal (each once), or, when `ages` is empty (resolved, or nothing listed), not
  // stalled any more. The gauge of a device is its age plus the time since `received`: it keeps
  // growing until the next event. `hostname`, `pid`, `exe` (cut to a basename of at most
  // kMaxKernelNameBytes) and, when not empty, `stream` (what tells apart processes that share
  // the others: the daemon gives "<instance_id>-<owner>", the tail of the stream's log name)
  // label the series, with the GPU's labels (the ordinal mapped as for Kernel) and the
  // process's workload labels; processes whose labels are all equal are one series (the larger
  // age). Join-table thread rule.
  void Stall(uint64_t process_id, std::string_view hostname, int32_t pid, std::string_view exe,
             std::span<const StallAge> ages, std::chrono::steady_clock::time_point received,
             std::string_view stream = {});

  // The version cuflight_build_info reports (the project's version, CMake's PROJECT_VERSION).
  static std::string_view Version();

  // Every series in the Prometheus text exposition format 0.0.4 (HELP and TYPE lines, then the
  // samples; families in a fixed order). Any thread; allocates the returned string only.
  std::string Render() const;
  // The same at a given time (the stall ages grow with it); for tests.
  std::string Render(std::chrono::steady_clock::time_point now) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_METRICS_METRICS_H_
