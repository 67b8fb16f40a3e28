#include "cuflight/report/build_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>
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
#include "cuflight/report/limiter_name.h"
#include "cuflight/report/retarget.h"
#include "cuflight/report/review.h"
#include "cuflight/report/text_format.h"
#include "cuflight/schema/log_layout.h"
#include "cuflight/schema/routine_failures.h"
#include "cuflight/schema/sticky_errors.h"
#include "join_key.h"

namespace cuflight::report {
namespace {

namespace fs = std::filesystem;
using schema::Resource;

struct StreamState {
  StreamTail tail;
  std::deque<LaunchSummary> last;
};

struct DeviceInfo {
  std::string name;
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
  std::vector<schema::JoinKey> kernel_keys;  // every kernel event's, for the timed count
  std::optional<uint64_t> last_kernel_seq;
  std::optional<uint64_t> last_api_error_seq;
  std::optional<uint64_t> stats_dropped_seq;
  std::optional<uint64_t> last_stall_seq;
  CompletionEvidence completion;
  // The seqs of the process's events read so far, as disjoint ranges [first, last] keyed by
  // first: a stream is mostly contiguous, so this stays small.
  std::map<uint64_t, uint64_t> seen_seqs;
};

// Adds `seq` to `seen`; false when it was there already.
bool MarkSeen(std::map<uint64_t, uint64_t>* seen, uint64_t seq) {
  auto next = seen->upper_bound(seq);  // first range starting after seq
  if (next != seen->begin()) {
    auto prev = std::prev(next);
    if (seq <= prev->second) return false;  // inside [first, last]
    if (prev->second + 1 == seq) {
      prev->second = seq;
      if (next != seen->end() && next->first == seq + 1) {  // now touches the next range
        prev->second = next->second;
        seen->erase(next);
      }
      return true;
    }
  }
  if (next != seen->end() && next->first == seq + 1) {
    const uint64_t last = next->second;
    seen->erase(next);
    seen->emplace(seq, last);
    return true;
  }
  seen->emplace(seq, seq);
  return true;
}

using SignatureKey = std::tuple<std::string, uint32_t, uint32_t, uint32_t, int64_t, int32_t,
                                std::string>;

struct SignatureState {
  Signature sig;
  std::set<size_t> processes;
  double waves_sum = 0;
  double tail_sum = 0;
  int warp_size = 32;
  std::vector<uint64_t> durations;
};

// A launch aggregated into a signature (indices into the builder's own process and signature
// lists).
struct Launch {
  uint32_t process;
  uint32_t signature;
  int32_t device;
  uint64_t stream;
  uint64_t correlation_id;
  uint64_t graph_node_id;  // 0: not a graph node
  uint64_t seq;
  int64_t ts_ns;

  schema::JoinKey key() const { return {correlation_id, graph_node_id, device}; }
};

// A kernel_time's GPU start, end and duration.
struct GpuTime {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t duration_ns;
};

class Builder {
 public:
  Builder(const ReportOptions& options, Report* report) : options_(options), report_(report) {
    if (!options.kernel_regex.empty()) {
      regex_.emplace(options.kernel_regex, std::regex::ECMAScript);
    }
    pids_.insert(options.pids.begin(), options.pids.end());
  }

  bool Read(const std::vector<fs::path>& files, std::string* error) {
    for (const fs::path& file : files) {
      file_key_ = ProcessKeyOfLogFile(file);
      const bool ok = logread::ReadLogFile(
          file,
          [&](const schema::OwnedEvent& event, const logread::Origin&) { OnEvent(event); },
          &report_->read, error);
      if (!ok) return false;
      report_->files.push_back(file);
    }
    return true;
  }

  void Finish() {
    FinishProcesses();
    FinishSignatures();
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
    if (file_key_ && file_key_->pid == h.pid) return ProcessIndex(*file_key_);
    const auto it = start_of_pid_.find(h.pid);
    if (it != start_of_pid_.end()) return ProcessIndex(it->second);
    ProcessKey key;
    key.pid = h.pid;
    return ProcessIndex(key);
  }

