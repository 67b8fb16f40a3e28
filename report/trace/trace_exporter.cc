#include "trace_exporter.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <variant>

#include "cuflight/report/read_once.h"
#include "cuflight/schema/join_key.h"
#include "cuflight/schema/routine_failures.h"

namespace cuflight::trace {
namespace {

// A new event type must be placed in the trace (a slice, an instant, a marker) or left out on
// purpose. `stall` is a marker ("stall" while a stream waits, "stall resolved" after).
// `kernel_config` and `launch` never come: the log reader gives a launch as its kernel event (a
// slice) and keeps the descriptions to itself (docs/protocol.md, "Interned configurations").
static_assert(std::variant_size_v<schema::OwnedEvent> == 12,
              "a new event type: decide how `cuflight export` shows it (trace_exporter.h, 4.)");

std::string Hex(uint64_t v) { return fmt::format("{:#x}", v); }

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

// "<exe> (pid N)"; for a process of a job, grouped by job and ordered by rank:
// "job 4242 rank 3: <exe> (pid N) on <host>" (docs/report.md, "The job view").
TraceExporter::ProcessLabel TraceExporter::ProcessLabelOf(const schema::OwnedProcessStartEvent& s,
                                                         const std::string& who) {
  ProcessLabel label;
  std::string job, rank;
  for (const auto& [k, v] : s.attribution) {
    if (k == "job") job = v;
    if (k == "rank") rank = v;
  }
  const std::string process = fmt::format("{} ({})", Basename(s.exe), who);
  if (job.empty() && rank.empty()) {
    label.name = process;
    return label;
  }
  label.rank = rank;
  std::string place = job.empty() ? "job ?" : "job " + job;
  place += rank.empty() ? " rank ?" : " rank " + rank;
  label.name =
      fmt::format("{}: {}{}", place, process, s.hostname.empty() ? "" : " on " + s.hostname);
  // Ranks in order, after the GPUs; a process without a rank after the ranks.
  int64_t r = -1;
  if (!rank.empty()) {
    const auto [end, ec] = std::from_chars(rank.data(), rank.data() + rank.size(), r);
    if (ec != std::errc() || end != rank.data() + rank.size()) r = -1;
  }
  label.sort_index = kRankSortBase + (r >= 0 ? r : int64_t{1} << 31);
  return label;
}

size_t TraceExporter::NameKeyHash::operator()(const NameKey& k) const {
  return static_cast<size_t>(report::SampledHash(k.name) ^
                             (report::SampledHash(k.api) * 0x94D049BB133111EBull));
}

TraceExporter::TraceExporter(report::LaunchFilter* filter, TraceWriter* writer, ExportLimits limits)
    : filter_(filter), writer_(writer), limits_(limits) {}

TraceExporter::~TraceExporter() = default;

void TraceExporter::SetFile(const std::filesystem::path* file) {
  if (file == file_) return;
  file_ = file;
  keys_.SetFile(file);
  file_process_ = kNoProcess;
}

// As the report's model: report::ProcessKeys tells the process; the first of a real pid keeps
// it as its trace pid, a later one gets the first free from kSharedPidBase (7.).
uint32_t TraceExporter::ProcessOf(int32_t pid) {
  const bool from_file = keys_.FromFile(pid);
  if (from_file && file_process_ != kNoProcess) return file_process_;
  const auto [it, added] =
      process_index_.try_emplace(keys_.KeyOf(pid), static_cast<uint32_t>(processes_.size()));
  if (added) {
    Process& p = processes_.emplace_back();
    p.pid = pid;
    const int32_t n = ++processes_of_pid_[pid];
    p.who = n == 1 ? fmt::format("pid {}", pid) : fmt::format("pid {} #{}", pid, n);
    p.trace_pid = pid;
    if (trace_pids_.count(p.trace_pid) > 0) {
      while (trace_pids_.count(next_shared_pid_) > 0) ++next_shared_pid_;
      p.trace_pid = next_shared_pid_++;
    }
    trace_pids_.emplace(p.trace_pid, it->second);
  }
  if (from_file) file_process_ = it->second;
  return it->second;
}

size_t TraceExporter::JoinProcess(uint32_t process) const {
  return static_cast<size_t>(static_cast<uint32_t>(processes_[process].trace_pid));
}

void TraceExporter::Add(const schema::OwnedEvent& event, const std::filesystem::path* file) {
  const schema::Header& h = schema::HeaderOf(event);
  if (!filter_->Pid(h.pid)) return;
  SetFile(file);
  const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&event);
  if (start != nullptr) keys_.Note(*start);
  const uint32_t process = ProcessOf(h.pid);
  Process& p = processes_[process];
  if (filter_->filters_attribution()) {
    // --job, --rank, --pod: a process is in when its process_start matched; its events read
    // before that are left out (who sent them is not known yet).
    if (start != nullptr) p.selected = filter_->Attribution(start->attribution);
    if (!p.selected.value_or(false)) return;
  }
  // process_lost is the collector's and carries the producer's last seq: never a duplicate.
  if (!std::holds_alternative<schema::OwnedProcessLostEvent>(event) &&
      !report::MarkSeen(&p.seen, h.seq)) {
    ++counts_.duplicates;
    return;
  }
  if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&event)) {
    OnKernel(process, *k);
  } else if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&event)) {
    OnTime(process, *t);
  } else if (const auto* d = std::get_if<schema::OwnedDeviceEvent>(&event)) {
    devices_[{process, d->device}] = Device{d->name, d->uuid};
  } else if (start != nullptr) {
    const ProcessLabel& label = p.label.emplace(ProcessLabelOf(*start, p.who));
    if (p.host_track != 0) {
      // Named after its first use (its process_start read late): name it again.
      Track track{p.host_track, TrackKind::kHostProcess, p.trace_pid, 0, 0, label.name,
                  label.sort_index};
      writer_->DefineTrack(track);
    }
  } else if (const auto* c = std::get_if<schema::OwnedProcessCrashEvent>(&event)) {
    Marker m;
    m.ts_ns = h.ts_ns;
    m.name = "crash " + (c->signal_name.empty() ? fmt::format("signal {}", c->signal) : c->signal_name);
    m.detail = fmt::format("{} (signal {}, code {}) in thread {}",
                           c->signal_name.empty() ? "signal" : c->signal_name, c->signal, c->code,
                           c->tid);
    if (c->addr != 0) m.detail += " at " + Hex(c->addr);
    if (c->app_handler) m.detail += "; the application's own handler ran first";
    m.pid = h.pid;
    m.seq = h.seq;
    Mark(process, std::move(m), c->tid);
  } else if (const auto* a = std::get_if<schema::OwnedApiErrorEvent>(&event)) {
    if (schema::IsRoutineFailure(a->api, a->code)) return;  // part of normal operation
    Marker m;
    m.ts_ns = h.ts_ns;
    m.name = "api_error " + a->error_name;
    m.detail = fmt::format("{} returned {} ({})", a->api, a->error_name, a->code);
    if (!a->message.empty()) m.detail += ": " + a->message;
    m.pid = h.pid;
    m.seq = h.seq;
    Mark(process, std::move(m), 0);
  } else if (const auto* l = std::get_if<schema::OwnedProcessLostEvent>(&event)) {
    Marker m;
    m.ts_ns = h.ts_ns;
    m.name = "lost";
    m.detail = fmt::format(
        "{} (last seq {}, {} events lost)",
        l->reason == schema::LostReason::kCollectorShutdown
            ? "the collector stopped while the process was connected"
            : "connection ended without process_end",
        l->last_seq ? fmt::format("{}", *l->last_seq) : std::string("none"), l->events_lost);
    m.pid = h.pid;
    m.seq = h.seq;
    Mark(process, std::move(m), 0);
  } else if (const auto* st = std::get_if<schema::OwnedStallEvent>(&event)) {
    Marker m;
    m.ts_ns = h.ts_ns;
    const bool resolved = st->state == schema::StallState::kResolved;
    m.name = resolved ? "stall resolved" : "stall";
    m.detail = resolved ? fmt::format("resolved after {} ms", st->stalled_ms)
                        : fmt::format("kernels unfinished for {} ms on {} stream{}",
                                      st->stalled_ms, st->streams_stalled,
                                      st->streams_stalled == 1 ? "" : "s");
    if (!resolved && !st->streams.empty() && !st->streams.front().launches.empty()) {
      const schema::OwnedStallLaunch& waits = st->streams.front().launches.front();
      m.detail += fmt::format("; device {} waits on {} (corr {})", st->streams.front().device,
                              waits.demangled.empty() ? waits.name : waits.demangled,
                              waits.correlation_id);
    }
    m.pid = h.pid;
    m.seq = h.seq;
    Mark(process, std::move(m), 0);
  }
}

