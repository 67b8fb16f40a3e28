#include "cuflight/exporter/exporter.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <thread>
#include <unordered_map>
#include <variant>

#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/join_key.h"
#include "cursor.h"
#include "log_dir.h"
#include "log_records.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"
#include "otlp_http.h"
#include "stream_reader.h"

namespace cuflight::exporter {
namespace {

using opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest;
using Clock = std::chrono::steady_clock;

// Launches remembered per stream while their kernel_time may still come (for the roll-up's GPU
// time and the kernel_time record's name); the oldest is forgotten first.
constexpr size_t kMaxPendingJoins = 16384;
// A stream whose last event was its end is looked at this often (it may continue after a
// collector restart: process_lost with reason collector_shutdown).
constexpr std::chrono::seconds kFinishedRecheck{30};
// At most this many lines are read from a stream's head to learn its process and GPUs.
constexpr int kMaxHeadLines = 256;
// A last-launches entry keeps its line as the record's body up to this size.
constexpr size_t kMaxKeptLineBytes = 8192;

int64_t RealtimeNs() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool IsEnd(schema::EventType t) {
  return t == schema::EventType::kProcessEnd || t == schema::EventType::kProcessCrash ||
         t == schema::EventType::kProcessLost;
}

struct RingEntry {
  schema::OwnedKernelEvent event;
  std::string line;  // "" when longer than kMaxKeptLineBytes
};

struct StreamState {
  std::string key;  // "<date>/<base>"
  StreamIdentity identity;
  CursorEntry committed;
  Position read;
  bool head_loaded = false;
  Clock::time_point first_seen = Clock::now();
  Clock::time_point next_check{};  // finished streams: when to look again
  std::optional<Clock::time_point> behind_since;
  // Roll-up window (design note 5): kernels interned by index.
  std::vector<RollupKey> kernels;
  std::map<RollupKey, int> kernel_index;
  std::map<int, RollupValue> window;
  std::optional<Position> window_start;  // where its first launch's line starts
  int64_t window_first_ns = 0;
  int64_t window_last_ns = 0;
  std::unordered_map<schema::JoinKey, int, schema::JoinKeyHash> joins;
  std::deque<schema::JoinKey> join_order;
  std::deque<RingEntry> ring;
  // The kernel configurations described in the segment being read (a launch names one), and the
  // position up to which that segment's lines have been fed to it: when reading resumes anywhere
  // else (a restart from the cursor, mid-segment), the descriptions before it are read again
  // first (LoadConfigs).
  schema::ConfigExpander configs;
  std::optional<Position> configs_at;

  // Ended: what it holds is let go once the records naming its Resource are sent (read again
  // from its head if it continues).
  bool release = false;

  Position CommitPosition() const { return window_start.value_or(read); }
  void Release() {
    const std::string stream = identity.stream;
    identity = StreamIdentity{};
    identity.stream = stream;
    head_loaded = false;
    joins.clear();
    join_order.clear();
    ring.clear();
    release = false;
  }
};

// One request being built.
struct Batch {
  ExportLogsServiceRequest request;
  std::map<std::string, otlp_logs::ResourceLogs*> by_stream;
  int records = 0;
  uint64_t bytes = 0;
};

}  // namespace

struct Exporter::Impl {
  ExportOptions options;
  std::filesystem::path cursor_file;
  std::unique_ptr<logstore::LogDir> dir;
  ExportMetrics* metrics = nullptr;
  std::shared_ptr<spdlog::logger> log;
  OtlpHttpClient client;
  Backoff backoff;

  std::map<std::string, StreamState> streams;
  std::map<std::string, StreamFiles> files;
  Batch batch;
  Clock::time_point last_lag{};
  bool cursor_dirty = false;

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool done = false;
  Clock::time_point drain_deadline{};
  std::thread thread;

