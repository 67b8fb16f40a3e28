// The collector's ingest rate: events/s per core of its single event-loop thread, with framing,
// validation, dedup/seq accounting, metrics and file writing, next to a raw byte copy of the same
// stream from the same producers (read(2) -> write(2), one file per connection, same epoll
// structure), and the collector binary's peak RSS under the same load.
//
//   taskset -c 0 build/release/bin/ingest_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
//
// Workload: kProducers producer threads, each one connection sending process_start (its config
// saying timing all, or off for the mixes without kernel_time), a device (and, for the interned
// mixes, the kernel_config of its configuration), then 250,000 events in one of these mixes (the
// benchmarks' first argument, Mix below):
//   0 launches as pairs of `kernel` (a CUTLASS GEMM with 84-byte mangled and 147-byte demangled
//     names, ~1.1 KB) and `kernel_time` (~0.3 KB) lines;
//   1 `kernel_time` lines only;
//   2 `kernel` lines only: today's self-contained launches with timing off;
//   3 `launch` lines only (docs/protocol.md, "Interned configurations"): the same launches
//     interned, timing off;
//   4 pairs of `launch` and `kernel_time`: the same launches interned, timing on.
// Every launch has its own ts_ns (19 digits, 2 us apart), seq (from 2 or 3 up, 6-7 digits) and
// correlation_id; the interned lines are schema::Split and schema::Encode of the same kernel
// event, so they follow whatever the launch line carries. Lines are made from an encoded template
// by patching those numbers, so the producers cost little next to the server. Logs go to
// $CUFLIGHT_BENCH_DIR (default /tmp). Per-core rates divide events (and launches) by the CPU time
// of the server's loop thread (pthread_getcpuclockid), so producers sharing the cores do not count
// against it.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench_events.h"
#include "collector.h"
#include "cuflight/metrics/metrics.h"
#include "cuflight/schema/ack.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/events.h"

extern char** environ;