  void OnEvent(const schema::OwnedEvent& event) {
    const schema::Header& h = schema::HeaderOf(event);
    if (!pids_.empty() && !pids_.contains(h.pid)) return;
    if (const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&event)) {
      if (!(file_key_ && file_key_->pid == h.pid)) {
        ProcessKey& key = start_of_pid_[h.pid];
        key = ProcessKey();
        key.pid = h.pid;
        key.start_ns = start->start_ns;
        key.instance_id = start->instance_id;
      }
    }
    const size_t index = ProcessOf(h);
    ProcessState& p = processes_[index];
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

  void On(size_t, ProcessState& p, const schema::OwnedProcessStartEvent& e) {
    ProcessSummary& s = p.summary;
    s.has_start = true;
    s.hostname = e.hostname;
    s.exe = e.exe;
    s.argv = e.argv;
    for (const auto& [name, value] : e.config) {
      if (name == "CUFLIGHT_TIMING") {
        p.completion.timing_off = value == "off" || value == "0" || value == "false";
      }
    }
  }

  void On(size_t, ProcessState& p, const schema::OwnedDeviceEvent& e) {
    p.devices[e.device] = {e.name, e.warp_size > 0 ? e.warp_size : 32, LimitsOf(e)};
  }

  void On(size_t index, ProcessState& p, const schema::OwnedKernelEvent& e) {
    ProcessSummary& s = p.summary;
    ++s.kernels;
    p.kernel_keys.push_back(schema::JoinKeyOf(e));
    p.last_kernel_seq = std::max(p.last_kernel_seq.value_or(0), e.header.seq);

    StreamState& stream = p.streams[{e.device, e.stream}];
    stream.tail.device = e.device;
    stream.tail.stream = e.stream;
    ++stream.tail.launches;
    if (options_.review_launches > 0) {
      LaunchSummary l;
      l.seq = e.header.seq;
      l.ts_ns = e.header.ts_ns;
      l.correlation_id = e.correlation_id;
      l.graph_node_id = e.graph_node_id.value_or(0);
      l.name = e.demangled.empty() ? e.name : e.demangled;
      l.grid = e.grid;
      l.block = e.block;
      l.occupancy = e.occupancy.occupancy;
      stream.last.push_back(std::move(l));
      while (stream.last.size() > static_cast<size_t>(options_.review_launches)) {
        stream.last.pop_front();
      }
    }

    if (!Selected(e)) return;
    const auto device = p.devices.find(e.device);
    std::string model = device == p.devices.end() ? std::string() : device->second.name;
    SignatureKey key(e.name, e.block.x, e.block.y, e.block.z, e.dyn_shared_bytes, e.num_regs,
                     std::move(model));
    auto [it, inserted] = signature_index_.try_emplace(std::move(key), signatures_.size());
    if (inserted) {
      signatures_.emplace_back();
      SignatureState& st = signatures_.back();
      st.sig.name = e.name;
      st.sig.demangled = e.demangled;
      st.sig.device_model = std::get<6>(it->first);
      st.sig.block = e.block;
      st.sig.dyn_smem = e.dyn_shared_bytes;
      st.sig.regs = e.num_regs;
      st.sig.first = e;
      st.sig.occupancy_min = e.occupancy.occupancy;
      st.sig.occupancy_max = e.occupancy.occupancy;
      st.sig.waves_min = e.occupancy.waves;
      st.sig.waves_max = e.occupancy.waves;
      st.warp_size = device == p.devices.end() ? 32 : device->second.warp_size;
      if (device != p.devices.end()) st.sig.device_limits = device->second.limits;
    }
    SignatureState& st = signatures_[it->second];
    ++st.sig.launches;
    st.processes.insert(index);
    st.sig.occupancy_min = std::min(st.sig.occupancy_min, e.occupancy.occupancy);
    st.sig.occupancy_max = std::max(st.sig.occupancy_max, e.occupancy.occupancy);
    st.sig.waves_min = std::min(st.sig.waves_min, e.occupancy.waves);
    st.sig.waves_max = std::max(st.sig.waves_max, e.occupancy.waves);
    st.waves_sum += e.occupancy.waves;
    st.tail_sum += e.occupancy.tail_utilization;
    launches_.push_back({static_cast<uint32_t>(index), static_cast<uint32_t>(it->second), e.device,
                         e.stream, e.correlation_id, e.graph_node_id.value_or(0), e.header.seq,
                         e.header.ts_ns});
  }

