#include "cuflight/report/build_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <string_view>
#include <iterator>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <variant>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/report/advice.h"
#include "cuflight/report/device_spec.h"
#include "cuflight/report/duration_stats.h"
#include "cuflight/report/job_view.h"
#include "cuflight/report/launch_filter.h"
#include "cuflight/report/limiter_name.h"
#include "cuflight/report/read_once.h"
#include "cuflight/report/retarget.h"
#include "cuflight/report/review.h"
#include "cuflight/report/text_format.h"
#include "cuflight/report/time_bins.h"
#include "cuflight/schema/log_layout.h"
#include "cuflight/schema/routine_failures.h"
#include "cuflight/schema/sticky_errors.h"
#include "cuflight/report/join_key.h"
#include "cuflight/report/join_table.h"

namespace cuflight::report {
namespace {

namespace fs = std::filesystem;
using schema::Resource;



// The last ReportOptions::review_launches launches of one stream, in a ring whose slots (and
// their name strings) are reused.
struct StreamState {
  StreamTail tail;
  std::vector<LaunchSummary> ring;  // without their names until Finish
  std::vector<uint32_t> ring_signature;  // each slot's builder signature: its name
  size_t next = 0;  // the slot the next launch takes
};

struct DeviceInfo {
  std::string name;
  std::string uuid;
  int warp_size = 32;
  occupancy::DeviceLimits limits;
};

occupancy::DeviceLimits LimitsOf(const schema::OwnedDeviceEvent& e) {
  occupancy::DeviceLimits l;
  l.cc_major = e.cc_major;
  l.cc_minor = e.cc_minor;
  l.sm_count = e.sm_count;
  l.max_threads_per_block = e.max_threads_per_block;
  l.max_threads_per_sm = e.max_threads_per_sm;
  l.max_blocks_per_sm = e.max_blocks_per_sm;
  l.regs_per_sm = e.regs_per_sm;
  l.regs_per_block = e.regs_per_block;
  l.smem_per_sm = e.smem_per_sm;
  l.smem_per_block = e.smem_per_block;
  l.smem_per_block_optin = e.smem_per_block_optin;
  l.reserved_smem_per_block = e.reserved_smem_per_block;
  l.warp_size = e.warp_size > 0 ? e.warp_size : 32;
  l.max_cluster_size = e.max_cluster_size;
  return l;
}

struct ProcessState {
  ProcessSummary summary;
  std::map<int32_t, DeviceInfo> devices;
  std::map<std::pair<int32_t, uint64_t>, StreamState> streams;
  std::optional<uint64_t> last_kernel_seq;
  std::optional<uint64_t> last_api_error_seq;
  std::optional<uint64_t> stats_dropped_seq;
  std::optional<uint64_t> last_stall_seq;
  // Its last launch (the highest seq) without its name, and its builder signature (the name).
  std::optional<LaunchSummary> last_launch;
  uint32_t last_launch_signature = 0;
  int32_t last_launch_device = 0;
  uint64_t last_launch_stream = 0;
  CompletionEvidence completion;
  // Under --job, --rank, --pod: whether its process_start matched (kUnknown until it is read).
  enum class Selected : uint8_t { kUnknown, kYes, kNo } selected = Selected::kUnknown;
  // The seqs of the process's events read so far, as disjoint ranges [first, last] keyed by
  // first: a stream is mostly contiguous, so this stays small.
  std::map<uint64_t, uint64_t> seen_seqs;
};

// A signature's key as the event states it, for lookups without copying the names.
struct SignatureKeyView {
  std::string_view name;
  uint32_t bx, by, bz;
  int64_t dyn_smem;
  int32_t regs;
  std::string_view model;
  bool operator==(const SignatureKeyView&) const = default;
};

struct SignatureKeyHash {
  size_t operator()(const SignatureKeyView& k) const {
    uint64_t h = SampledHash(k.name) ^ (SampledHash(k.model) * 0x94D049BB133111EBull);
    const uint64_t shape = (uint64_t{k.bx} << 40) ^ (uint64_t{k.by} << 20) ^ k.bz ^
                           (static_cast<uint64_t>(k.dyn_smem) << 13) ^
                           (static_cast<uint64_t>(static_cast<uint32_t>(k.regs)) << 3);
    h ^= shape * 0xC2B2AE3D27D4EB4Full;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

struct SignatureState {
  Signature sig;
  // The key's strings, owned here; the index's key views point into them (SignatureState lives
  // in a deque, so they stay put).
  std::string key_name;
  std::string key_model;
  std::string display;  // the demangled name, or the mangled one (the review's launches)
  bool name_selected = true;  // the --kernel regex matches it
  bool limiter_selected = true;  // its first launch's limiting resource is --limiter's
  bool has_first = false;  // a launch passed the filters and set `sig.first`
  uint64_t processes = 0;
  size_t last_process = std::numeric_limits<size_t>::max();
  std::vector<bool> process_seen;  // by builder process index
  double waves_sum = 0;
  double tail_sum = 0;
  int warp_size = 32;
  DurationAccumulator durations;
};

// A kernel_time's GPU start, end and duration.
struct GpuTime {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t duration_ns;
};

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// A launch waiting for its kernel_time.
struct PendingLaunch {
  uint32_t process;    // builder process index
  uint64_t seq;
  int64_t ts_ns;
  uint32_t signature;  // builder signature index; kNone when the filters left it out
  uint32_t lane;       // index into lanes_; kNone when not aggregated or no timeline
  bool sampled;        // made under sampled timing (Aggregate)
  uint32_t kept;       // index into Report::kept_launches; kNone when not kept
  StreamState* stream;  // its review ring
  size_t slot;          // its slot in the ring, while the slot still holds it (same seq)
};

class Builder {
 public:
  Builder(const ReportOptions& options, Report* report)
      : options_(options), report_(report), filter_(options) {
    if (!options.limiter.empty()) limiter_ = ParseLimiter(options.limiter);
  }

  bool Read(const std::vector<fs::path>& files, std::string* error) {
    logread::ReadOptions read;
    read.threads = options_.read_threads;
    read.on_progress = options_.on_progress;
    // Which file an event comes from decides its process (ProcessKeyOfLogFile): the file name
    // is parsed once per file, when its first event arrives.
    const fs::path* current = nullptr;
    const bool ok = logread::ReadLogFiles(
        files,
        [&](const schema::OwnedEvent& event, const logread::Origin& origin) {
          if (origin.file != current) {
            current = origin.file;
            keys_.SetFile(current);
            file_process_ = kNoProcess;
            by_config_.clear();  // configuration ids are the file's
          }
          config_ = origin.config;
          OnEvent(event);
        },
        read, &report_->read, error);
    if (!ok) return false;
    report_->files = files;
    return true;
  }

  void Finish() {
    // Launches still waiting for their kernel_time are untimed; times still waiting had no kernel.
    pending_.ForEach([&](const PendingLaunch& l) { Untimed(l); });
    report_->bounds.times_without_kernel += early_times_.size();
    pending_.Clear();
    early_times_.clear();
    FinishProcesses();
    FinishSignatures();
    if (options_.keep_launches) FinishTimeline();
    Notes();
  }

 private:
  size_t ProcessIndex(const ProcessKey& key) {
    auto [it, inserted] = process_index_.try_emplace(key, processes_.size());
    if (inserted) {
      processes_.emplace_back();
      processes_.back().summary.key = key;
    }
    return it->second;
  }

  size_t ProcessOf(const schema::Header& h) {
    if (keys_.FromFile(h.pid)) {
      // The file names the process: the same key for every event of the file.
      if (file_process_ == kNoProcess) file_process_ = ProcessIndex(keys_.KeyOf(h.pid));
      return file_process_;
    }
    return ProcessIndex(keys_.KeyOf(h.pid));
  }

  void OnEvent(const schema::OwnedEvent& event) {
    const schema::Header& h = schema::HeaderOf(event);
    if (!filter_.Pid(h.pid)) return;
    if (const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&event)) {
      keys_.Note(*start);
    }
    const size_t index = ProcessOf(h);
    ProcessState& p = processes_[index];
    if (filter_.filters_attribution()) {
      using Selected = ProcessState::Selected;
      if (const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&event)) {
        p.selected = filter_.Attribution(start->attribution) ? Selected::kYes : Selected::kNo;
      }
      if (p.selected == Selected::kUnknown) {
        ++report_->events_before_attribution;  // who it is is not known yet: not guessed
        return;
      }
      if (p.selected == Selected::kNo) return;
    }
    // process_lost is the collector's and carries the producer's last seq: not a duplicate.
    if (!std::holds_alternative<schema::OwnedProcessLostEvent>(event) &&
        !MarkSeen(&p.seen_seqs, h.seq)) {
      ++report_->duplicate_events;
      return;
    }
    ProcessSummary& s = p.summary;
    if (s.events == 0 || h.ts_ns < s.first_ts_ns) s.first_ts_ns = h.ts_ns;
    s.last_ts_ns = std::max(s.last_ts_ns, h.ts_ns);
    ++s.events;
    std::visit([&](const auto& e) { On(index, p, e); }, event);
  }

