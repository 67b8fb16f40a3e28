// The report as data: what BuildReport() computes from the logs and every renderer (terminal
// table, JSON, CSV and HTML) reads. No formatting happens here.
#ifndef CUFLIGHT_REPORT_REPORT_MODEL_H_
#define CUFLIGHT_REPORT_REPORT_MODEL_H_

#include <array>
#include <compare>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/occupancy/device_limits.h"
#include "cuflight/occupancy/engine.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/occupancy_fields.h"

namespace cuflight::report {

// One producer stream: its pid and process_start's start_ns (0 when unknown), and the instance
// id (0 when unknown) and owner ("" when unknown) its log file's name states. Two processes with
// the same pid (pid reuse, containers, a process after exec()) differ by start_ns or instance
// id; streams of one instance id written by different owners (another uid, another TCP
// connection) are kept apart, as the collector keeps them (docs/collector.md).
struct ProcessKey {
  int32_t pid = 0;
  int64_t start_ns = 0;
  uint64_t instance_id = 0;
  std::string owner{};
  auto operator<=>(const ProcessKey&) const = default;
};

// A process's kernel timing policy (CUFLIGHT_TIMING): cuflight/schema/timing_policy.h.
using schema::TimingPolicy;
using schema::TimingPolicyName;
// The policy a process_start's config "timing" states: "all", "sampled" or "off", and as older
// producers wrote it "1", "true" or "on" (all), "0" or "false" (off). Anything else: all, the
// library's default (readers take all when the member is absent).
TimingPolicy TimingPolicyOfConfig(std::string_view value);

// How a process's stream ends. The review section lists every process whose ending is not
// kEnded or kRunning.
enum class Ending : uint8_t {
  kEnded = 0,     // process_end, and its last CUDA activity was not a failed call
  kRunning = 1,   // no process_end or process_lost (still running, or the log is cut)
  kLost = 2,      // process_lost: the connection ended without process_end
  kApiError = 3,  // its last CUDA activity (kernel launch or failed call) is an api_error
  kCrash = 4,     // a process_crash event: a fatal signal in the process
  // No process_end or process_lost, and its latest stall event says stalled: hung when the log
  // ends (still hung, or the log is cut).
  kStalled = 5,
};
// "ended", "running", "lost", "api_error", "crash", "stalled".
std::string_view EndingName(Ending ending);

// A process's GPU stalls, from its stall events (docs/crash.md, "GPU hangs").
struct StallSummary {
  uint64_t stalls = 0;     // stalls that began: a stalled event with none going on before it
  int64_t longest_ms = 0;  // the longest: resolved events' stalled_ms, or the last one's so far
  bool ongoing = false;    // the latest stall event says stalled
  // The latest stall event with state stalled: what was stalled, per stream.
  schema::OwnedStallEvent latest;
};

// Whether a launch finished, as far as the log can tell (review.h: CompletionOf).
enum class Completion : uint8_t {
  kFinished = 0,     // a kernel_time joined it
  kNotFinished = 1,  // no kernel_time, and a flush after it reported every kernel that had run
  kUnknown = 2,      // no kernel_time, and the log cannot tell (timing never flushed: a crash or
                     // a kill, records lost, or timing off)
};

// One kernel launch as the review section shows it.
struct LaunchSummary {
  uint64_t seq = 0;
  int64_t ts_ns = 0;
  uint64_t correlation_id = 0;
  uint64_t graph_node_id = 0;  // the graph node a graph launch ran it as; 0: not a graph node
  // The kernel event's timing_window: set only under sampled timing (true: made in a timing
  // window, a kernel_time is expected; false: none will come).
  std::optional<bool> timing_window;
  std::string name;  // demangled, or the mangled name when demangling failed
  schema::Dim3 grid;
  schema::Dim3 block;
  double occupancy = 0;
  std::optional<uint64_t> duration_ns;  // set when a kernel_time joined it: it finished
  Completion completion = Completion::kUnknown;
  // It failed: named by the process's last api_error, a sticky error (cuflight/schema/
  // sticky_errors.h), among the launches in flight, and it did not finish (kNotFinished).
  bool in_error = false;
};

// The latest launches of one stream of one process.
struct StreamTail {
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t launches = 0;              // launches seen on the stream in all
  std::vector<LaunchSummary> last;    // the last ReportOptions::review_launches, oldest first
};

// One kind of failed CUDA call of a process (api and error code): how often, and its first instance.
struct FailedCall {
  uint64_t count = 0;
  schema::OwnedApiErrorEvent first;  // the lowest seq of the kind
};

// Failed-call kinds a process keeps (ProcessSummary::failed_calls); the errors of kinds beyond it
// are counted in ProcessSummary::failed_calls_left_out. A program fails in a few ways, each
// repeated; the injector's limiter already keeps a repeat from flooding the log.
inline constexpr size_t kMaxFailedCallKinds = 32;

struct ProcessSummary {
  ProcessKey key;
  bool has_start = false;  // its process_start was read
  std::string hostname;
  std::string exe;
  std::vector<std::string> argv;
  // process_start's attribution (who the process is to a scheduler: "job", "rank", ... and the
  // environment variables it read), sorted by name; empty when it had none.
  std::vector<std::pair<std::string, std::string>> attribution;
  std::vector<std::pair<int32_t, std::string>> devices;  // ordinal, name; by ordinal
  // The device events' GPU identities, by ordinal: "GPU-..." or "MIG-..." as nvidia-smi writes
  // them, "" when the event had none (older producers); only ordinals with a device event.
  std::vector<std::pair<int32_t, std::string>> device_uuids;
  // Its kernel timing policy: the latest of stats, process_end and process_crash that states it
  // (the policy in force, after any fallback), else its process_start's config.timing, else kAll.
  TimingPolicy timing_policy = TimingPolicy::kAll;
  // With kSampled, from the same event: timing windows opened, ns they were open in all, and
  // recorded launches made in one.
  uint64_t timing_windows = 0;
  uint64_t timing_window_ns = 0;
  uint64_t launches_in_window = 0;
  uint64_t events = 0;
  uint64_t kernels = 0;        // kernel events (before the report's filters)
  uint64_t timed_kernels = 0;  // of those, joined to a kernel_time
  uint64_t api_errors = 0;
  int64_t first_ts_ns = 0;
  int64_t last_ts_ns = 0;
  std::optional<schema::OwnedProcessEndEvent> end;
  std::optional<schema::OwnedProcessLostEvent> lost;
  std::optional<schema::OwnedProcessCrashEvent> crash;  // the latest
  std::optional<schema::OwnedApiErrorEvent> last_api_error;
  // Its failed calls (not the routine ones) by (api, code), in the order of their first seqs; at
  // most kMaxFailedCallKinds kinds, the errors of later kinds counted in failed_calls_left_out.
  std::vector<FailedCall> failed_calls;
  uint64_t failed_calls_left_out = 0;
  std::optional<StallSummary> stall;  // set when the process sent a stall event
  // Events the process reported as dropped (process_end, else its latest stats).
  uint64_t dropped = 0;
  // Kernel timing records the process reported lost (no kernel_time for them; process_end, else
  // its latest stats).
  uint64_t timing_dropped = 0;
  // Launches recorded while kernel timing was stopped, and why (process_end, else the latest of
  // process_crash and stats).
  uint64_t timing_stopped = 0;
  schema::TimingStoppedReason timing_stopped_reason = schema::TimingStoppedReason::kNone;
  Ending ending = Ending::kRunning;
  // Its last CUDA activity (by seq) is last_api_error: the last call it made failed.
  bool last_call_failed = false;
  // One line saying how it ended and what the log knows of what was lost, e.g. "lost: the
  // connection ended without process_end; 42 events stored up to seq 41, none missing before it;
  // whether it sent more after seq 41 is unknown" or "api_error: cuLaunchKernel returned
  // CUDA_ERROR_LAUNCH_FAILED (719)" (review.h: DescribeEnding).
  std::string ending_detail;
  std::vector<StreamTail> streams;  // by (device, stream)
  // Its last kernel launch (the highest seq), whatever the filters; nullopt when it launched
  // none. `completion` and `duration_ns` as in the review's launches.
  std::optional<LaunchSummary> last_kernel;
  int32_t last_kernel_device = 0;
  uint64_t last_kernel_stream = 0;
};

// "pid 123 trainer" (the exe's basename when known), with "(job 4242, rank 3)" after it when
// the attribution has a job or a rank.
std::string ProcessName(const ProcessSummary& p);

// The attribution's value of `key` ("job", "rank", ...), or "" when it has none.
std::string_view AttributionValue(const ProcessSummary& p, std::string_view key);

// One sentence on kernel timing that stopped in the process, e.g. "pid 42 train.py: kernel timing
// records stopped arriving while launches went on (...); 4,096 launches have no GPU time"; "" when
// it did not stop.
std::string TimingStoppedNote(const ProcessSummary& p);

// Statistics of the GPU durations of a signature's timed launches, in ns. Percentiles are
// nearest-rank: the smallest duration d with at least p% of the durations <= d. Count, total,
// min, max and mean are exact; p50 and p99 are exact up to DurationAccumulator::kExact timed
// launches of the signature and within 0.2 % beyond (percentiles_exact false;
// duration_stats.h).
struct DurationStats {
  uint64_t count = 0;
  uint64_t total_ns = 0;
  uint64_t min_ns = 0;
  uint64_t max_ns = 0;
  double mean_ns = 0;
  uint64_t p50_ns = 0;
  uint64_t p99_ns = 0;
  bool percentiles_exact = true;
};

// What one resource alone allows, from the kernel event's occupancy fields.
struct ResourceLimit {
  bool applies = true;  // false for kCluster on a launch without a cluster
  double occupancy = 0;
  // Blocks per SM this resource alone allows: exact for the limiting resources, derived from the
  // occupancy (occupancy x max_warps / warps per block) for the others; nullopt when it allows
  // full occupancy (then the exact count is not in the event).
  std::optional<int32_t> blocks_per_sm;
};

// The occupancy of a signature recomputed for another GPU (--retarget).
struct Retarget {
  bool ok = false;
  std::string error;  // set when the engine rejected the launch or device
  occupancy::Result result;
  // e.g. "occupancy 50% -> 75%, limiter registers -> shared_mem", "no change",
  // "cannot run: shared_mem allows no block".
  std::string change;
};

// Launches of one kernel with one shape: (name, block, dynamic smem, registers, device model).
struct Signature {
  std::string name;       // mangled
  std::string demangled;  // "" when demangling failed
  std::string device_model;  // the device event's name; "" when the device event is missing
  // The device event's limits (what the occupancy engine needs to check a what-if); nullopt when
  // the device event is missing.
  std::optional<occupancy::DeviceLimits> device_limits;
  schema::Dim3 block;
  int64_t dyn_smem = 0;
  int32_t regs = 0;
  schema::OwnedKernelEvent first;  // the first launch read: resources and occupancy fields
  uint64_t launches = 0;
  uint64_t processes = 0;  // distinct processes that launched it
  std::optional<DurationStats> gpu_time;  // nullopt when no launch was timed: GPU time unknown
  // The launches above made under sampled timing (kernel events with timing_window, which the
  // library writes then and only then), how many of those were
  // timed, and their measured GPU time (ns, saturating): what EstimatedGpuNs scales. All 0 when
  // no process sampled the signature's timing.
  struct SampledLaunches {
    uint64_t launches = 0;
    uint64_t timed = 0;
    uint64_t measured_ns = 0;
  };
  SampledLaunches sampled;
  double occupancy_min = 0;  // over the launches (carveout and cluster can differ)
  double occupancy_max = 0;
  double waves_mean = 0;  // over the launches (the grid can differ)
  double waves_min = 0;
  double waves_max = 0;
  double tail_mean = 0;
  int32_t warps_per_block = 0;
  std::array<ResourceLimit, schema::kResourceCount> resources{};
  std::string advice;  // one line, "" when nothing to advise (full occupancy, no spills)
  std::optional<Retarget> retarget;