  // Joined per kernel execution: the nodes of one graph launch share its correlation id, the
  // devices of one multi-device cooperative launch too (cuflight/schema/join_key.h). A repeated
  // key (the same event in two files under different seqs) keeps the first time read.
  void On(size_t index, ProcessState& p, const schema::OwnedKernelTimeEvent& e) {
    p.completion.last_kernel_time_seq =
        std::max(p.completion.last_kernel_time_seq.value_or(0), e.header.seq);
    gpu_times_.try_emplace(JoinKey{index, schema::JoinKeyOf(e)},
                           GpuTime{e.start_ns, e.end_ns, e.duration_ns});
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
  }

  void On(size_t, ProcessState& p, const schema::OwnedStatsEvent& e) {
    if (!p.summary.end && (!p.stats_dropped_seq || e.header.seq >= *p.stats_dropped_seq)) {
      p.stats_dropped_seq = e.header.seq;
      p.summary.dropped = e.dropped;
      p.summary.timing_dropped = e.timing_dropped;
      p.summary.timing_stopped = e.timing_stopped;
      p.summary.timing_stopped_reason = e.timing_stopped_reason;
    }
  }

  void On(size_t, ProcessState& p, const schema::OwnedProcessEndEvent& e) {
    p.summary.end = e;
    p.summary.dropped = e.dropped;
    p.summary.timing_dropped = e.timing_dropped;
    p.summary.timing_stopped = e.timing_stopped;
    p.summary.timing_stopped_reason = e.timing_stopped_reason;
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

  bool Selected(const schema::OwnedKernelEvent& e) {
    if (options_.since_ns && e.header.ts_ns < *options_.since_ns) return false;
    if (options_.until_ns && e.header.ts_ns > *options_.until_ns) return false;
    if (!regex_) return true;
    auto [it, inserted] = regex_cache_.try_emplace(e.name, false);
    if (inserted) {
      it->second = std::regex_search(e.name, *regex_) ||
                   (!e.demangled.empty() && std::regex_search(e.demangled, *regex_));
    }
    return it->second;
  }

  std::optional<uint64_t> DurationOf(size_t process, const schema::JoinKey& launch) const {
    const GpuTime* t = GpuTimeOf(process, launch);
    if (t == nullptr) return std::nullopt;
    return t->duration_ns;
  }

  const GpuTime* GpuTimeOf(size_t process, const schema::JoinKey& launch) const {
    const auto it = gpu_times_.find(JoinKey{process, launch});
    return it == gpu_times_.end() ? nullptr : &it->second;
  }

  void Classify(ProcessState& p) {
    const bool api_error_last =
        p.last_api_error_seq && (!p.last_kernel_seq || *p.last_api_error_seq > *p.last_kernel_seq);
    DescribeEnding(api_error_last, &p.summary);
  }

  void FinishProcesses() {
    std::vector<std::pair<ProcessKey, size_t>> order(process_index_.begin(), process_index_.end());
    report_index_of_process_.assign(processes_.size(), 0);
    for (const auto& [key, index] : order) {
      report_index_of_process_[index] = static_cast<uint32_t>(report_->processes.size());
      ProcessState& p = processes_[index];
      ProcessSummary& s = p.summary;
      for (const schema::JoinKey& launch : p.kernel_keys) {
        if (DurationOf(index, launch)) ++s.timed_kernels;
      }
      for (const auto& [ordinal, device] : p.devices) s.devices.emplace_back(ordinal, device.name);
      // Only a sticky error stops the kernels in flight; any other failed call is about itself.
      const std::vector<uint64_t>* error_ids =
          s.last_api_error && schema::IsStickyError(s.last_api_error->code)
              ? &s.last_api_error->last_correlation_ids
              : nullptr;
      p.completion.ended = s.end.has_value();
      p.completion.timing_dropped = s.timing_dropped;
      for (auto& [stream_key, stream] : p.streams) {
        StreamTail tail = stream.tail;
        for (LaunchSummary& l : stream.last) {
          l.duration_ns = DurationOf(index, {l.correlation_id, l.graph_node_id, tail.device});
          l.completion = CompletionOf(p.completion, l.seq, l.duration_ns.has_value());
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
    report_->review = SelectForReview(report_->processes);
  }

  void FinishSignatures() {
    for (const Launch& l : launches_) {
      if (const auto d = DurationOf(l.process, l.key())) {
        signatures_[l.signature].durations.push_back(*d);
      }
    }
    std::optional<Resource> limiter;
    if (!options_.limiter.empty()) limiter = ParseLimiter(options_.limiter);
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
    for (SignatureState& st : signatures_) {
      Signature& sig = st.sig;
      // A kernel at full occupancy is limited by nothing (text_format.h: Limited).
      if (limiter && (sig.fields().limiting_resource != *limiter || !Limited(sig.fields()))) {
        continue;
      }
      sig.processes = st.processes.size();
      if (!st.durations.empty()) sig.gpu_time = ComputeDurationStats(&st.durations);
      const double n = static_cast<double>(sig.launches);
      sig.waves_mean = st.waves_sum / n;
      sig.tail_mean = st.tail_sum / n;
      sig.warps_per_block = WarpsPerBlock(sig.fields(), sig.block, st.warp_size);
      sig.resources = ResourceLimits(sig.fields(), sig.warps_per_block);
      sig.advice = Advice(sig);
      if (target) sig.retarget = RetargetSignature(sig, *target);
      report_->launches += sig.launches;
      report_->timed_launches += sig.gpu_time ? sig.gpu_time->count : 0;
      models.insert(sig.device_model);
      report_->signatures.push_back(std::move(sig));
    }
    report_->several_device_models = models.size() > 1;
    SortSignatures(options_.sort, &report_->signatures);
    if (options_.keep_launches) KeepLaunches();
  }

  // Report::kept_launches: every launch of a signature the report kept, with the indices the
  // report's own lists give its process and signature.
  void KeepLaunches() {
    constexpr uint32_t kNotKept = std::numeric_limits<uint32_t>::max();
    std::vector<uint32_t> report_index_of_signature(signatures_.size(), kNotKept);
    for (size_t i = 0; i < report_->signatures.size(); ++i) {
      const Signature& s = report_->signatures[i];
      const auto it = signature_index_.find(SignatureKey(s.name, s.block.x, s.block.y, s.block.z,
                                                         s.dyn_smem, s.regs, s.device_model));
      if (it != signature_index_.end()) {
        report_index_of_signature[it->second] = static_cast<uint32_t>(i);
      }
    }
    report_->kept_launches.reserve(launches_.size());
    for (const Launch& l : launches_) {
      const uint32_t signature = report_index_of_signature[l.signature];
      if (signature == kNotKept) continue;  // left out by --limiter
      KeptLaunch k;
      k.process = report_index_of_process_[l.process];
      k.signature = signature;
      k.device = l.device;
      k.stream = l.stream;
      k.correlation_id = l.correlation_id;
      k.graph_node_id = l.graph_node_id;
      k.seq = l.seq;
      k.ts_ns = l.ts_ns;
      if (const GpuTime* t = GpuTimeOf(l.process, l.key())) {
        k.timed = true;
        k.gpu_start_ns = static_cast<int64_t>(t->start_ns);
        k.gpu_end_ns = static_cast<int64_t>(t->end_ns);
      }
      report_->kept_launches.push_back(k);
    }
  }

  const ReportOptions& options_;
  Report* report_;
  std::optional<std::regex> regex_;
  std::unordered_map<std::string, bool> regex_cache_;
  std::set<int32_t> pids_;
  std::optional<ProcessKey> file_key_;
  std::map<int32_t, ProcessKey> start_of_pid_;  // from the latest process_start of each pid
  std::map<ProcessKey, size_t> process_index_;
  std::vector<ProcessState> processes_;
  std::map<SignatureKey, size_t> signature_index_;
  std::vector<SignatureState> signatures_;
  std::vector<Launch> launches_;
  std::unordered_map<JoinKey, GpuTime, JoinKeyHash> gpu_times_;
  std::vector<uint32_t> report_index_of_process_;  // builder's process index -> Report's
};

}  // namespace

std::string TimingStoppedNote(const ProcessSummary& p) {
  if (p.timing_stopped_reason == schema::TimingStoppedReason::kNone) return "";
  std::string who = fmt::format("pid {}", p.key.pid);
  if (!p.exe.empty()) {
    const size_t slash = p.exe.rfind('/');
    who += " " + (slash == std::string::npos ? p.exe : p.exe.substr(slash + 1));
  }
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