void TraceExporter::AddUnknown(const logread::UnknownEvent& event,
                               const std::filesystem::path* file) {
  if (std::find(kMarkerTypes.begin(), kMarkerTypes.end(), event.type) == kMarkerTypes.end()) {
    return;
  }
  const schema::Header& h = event.header;
  if (!filter_->Pid(h.pid)) return;
  SetFile(file);
  const uint32_t process = ProcessOf(h.pid);
  if (!report::MarkSeen(&processes_[process].seen, h.seq)) return;
  Marker m;
  m.ts_ns = h.ts_ns;
  m.name = std::string(event.type);
  m.detail = fmt::format("a {} event (seq {})", event.type, h.seq);
  m.pid = h.pid;
  m.seq = h.seq;
  Mark(process, std::move(m), 0);
}

void TraceExporter::Mark(uint32_t process, Marker marker, int32_t tid) {
  if (!filter_->InWindow(marker.ts_ns)) return;
  const uint64_t track = tid != 0 ? HostThreadTrack(process, tid) : HostProcessTrack(process);
  writer_->MarkerInstant(track, marker);
  ++counts_.markers;
}

// Kernels are told apart by mangled name and launch API: the demangled name follows from the
// mangled one (the injector demangles it), so it is not compared for every launch.
const KernelNames* TraceExporter::NamesOf(const schema::OwnedKernelEvent& e) {
  const NameKey view{e.name, e.api};
  if (const auto it = names_.find(view); it != names_.end()) return it->second;
  KernelNames& n = name_storage_.emplace_back(KernelNames{e.name, e.demangled, e.api});
  names_.emplace(NameKey{n.name, n.api}, &n);
  return &n;
}

