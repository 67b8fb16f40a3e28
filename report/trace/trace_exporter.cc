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
TraceExporter::ProcessLabel TraceExporter::ProcessLabelOf(const schema::OwnedProcessStartEvent& s) {
  ProcessLabel label;
  std::string job, rank;
  for (const auto& [k, v] : s.attribution) {
    if (k == "job") job = v;
    if (k == "rank") rank = v;
  }
  const std::string process = fmt::format("{} (pid {})", Basename(s.exe), s.header.pid);
  if (job.empty() && rank.empty()) {
    label.name = process;
    return label;
  }
  label.rank = rank;
  std::string who = job.empty() ? "job ?" : "job " + job;
  who += rank.empty() ? " rank ?" : " rank " + rank;
  label.name = fmt::format("{}: {}{}", who, process, s.hostname.empty() ? "" : " on " + s.hostname);
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

bool TraceExporter::Seen(int32_t pid, uint64_t seq) { return !report::MarkSeen(&seen_[pid], seq); }

void TraceExporter::Add(const schema::OwnedEvent& event) {
  const schema::Header& h = schema::HeaderOf(event);
  if (!filter_->Pid(h.pid)) return;
  if (filter_->filters_attribution()) {
    // --job, --rank, --pod: a process is in when its process_start matched; its events read
    // before that are left out (who sent them is not known yet).
    if (const auto* s = std::get_if<schema::OwnedProcessStartEvent>(&event)) {
      selected_[h.pid] = filter_->Attribution(s->attribution);
    }
    const auto it = selected_.find(h.pid);
    if (it == selected_.end() || !it->second) return;
  }
  // process_lost is the collector's and carries the producer's last seq: never a duplicate.
  if (!std::holds_alternative<schema::OwnedProcessLostEvent>(event) && Seen(h.pid, h.seq)) {
    ++counts_.duplicates;
    return;
  }
  if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&event)) {
    OnKernel(*k);
  } else if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&event)) {
    OnTime(*t);
  } else if (const auto* d = std::get_if<schema::OwnedDeviceEvent>(&event)) {
    devices_[{h.pid, d->device}] = Device{d->name, d->uuid};
  } else if (const auto* s = std::get_if<schema::OwnedProcessStartEvent>(&event)) {
    ProcessLabel& label = process_labels_[h.pid];
    label = ProcessLabelOf(*s);
    if (const auto it = host_processes_.find(h.pid); it != host_processes_.end()) {
      // Named after its first use (its process_start read late): name it again.
      Track track{it->second, TrackKind::kHostProcess, h.pid, 0, 0, label.name, label.sort_index};
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
    Mark(std::move(m), c->tid);
  } else if (const auto* a = std::get_if<schema::OwnedApiErrorEvent>(&event)) {
    if (schema::IsRoutineFailure(a->api, a->code)) return;  // part of normal operation
    Marker m;
    m.ts_ns = h.ts_ns;
    m.name = "api_error " + a->error_name;
    m.detail = fmt::format("{} returned {} ({})", a->api, a->error_name, a->code);
    if (!a->message.empty()) m.detail += ": " + a->message;
    m.pid = h.pid;
    m.seq = h.seq;
    Mark(std::move(m), 0);
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
    Mark(std::move(m), 0);
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
    Mark(std::move(m), 0);
  }
}

void TraceExporter::AddUnknown(const logread::UnknownEvent& event) {
  if (std::find(kMarkerTypes.begin(), kMarkerTypes.end(), event.type) == kMarkerTypes.end()) {
    return;
  }
  const schema::Header& h = event.header;
  if (!filter_->Pid(h.pid) || Seen(h.pid, h.seq)) return;
  Marker m;
  m.ts_ns = h.ts_ns;
  m.name = std::string(event.type);
  m.detail = fmt::format("a {} event (seq {})", event.type, h.seq);
  m.pid = h.pid;
  m.seq = h.seq;
  Mark(std::move(m), 0);
}