  // The log reader delivers a launch as its kernel event and keeps descriptions to itself
  // (logread's Expansion): neither reaches here.
  void On(size_t, ProcessState&, const schema::OwnedKernelConfigEvent&) {}
  void On(size_t, ProcessState&, const schema::OwnedLaunchEvent&) {}

  void On(size_t, ProcessState& p, const schema::OwnedProcessStartEvent& e) {
    ProcessSummary& s = p.summary;
    s.has_start = true;
    s.hostname = e.hostname;
    s.exe = e.exe;
    s.argv = e.argv;
    s.attribution = e.attribution;
    for (const auto& [name, value] : e.config) {
      // process_start's config names variables without "CUFLIGHT_", in lower case.
      if (name == "timing" || name == "CUFLIGHT_TIMING") {
        s.timing_policy = TimingPolicyOfConfig(value);
      }
    }
  }

  void On(size_t, ProcessState& p, const schema::OwnedDeviceEvent& e) {
    p.devices[e.device] = {e.name, e.uuid, e.warp_size > 0 ? e.warp_size : 32, LimitsOf(e)};
    by_config_.clear();  // a signature's key holds its device's model
  }

  void On(size_t index, ProcessState& p, const schema::OwnedKernelEvent& e) {
    ProcessSummary& s = p.summary;
    ++s.kernels;
    p.last_kernel_seq = std::max(p.last_kernel_seq.value_or(0), e.header.seq);

    // The stream and the signature of a launch of a configuration already seen in this file and
    // process are those of its configuration's first launch (Origin::config).
    ConfigEntry* entry = nullptr;
    if (config_ != 0 && config_ < kMaxConfigEntries) {
      if (by_config_.size() <= config_) by_config_.resize(config_ + 1);
      entry = &by_config_[config_];
      if (entry->process != index) {
        entry->process = index;
        entry->stream = &p.streams[{e.device, e.stream}];
        entry->signature = SignatureOf(p, e);
      }
    }
    StreamState& stream = entry != nullptr ? *entry->stream : p.streams[{e.device, e.stream}];
    stream.tail.device = e.device;
    stream.tail.stream = e.stream;
    ++stream.tail.launches;
    PendingLaunch launch{static_cast<uint32_t>(index), e.header.seq, e.header.ts_ns, kNone, kNone,
                         false, kNone, nullptr, 0};
    const uint32_t signature = entry != nullptr ? entry->signature : SignatureOf(p, e);
    if (!p.last_launch || e.header.seq >= p.last_launch->seq) {
      LaunchSummary& l = p.last_launch ? *p.last_launch : p.last_launch.emplace();
      l.seq = e.header.seq;
      l.ts_ns = e.header.ts_ns;
      l.correlation_id = e.correlation_id;
      l.graph_node_id = e.graph_node_id.value_or(0);
      l.grid = e.grid;
      l.block = e.block;
      l.occupancy = e.occupancy.occupancy;
      l.duration_ns.reset();
      l.timing_window = e.timing_window;
      p.last_launch_signature = signature;
      p.last_launch_device = e.device;
      p.last_launch_stream = e.stream;
    }
    if (options_.review_launches > 0) {
      const auto n = static_cast<size_t>(options_.review_launches);
      if (stream.ring.size() < n) {
        stream.ring.emplace_back();
        stream.ring_signature.push_back(kNone);
      }
      const size_t slot = stream.ring.size() < n ? stream.ring.size() - 1 : stream.next;
      stream.next = (slot + 1) % n;
      LaunchSummary& l = stream.ring[slot];
      l.seq = e.header.seq;
      l.ts_ns = e.header.ts_ns;
      l.correlation_id = e.correlation_id;
      l.graph_node_id = e.graph_node_id.value_or(0);
      l.timing_window = e.timing_window;
      l.grid = e.grid;
      l.block = e.block;
      l.occupancy = e.occupancy.occupancy;
      l.duration_ns.reset();
      l.in_error = false;
      stream.ring_signature[slot] = signature;
      launch.stream = &stream;
      launch.slot = slot;
    }

    const uint32_t sig = Aggregate(index, signature, e);
    if (sig != kNone) {
      launch.signature = sig;
      launch.sampled = e.timing_window.has_value();
      if (options_.keep_launches) {
        launch.lane = LaneOf(index, e.device, e.stream);
        if (report_->kept_launches.size() < options_.max_kept_launches) {
          launch.kept = static_cast<uint32_t>(report_->kept_launches.size());
          KeptLaunch k;
          k.process = static_cast<uint32_t>(index);  // builder indices, mapped in Finish
          k.signature = sig;
          k.device = e.device;
          k.stream = e.stream;
          k.correlation_id = e.correlation_id;
          k.graph_node_id = e.graph_node_id.value_or(0);
          k.seq = e.header.seq;
          k.ts_ns = e.header.ts_ns;
          report_->kept_launches.push_back(k);
        } else {
          report_->kept_launches_complete = false;
        }
      }
    }

    // Made outside a timing window of `sampled` (schema/README.md: false, "so none will come"):
    // no kernel_time to wait for. Kept waiting, such launches (most under `sampled`) would push
    // the ones whose time is coming out of the bounded wait, given up untimed.
    if (!schema::ExpectsKernelTime(e)) {
      Untimed(launch);
      return;
    }
    // Joined per kernel execution: the nodes of one graph launch share its correlation id, the
    // devices of one multi-device cooperative launch too (cuflight/schema/join_key.h).
    const JoinKey key{index, schema::JoinKeyOf(e)};
    if (const auto t = early_times_.find(key); t != early_times_.end()) {
      Timed(launch, t->second);  // the kernel_time came first (another file, or out of order)
      early_times_.erase(t);
      return;
    }
    pending_.Insert(key, launch);
    pending_order_.emplace_back(key, e.header.seq);
    while (pending_order_.size() > options_.max_pending_launches) {
      const auto [old_key, old_seq] = pending_order_.front();
      pending_order_.pop_front();
      pending_.TakeIf(
          old_key, [&](const PendingLaunch& l) { return l.seq == old_seq; },
          [&](const PendingLaunch& l) {
            Untimed(l);
            ++report_->bounds.launches_given_up;
          });
    }
    report_->bounds.peak_pending_launches =
        std::max<uint64_t>(report_->bounds.peak_pending_launches, pending_.size());
  }