  Impl(const ExportOptions& o)
      : options(o), client(o), backoff(o.retry_initial, o.retry_max) {}

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu);
    return stop;
  }
  bool PastDrain() {
    std::lock_guard<std::mutex> lock(mu);
    return stop && Clock::now() >= drain_deadline;
  }
  // Waits `d` or until Stop; true when stopping.
  bool Sleep(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, d, [&] { return stop; });
    return stop;
  }

  void Run();
  void Cycle();
  void ProcessStream(StreamState& s, const StreamFiles& f);
  void LoadHead(StreamState& s, const StreamFiles& f, bool* ready);
  void LoadConfigs(StreamState& s, const StreamFiles& f);
  void HandleLine(StreamState& s, std::string_view line, const Position& line_start);
  std::string expanded_line;  // the kernel event a launch line stands for (HandleLine)
  void HandleEvent(StreamState& s, const schema::OwnedEvent& event, std::string_view line,
                   const Position& line_start);
  void AddRecord(StreamState& s, const schema::OwnedEvent& event, std::string_view line,
                 std::string_view kernel_name, LaunchTrigger trigger);
  void EmitRing(StreamState& s, LaunchTrigger trigger);
  void CloseWindow(StreamState& s);
  otlp_logs::ScopeLogs* ScopeFor(StreamState& s);
  bool BatchFull() const {
    return batch.records >= options.max_batch_records || batch.bytes >= options.max_batch_bytes;
  }
  // Sends the batch (retrying), then commits every stream's position. False when stopping
  // abandoned it.
  bool Flush();
  void Commit();
  void UpdateLag(bool force);
  std::unique_ptr<SegmentReader> OpenSegment(StreamState& s, const StreamFiles& f, bool* active,
                                             bool* exhausted);
};

// ---- reading ----