void TraceExporter::Mark(Marker marker, int32_t tid) {
  if (!filter_->InWindow(marker.ts_ns)) return;
  const uint64_t track =
      tid != 0 ? HostThreadTrack(marker.pid, tid) : HostProcessTrack(marker.pid);
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

void TraceExporter::OnKernel(const schema::OwnedKernelEvent& e) {
  const bool hidden = !filter_->Launch(e);
  const report::JoinKey key{static_cast<size_t>(static_cast<uint32_t>(e.header.pid)),
                            schema::JoinKeyOf(e)};
  Pending p;
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
    writer_->Launch(HostThreadTrack(e.header.pid, e.tid), k, p.flow);
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

void TraceExporter::OnTime(const schema::OwnedKernelTimeEvent& e) {
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
  const report::JoinKey key{static_cast<size_t>(static_cast<uint32_t>(e.header.pid)),
                            schema::JoinKeyOf(e)};
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
  const uint64_t track = StreamTrack(p.kernel.header.pid, t.device, t.stream, start,
                                     start + static_cast<int64_t>(t.duration_ns));
  writer_->KernelSlice(track, p.kernel, t, p.flow);
  ++counts_.timed;
  ++counts_.flows;
}

void TraceExporter::Untimed(const Pending& p) {
  const int64_t ts = p.kernel.header.ts_ns;
  const uint64_t track = StreamTrack(p.kernel.header.pid, p.kernel.device, p.kernel.stream, ts, ts);
  writer_->KernelInstant(track, p.kernel, p.flow);
  ++counts_.untimed;
  ++counts_.flows;
}

void TraceExporter::Orphan(const GpuTime& t) {
  const int64_t start = static_cast<int64_t>(t.start_ns);
  if (filter_->filters_names() || !filter_->InWindow(start)) return;  // no name to match
  writer_->OrphanSlice(
      StreamTrack(t.pid, t.device, t.stream, start, start + static_cast<int64_t>(t.duration_ns)),
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
    Orphan(it->second);
    early_times_.erase(it);
  }
  early_order_.clear();
  return writer_->Finish(counts_, error);
}

std::pair<uint64_t, int64_t> TraceExporter::GpuTrack(int32_t pid, int32_t ordinal) {
  if (const auto it = gpu_of_device_.find({pid, ordinal}); it != gpu_of_device_.end()) {
    return it->second;
  }
  const auto found = devices_.find({pid, ordinal});
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
  if (found != devices_.end()) gpu_of_device_[{pid, ordinal}] = it->second;
  return it->second;
}

uint64_t TraceExporter::StreamTrack(int32_t pid, int32_t device, uint64_t stream, int64_t start,
                                    int64_t end) {
  const auto [gpu, gpu_pid] = GpuTrack(pid, device);
  StreamLanes& lanes = streams_[{gpu, pid, stream}];
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
    const auto label = process_labels_.find(pid);
    const std::string who = label != process_labels_.end() && !label->second.rank.empty()
                                ? fmt::format("pid {}, rank {}", pid, label->second.rank)
                                : fmt::format("pid {}", pid);
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

uint64_t TraceExporter::HostProcessTrack(int32_t pid) {
  const auto [it, added] = host_processes_.try_emplace(pid, 0);
  if (added) {
    Track track;
    track.uuid = next_uuid_++;
    track.kind = TrackKind::kHostProcess;
    track.pid = pid;
    const auto label = process_labels_.find(pid);
    if (label != process_labels_.end()) {
      track.name = label->second.name;
      track.sort_index = label->second.sort_index;
    } else {
      track.name = fmt::format("pid {}", pid);
    }
    it->second = track.uuid;
    writer_->DefineTrack(track);
  }
  return it->second;
}

uint64_t TraceExporter::HostThreadTrack(int32_t pid, int32_t tid) {
  const uint64_t process = HostProcessTrack(pid);
  const auto [it, added] = host_threads_.try_emplace({pid, tid}, 0);
  if (added) {
    Track track;
    track.uuid = next_uuid_++;
    track.kind = TrackKind::kHostThread;
    track.pid = pid;
    track.tid = tid;
    track.parent_uuid = process;
    track.name = fmt::format("thread {}", tid);
    it->second = track.uuid;
    writer_->DefineTrack(track);
  }
  return it->second;
}

}  // namespace cuflight::trace