  // A kernel_time joins every launch waiting with its key (the same launch read under two seqs
  // gets the same time); one that finds none waits for its kernel. A repeated key keeps the
  // first time read.
  void On(size_t index, ProcessState& p, const schema::OwnedKernelTimeEvent& e) {
    p.completion.last_kernel_time_seq =
        std::max(p.completion.last_kernel_time_seq.value_or(0), e.header.seq);
    const JoinKey key{index, schema::JoinKeyOf(e)};
    const GpuTime time{e.start_ns, e.end_ns, e.duration_ns};
    if (pending_.Take(key, [&](const PendingLaunch& l) { Timed(l, time); }) > 0) return;
    if (!early_times_.try_emplace(key, time).second) return;
    early_order_.push_back(key);
    while (early_order_.size() > options_.max_pending_times) {
      if (early_times_.erase(early_order_.front()) > 0) ++report_->bounds.times_given_up;
      early_order_.pop_front();
    }
    report_->bounds.peak_pending_times =
        std::max<uint64_t>(report_->bounds.peak_pending_times, early_times_.size());
  }

  void On(size_t, ProcessState& p, const schema::OwnedApiErrorEvent& e) {
    // Logs written before the injected library counted routine failures instead of sending them
    // hold such events: they are part of normal operation, never why a process failed.
    if (schema::IsRoutineFailure(e.api, e.code)) return;
    ++p.summary.api_errors;
    if (schema::IsStickyError(e.code) &&
        (!p.completion.sticky_error_seq || e.header.seq < *p.completion.sticky_error_seq)) {
      p.completion.sticky_error_seq = e.header.seq;
    }
    if (!p.last_api_error_seq || e.header.seq >= *p.last_api_error_seq) {
      p.last_api_error_seq = e.header.seq;
      p.summary.last_api_error = e;
    }
    std::vector<FailedCall>& calls = p.summary.failed_calls;
    const auto kind = std::find_if(calls.begin(), calls.end(), [&](const FailedCall& c) {
      return c.first.code == e.code && c.first.api == e.api;
    });
    if (kind != calls.end()) {
      ++kind->count;
      if (e.header.seq < kind->first.header.seq) kind->first = e;
    } else if (calls.size() < kMaxFailedCallKinds) {
      calls.push_back(FailedCall{1, e});
    } else {
      ++p.summary.failed_calls_left_out;
    }
  }