uint32_t TraceExporter::Store(const Pending& p) {
  if (!free_records_.empty()) {
    const uint32_t index = free_records_.back();
    free_records_.pop_back();
    records_[index] = p;
    return index;
  }
  records_.push_back(p);
  return static_cast<uint32_t>(records_.size() - 1);
}

void TraceExporter::Release(uint32_t record) {
  if (record != kHidden) free_records_.push_back(record);
}

void TraceExporter::OnKernel(uint32_t process, const schema::OwnedKernelEvent& e) {
  const bool hidden = !filter_->Launch(e);
  const report::JoinKey key{JoinProcess(process), schema::JoinKeyOf(e)};
  Pending p;
  p.process = process;
  if (hidden) {
    ++counts_.filtered;
  } else {
    KernelRecord& k = p.kernel;
    k.names = NamesOf(e);
    k.header = e.header;
    k.tid = e.tid;
    k.device = e.device;
    k.context = e.context;
    k.stream = e.stream;
    k.correlation_id = e.correlation_id;
    k.grid = e.grid;
    k.block = e.block;
    k.cluster = e.cluster;
    k.num_regs = e.num_regs;
    k.static_shared_bytes = e.static_shared_bytes;
    k.dyn_shared_bytes = e.dyn_shared_bytes;
    k.local_bytes = e.local_bytes;
    k.max_threads_per_block = e.max_threads_per_block;
    k.carveout = e.carveout;
    k.cooperative = e.cooperative;
    k.graph_id = e.graph_id;
    k.graph_node_id = e.graph_node_id;
    k.occupancy = e.occupancy;
    k.timing_window = e.timing_window;
    ++counts_.kernels;
    p.flow = next_flow_++;
    writer_->Launch(HostThreadTrack(process, e.tid), k, p.flow);
  }
  // Made outside a timing window of `sampled` (schema/README.md: false, "so none will come"): an
  // instant now. Kept waiting, such launches (most under `sampled`) would push those whose time
  // is coming out of the bounded wait, written untimed.
  if (!schema::ExpectsKernelTime(e)) {
    if (!hidden) Untimed(p);
    return;
  }
  if (const auto t = early_times_.find(key); t != early_times_.end()) {
    const GpuTime time = t->second;
    early_times_.erase(t);
    if (!hidden) Timed(p, time);
    return;
  }
  pending_.Insert(key, Waiting{e.header.seq, hidden ? kHidden : Store(p)});
  pending_order_.emplace_back(key, e.header.seq);
  while (pending_order_.size() > limits_.max_pending_launches) {
    const auto [old_key, old_seq] = pending_order_.front();
    pending_order_.pop_front();
    pending_.TakeIf(
        old_key, [&](const Waiting& w) { return w.seq == old_seq; },
        [&](const Waiting& w) {
          if (w.record == kHidden) return;
          Untimed(records_[w.record]);
          Release(w.record);
          ++counts_.launches_given_up;
        });
  }
  peak_pending_ = std::max(peak_pending_, pending_.size());
}