std::unique_ptr<SegmentReader> Exporter::Impl::OpenSegment(StreamState& s, const StreamFiles& f,
                                                           bool* active, bool* exhausted) {
  *exhausted = false;
  const int date_fd = dir->OpenSubdir(f.date, false);
  if (date_fd < 0) {
    *exhausted = true;
    return nullptr;
  }
  base::ScopedFd date(date_fd);
  std::string error;
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (!f.closed.empty() && s.read.segment > f.last_closed() + 1) {
      // Past the stream's end (the active file is segment last + 1): not a position this
      // exporter saved (a damaged or foreign cursor). Taken as is, the active file would be read
      // as that segment and every segment before it never: read the stream again from its
      // first segment there; the sink drops what it already has by (stream, seq).
      log->warn(
          "otlp: {}: the cursor's segment {} is past the stream's last ({}); reading it "
          "again from segment {}",
          s.key, s.read.segment, f.last_closed() + 1, f.closed.begin()->first);
      s.read = {f.closed.begin()->first, 0};
      cursor_dirty = true;
    }
    const uint64_t k = s.read.segment;
    const auto closed = f.closed.find(k);
    // Closed segments are listed when the cycle began; one may since have been compressed
    // (plain removed) or the active file renamed to it: look at the names themselves.
    const std::string plain = schema::SegmentFileName(f.base, k, false);
    const std::string zst = schema::SegmentFileName(f.base, k, true);
    struct stat st {};
    const bool zst_there = fstatat(date.Get(), zst.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    const bool plain_there =
        !zst_there && fstatat(date.Get(), plain.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (plain_there && static_cast<uint64_t>(st.st_size) < s.read.offset) {
      // A closed segment shorter than the position exported: not a position this exporter saved
      // (a closed segment never changes). Read it again from its start, as the active file
      // below.
      log->warn("otlp: {} segment {} is shorter than the position exported; reading it again",
                s.key, k);
      s.read.offset = 0;
      cursor_dirty = true;
    }
    if (zst_there || plain_there) {
      const std::string& name = zst_there ? zst : plain;
      auto r = SegmentReader::Open({date.Get(), name, dir->Shown(f.date, name)}, zst_there,
                                   s.read.offset, &error);
      if (r) {
        *active = false;
        return r;
      }
      continue;  // compressed meanwhile: look again
    }
    if (closed != f.closed.end() || f.closed.upper_bound(k) != f.closed.end()) {
      // Segment k is gone (retention) but later ones exist: on to the next that is there.
      if (metrics) metrics->SegmentMissed();
      log->warn("otlp: {} segment {} was removed before it was exported", s.key, k);
      const auto next = f.closed.upper_bound(k);
      s.read = {next != f.closed.end() ? next->first : f.last_closed() + 1, 0};
      cursor_dirty = true;
      continue;
    }
    if (!f.active) {
      *exhausted = true;
      return nullptr;
    }
    const std::string name = schema::ActiveFileName(f.base);
    auto r = SegmentReader::Open({date.Get(), name, dir->Shown(f.date, name)}, false,
                                 s.read.offset, &error);
    if (!r) {
      *exhausted = true;
      return nullptr;
    }
    // Renamed to segment k between the look above and the open? Then read it under that name.
    if (fstatat(date.Get(), plain.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ||
        fstatat(date.Get(), zst.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      continue;
    }
    struct stat now {};
    if (fstatat(date.Get(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        static_cast<uint64_t>(now.st_size) < s.read.offset && now.st_ino == r->inode()) {
      // Shorter than what was read (the machine lost the end of the file): read it again from
      // its start; the sink drops what it already has by (stream, seq).
      log->warn("otlp: {} is shorter than the position exported; reading it again", s.key);
      s.read.offset = 0;
      continue;
    }
    *active = true;
    return r;
  }
  *exhausted = true;
  return nullptr;
}

void Exporter::Impl::LoadHead(StreamState& s, const StreamFiles& f, bool* ready) {
  *ready = false;
  StreamState head;
  head.key = s.key;
  head.read = {f.closed.empty() ? std::max<uint64_t>(s.read.segment, 1) : f.closed.begin()->first,
               0};
  if (!f.closed.empty() && f.closed.begin()->first != 1) {
    *ready = true;  // its start was removed: nothing to wait for
    s.head_loaded = true;
    return;
  }
  if (f.closed.empty()) head.read.segment = 1;
  bool active = false;
  bool exhausted = false;
  auto reader = OpenSegment(head, f, &active, &exhausted);
  if (!reader) return;
  std::string error;
  std::string_view line;
  for (int i = 0; i < kMaxHeadLines; ++i) {
    const SegmentReader::Status st = reader->Next(&line, &error);
    if (st == SegmentReader::Status::kLongLine) continue;
    if (st != SegmentReader::Status::kLine) break;
    schema::DecodeResult d = schema::Decode(line);
    if (!d.ok()) continue;
    const schema::EventType t = schema::TypeOf(d.event);
    if (t == schema::EventType::kProcessStart) {
      s.identity.start = std::get<schema::OwnedProcessStartEvent>(std::move(d.event));
    } else if (t == schema::EventType::kDevice) {
      const auto& dev = std::get<schema::OwnedDeviceEvent>(d.event);
      s.identity.gpus[dev.device] = {dev.uuid, dev.pci_bus_id, dev.name};
      if (!s.identity.first_device) s.identity.first_device = dev.device;
      *ready = true;
    } else {
      *ready = true;  // a process past its start and devices, or one that ended without any
      break;
    }
  }
  s.head_loaded = true;
}

void Exporter::Impl::ProcessStream(StreamState& s, const StreamFiles& f) {
  if (!s.head_loaded) {
    bool ready = false;
    LoadHead(s, f, &ready);
    const bool fresh = s.read == Position{} && s.committed.position == Position{};
    if (fresh && !ready && Clock::now() - s.first_seen < options.resource_wait) {
      s.head_loaded = false;  // look again next cycle: its first device may come
      s.identity = StreamIdentity{};
      s.identity.stream = f.base;
      return;
    }
  }
  for (int guard = 0; guard < 1 << 20; ++guard) {
    if (Stopping()) return;
    bool active = false;
    bool exhausted = false;
    std::unique_ptr<SegmentReader> reader = OpenSegment(s, f, &active, &exhausted);
    if (!reader) return;
    if (s.read.offset > 0 && s.configs_at != s.read) LoadConfigs(s, f);
    std::string error;
    std::string_view line;
    for (;;) {
      const Position start = s.read;
      const SegmentReader::Status st = reader->Next(&line, &error);
      if (st == SegmentReader::Status::kLine) {
        s.read.offset = reader->offset();
        s.configs_at = s.read;
        HandleLine(s, line, start);
        if (BatchFull() && !Flush()) return;
        if (Stopping()) return;
        continue;
      }
      if (st == SegmentReader::Status::kLongLine) {
        s.read.offset = reader->offset();
        s.configs_at = s.read;
        if (metrics) metrics->LineSkipped();
        continue;
      }
      if (st == SegmentReader::Status::kError) {
        log->warn("otlp: {} segment {}: {}; going on with the next", s.key, s.read.segment,
                  error);
      }
      break;
    }
    if (active) return;  // the end of what the collector has written so far
    // A closed segment read to its end: on to the next.
    s.read = {s.read.segment + 1, 0};
  }
}

void Exporter::Impl::LoadConfigs(StreamState& s, const StreamFiles& f) {
  // A segment is one sequence of interned configurations (docs/protocol.md): a launch after the
  // cursor may name a description before it. Those are read again, exported already or not,
  // and nothing else of the segment's start is looked at (no record, no roll-up, no metric): at
  // most one segment's reading per stream and restart.
  s.configs.Reset();
  s.configs_at = s.read;
  StreamState scan;
  scan.key = s.key;
  scan.read = {s.read.segment, 0};
  bool active = false;
  bool exhausted = false;
  std::unique_ptr<SegmentReader> reader = OpenSegment(scan, f, &active, &exhausted);
  if (!reader || scan.read.segment != s.read.segment) return;
  std::string error;
  std::string_view line;
  for (;;) {
    const SegmentReader::Status st = reader->Next(&line, &error);
    if (st == SegmentReader::Status::kLongLine) continue;
    if (st != SegmentReader::Status::kLine || reader->offset() > s.read.offset) break;
    if (line.find("\"kernel_config\"") == std::string_view::npos) continue;  // most lines
    schema::DecodeResult d = schema::Decode(line);
    if (!d.ok()) continue;
    if (const auto* config = std::get_if<schema::OwnedKernelConfigEvent>(&d.event)) {
      try {
        s.configs.Describe(*config);
      } catch (const std::bad_alloc&) {
        return;  // the launches naming it are skipped and counted, as for a flood
      }
    }
  }
}

void Exporter::Impl::HandleLine(StreamState& s, std::string_view line,
                                const Position& line_start) {
  schema::DecodeResult d = schema::Decode(line);
  if (!d.ok()) {
    // Lines of a newer schema's types, and the damaged line a failed write can leave
    // (docs/fleet.md, "Torn lines"), are skipped.
    if (d.reason != schema::Reason::kUnknownType && metrics) metrics->LineSkipped();
    return;
  }
  // Interned configurations (docs/protocol.md): a segment is a sequence; a launch is exported as
  // the self-contained kernel event it stands for.
  if (line_start.offset == 0) s.configs.Reset();
  schema::ExpandVerdict verdict;
  try {
    verdict = s.configs.Feed(&d.event);
  } catch (const std::bad_alloc&) {
    verdict = schema::ExpandVerdict::kConfigFlood;
  }
  if (verdict == schema::ExpandVerdict::kDescribed) return;
  if (schema::Refused(verdict)) {
    if (metrics) metrics->LineSkipped();
    return;
  }
  if (verdict == schema::ExpandVerdict::kExpanded) {
    expanded_line.resize(64 << 10);
    const size_t n = schema::Encode(d.event, expanded_line.data(), expanded_line.size());
    if (n == 0) {
      if (metrics) metrics->LineSkipped();
      return;
    }
    line = std::string_view(expanded_line.data(), n - 1);  // a log line, without the '\n'
  }
  HandleEvent(s, d.event, line, line_start);
}

otlp_logs::ScopeLogs* Exporter::Impl::ScopeFor(StreamState& s) {
  auto it = batch.by_stream.find(s.key);
  if (it == batch.by_stream.end()) {
    otlp_logs::ResourceLogs* rl = batch.request.add_resource_logs();
    otlp_logs::ScopeLogs* scope = rl->add_scope_logs();
    scope->mutable_scope()->set_name("cuflight");
    scope->mutable_scope()->set_version(CUFLIGHT_VERSION);
    it = batch.by_stream.emplace(s.key, rl).first;
  }
  return it->second->mutable_scope_logs(0);
}

void Exporter::Impl::AddRecord(StreamState& s, const schema::OwnedEvent& event,
                               std::string_view line, std::string_view kernel_name,
                               LaunchTrigger trigger) {
  FillRecord(event, line, s.identity, RealtimeNs(), kernel_name, trigger,
             ScopeFor(s)->add_log_records());
  ++batch.records;
  batch.bytes += line.size() + 256;
}

void Exporter::Impl::EmitRing(StreamState& s, LaunchTrigger trigger) {
  for (const RingEntry& e : s.ring) {
    const schema::OwnedEvent event(e.event);
    AddRecord(s, event, e.line, {}, trigger);
  }
  s.ring.clear();
}

void Exporter::Impl::CloseWindow(StreamState& s) {
  if (s.window.empty()) {
    s.window_start.reset();
    return;
  }
  otlp_logs::ScopeLogs* scope = ScopeFor(s);
  const int64_t observed = RealtimeNs();
  for (const auto& [index, value] : s.window) {
    FillRollupRecord(s.kernels[static_cast<size_t>(index)], value, s.identity, s.window_first_ns,
                     s.window_last_ns, observed, scope->add_log_records());
    ++batch.records;
    batch.bytes += 512;
  }
  s.window.clear();
  s.window_start.reset();
}

void Exporter::Impl::HandleEvent(StreamState& s, const schema::OwnedEvent& event,
                                 std::string_view line, const Position& line_start) {
  const schema::EventType type = schema::TypeOf(event);
  const int64_t ts = schema::HeaderOf(event).ts_ns;
  const bool rollups = options.rollup_interval.count() > 0;
  const int64_t interval_ns = static_cast<int64_t>(options.rollup_interval.count()) * 1000000;
  if (!IsEnd(type) && s.committed.finished) {
    s.committed.finished = false;  // continued after a collector restart
    cursor_dirty = true;
  }
  // A window covers interval_ns of event time from its first launch.
  if (rollups && !s.window.empty() && ts - s.window_first_ns >= interval_ns) CloseWindow(s);
  switch (type) {
    case schema::EventType::kProcessStart:
      s.identity.start = std::get<schema::OwnedProcessStartEvent>(event);
      AddRecord(s, event, line, {}, LaunchTrigger::kNone);
      return;
    case schema::EventType::kDevice: {
      const auto& dev = std::get<schema::OwnedDeviceEvent>(event);
      s.identity.gpus[dev.device] = {dev.uuid, dev.pci_bus_id, dev.name};
      if (!s.identity.first_device) s.identity.first_device = dev.device;
      AddRecord(s, event, line, {}, LaunchTrigger::kNone);
      return;
    }
    case schema::EventType::kKernel: {
      const auto& k = std::get<schema::OwnedKernelEvent>(event);
      RollupKey key{k.demangled.empty() ? k.name : k.demangled,
                    std::string(schema::ResourceName(k.occupancy.limiting_resource)), k.device};
      auto found = s.kernel_index.find(key);
      if (found == s.kernel_index.end()) {
        if (s.kernels.size() >= kMaxRollupKernels) key.name = "other";
        found = s.kernel_index.find(key);
        if (found == s.kernel_index.end()) {
          found = s.kernel_index.emplace(key, static_cast<int>(s.kernels.size())).first;
          s.kernels.push_back(key);
        }
      }
      const int index = found->second;
      if (s.joins.size() >= kMaxPendingJoins) {
        s.joins.erase(s.join_order.front());
        s.join_order.pop_front();
      }
      const schema::JoinKey join = schema::JoinKeyOf(k);
      if (schema::ExpectsKernelTime(k) && s.joins.emplace(join, index).second) {
        s.join_order.push_back(join);
      }
      if (rollups) {
        if (s.window.empty()) {
          s.window_start = line_start;
          s.window_first_ns = ts;
        }
        s.window_last_ns = std::max(s.window_last_ns, ts);
        RollupValue& v = s.window[index];
        if (v.launches == 0 && v.timed == 0) {
          v.first_seq = k.header.seq;
          v.first_ts_ns = ts;
        }
        v.last_ts_ns = ts;
        ++v.launches;
        v.occupancy_sum += k.occupancy.occupancy;
        v.occupancy_min = std::min(v.occupancy_min, k.occupancy.occupancy);
        v.registers = k.num_regs;
        if (k.recovered) ++v.launches_recovered;
      }
      if (options.every_launch) {
        AddRecord(s, event, line, {}, LaunchTrigger::kNone);
      } else if (options.last_launches > 0) {
        if (s.ring.size() >= static_cast<size_t>(options.last_launches)) s.ring.pop_front();
        s.ring.push_back({k, line.size() <= kMaxKeptLineBytes ? std::string(line) : std::string()});
      }
      return;
    }
    case schema::EventType::kKernelTime: {
      const auto& t = std::get<schema::OwnedKernelTimeEvent>(event);
      const auto join = s.joins.find(schema::JoinKeyOf(t));
      std::string_view name;
      if (join != s.joins.end()) {
        name = s.kernels[static_cast<size_t>(join->second)].name;
        if (rollups) {
          if (s.window.empty()) {
            s.window_start = line_start;
            s.window_first_ns = ts;
          }
          s.window_last_ns = std::max(s.window_last_ns, ts);
          RollupValue& v = s.window[join->second];
          if (v.launches == 0 && v.timed == 0) {
            v.first_seq = t.header.seq;
            v.first_ts_ns = ts;
            v.last_ts_ns = ts;
          }
          ++v.timed;
          v.gpu_time_ns = v.gpu_time_ns + t.duration_ns < v.gpu_time_ns
                              ? UINT64_MAX
                              : v.gpu_time_ns + t.duration_ns;
        }
      }
      if (options.every_launch) AddRecord(s, event, line, name, LaunchTrigger::kNone);
      return;
    }
    case schema::EventType::kStats:
      return;
    case schema::EventType::kApiError:
      AddRecord(s, event, line, {}, LaunchTrigger::kNone);
      return;
    case schema::EventType::kStall:
      if (std::get<schema::OwnedStallEvent>(event).state == schema::StallState::kStalled) {
        EmitRing(s, LaunchTrigger::kStall);
      }
      AddRecord(s, event, line, {}, LaunchTrigger::kNone);
      return;
    case schema::EventType::kProcessCrash:
    case schema::EventType::kProcessLost:
      EmitRing(s, type == schema::EventType::kProcessCrash ? LaunchTrigger::kCrash
                                                           : LaunchTrigger::kLost);
      AddRecord(s, event, line, {}, LaunchTrigger::kNone);
      CloseWindow(s);
      s.committed.finished = true;
      return;
    case schema::EventType::kProcessEnd:
      s.ring.clear();
      AddRecord(s, event, line, {}, LaunchTrigger::kNone);
      CloseWindow(s);
      s.committed.finished = true;
      return;
    case schema::EventType::kKernelConfig:  // remembered by HandleLine, not a record
    case schema::EventType::kLaunch:        // expanded by HandleLine: a kernel event here
      return;
  }
}

// ---- sending ----

bool Exporter::Impl::Flush() {
  if (batch.records == 0) {
    batch = Batch{};
    Commit();
    return true;
  }
  // The Resources now, so that a device read after a stream's first records still names them.
  for (auto& [key, rl] : batch.by_stream) {
    const auto it = streams.find(key);
    if (it != streams.end()) FillResource(it->second.identity, rl->mutable_resource());
  }
  std::string body;
  bool encoded = false;
  if (options.encoding == Encoding::kJson) {
    google::protobuf::util::JsonPrintOptions json;
    json.always_print_enums_as_ints = true;  // OTLP/JSON: enums as integers
    encoded = google::protobuf::util::MessageToJsonString(batch.request, &body, json).ok();
  } else {
    encoded = batch.request.SerializeToString(&body);
  }
  const uint64_t records = static_cast<uint64_t>(batch.records);
  if (!encoded) {
    if (metrics) metrics->Failed("encode", records);
    log->error("otlp: cannot encode a request of {} records; they are not exported", records);
    batch = Batch{};
    Commit();
    return true;
  }
  for (;;) {
    const SendResult r = client.Post(body);
    if (r.kind == SendResult::Kind::kOk) {
      backoff.Reset();
      if (metrics) {
        metrics->Sent(records);
        if (r.rejected > 0) metrics->Failed("partial_success", static_cast<uint64_t>(r.rejected));
      }
      if (r.rejected > 0) {
        log->warn("otlp: the receiver rejected {} of {} records: {}", r.rejected, records,
                  r.message);
      }
      break;
    }
    if (r.kind == SendResult::Kind::kPermanent) {
      backoff.Reset();
      if (metrics) metrics->Failed(r.reason, records);
      log->error("otlp: the receiver refused {} records ({}); not sent again", records, r.message);
      break;
    }
    if (metrics) metrics->Retried(r.reason);
    const std::chrono::milliseconds wait = r.retry_after.value_or(backoff.Next());
    log->debug("otlp: {} ({} records); again in {} ms", r.message, records, wait.count());
    UpdateLag(false);
    // Waits in short steps, so that Stop's drain deadline and the lag gauges are kept.
    const Clock::time_point until = Clock::now() + wait;
    while (Clock::now() < until) {
      if (PastDrain()) return false;
      Sleep(std::min<std::chrono::milliseconds>(
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()) +
              std::chrono::milliseconds(1),
          std::chrono::milliseconds(200)));
    }
    if (PastDrain()) return false;
  }
  batch = Batch{};
  Commit();
  return true;
}

void Exporter::Impl::Commit() {
  Cursor cursor;
  for (auto& [key, s] : streams) {
    if (s.release && s.committed.finished && batch.by_stream.count(key) == 0) s.Release();
    const Position p = s.CommitPosition();
    if (p != s.committed.position) {
      s.committed.position = p;
      cursor_dirty = true;
    }
    cursor[key] = s.committed;
  }
  if (!cursor_dirty) return;
  std::string error;
  if (SaveCursor(cursor_file, cursor, &error)) {
    cursor_dirty = false;
  } else {
    log->error("otlp: {}", error);
  }
}

void Exporter::Impl::UpdateLag(bool force) {
  const Clock::time_point now = Clock::now();
  if (!force && now - last_lag < std::chrono::seconds(1)) return;
  last_lag = now;
  if (metrics == nullptr) return;
  std::map<std::string, StreamFiles> listing;
  std::string error;
  if (!ListStreams(dir->fd(), &listing, &error)) return;
  uint64_t bytes = 0;
  double seconds = 0;
  for (const auto& [key, f] : listing) {
    const auto it = streams.find(key);
    const Position p = it == streams.end() ? Position{} : it->second.committed.position;
    const int date_fd = dir->OpenSubdir(f.date, false);
    if (date_fd < 0) continue;
    base::ScopedFd date(date_fd);
    uint64_t behind = 0;
    const auto size_of = [&](const std::string& name) -> uint64_t {
      struct stat st {};
      return fstatat(date.Get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0
                 ? static_cast<uint64_t>(st.st_size)
                 : 0;
    };
    for (const auto& [k, compressed] : f.closed) {
      if (k < p.segment) continue;
      const uint64_t size = size_of(schema::SegmentFileName(f.base, k, compressed));
      behind += (k == p.segment && !compressed) ? (size > p.offset ? size - p.offset : 0) : size;
    }
    if (f.active) {
      const uint64_t size = size_of(schema::ActiveFileName(f.base));
      const bool same = p.segment > f.last_closed();
      const uint64_t read_bytes = same ? p.offset : 0;
      behind += size > read_bytes ? size - read_bytes : 0;
    }
    bytes += behind;
    if (it != streams.end()) {
      StreamState& s = it->second;
      if (behind == 0) {
        s.behind_since.reset();
      } else {
        if (!s.behind_since) s.behind_since = now;
        seconds = std::max(seconds, std::chrono::duration<double>(now - *s.behind_since).count());
      }
    }
  }
  metrics->SetLag(bytes, seconds);
}

void Exporter::Impl::Cycle() {
  std::string error;
  if (!ListStreams(dir->fd(), &files, &error)) {
    log->warn("otlp: {}", error);
    return;
  }
  // Streams whose files are all gone (retention) are forgotten.
  for (auto it = streams.begin(); it != streams.end();) {
    if (files.count(it->first) == 0) {
      it = streams.erase(it);
      cursor_dirty = true;
    } else {
      ++it;
    }
  }
  const Clock::time_point now = Clock::now();
  for (const auto& [key, f] : files) {
    if (Stopping()) break;
    auto [it, added] = streams.try_emplace(key);
    StreamState& s = it->second;
    if (added) {
      s.key = key;
      s.identity.stream = f.base;
    }
    if (s.committed.finished && now < s.next_check) continue;
    ProcessStream(s, f);
    if (s.committed.finished) {
      s.next_check = Clock::now() + kFinishedRecheck;
      s.release = true;  // once its records are sent (Commit)
    }
  }
  // Windows whose time has passed with no launch since (event time against the clock).
  const int64_t interval_ns = static_cast<int64_t>(options.rollup_interval.count()) * 1000000;
  const int64_t real_now = RealtimeNs();
  for (auto& [key, s] : streams) {
    if (!s.window.empty() && (Stopping() || real_now - s.window_first_ns >= interval_ns)) {
      CloseWindow(s);
      if (BatchFull() && !Flush()) return;
    }
  }
  Flush();
  UpdateLag(true);
}

void Exporter::Impl::Run() {
  for (;;) {
    Cycle();
    if (Stopping()) break;
    if (Sleep(options.scan_interval)) {
      Cycle();  // the last look, sending what has been read within the drain time
      break;
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  done = true;
  cv.notify_all();
}

// ---- the public class ----

Exporter::Exporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Exporter::~Exporter() { Stop(); }

std::unique_ptr<Exporter> Exporter::Start(const ExportOptions& options,
                                          const std::filesystem::path& log_dir,
                                          std::optional<gid_t> socket_group,
                                          ExportMetrics* metrics,
                                          std::shared_ptr<spdlog::logger> logger,
                                          std::string* error) {
  auto impl = std::make_unique<Impl>(options);
  impl->metrics = metrics;
  impl->log = std::move(logger);
  impl->dir = logstore::LogDir::Open(log_dir, error, socket_group);
  if (!impl->dir) return nullptr;
  impl->cursor_file =
      options.cursor_file.empty() ? impl->dir->path() / "otlp-cursor.json" : options.cursor_file;
  Cursor cursor;
  if (!LoadCursor(impl->cursor_file, &cursor, error)) return nullptr;
  for (const auto& [key, entry] : cursor) {
    StreamState& s = impl->streams[key];
    s.key = key;
    s.identity.stream = key.substr(key.find('/') + 1);
    s.committed = entry;
    s.read = entry.position;
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    try {
      raw->Run();
    } catch (const std::exception& e) {
      raw->log->error("otlp: the exporter stopped: {}", e.what());
      std::lock_guard<std::mutex> lock(raw->mu);
      raw->done = true;
      raw->cv.notify_all();
    }
  });
  return std::unique_ptr<Exporter>(new Exporter(std::move(impl)));
}

void Exporter::Stop(std::chrono::milliseconds drain) {
  if (!impl_ || !impl_->thread.joinable()) return;
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    impl_->stop = true;
    impl_->drain_deadline = Clock::now() + drain;
    impl_->cv.notify_all();
    impl_->cv.wait_until(lock, impl_->drain_deadline + std::chrono::milliseconds(100),
                         [&] { return impl_->done; });
  }
  impl_->client.Stop();  // a request still in flight returns at once
  impl_->thread.join();
}

}  // namespace cuflight::exporter