namespace cuflight::collector {
namespace {

constexpr int kProducers = 4;
constexpr uint64_t kEventsPerProducer = 250000;  // 1 M events per run
constexpr size_t kSendBatchBytes = 256 << 10;
constexpr int64_t kLaunchSpacingNs = 2000;  // a launch every 2 us per producer: 500 k/s each
constexpr uint64_t kConfigId = 1;

// The event mix, the benchmarks' first argument.
enum Mix : int64_t {
  kLaunches = 0,        // kernel + kernel_time per launch (~0.7 KB per event)
  kKernelTimeOnly = 1,  // kernel_time events only (~0.3 KB per event)
  kKernelsOnly = 2,     // whole kernel events only, timing off (~1.1 KB per event)
  kInterned = 3,        // a kernel_config, then launch events only, timing off (~0.2 KB)
  kInternedTimed = 4,   // a kernel_config, then launch + kernel_time per launch
};

bool Interned(Mix mix) { return mix == kInterned || mix == kInternedTimed; }
bool Timed(Mix mix) { return mix == kLaunches || mix == kKernelTimeOnly || mix == kInternedTimed; }

// Launch lines (kernel or launch) among a producer's kEventsPerProducer events.
uint64_t LaunchesPerProducer(Mix mix) {
  switch (mix) {
    case kKernelTimeOnly:
      return 0;
    case kKernelsOnly:
    case kInterned:
      return kEventsPerProducer;
    default:
      return kEventsPerProducer / 2;
  }
}

// ---- the stream ----

// Marks written into the template events, found again in their encoded lines.
constexpr int64_t kTsMark = 1732000000123456789;
constexpr uint64_t kSeqMark = 7777777;
constexpr uint64_t kCorrMark = 8888888;

// An encoded line split around the digits of ts_ns, seq and correlation_id (in the encoder's
// order: the header's ts_ns and seq, then the event's correlation_id).
struct Template {
  std::string a, b, c, d;  // a <ts_ns> b <seq> c <correlation_id> d
};

Template Split(const std::string& line) {
  const std::string ts_text = "\"ts_ns\":" + std::to_string(kTsMark);
  const std::string seq_text = "\"seq\":" + std::to_string(kSeqMark);
  const std::string corr_text = "\"correlation_id\":" + std::to_string(kCorrMark);
  const size_t t = line.find(ts_text);
  const size_t s = line.find(seq_text);
  const size_t c = line.find(corr_text);
  if (t == std::string::npos || s == std::string::npos || c == std::string::npos || !(t < s) ||
      !(s < c)) {
    std::fprintf(stderr, "ingest_bench: the template line lacks its marks: %s", line.c_str());
    std::abort();
  }
  const size_t t_end = t + ts_text.size();
  const size_t s_end = s + seq_text.size();
  Template out;
  out.a = line.substr(0, t_end - std::to_string(kTsMark).size());
  out.b = line.substr(t_end, s_end - std::to_string(kSeqMark).size() - t_end);
  out.c = line.substr(s_end, c + corr_text.size() - std::to_string(kCorrMark).size() - s_end);
  out.d = line.substr(c + corr_text.size());
  return out;
}

template <class E>
std::string Encode(const E& e) {
  std::string buf(8192, '\0');
  buf.resize(schema::Encode(e, buf.data(), buf.size()));
  return buf;
}

struct Stream {
  // process_start (seq 0) saying timing all, or off; device (seq 1); kernel_config (seq 2).
  std::string start_timed, start_untimed, device, config;
  Template kernel;
  Template launch;
  Template kernel_time;
  int64_t ts0 = 0;  // the first launch's ts_ns
};

Stream MakeStream(int producer) {
  const int32_t pid = static_cast<int32_t>(getpid());
  const schema::Header h{kTsMark, pid, 0};
  schema::ProcessStartEvent start;
  start.header = h;
  start.exe = "/opt/bench/trainer";
  static const std::array<std::string_view, 1> kArgv = {"trainer"};
  start.argv = kArgv;
  start.hostname = "bench";
  start.start_ns = 1000 + producer;
  start.cuflight_version = "0.1.0";
  // What a producer's config says of its timing policy (schema/env/README.md, CUFLIGHT_TIMING):
  // the mixes without kernel_time lines are a process with timing off.
  static const std::array<std::pair<std::string_view, std::string_view>, 1> kTimingAll = {
      {{"timing", "all"}}};
  static const std::array<std::pair<std::string_view, std::string_view>, 1> kTimingOff = {
      {{"timing", "off"}}};
  schema::DeviceEvent device;
  device.header = h;
  device.header.seq = 1;
  device.name = "NVIDIA H100 80GB HBM3";
  device.sm_count = 132;
  schema::KernelEvent k = bench::RealisticKernel();
  k.header = h;
  k.header.seq = kSeqMark;
  k.tid = pid;
  k.correlation_id = kCorrMark;
  schema::KernelConfigEvent config;
  schema::LaunchEvent launch;
  schema::Split(k, kConfigId, &config, &launch);
  config.header.seq = 2;
  schema::KernelTimeEvent t;
  t.header = h;
  t.header.seq = kSeqMark;
  t.correlation_id = kCorrMark;
  t.context = k.context;
  t.stream = k.stream;
  t.start_ns = 1732000000223456789;
  t.end_ns = 1732000000223556789;
  t.duration_ns = 100000;
  Stream s;
  start.config = kTimingAll;
  s.start_timed = Encode(start);
  start.config = kTimingOff;
  s.start_untimed = Encode(start);
  s.device = Encode(device);
  s.config = Encode(config);
  s.kernel = Split(Encode(k));
  s.launch = Split(Encode(launch));
  s.kernel_time = Split(Encode(t));
  s.ts0 = kTsMark + 1000000000;
  return s;
}

void AppendNumber(std::string* out, uint64_t value) {
  char digits[24];
  out->append(digits, std::to_chars(digits, digits + sizeof(digits), value).ptr);
}

void AppendLine(std::string* out, const Template& t, int64_t ts, uint64_t seq, uint64_t corr) {
  *out += t.a;
  AppendNumber(out, static_cast<uint64_t>(ts));
  *out += t.b;
  AppendNumber(out, seq);
  *out += t.c;
  AppendNumber(out, corr);
  *out += t.d;
}

int Connect(const std::filesystem::path& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads acks until one covers `seq`.
bool WaitAck(int fd, uint64_t seq) {
  std::string in;
  char buf[4096];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = in.find('\n')) != std::string::npos) {
      const auto ack = schema::ParseAck(std::string_view(in).substr(0, nl + 1));
      in.erase(0, nl + 1);
      if (ack && *ack >= seq) return true;
    }
  }
}