  // The timing policy in force and its windows, from an event that states them (older lines do
  // not: kUnknown leaves what process_start's config said).
  template <class E>
  static void TakeTimingPolicy(ProcessSummary& s, const E& e) {
    if (e.timing_policy == TimingPolicy::kUnknown) return;
    s.timing_policy = e.timing_policy;
    s.timing_windows = e.timing_windows;
    s.timing_window_ns = e.timing_window_ns;
    s.launches_in_window = e.launches_in_window;
  }

  void On(size_t, ProcessState& p, const schema::OwnedStatsEvent& e) {
    if (!p.summary.end && (!p.stats_dropped_seq || e.header.seq >= *p.stats_dropped_seq)) {
      p.stats_dropped_seq = e.header.seq;
      p.summary.dropped = e.dropped;
      p.summary.timing_dropped = e.timing_dropped;
      p.summary.timing_stopped = e.timing_stopped;
      p.summary.timing_stopped_reason = e.timing_stopped_reason;
      TakeTimingPolicy(p.summary, e);
    }
  }

  void On(size_t, ProcessState& p, const schema::OwnedProcessEndEvent& e) {
    p.summary.end = e;
    p.summary.dropped = e.dropped;
    p.summary.timing_dropped = e.timing_dropped;
    p.summary.timing_stopped = e.timing_stopped;
    p.summary.timing_stopped_reason = e.timing_stopped_reason;
    TakeTimingPolicy(p.summary, e);
  }

  void On(size_t, ProcessState& p, const schema::OwnedProcessLostEvent& e) {
    p.summary.lost = e;
  }

  void On(size_t, ProcessState& p, const schema::OwnedProcessCrashEvent& e) {
    if (!p.summary.crash || e.header.seq >= p.summary.crash->header.seq) {
      p.summary.crash = e;
      if (!p.summary.end) {
        p.summary.timing_stopped = e.timing_stopped;
        p.summary.timing_stopped_reason = e.timing_stopped_reason;
        TakeTimingPolicy(p.summary, e);
      }
    }
  }

  // A process's events are read in seq order (segments in order); one read out of order only
  // counts for the longest stall.
  void On(size_t, ProcessState& p, const schema::OwnedStallEvent& e) {
    StallSummary& s = p.summary.stall ? *p.summary.stall : p.summary.stall.emplace();
    s.longest_ms = std::max(s.longest_ms, e.stalled_ms);
    if (p.last_stall_seq && e.header.seq < *p.last_stall_seq) return;
    p.last_stall_seq = e.header.seq;
    const bool stalled = e.state == schema::StallState::kStalled;
    if (stalled && !s.ongoing) ++s.stalls;
    s.ongoing = stalled;
    if (stalled) s.latest = e;
  }

  // The builder signature of a launch (made on its first launch), whatever the filters.
  uint32_t SignatureOf(const ProcessState& p, const schema::OwnedKernelEvent& e) {
    const auto device = p.devices.find(e.device);
    const std::string_view model =
        device == p.devices.end() ? std::string_view() : std::string_view(device->second.name);
    const SignatureKeyView view{e.name, e.block.x, e.block.y, e.block.z, e.dyn_shared_bytes,
                                e.num_regs, model};
    const auto it = signature_index_.find(view);
    if (it != signature_index_.end()) return it->second;
    SignatureState& st = signatures_.emplace_back();
    st.key_name = e.name;
    st.key_model = std::string(model);
    st.display = e.demangled.empty() ? e.name : e.demangled;
    st.name_selected = filter_.NameMatches(e.name, e.demangled);
    st.warp_size = device == p.devices.end() ? 32 : device->second.warp_size;
    if (device != p.devices.end()) st.sig.device_limits = device->second.limits;
    SignatureKeyView owned = view;
    owned.name = st.key_name;
    owned.model = st.key_model;
    const auto index = static_cast<uint32_t>(signatures_.size() - 1);
    signature_index_.emplace(owned, index);
    return index;
  }