void TraceExporter::OnTime(uint32_t process, const schema::OwnedKernelTimeEvent& e) {
  GpuTime t;
  t.correlation_id = e.correlation_id;
  t.pid = e.header.pid;
  t.device = e.device;
  t.stream = e.stream;
  t.start_ns = e.start_ns;
  t.end_ns = e.end_ns;
  t.duration_ns = e.duration_ns;
  t.graph_id = e.graph_id;
  t.graph_node_id = e.graph_node_id;
  const report::JoinKey key{JoinProcess(process), schema::JoinKeyOf(e)};
  bool joined = false;
  pending_.Take(key, [&](const Waiting& w) {
    joined = true;
    if (w.record == kHidden) return;
    Timed(records_[w.record], t);
    Release(w.record);
  });
  if (joined) return;
  if (!early_times_.try_emplace(key, t).second) return;  // a repeated key keeps the first
  early_order_.push_back(key);
  while (early_order_.size() > limits_.max_pending_times) {
    if (early_times_.erase(early_order_.front()) > 0) ++counts_.times_given_up;
    early_order_.pop_front();
  }
}

void TraceExporter::Timed(const Pending& p, const GpuTime& t) {
  const int64_t start = static_cast<int64_t>(t.start_ns);
  const uint64_t track = StreamTrack(p.process, t.device, t.stream, start,
                                     start + static_cast<int64_t>(t.duration_ns));
  writer_->KernelSlice(track, p.kernel, t, p.flow);
  ++counts_.timed;
  ++counts_.flows;
}

void TraceExporter::Untimed(const Pending& p) {
  const int64_t ts = p.kernel.header.ts_ns;
  const uint64_t track = StreamTrack(p.process, p.kernel.device, p.kernel.stream, ts, ts);
  writer_->KernelInstant(track, p.kernel, p.flow);
  ++counts_.untimed;
  ++counts_.flows;
}

void TraceExporter::Orphan(uint32_t process, const GpuTime& t) {
  const int64_t start = static_cast<int64_t>(t.start_ns);
  if (filter_->filters_names() || !filter_->InWindow(start)) return;  // no name to match
  writer_->OrphanSlice(
      StreamTrack(process, t.device, t.stream, start,
                  start + static_cast<int64_t>(t.duration_ns)),
      t);
  ++counts_.orphan_times;
}

bool TraceExporter::Finish(std::string* error) {
  pending_.ForEach([&](const Waiting& w) {
    if (w.record != kHidden) Untimed(records_[w.record]);
  });
  pending_.Clear();
  records_.clear();
  free_records_.clear();
  pending_order_.clear();
  // Kernel_times without their kernel, in the order read.
  for (const report::JoinKey& key : early_order_) {
    const auto it = early_times_.find(key);
    if (it == early_times_.end()) continue;
    Orphan(trace_pids_.at(static_cast<int64_t>(static_cast<int32_t>(key.process))), it->second);
    early_times_.erase(it);
  }
  early_order_.clear();
  return writer_->Finish(counts_, error);
}