// What a connection sends first: process_start, device, and the kernel_config when interned.
std::string Preamble(const Stream& s, Mix mix) {
  return (Timed(mix) ? s.start_timed : s.start_untimed) + s.device +
         (Interned(mix) ? s.config : std::string());
}

// The first seq after the preamble, and the last one of the stream.
uint64_t FirstSeq(Mix mix) { return Interned(mix) ? 3 : 2; }
uint64_t LastSeq(Mix mix) { return FirstSeq(mix) + kEventsPerProducer - 1; }

// One producer: the whole stream, then (when `wait_ack`) the ack of its last seq, then close.
// Returns the bytes sent.
uint64_t Produce(const std::filesystem::path& socket, const Stream& s, Mix mix, bool wait_ack) {
  const int fd = Connect(socket);
  if (fd < 0) return 0;
  std::string batch = Preamble(s, mix);
  batch.reserve(kSendBatchBytes + 4096);
  uint64_t bytes = 0;
  uint64_t seq = FirstSeq(mix);
  const Template& launch = Interned(mix) ? s.launch : s.kernel;
  const bool timed = Timed(mix);
  const bool launches = mix != kKernelTimeOnly;
  // Correlation ids as CUPTI gives them: one per API call, so a launch's own and the next
  // launch's a few apart (the API calls between launches).
  uint64_t corr = 734211;
  for (uint64_t event = 0; event < kEventsPerProducer;) {
    const int64_t ts = s.ts0 + static_cast<int64_t>(event) * kLaunchSpacingNs;
    if (launches) {
      AppendLine(&batch, launch, ts, seq++, corr);
      ++event;
    }
    if (timed) {
      // The timing record arrives later than its launch: its event is built later.
      AppendLine(&batch, s.kernel_time, ts + 150000, seq++, launches ? corr : corr + 1);
      ++event;
    }
    corr += 3;
    if (batch.size() >= kSendBatchBytes) {
      SendAll(fd, batch);
      bytes += batch.size();
      batch.clear();
    }
  }
  SendAll(fd, batch);
  bytes += batch.size();
  if (wait_ack) WaitAck(fd, LastSeq(mix));
  close(fd);
  return bytes;
}

// ---- measurement helpers ----

class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("CUFLIGHT_BENCH_DIR");
    std::string templ = std::string(base != nullptr ? base : "/tmp") + "/cuflight-bench-XXXXXX";
    if (mkdtemp(templ.data()) != nullptr) path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

double ThreadCpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Runs the producers; returns the wall seconds and the bytes they sent.
struct ProducersResult {
  double wall_s = 0;
  uint64_t bytes = 0;
};

ProducersResult RunProducers(const std::filesystem::path& socket,
                             const std::vector<Stream>& streams, Mix mix, bool wait_ack) {
  std::vector<std::thread> threads;
  std::atomic<uint64_t> bytes{0};
  const auto start = std::chrono::steady_clock::now();
  for (const Stream& s : streams) {
    threads.emplace_back([&, p = &s] { bytes += Produce(socket, *p, mix, wait_ack); });
  }
  for (auto& t : threads) t.join();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          bytes.load()};
}