  // Aggregates the launch into its signature when it passes the filters (time window, --kernel,
  // --limiter); returns the signature, or kNone when it does not.
  uint32_t Aggregate(size_t index, uint32_t signature, const schema::OwnedKernelEvent& e) {
    SignatureState& st = signatures_[signature];
    if (!st.name_selected || !filter_.InWindow(e.header.ts_ns)) return kNone;
    if (!st.has_first) {
      // The first launch that passes the filters gives the signature its resources and
      // occupancy fields, and with them its limiting resource (--limiter).
      st.has_first = true;
      st.sig.name = e.name;
      st.sig.demangled = e.demangled;
      st.sig.device_model = st.key_model;
      st.sig.block = e.block;
      st.sig.dyn_smem = e.dyn_shared_bytes;
      st.sig.regs = e.num_regs;
      st.sig.first = e;
      st.sig.occupancy_min = e.occupancy.occupancy;
      st.sig.occupancy_max = e.occupancy.occupancy;
      st.sig.waves_min = e.occupancy.waves;
      st.sig.waves_max = e.occupancy.waves;
      // A kernel at full occupancy is limited by nothing (text_format.h: Limited).
      st.limiter_selected = !limiter_ || (e.occupancy.limiting_resource == *limiter_ &&
                                          Limited(e.occupancy));
    }
    if (!st.limiter_selected) return kNone;
    ++st.sig.launches;
    // The kernel event says it was made under sampled timing: timing_window is written then and
    // only then. Absent, the policy in force was all or off (a process_start asking for sampled
    // may have fallen back to all: its stats and process_end say so), and nothing is scaled.
    if (e.timing_window.has_value()) ++st.sig.sampled.launches;
    if (index != st.last_process) {
      st.last_process = index;
      if (st.process_seen.size() <= index) st.process_seen.resize(index + 1, false);
      if (!st.process_seen[index]) {
        st.process_seen[index] = true;
        ++st.processes;
      }
    }
    st.sig.occupancy_min = std::min(st.sig.occupancy_min, e.occupancy.occupancy);
    st.sig.occupancy_max = std::max(st.sig.occupancy_max, e.occupancy.occupancy);
    st.sig.waves_min = std::min(st.sig.waves_min, e.occupancy.waves);
    st.sig.waves_max = std::max(st.sig.waves_max, e.occupancy.waves);
    st.waves_sum += e.occupancy.waves;
    st.tail_sum += e.occupancy.tail_utilization;
    return signature;
  }

  uint32_t LaneOf(size_t process, int32_t device, uint64_t stream) {
    const auto [it, inserted] =
        lane_index_.try_emplace({process, device, stream}, static_cast<uint32_t>(lanes_.size()));
    if (inserted) lanes_.emplace_back();
    return it->second;
  }

  void Timed(const PendingLaunch& l, const GpuTime& t) {
    ProcessState& p = processes_[l.process];
    ++p.summary.timed_kernels;
    if (l.stream != nullptr && l.stream->ring[l.slot].seq == l.seq) {
      l.stream->ring[l.slot].duration_ns = t.duration_ns;
    }
    if (p.last_launch && p.last_launch->seq == l.seq) p.last_launch->duration_ns = t.duration_ns;
    if (l.signature == kNone) return;
    SignatureState& st = signatures_[l.signature];
    st.durations.Add(t.duration_ns);
    if (l.sampled) {
      Signature::SampledLaunches& sampled = st.sig.sampled;
      ++sampled.timed;
      sampled.measured_ns = t.duration_ns > UINT64_MAX - sampled.measured_ns
                                ? UINT64_MAX
                                : sampled.measured_ns + t.duration_ns;
    }
    if (l.lane != kNone) {
      lanes_[l.lane].Add(static_cast<int64_t>(t.start_ns), static_cast<int64_t>(t.end_ns),
                         l.signature, true);
    }
    if (l.kept != kNone) {
      KeptLaunch& k = report_->kept_launches[l.kept];
      k.timed = true;
      k.gpu_start_ns = static_cast<int64_t>(t.start_ns);
      k.gpu_end_ns = static_cast<int64_t>(t.end_ns);
    }
  }

  void Untimed(const PendingLaunch& l) {
    if (l.lane != kNone) lanes_[l.lane].Add(l.ts_ns, l.ts_ns, l.signature, false);
  }

  void Classify(ProcessState& p) {
    ProcessSummary& s = p.summary;
    const bool api_error_last =
        p.last_api_error_seq && (!p.last_kernel_seq || *p.last_api_error_seq > *p.last_kernel_seq);
    DescribeEnding(api_error_last, &s);
  }

  void FinishProcesses() {
    std::vector<std::pair<ProcessKey, size_t>> order(process_index_.begin(), process_index_.end());
    report_index_of_process_.assign(processes_.size(), 0);
    for (const auto& [key, index] : order) {
      report_index_of_process_[index] = static_cast<uint32_t>(report_->processes.size());
      ProcessState& p = processes_[index];
      if (filter_.filters_attribution() && p.selected != ProcessState::Selected::kYes) {
        ++report_->processes_not_selected;
        continue;
      }
      ProcessSummary& s = p.summary;
      for (const auto& [ordinal, device] : p.devices) {
        s.devices.emplace_back(ordinal, device.name);
        s.device_uuids.emplace_back(ordinal, device.uuid);
      }
      // Only a sticky error stops the kernels in flight; any other failed call is about itself.
      const std::vector<uint64_t>* error_ids =
          s.last_api_error && schema::IsStickyError(s.last_api_error->code)
              ? &s.last_api_error->last_correlation_ids
              : nullptr;
      p.completion.ended = s.end.has_value();
      p.completion.timing_dropped = s.timing_dropped;
      p.completion.timing = s.timing_policy;
      if (p.last_launch) {
        LaunchSummary& l = *p.last_launch;
        l.name = signatures_[p.last_launch_signature].display;
        l.completion =
            CompletionOf(p.completion, l.seq, l.duration_ns.has_value(), l.timing_window);
        s.last_kernel = std::move(l);
        s.last_kernel_device = p.last_launch_device;
        s.last_kernel_stream = p.last_launch_stream;
      }
      for (auto& [stream_key, stream] : p.streams) {
        StreamTail tail = stream.tail;
        // The ring, oldest first: from `next` once it is full.
        const size_t n = stream.ring.size();
        const size_t oldest =
            n == static_cast<size_t>(std::max(options_.review_launches, 0)) ? stream.next : 0;
        for (size_t i = 0; i < n; ++i) {
          const size_t slot = (oldest + i) % n;
          LaunchSummary& l = stream.ring[slot];
          l.name = signatures_[stream.ring_signature[slot]].display;
          l.completion =
              CompletionOf(p.completion, l.seq, l.duration_ns.has_value(), l.timing_window);
          l.in_error =
              l.completion == Completion::kNotFinished && error_ids != nullptr &&
              std::find(error_ids->begin(), error_ids->end(), l.correlation_id) != error_ids->end();
          tail.last.push_back(std::move(l));
        }
        s.streams.push_back(std::move(tail));
      }
      Classify(p);
      report_->processes.push_back(std::move(s));
    }
    for (ProcessSummary& s : report_->processes) {
      // Files are read in any order: the kinds by their first instance.
      std::sort(s.failed_calls.begin(), s.failed_calls.end(),
                [](const FailedCall& a, const FailedCall& b) {
                  return a.first.header.seq < b.first.header.seq;
                });
    }
    report_->review = SelectForReview(report_->processes);
    report_->review_groups = GroupReview(report_->processes, report_->review);
    report_->jobs = BuildJobViews(report_->processes, &report_->processes_without_job);
  }