std::pair<uint64_t, int64_t> TraceExporter::GpuTrack(uint32_t process, int32_t ordinal) {
  if (const auto it = gpu_of_device_.find({process, ordinal}); it != gpu_of_device_.end()) {
    return it->second;
  }
  const auto found = devices_.find({process, ordinal});
  const Device device = found != devices_.end() ? found->second : Device{};
  const std::string key =
      device.uuid.empty() ? fmt::format("{}|{}", ordinal, device.name) : device.uuid;
  const auto [it, added] = gpus_.try_emplace(key, 0, 0);
  if (added) {
    Track track;
    track.uuid = next_uuid_++;
    track.kind = TrackKind::kGpu;
    track.pid = kGpuPidBase + static_cast<int64_t>(gpus_.size() - 1);
    track.name = device.name.empty() ? fmt::format("GPU {}", ordinal)
                                     : fmt::format("GPU {}: {}", ordinal, device.name);
    track.sort_index = static_cast<int64_t>(gpus_.size() - 1);
    it->second = {track.uuid, track.pid};
    writer_->DefineTrack(track);
  }
  // Placed once its device event has been read (a kernel before it names the GPU by ordinal).
  if (found != devices_.end()) gpu_of_device_[{process, ordinal}] = it->second;
  return it->second;
}

uint64_t TraceExporter::StreamTrack(uint32_t process, int32_t device, uint64_t stream,
                                    int64_t start, int64_t end) {
  const auto [gpu, gpu_pid] = GpuTrack(process, device);
  StreamLanes& lanes = streams_[{gpu, process, stream}];
  // The first lane free at `start`; kernels of one stream normally follow one another, so this
  // is lane 0 but for overlapping graph branches. At most kMaxLanes, the last taking the rest.
  constexpr size_t kMaxLanes = 8;
  size_t lane = 0;
  while (lane < lanes.ends.size() && lanes.ends[lane] > start && lane + 1 < kMaxLanes) ++lane;
  if (lane == lanes.tracks.size()) {
    Track track;
    track.uuid = next_uuid_++;
    track.kind = TrackKind::kStream;
    track.pid = gpu_pid;
    track.tid = next_stream_tid_++;
    track.parent_uuid = gpu;
    const Process& p = processes_[process];
    const std::string who = p.label && !p.label->rank.empty()
                                ? fmt::format("{}, rank {}", p.who, p.label->rank)
                                : p.who;
    track.name = stream == 0 ? fmt::format("default stream ({})", who)
                             : fmt::format("stream {} ({})", Hex(stream), who);
    if (lane > 0) track.name += fmt::format(" overlap {}", lane);
    lanes.tracks.push_back(track.uuid);
    lanes.ends.push_back(end);
    writer_->DefineTrack(track);
  } else {
    lanes.ends[lane] = std::max(lanes.ends[lane], end);
  }
  return lanes.tracks[lane];
}

uint64_t TraceExporter::HostProcessTrack(uint32_t process) {
  Process& p = processes_[process];
  if (p.host_track == 0) {
    Track track;
    track.uuid = next_uuid_++;
    track.kind = TrackKind::kHostProcess;
    track.pid = p.trace_pid;
    if (p.label) {
      track.name = p.label->name;
      track.sort_index = p.label->sort_index;
    } else {
      track.name = p.who;
    }
    p.host_track = track.uuid;
    writer_->DefineTrack(track);
  }
  return p.host_track;
}

uint64_t TraceExporter::HostThreadTrack(uint32_t process, int32_t tid) {
  const uint64_t process_track = HostProcessTrack(process);
  const auto [it, added] = host_threads_.try_emplace({process, tid}, 0);
  if (added) {
    Track track;
    track.uuid = next_uuid_++;
    track.kind = TrackKind::kHostThread;
    track.pid = processes_[process].trace_pid;
    track.tid = tid;
    track.parent_uuid = process_track;
    track.name = fmt::format("thread {}", tid);
    it->second = track.uuid;
    writer_->DefineTrack(track);
  }
  return it->second;
}

}  // namespace cuflight::trace