// Every line the collector stores: the preambles' and the events'.
uint64_t EventsPerRun(Mix mix) {
  return kProducers * (FirstSeq(mix) + kEventsPerProducer);
}
uint64_t LaunchesPerRun(Mix mix) { return kProducers * LaunchesPerProducer(mix); }

std::vector<Stream> Streams() {
  std::vector<Stream> streams;
  for (int i = 0; i < kProducers; ++i) streams.push_back(MakeStream(i));
  return streams;
}

void Report(benchmark::State& state, Mix mix, double cpu_s, double wall_s, double bytes) {
  const auto events = static_cast<double>(EventsPerRun(mix));
  state.counters["events_per_s_per_core"] = benchmark::Counter(events / cpu_s);
  state.counters["launches_per_s_per_core"] =
      benchmark::Counter(static_cast<double>(LaunchesPerRun(mix)) / cpu_s);
  state.counters["bytes_per_event"] = benchmark::Counter(bytes / events);
  state.counters["events_per_s_wall"] = benchmark::Counter(events / wall_s);
  state.counters["server_cpu_s"] = benchmark::Counter(cpu_s);
  state.counters["MB_per_s_per_core"] = benchmark::Counter(bytes / cpu_s / 1e6);
}

// ---- the collector, in process ----

void BM_CollectorIngest(benchmark::State& state) {
  const std::vector<Stream> streams = Streams();
  const auto mix = static_cast<Mix>(state.range(0));
  for (auto _ : state) {
    ScratchDir dir;
    CollectorOptions options;
    options.socket = dir.path() / "c.sock";
    options.log_dir = dir.path() / "logs";
    // Argument 1: with the Prometheus metrics (--metrics given), or without (the default).
    const bool with_metrics = state.range(1) != 0;
    Metrics metrics;
    auto quiet = std::make_shared<spdlog::logger>("bench");
    quiet->set_level(spdlog::level::off);
    StartupError error;
    auto collector = Collector::Create(options, with_metrics ? &metrics : nullptr, quiet, &error);
    if (!collector) {
      state.SkipWithError(error.line.c_str());
      return;
    }
    std::atomic<clockid_t> clock{0};
    std::atomic<bool> clock_ready{false};
    std::thread loop([&] {
      pthread_setname_np(pthread_self(), "collector");
      clockid_t id;
      pthread_getcpuclockid(pthread_self(), &id);
      clock = id;
      clock_ready = true;
      collector->Run();
    });
    while (!clock_ready) std::this_thread::yield();
    const double cpu0 = ThreadCpuSeconds(clock);
    const ProducersResult r = RunProducers(options.socket, streams, mix, true);
    const double cpu1 = ThreadCpuSeconds(clock);
    collector->RequestStop();
    loop.join();
    const IngestStats stats = collector->stats();
    if (stats.lines_stored != EventsPerRun(mix) || stats.lines_received != stats.lines_stored) {
      state.SkipWithError("not every event was stored");
      return;
    }
    state.SetIterationTime(r.wall_s);
    Report(state, mix, cpu1 - cpu0, r.wall_s, static_cast<double>(r.bytes));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * EventsPerRun(mix)));
}
BENCHMARK(BM_CollectorIngest)
    ->ArgNames({"mix", "metrics"})
    ->ArgsProduct({{kLaunches, kKernelTimeOnly, kKernelsOnly, kInterned, kInternedTimed}, {0, 1}})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ---- raw byte copy: the same epoll loop shape without framing or validation ----

class RawCopyServer {
 public:
  RawCopyServer(const std::filesystem::path& socket, const std::filesystem::path& dir, int expected)
      : dir_(dir), expected_(expected) {
    std::filesystem::create_directories(dir);
    listen_fd_ = socket_fd(socket);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  }
  ~RawCopyServer() {
    close(listen_fd_);
    close(epoll_fd_);
  }