  void FinishSignatures() {
    std::optional<occupancy::DeviceContext> target;
    if (!options_.retarget.empty()) {
      const occupancy::DevicePreset* preset = ResolveDevicePreset(options_.retarget).preset;
      if (preset != nullptr) {
        report_->retarget =
            RetargetDevice{std::string(preset->key), std::string(preset->name), preset->limits};
        target = occupancy::DeviceContext::Make(preset->limits);
      }
    }
    std::set<std::string> models;
    for (uint32_t i = 0; i < signatures_.size(); ++i) {
      SignatureState& st = signatures_[i];
      Signature& sig = st.sig;
      if (sig.launches == 0) continue;  // no launch passed the filters
      sig.processes = st.processes;
      if (st.durations.count() > 0) sig.gpu_time = st.durations.Finish();
      const double n = static_cast<double>(sig.launches);
      sig.waves_mean = st.waves_sum / n;
      sig.tail_mean = st.tail_sum / n;
      sig.warps_per_block = WarpsPerBlock(sig.fields(), sig.block, st.warp_size);
      sig.resources = ResourceLimits(sig.fields(), sig.warps_per_block);
      sig.advice = Advice(sig);
      if (target) sig.retarget = RetargetSignature(sig, *target);
      report_->launches += sig.launches;
      report_->timed_launches += sig.gpu_time ? sig.gpu_time->count : 0;
      report_->sampled_launches += sig.sampled.launches;
      report_->sampled_timed += sig.sampled.timed;
      models.insert(sig.device_model);
      report_->signatures.push_back(std::move(sig));
      builder_index_of_signature_.push_back(i);
    }
    report_->several_device_models = models.size() > 1;
    // Sort, remembering where each builder signature went.
    std::vector<Signature> sorted = report_->signatures;
    SortSignatures(options_.sort, &sorted);
    report_index_of_signature_.assign(signatures_.size(), kNone);
    // SortSignatures is a stable sort over a total order of (key, launches, name, model, smem,
    // regs) ties: match the sorted entries back by their full key.
    std::map<std::tuple<std::string, std::string, uint32_t, uint32_t, uint32_t, int64_t, int32_t>,
             uint32_t>
        builder_of;
    for (size_t i = 0; i < report_->signatures.size(); ++i) {
      const Signature& s = report_->signatures[i];
      builder_of[{s.name, s.device_model, s.block.x, s.block.y, s.block.z, s.dyn_smem, s.regs}] =
          builder_index_of_signature_[i];
    }
    for (size_t i = 0; i < sorted.size(); ++i) {
      const Signature& s = sorted[i];
      report_index_of_signature_[builder_of[{s.name, s.device_model, s.block.x, s.block.y,
                                             s.block.z, s.dyn_smem, s.regs}]] =
          static_cast<uint32_t>(i);
    }
    report_->signatures = std::move(sorted);
  }

  uint32_t ReportSignature(uint32_t builder) const {
    if (builder == kMixedSignatures || builder == kNoSignature) return builder;
    return report_index_of_signature_[builder];
  }

  void FinishTimeline() {
    for (KeptLaunch& k : report_->kept_launches) {
      k.process = report_index_of_process_[k.process];
      k.signature = ReportSignature(k.signature);
    }
    std::vector<std::pair<std::tuple<uint32_t, int32_t, uint64_t>, uint32_t>> order;
    for (const auto& [key, lane] : lane_index_) {
      order.push_back({{report_index_of_process_[std::get<0>(key)], std::get<1>(key),
                        std::get<2>(key)},
                       lane});
    }
    std::sort(order.begin(), order.end());
    for (const auto& [key, index] : order) {
      const TimeBins& bins = lanes_[index];
      if (bins.empty()) continue;
      LaneDensity lane;
      lane.process = std::get<0>(key);
      lane.device = std::get<1>(key);
      lane.stream = std::get<2>(key);
      lane.launches = bins.launches();
      lane.timed = bins.timed();
      lane.origin_ns = bins.origin_ns();
      lane.bin_ns = bins.bin_ns();
      lane.bins = bins.bins();
      for (DensityBin& b : lane.bins) b.signature = ReportSignature(b.signature);
      report_->lanes.push_back(std::move(lane));
    }
  }