  // Display name: the demangled name, or the mangled one.
  const std::string& display_name() const { return demangled.empty() ? name : demangled; }
  bool spills() const { return first.local_bytes > 0; }
  const schema::OccupancyFields& fields() const { return first.occupancy; }
};

// Launches of the signature that were timed over its launches, in [0, 1] (0 without launches).
double TimedFraction(const Signature& s);

// The signature's GPU time estimated over all its launches when some were made under sampled
// timing: the measured time of its other launches as it is, plus its sampled launches' measured
// time x sampled launches / sampled launches timed (docs/report.md, "Sampled timing"). An
// estimate, never to be shown as a measurement. nullopt when no launch was sampled (the
// measurement is the whole) or no sampled launch was timed (then the GPU time is unknown).
std::optional<uint64_t> EstimatedGpuNs(const Signature& s);

struct RetargetDevice {
  std::string key;
  std::string name;
  occupancy::DeviceLimits limits;
};

// Marks a timeline bin or slice whose launches are of several signatures, and one with none.
inline constexpr uint32_t kMixedSignatures = std::numeric_limits<uint32_t>::max();
inline constexpr uint32_t kNoSignature = std::numeric_limits<uint32_t>::max() - 1;

// The launches of one time bin of a timeline lane (time_bins.h).
struct DensityBin {
  uint32_t launches = 0;  // launches that start in the bin
  uint32_t timed = 0;     // of those, joined to a kernel_time
  // The signature of every launch in the bin, kMixedSignatures when they differ, kNoSignature
  // when the bin is empty.
  uint32_t signature = kNoSignature;
  uint64_t busy_ns = 0;   // GPU time of timed launches inside the bin (any start), <= its width
  int64_t first_ns = 0;   // earliest start of a launch in the bin (meaningful when launches > 0)
  int64_t last_ns = 0;    // latest end of those launches
};

// Every launch of one timeline lane (process, device, stream), counted into equal time bins so
// that the timeline can be drawn at any size with memory that does not grow with the launches.
// Bin i covers [origin_ns + i * bin_ns, origin_ns + (i + 1) * bin_ns).
struct LaneDensity {
  uint32_t process = 0;  // index into Report::processes
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t launches = 0;
  uint64_t timed = 0;
  int64_t origin_ns = 0;
  int64_t bin_ns = 0;
  std::vector<DensityBin> bins;
};

// What the report held back to keep its memory bounded, and what that cost.
struct ReadBounds {
  // Launches waiting for their kernel_time at most at once, and kernel_time events waiting for
  // their kernel at most at once.
  uint64_t peak_pending_launches = 0;
  uint64_t peak_pending_times = 0;
  // Launches counted untimed because their kernel_time had not come within
  // ReportOptions::max_pending_launches later launches, and kernel_time events dropped because
  // their kernel had not come within max_pending_times later times (a note says each).
  uint64_t launches_given_up = 0;
  uint64_t times_given_up = 0;
  // Kernel_time events that joined no kernel by the end (their kernel is not in the logs).
  uint64_t times_without_kernel = 0;
};

// One launch aggregated into a signature, as ReportOptions::keep_launches keeps it.
struct KeptLaunch {
  uint32_t process = 0;    // index into Report::processes
  uint32_t signature = 0;  // index into Report::signatures
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;
  uint64_t graph_node_id = 0;  // 0: not a graph node
  uint64_t seq = 0;
  int64_t ts_ns = 0;  // the kernel event's (host, at launch)
  // The joined kernel_time's GPU start and end (same process, correlation_id, graph node and
  // device: cuflight/schema/join_key.h), if any.
  bool timed = false;
  int64_t gpu_start_ns = 0;
  int64_t gpu_end_ns = 0;
};

// How a rank of a job ended, as the job view says it (from Ending, review.h).
enum class RankEnding : uint8_t {
  kFinished = 0,  // process_end (exit code 0 or unknown)
  kExited = 1,    // process_end with a non-zero exit code: a failure
  kFailedCall = 2,  // process_end, and its last CUDA call had failed (Ending::kApiError)
  kCrashed = 3,   // process_crash
  kLost = 4,      // process_lost: killed (SIGKILL, the OOM killer) or no exit flush
  kStalled = 5,   // its kernels stalled and the log ends there (hung)
  kRunning = 6,   // no end in the log (still running, or the log is cut)
};
// "finished", "exited", "failed call", "crashed", "lost", "stalled", "running".
std::string_view RankEndingName(RankEnding ending);

// One process of a job, as the job view lists it. Every field the attribution or the log does
// not give is empty or nullopt: said as unknown, never guessed.
struct RankRow {
  size_t process = 0;  // index into Report::processes
  std::optional<int32_t> rank;       // attribution "rank"
  std::string local_rank;            // attribution "local_rank"; "" unknown
  std::string host;                  // process_start's hostname; "" unknown
  // The GPUs it used: the device events' uuids ("GPU-..."/"MIG-..."), by ordinal; a device event
  // without one gives "device N (no UUID)"; empty: no device event.
  std::vector<std::string> gpus;
  std::string pod;  // "namespace/name", "name", or the pod_uid; "" unknown
  RankEnding ending = RankEnding::kRunning;
  // When it ended (finished, exited, failed call, crashed, lost): the ts of the event that says
  // so (process_end, process_crash, process_lost), on its host's clock.
  std::optional<int64_t> ended_ns;
  // When it failed (every ending but finished and running): the failed call's, the crash's, the
  // process_lost's, the exit's ts, or when its stall began (the stall event's ts - stalled_ms).
  std::optional<int64_t> failed_ns;
  std::optional<size_t> end_order;  // 1-based place in JobView::end_order; nullopt: not ended
};

// The ranks of one job (attribution "job"), for `cuflight report --job` and every report of logs
// whose processes name a job.
struct JobView {
  std::string job;
  // attribution "world_size" as the processes say it; several values when they disagree; empty
  // when none says.
  std::vector<std::string> world_sizes;
  std::vector<RankRow> ranks;     // by rank (unknown rank last), then start time, then pid
  std::vector<size_t> end_order;  // indices into ranks that ended, by ended_ns, then rank
  std::optional<size_t> first_failed;  // index into ranks: the smallest failed_ns (then rank)
  std::vector<int32_t> missing_ranks;   // 0..world_size-1 with no process (one world size only)
  std::vector<int32_t> repeated_ranks;  // ranks held by more than one process (restarts)
  size_t hosts = 0;                     // distinct known hostnames
};

// Reviewed processes whose reviews say the same (review.h: GroupReview): the ranks of one job
// that crashed alike are one group.
struct ReviewGroup {
  // Indices into Report::processes, the first to fail first (review.h: FailedAt).
  std::vector<size_t> processes;
  // What every member's review says, with nothing that differs between them (no pid, thread,
  // seq, count or time), e.g. "crash: SIGSEGV (signal 11, code 1) at 0x10; its last CUDA call
  // failed: cuLaunchKernel returned CUDA_ERROR_INVALID_VALUE (1): invalid argument".
  std::string says;
};

struct Report {
  std::vector<std::filesystem::path> files;
  logread::ReadSummary read;
  std::vector<ProcessSummary> processes;  // by ProcessKey, filtered by --pid
  // Indices into processes: the stalled ones first (a stall going on at the end of the log),
  // then those that ended lost, api_error or crash or had a stall (review.h).
  std::vector<size_t> review;
  // The reviewed processes grouped by what their reviews say; every index of `review` in one
  // group; groups by their first member's failure, the first to fail first.
  std::vector<ReviewGroup> review_groups;
  std::vector<Signature> signatures;      // every signature passing the filters, sorted
  uint64_t launches = 0;                  // launches aggregated into signatures
  uint64_t timed_launches = 0;
  // Of `launches`, those made under sampled timing, and of those the timed ones.
  uint64_t sampled_launches = 0;
  uint64_t sampled_timed = 0;
  // Events read twice (same process and seq, e.g. in a spill file and in the collector's log
  // after a reconnect): counted once, the later copies skipped.
  uint64_t duplicate_events = 0;
  bool several_device_models = false;  // the signatures span more than one device model
  std::optional<RetargetDevice> retarget;
  // Every launch aggregated into `signatures`, in the order read, up to
  // ReportOptions::max_kept_launches; filled only under ReportOptions::keep_launches.
  // kept_launches_complete: every aggregated launch is there (none beyond the limit).
  std::vector<KeptLaunch> kept_launches;
  bool kept_launches_complete = true;
  // Every aggregated launch per timeline lane, in time bins, by (process, device, stream);
  // filled under ReportOptions::keep_launches (the timeline's input when kept_launches is not
  // complete).
  std::vector<LaneDensity> lanes;
  ReadBounds bounds;
  // The jobs the processes name (attribution "job"), by job id; empty when none names one.
  std::vector<JobView> jobs;
  uint64_t processes_without_job = 0;  // processes of `processes` whose attribution has no job
  // With --job, --rank or --pod: processes left out because they do not match, and because the
  // events read before their process_start could not be matched (process_start not read first:
  // those events are left out, and counted).
  uint64_t processes_not_selected = 0;
  uint64_t events_before_attribution = 0;
};

// The GPU time of the report's signatures in all: measured (the kernel_time durations) and, when
// some launches were made under sampled timing, estimated (EstimatedGpuNs of each signature with
// sampled launches, the measured time of the others).
struct GpuTimeTotals {
  uint64_t measured_ns = 0;  // saturating
  std::optional<uint64_t> estimate_ns;  // set when report.sampled_launches > 0
  // Signatures with sampled launches none of which was timed: their GPU time is unknown and the
  // estimate leaves them out (it is then a lower bound).
  uint64_t unknown_signatures = 0;
};
GpuTimeTotals TotalGpuTime(const Report& report);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_REPORT_MODEL_H_