  // Until `expected` connections have come and gone.
  void Run() {
    std::vector<char> buf(Collector::kReadChunkBytes);
    std::array<epoll_event, 256> events{};
    int finished = 0;
    while (finished < expected_) {
      const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 1000);
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<size_t>(i)].data.fd;
        if (fd == listen_fd_) {
          const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) continue;
          const std::string name = (dir_ / ("conn" + std::to_string(c) + ".jsonl")).string();
          files_[c] = open(name.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.fd = c;
          epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c, &ev);
          continue;
        }
        const ssize_t got = recv(fd, buf.data(), buf.size(), 0);
        if (got > 0) {
          const char* p = buf.data();
          size_t left = static_cast<size_t>(got);
          while (left > 0) {
            const ssize_t w = write(files_[fd], p, left);
            if (w <= 0) break;
            p += w;
            left -= static_cast<size_t>(w);
          }
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
          close(files_[fd]);
          files_.erase(fd);
          close(fd);
          ++finished;
        }
      }
    }
  }

 private:
  static int socket_fd(const std::filesystem::path& path) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd, SOMAXCONN);
    return fd;
  }

  std::filesystem::path dir_;
  int expected_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  std::unordered_map<int, int> files_;
};

void BM_RawCopy(benchmark::State& state) {
  const std::vector<Stream> streams = Streams();
  const auto mix = static_cast<Mix>(state.range(0));
  for (auto _ : state) {
    ScratchDir dir;
    RawCopyServer server(dir.path() / "raw.sock", dir.path() / "logs", kProducers);
    std::atomic<clockid_t> clock{0};
    std::atomic<bool> clock_ready{false};
    std::atomic<double> cpu_end{0};
    std::thread loop([&] {
      pthread_setname_np(pthread_self(), "raw-copy");
      clockid_t id;
      pthread_getcpuclockid(pthread_self(), &id);
      clock = id;
      clock_ready = true;
      server.Run();
      cpu_end = ThreadCpuSeconds(id);
    });
    while (!clock_ready) std::this_thread::yield();
    const double cpu0 = ThreadCpuSeconds(clock);
    const ProducersResult r =
        RunProducers(dir.path() / "raw.sock", streams, mix, false);
    loop.join();  // every connection copied to its end
    const double wall = r.wall_s;
    state.SetIterationTime(wall);
    Report(state, mix, cpu_end - cpu0, wall, static_cast<double>(r.bytes));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * EventsPerRun(mix)));
}
BENCHMARK(BM_RawCopy)
    ->ArgName("mix")
    ->DenseRange(kLaunches, kInternedTimed)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ---- the cuflight-collector binary: peak RSS under the same load ----

uint64_t PeakRssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

void BM_CollectorProcessPeakRss(benchmark::State& state) {
  const std::vector<Stream> streams = Streams();
  for (auto _ : state) {
    ScratchDir dir;
    const std::string socket = (dir.path() / "c.sock").string();
    const std::string logs = (dir.path() / "logs").string();
    std::vector<const char*> argv = {
        CUFLIGHT_COLLECTOR_PATH, "--socket", socket.c_str(), "--log-dir", logs.c_str(),
        "--log-level",           "warn",     nullptr};
    pid_t pid = -1;
    if (posix_spawn(&pid, CUFLIGHT_COLLECTOR_PATH, nullptr, nullptr,
                    const_cast<char* const*>(argv.data()), environ) != 0) {
      state.SkipWithError("cannot start cuflight-collector");
      return;
    }
    int fd = -1;
    for (int i = 0; i < 2000 && fd < 0; ++i) {
      fd = Connect(socket);
      if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (fd >= 0) close(fd);
    const ProducersResult r = RunProducers(socket, streams, kLaunches, true);
    const uint64_t rss = PeakRssBytes(pid);
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    state.SetIterationTime(r.wall_s);
    state.counters["peak_rss_MiB"] = benchmark::Counter(static_cast<double>(rss) / 1048576.0);
    state.counters["events_per_s_wall"] =
        benchmark::Counter(static_cast<double>(EventsPerRun(kLaunches)) / r.wall_s);
  }
}
BENCHMARK(BM_CollectorProcessPeakRss)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cuflight::collector

BENCHMARK_MAIN();