  void Notes() {
    const ReadBounds& b = report_->bounds;
    auto note = [&](std::string text) {
      if (report_->read.notes.size() < logread::ReadSummary::kMaxNotes) {
        report_->read.notes.push_back(std::move(text));
      } else {
        ++report_->read.notes_left_out;
      }
    };
    if (b.launches_given_up > 0) {
      note(fmt::format("{} launches counted untimed: their kernel_time had not come within {} "
                       "later launches",
                       b.launches_given_up, options_.max_pending_launches));
    }
    if (b.times_given_up > 0) {
      note(fmt::format("{} kernel_time events dropped: their kernel had not come within {} later "
                       "kernel_time events",
                       b.times_given_up, options_.max_pending_times));
    }
  }

  static constexpr size_t kNoProcess = std::numeric_limits<size_t>::max();

  // What the launches of one configuration of the file being read share (Origin::config): its
  // process's stream and its signature, whose key (name, block, shared memory, registers, the
  // device's model) the configuration fixes. Valid for the process that read it; cleared at each
  // new file (ids are the file's) and each device event (the model is the key's).
  struct ConfigEntry {
    size_t process = kNoProcess;
    StreamState* stream = nullptr;  // a node of the process's `streams`: it stays put
    uint32_t signature = kNone;
  };
  // Ids up to this are looked up in by_config_ (a producer counts them from 1); larger ones as
  // launches read whole are.
  static constexpr uint64_t kMaxConfigEntries = 1 << 16;

  const ReportOptions& options_;
  Report* report_;
  LaunchFilter filter_;
  std::optional<Resource> limiter_;
  ProcessKeys keys_;
  size_t file_process_ = kNoProcess;
  uint64_t config_ = 0;                 // Origin::config of the event being read
  std::vector<ConfigEntry> by_config_;  // by Origin::config, in the file being read
  std::map<ProcessKey, size_t> process_index_;
  std::deque<ProcessState> processes_;
  std::unordered_map<SignatureKeyView, uint32_t, SignatureKeyHash> signature_index_;
  std::deque<SignatureState> signatures_;
  JoinTable<PendingLaunch> pending_;
  std::deque<std::pair<JoinKey, uint64_t>> pending_order_;  // (key, seq), oldest first
  std::unordered_map<JoinKey, GpuTime, JoinKeyHash> early_times_;
  std::deque<JoinKey> early_order_;
  std::map<std::tuple<size_t, int32_t, uint64_t>, uint32_t> lane_index_;
  std::deque<TimeBins> lanes_;
  std::vector<uint32_t> report_index_of_process_;    // builder's process index -> Report's
  std::vector<uint32_t> builder_index_of_signature_;  // Report's (unsorted) -> builder's
  std::vector<uint32_t> report_index_of_signature_;  // builder's -> Report's (sorted)
};

}  // namespace

std::string ProcessName(const ProcessSummary& p) {
  std::string name = fmt::format("pid {}", p.key.pid);
  if (!p.exe.empty()) {
    const size_t slash = p.exe.rfind('/');
    name += " " + (slash == std::string::npos ? p.exe : p.exe.substr(slash + 1));
  }
  const std::string_view job = AttributionValue(p, "job");
  const std::string_view rank = AttributionValue(p, "rank");
  if (!job.empty() && !rank.empty()) {
    name += fmt::format(" (job {}, rank {})", job, rank);
  } else if (!job.empty()) {
    name += fmt::format(" (job {})", job);
  } else if (!rank.empty()) {
    name += fmt::format(" (rank {})", rank);
  }
  return name;
}

TimingPolicy TimingPolicyOfConfig(std::string_view value) {
  if (value == "sampled") return TimingPolicy::kSampled;
  if (value == "off" || value == "0" || value == "false") return TimingPolicy::kOff;
  return TimingPolicy::kAll;  // "all", and "1", "true", "on" as older producers wrote it
}

double TimedFraction(const Signature& s) {
  if (s.launches == 0) return 0;
  return static_cast<double>(s.gpu_time ? s.gpu_time->count : 0) /
         static_cast<double>(s.launches);
}

std::optional<uint64_t> EstimatedGpuNs(const Signature& s) {
  const Signature::SampledLaunches& sampled = s.sampled;
  if (sampled.launches == 0 || sampled.timed == 0) return std::nullopt;
  const uint64_t measured = s.gpu_time ? s.gpu_time->total_ns : 0;
  // Launches of processes timing every launch count as measured; the sampled ones scale.
  const long double scaled = static_cast<long double>(sampled.measured_ns) *
                             static_cast<long double>(sampled.launches) /
                             static_cast<long double>(sampled.timed);
  const uint64_t others = measured >= sampled.measured_ns ? measured - sampled.measured_ns : 0;
  const long double total = static_cast<long double>(others) + scaled;
  if (total >= static_cast<long double>(UINT64_MAX)) return UINT64_MAX;
  return static_cast<uint64_t>(std::llroundl(total));
}

GpuTimeTotals TotalGpuTime(const Report& report) {
  GpuTimeTotals t;
  auto add = [](uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; };
  uint64_t estimate = 0;
  for (const Signature& s : report.signatures) {
    const uint64_t measured = s.gpu_time ? s.gpu_time->total_ns : 0;
    t.measured_ns = add(t.measured_ns, measured);
    if (s.sampled.launches == 0) {
      estimate = add(estimate, measured);
    } else if (const std::optional<uint64_t> e = EstimatedGpuNs(s)) {
      estimate = add(estimate, *e);
    } else {
      ++t.unknown_signatures;
      estimate = add(estimate, measured);  // its launches of processes timing every launch
    }
  }
  if (report.sampled_launches > 0) t.estimate_ns = estimate;
  return t;
}

std::string_view AttributionValue(const ProcessSummary& p, std::string_view key) {
  for (const auto& [k, v] : p.attribution) {
    if (k == key) return v;
  }
  return {};
}

std::string TimingStoppedNote(const ProcessSummary& p) {
  if (p.timing_stopped_reason == schema::TimingStoppedReason::kNone) return "";
  const std::string who = ProcessName(p);
  const std::string launches = fmt::format("{} {}", p.timing_stopped,
                                           p.timing_stopped == 1 ? "launch has" : "launches have");
  if (p.timing_stopped_reason == schema::TimingStoppedReason::kUnavailable) {
    return fmt::format("{}: kernel timing was unavailable (another CUPTI tool held kernel activity "
                       "tracing); {} no GPU time",
                       who, launches);
  }
  return fmt::format("{}: kernel timing records stopped arriving while launches went on (another "
                     "CUPTI client such as torch.profiler took over the activity buffers or "
                     "disabled kernel records, or the GPU stopped completing kernels); {} no GPU "
                     "time",
                     who, launches);
}

// What a collector log file's name states (cuflight/schema/log_layout.h): pid and start_ns, and
// for names with an owner the instance id and the owner.
std::optional<ProcessKey> ProcessKeyOfLogFile(const fs::path& file) {
  const schema::ParsedLogFileName parsed =
      schema::ParseLogFileName(file.filename().native());
  if (parsed.kind == schema::LogFileKind::kOther) return std::nullopt;
  schema::StreamNameParts parts;
  if (!schema::ParseStreamBaseName(parsed.base, &parts)) return std::nullopt;
  ProcessKey key;
  key.pid = parts.pid;
  key.start_ns = parts.start_ns;
  key.instance_id = parts.instance_id;
  key.owner = std::move(parts.owner);
  return key;
}

void ProcessKeys::SetFile(const fs::path* file) {
  file_key_.reset();
  if (file != nullptr) file_key_ = ProcessKeyOfLogFile(*file);
}

void ProcessKeys::Note(const schema::OwnedProcessStartEvent& start) {
  const int32_t pid = start.header.pid;
  if (FromFile(pid)) return;
  ProcessKey& key = start_of_pid_[pid];
  key = ProcessKey();
  key.pid = pid;
  key.start_ns = start.start_ns;
  key.instance_id = start.instance_id;
}

const ProcessKey& ProcessKeys::KeyOf(int32_t pid) {
  if (FromFile(pid)) return *file_key_;
  const auto it = start_of_pid_.find(pid);
  if (it != start_of_pid_.end()) return it->second;
  pid_only_ = ProcessKey();
  pid_only_.pid = pid;
  return pid_only_;
}

bool CheckReportOptions(const ReportOptions& options, std::string* error) {
  if (!options.kernel_regex.empty()) {
    try {
      std::regex re(options.kernel_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      *error = fmt::format("--kernel '{}' is not a valid ECMAScript regular expression: {}",
                           options.kernel_regex, e.what());
      return false;
    }
  }
  if (!options.limiter.empty() && !ParseLimiter(options.limiter)) {
    *error = LimiterError(options.limiter);
    return false;
  }
  if (!options.retarget.empty()) {
    const ResolvedPreset resolved = ResolveDevicePreset(options.retarget);
    if (resolved.preset == nullptr) {
      *error = "--retarget " + resolved.error + resolved.hint;
      return false;
    }
  }
  if (options.top < -1) {
    *error = fmt::format("--top {} is out of range: use 0 (all) or more", options.top);
    return false;
  }
  if (options.review_launches < 0 || options.review_launches > 1000) {
    *error = fmt::format("--review-launches {} is out of range: use 0..1000",
                         options.review_launches);
    return false;
  }
  // The attribution cuts values to 256 bytes and replaces control characters (docs/fleet.md):
  // a longer value, or one with a control character, can match no process.
  for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{"--job", options.job},
                                    {"--pod", options.pod}}) {
    const bool control = std::any_of(value.begin(), value.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (value.size() > 256 || control) {
      *error = fmt::format("{} is not an attribution value: at most 256 bytes, no control "
                           "characters",
                           flag);
      return false;
    }
  }
  for (const int32_t rank : options.ranks) {
    if (rank < 0) {
      *error = fmt::format("--rank {} is out of range: use 0 or more", rank);
      return false;
    }
  }
  if (options.since_ns && options.until_ns && *options.since_ns > *options.until_ns) {
    *error = "--since is after --until: the time window is empty";
    return false;
  }
  return true;
}

bool BuildReport(const ReportOptions& options, const std::vector<fs::path>& files, Report* report,
                 std::string* error) {
  *report = Report{};
  Builder builder(options, report);
  if (!builder.Read(files, error)) return false;
  builder.Finish();
  return true;
}

void SortSignatures(SortKey key, std::vector<Signature>* signatures) {
  auto total = [](const Signature& s) { return s.gpu_time ? s.gpu_time->total_ns : 0; };
  auto by_key = [&](const Signature& a, const Signature& b) -> int {
    switch (key) {
      case SortKey::kTime:
        if (total(a) != total(b)) return total(a) > total(b) ? -1 : 1;
        break;
      case SortKey::kLaunches:
        break;
      case SortKey::kOccupancy:
        if (a.fields().occupancy != b.fields().occupancy) {
          return a.fields().occupancy < b.fields().occupancy ? -1 : 1;
        }
        break;
    }
    if (a.launches != b.launches) return a.launches > b.launches ? -1 : 1;
    return 0;
  };
  std::stable_sort(signatures->begin(), signatures->end(),
                   [&](const Signature& a, const Signature& b) {
                     const int c = by_key(a, b);
                     if (c != 0) return c < 0;
                     return std::tie(a.name, a.device_model, a.dyn_smem, a.regs) <
                            std::tie(b.name, b.device_model, b.dyn_smem, b.regs);
                   });
}

}  // namespace cuflight::report
