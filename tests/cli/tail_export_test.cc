// `cuflight tail` following a live collector fed by the injector's own Sender, the LogFollower
// under it (rotation, new files, partial lines), and `cuflight export --perfetto` checked against
// hand-made logs with hand-computed expectations.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "collector_process.h"
#include "collector_test_util.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/events.h"
#include "cuflight/transport/sender.h"
#include "event_text.h"
#include "h100_device.h"
#include "log_dir_locator.h"
#include "log_follower.h"
#include "report_test_events.h"
#include "subprocess.h"

namespace cuflight::cli {
namespace {

using collector::testing::ChildProcess;
using collector::testing::RunningCollector;
using collector::testing::TempDir;
using collector::testing::WaitUntil;
using cuflight::testing::RunProcess;
using nlohmann::json;

constexpr std::chrono::seconds kDeadline{30};

template <class E>
std::string Line(const E& event) {
  std::string buf(64 * 1024, '\0');
  const size_t n = schema::Encode(event, buf.data(), buf.size());
  EXPECT_GT(n, 0u);
  buf.resize(n);
  return buf;
}

schema::OwnedProcessStartEvent Start(int32_t pid, uint64_t seq, int64_t start_ns) {
  schema::OwnedProcessStartEvent e;
  e.header = {1'700'000'000'000'000'000, pid, seq};
  e.exe = "/opt/bin/trainer";
  e.argv = {"trainer"};
  e.hostname = "node1";
  e.start_ns = start_ns;
  e.cuflight_version = "0.1.0";
  return e;
}

schema::OwnedDeviceEvent Device(int32_t pid, uint64_t seq) {
  schema::OwnedDeviceEvent e;
  e.header = {1'700'000'000'000'000'500, pid, seq};
  e.device = 0;
  test_support::SetH100(&e);
  return e;
}

schema::OwnedKernelEvent Kernel(int32_t pid, uint64_t seq, int64_t ts_ns, uint64_t corr,
                                const std::string& demangled, schema::Resource limiter) {
  schema::OwnedKernelEvent k;
  k.header = {ts_ns, pid, seq};
  k.tid = pid + 1;
  k.device = 0;
  k.context = 0xc0;
  k.stream = 0x10;
  k.correlation_id = corr;
  k.api = "cuLaunchKernel";
  k.name = "_Z" + std::to_string(demangled.size()) + demangled + "v";
  k.demangled = demangled + "()";
  k.grid = {132, 1, 1};
  k.block = {256, 1, 1};
  k.num_regs = 64;
  k.static_shared_bytes = 8192;
  k.dyn_shared_bytes = 1024;
  k.max_threads_per_block = 1024;
  k.occupancy.max_active_blocks = 4;
  k.occupancy.active_warps = 32;
  k.occupancy.max_warps = 64;
  k.occupancy.occupancy = 0.5;
  k.occupancy.reg_occupancy = 0.5;
  k.occupancy.smem_occupancy = 1;
  k.occupancy.warp_occupancy = 1;
  k.occupancy.block_occupancy = 1;
  k.occupancy.barrier_occupancy = 1;
  k.occupancy.limiting_resource = limiter;
  k.occupancy.limiting_resources = schema::MaskOf(limiter);
  k.occupancy.allocated_regs_per_block = 16384;
  k.occupancy.allocated_smem_per_block = 10240;
  k.occupancy.waves = 0.25;
  k.occupancy.tail_utilization = 0.25;
  k.occupancy.regs_for_next_block = 48;
  k.occupancy.smem_for_next_block = -1;
  k.occupancy.best_block_size = 256;
  return k;
}

schema::OwnedKernelTimeEvent Time(int32_t pid, uint64_t seq, uint64_t corr, uint64_t start,
                                  uint64_t end) {
  schema::OwnedKernelTimeEvent t;
  t.header = {static_cast<int64_t>(end) + 10'000, pid, seq};
  t.correlation_id = corr;
  t.device = 0;
  t.context = 0xc0;
  t.stream = 0x10;
  t.start_ns = start;
  t.end_ns = end;
  t.duration_ns = end - start;
  return t;
}

void Append(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::app);
  out << text;
}

// ---- LogFollower ----

TEST(LogFollowerTest, FollowsAppendsRotationAndNewFilesFromTheirStart) {
  TempDir dir;
  const std::filesystem::path day = dir.path() / "2026-01-05";
  std::filesystem::create_directories(day);
  const std::filesystem::path active = day / "h-app-1-2.jsonl";
  Append(active, "old 1\nold 2\n");
  Append(day / "h-app-1-2.000001.jsonl.zst", "compressed, never read\n");

  LogFollower follower(dir.path(), /*from_start=*/false);
  std::vector<std::string> lines;
  auto collect = [&lines](std::string_view line, const std::filesystem::path&) {
    lines.emplace_back(line);
  };
  EXPECT_EQ(follower.Poll(collect), 0u);  // what was there is skipped
  EXPECT_EQ(follower.files(), 1u);

  Append(active, "new 1\nnew 2 half");
  EXPECT_EQ(follower.Poll(collect), 1u);
  Append(active, " and rest\n");
  EXPECT_EQ(follower.Poll(collect), 1u);

  // Rotation as the collector does it: the active file is renamed, a new one started.
  Append(active, "before rename\n");
  const std::filesystem::path segment = day / "h-app-1-2.000002.jsonl";
  std::filesystem::rename(active, segment);
  Append(active, "fresh 1\n");
  Append(day / "h-app-9-9.jsonl", "other process\n");
  EXPECT_EQ(follower.Poll(collect), 3u);
  EXPECT_EQ(follower.files(), 3u);

  // The plain segment replaced by its compressed copy: dropped once read to its end.
  std::filesystem::remove(segment);
  EXPECT_EQ(follower.Poll(collect), 0u);
  EXPECT_EQ(follower.files(), 2u);

  std::vector<std::string> sorted_tail(lines.begin() + 2, lines.end());
  std::sort(sorted_tail.begin(), sorted_tail.end());
  EXPECT_EQ(lines[0], "new 1");
  EXPECT_EQ(lines[1], "new 2 half and rest");
  EXPECT_EQ(sorted_tail, (std::vector<std::string>{"before rename", "fresh 1", "other process"}));
}

TEST(LogFollowerTest, FromStartReadsWhatIsAlreadyThere) {
  TempDir dir;
  Append(dir.path() / "a.jsonl", "one\ntwo\n");
  LogFollower follower(dir.path(), /*from_start=*/true);
  std::vector<std::string> lines;
  follower.Poll([&lines](std::string_view line, const std::filesystem::path&) {
    lines.emplace_back(line);
  });
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two"}));
}

// ---- tail ----

// One producer: the injector's Sender, connected to the collector's socket.
class Producer {
 public:
  Producer(const std::filesystem::path& socket, int64_t start_ns)
      : start_ns_(start_ns), sender_(Options(socket)) {
    EXPECT_TRUE(sender_.AddPreamble(0, Line(Start(4242, 0, start_ns_))));
    EXPECT_TRUE(sender_.AddPreamble(1, Line(Device(4242, 1))));
  }
  void Kernel(const std::string& name, schema::Resource limiter) {
    const uint64_t seq = next_seq_++;
    EXPECT_TRUE(sender_.Enqueue(
        seq, Line(cli::Kernel(4242, seq, 1'700'000'000'000'100'000, seq, name, limiter))));
  }
  bool Flush() { return sender_.Flush(std::chrono::steady_clock::now() + kDeadline); }

 private:
  static transport::SenderOptions Options(const std::filesystem::path& socket) {
    transport::SenderOptions o;
    o.socket_path = socket.string();
    o.flush_interval = std::chrono::milliseconds(1);
    return o;
  }
  int64_t start_ns_;
  uint64_t next_seq_ = 2;
  transport::Sender sender_;
};

TEST(TailTest, PrintsTheEventsThatArriveAfterItStartsFromOldAndNewFiles) {
  TempDir dir;
  RunningCollector collector(collector::testing::TestOptions(dir.path()));
  ASSERT_NE(collector.collector(), nullptr);
  const std::filesystem::path socket = collector.collector()->socket_path();
  Producer first(socket, 1);
  first.Kernel("before_tail", schema::Resource::kRegisters);
  ASSERT_TRUE(first.Flush());

  ChildProcess tail(CUFLIGHT_CLI_PATH,
                    {"tail", "--log-dir", (dir.path() / "logs").string(), "--interval", "20"},
                    dir.path() / "tail.txt");
  ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
  first.Kernel("appended_kernel", schema::Resource::kWarps);
  ASSERT_TRUE(first.Flush());
  Producer second(socket, 2);  // another process: a new log file
  second.Kernel("new_file_kernel", schema::Resource::kSharedMem);
  ASSERT_TRUE(second.Flush());

  ASSERT_TRUE(tail.WaitForOutput("new_file_kernel()", kDeadline)) << tail.Output();
  ASSERT_TRUE(tail.WaitForOutput("appended_kernel()", kDeadline)) << tail.Output();
  tail.Signal(SIGINT);
  EXPECT_EQ(tail.Wait(kDeadline), 0);
  const std::string output = tail.Output();
  EXPECT_EQ(output.find("before_tail"), std::string::npos) << output;
  // The new file is read from its start: its process_start and device come first.
  EXPECT_NE(output.find("process_start /opt/bin/trainer on node1"), std::string::npos) << output;
  EXPECT_NE(output.find("device 0: NVIDIA H100 80GB HBM3 (cc 9.0, 132 SMs)"), std::string::npos)
      << output;
  EXPECT_NE(output.find("kernel appended_kernel() grid 132x1x1 block 256x1x1 regs 64 smem 9216 "
                        "occupancy 0.50 (warps)"),
            std::string::npos)
      << output;
}

TEST(TailTest, JsonWithFiltersPrintsOnlyTheMatchingStoredLines) {
  TempDir dir;
  RunningCollector collector(collector::testing::TestOptions(dir.path()));
  ASSERT_NE(collector.collector(), nullptr);
  std::filesystem::create_directories(dir.path() / "logs");
  ChildProcess tail(CUFLIGHT_CLI_PATH,
                    {"tail", "--log-dir", (dir.path() / "logs").string(), "--interval", "20",
                     "--json", "--kernel", "^gemm", "--limiter", "registers"},
                    dir.path() / "tail.txt");
  ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
  Producer producer(collector.collector()->socket_path(), 1);
  producer.Kernel("gemm_a", schema::Resource::kRegisters);
  producer.Kernel("gemm_b", schema::Resource::kWarps);
  producer.Kernel("conv_gemm", schema::Resource::kRegisters);
  producer.Kernel("gemm_last", schema::Resource::kRegisters);
  ASSERT_TRUE(producer.Flush());
  ASSERT_TRUE(tail.WaitForOutput("gemm_last", kDeadline)) << tail.Output();
  tail.Signal(SIGTERM);
  EXPECT_EQ(tail.Wait(kDeadline), 0);

  std::istringstream lines(tail.Output());
  std::string line;
  std::vector<std::string> names;
  while (std::getline(lines, line)) {
    if (line.rfind("cuflight tail:", 0) == 0) continue;
    const json j = json::parse(line);
    EXPECT_EQ(j["type"], "kernel");
    EXPECT_EQ(j["limiting_resource"], "registers");
    names.push_back(j["demangled"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"gemm_a()", "gemm_last()"}));
}

schema::OwnedStallEvent Stall(int32_t pid, uint64_t seq, bool stalled, int64_t stalled_ms,
                              const std::string& kernel) {
  schema::OwnedStallEvent e;
  e.header = {1'700'000'100'000'000'000 + static_cast<int64_t>(seq), pid, seq};
  e.state = stalled ? schema::StallState::kStalled : schema::StallState::kResolved;
  e.stall_ms = 10000;
  e.stalled_ms = stalled_ms;
  if (!stalled) return e;
  e.streams_stalled = 1;
  schema::OwnedStallStream& s = e.streams.emplace_back();
  s.device = 0;
  s.context = 1;
  s.stream = 0xe;
  s.waiting_ms = stalled_ms;
  s.unfinished = 3;
  schema::OwnedStallLaunch& l = s.launches.emplace_back();
  l.correlation_id = 17;
  l.name = "_Z" + std::to_string(kernel.size()) + kernel + "v";
  l.demangled = kernel + "()";
  l.grid = {1, 1, 1};
  l.block = {32, 1, 1};
  l.occupancy = 0.25;
  l.age_ms = stalled_ms;
  return e;
}

// Processes stalled now are listed first, the longest stalled first (from the ends of the active
// files, whatever the kernel filters), then tail follows; a stall event that arrives later is one
// line saying what the stream waits on.
TEST(TailTest, StalledProcessesComeFirstThenStallEventsAsTheyArrive) {
  TempDir dir;
  const std::filesystem::path logs = dir.path() / "logs" / "2026-01-05";
  std::filesystem::create_directories(logs);
  // Stalled for 20 s, then 42 s: stalled now.
  Append(logs / "node1-hung-101-1.jsonl", Line(Start(101, 0, 1)) + Line(Device(101, 1)) +
                                              Line(Stall(101, 2, true, 20000, "spin")) +
                                              Line(Stall(101, 3, true, 42000, "spin")));
  // Stalled, then resolved: not stalled now.
  Append(logs / "node1-slow-102-1.jsonl", Line(Start(102, 0, 1)) +
                                              Line(Stall(102, 1, true, 11000, "long_kernel")) +
                                              Line(Stall(102, 2, false, 15000, "")));
  // Stalled when it was lost: over.
  schema::OwnedProcessLostEvent lost;
  lost.header = {1'700'000'200'000'000'000, 103, 2};
  lost.last_seq = 1;
  Append(logs / "node1-gone-103-1.jsonl",
         Line(Start(103, 0, 1)) + Line(Stall(103, 1, true, 30000, "gone_kernel")) + Line(lost));
  // Stalled for 12 s: listed after the one stalled longer.
  Append(logs / "node1-wait-104-1.jsonl",
         Line(Start(104, 0, 1)) + Line(Stall(104, 1, true, 12000, "reduce")));

  ChildProcess tail(CUFLIGHT_CLI_PATH,
                    {"tail", "--log-dir", (dir.path() / "logs").string(), "--interval", "20",
                     "--kernel", "^nothing$"},
                    dir.path() / "tail.txt");
  ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
  Append(logs / "node1-wait-104-1.jsonl", Line(Stall(104, 2, false, 13000, "")));
  Append(logs / "node1-new-105-1.jsonl",
         Line(Start(105, 0, 1)) + Line(Stall(105, 1, true, 10000, "late_hang")));
  ASSERT_TRUE(tail.WaitForOutput("late_hang", kDeadline)) << tail.Output();
  ASSERT_TRUE(tail.WaitForOutput("resolved after 13.0 s", kDeadline)) << tail.Output();
  tail.Signal(SIGINT);
  EXPECT_EQ(tail.Wait(kDeadline), 0);
  const std::string output = tail.Output();
  const size_t header = output.find("cuflight tail: 2 processes stalled now");
  const size_t first = output.find(
      "pid 101 stall STALLED 42.0 s: device 0 stream 14 waits on spin() grid 1x1x1 block "
      "32x1x1 occupancy 0.25 launched 42.0 s ago corr 17 (+2 queued); 1 stream stalled, 0 "
      "kernels finished since the last report");
  const size_t second = output.find(
      "pid 104 stall STALLED 12.0 s: device 0 stream 14 waits on "
      "reduce()");
  const size_t following = output.find("cuflight tail: following");
  ASSERT_NE(header, std::string::npos) << output;
  ASSERT_NE(first, std::string::npos) << output;
  ASSERT_NE(second, std::string::npos) << output;
  EXPECT_LT(header, first);
  EXPECT_LT(first, second);
  EXPECT_LT(second, following);
  EXPECT_EQ(output.find("long_kernel"), std::string::npos) << output;  // resolved
  EXPECT_EQ(output.find("gone_kernel"), std::string::npos) << output;  // lost
  EXPECT_NE(output.find("pid 105 stall STALLED 10.0 s: device 0 stream 14 waits on late_hang()"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("pid 104 stall resolved after 13.0 s, 0 kernels finished since the last "
                        "report"),
            std::string::npos)
      << output;
}


// What one launch, a crash and a kernel at full occupancy look like: the crash with its signal,
// the two lines of a launch with one stream (the kernel_time names the stream its kernel line
// named, also in logs of older producers whose kernel events held a CUstream handle, here 0,
// and kernel_time CUPTI's id, here 7), no limiter named at 100%.
TEST(TailTest, ALaunchsTwoLinesNameOneStreamAndACrashItsSignal) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "logs");
  schema::OwnedKernelEvent launch =
      cli::Kernel(4242, 2, 1'700'000'000'000'100'000, 31, "old_stream", schema::Resource::kWarps);
  launch.stream = 0;
  schema::OwnedKernelTimeEvent time =
      Time(4242, 3, 31, 1'700'000'000'000'200'000, 1'700'000'000'000'201'500);
  time.stream = 7;
  schema::OwnedKernelEvent full =
      cli::Kernel(4242, 4, 1'700'000'000'000'300'000, 32, "full", schema::Resource::kRegisters);
  full.stream = 7;
  full.occupancy.occupancy = 1.0;
  schema::OwnedProcessCrashEvent crash;
  crash.header = {1'700'000'000'000'400'000, 4242, 5};
  crash.signal = 11;
  crash.signal_name = "SIGSEGV";
  crash.code = 1;
  crash.addr = 0x10;
  crash.tid = 4243;
  crash.launches = 2;
  crash.emitted = 5;
  Append(dir.path() / "logs" / "a.jsonl", Line(Start(4242, 0, 1)) + Line(Device(4242, 1)) +
                                              Line(launch) + Line(time) + Line(full) + Line(crash));
  ChildProcess tail(
      CUFLIGHT_CLI_PATH,
      {"tail", "--log-dir", (dir.path() / "logs").string(), "--from-start", "--interval", "20"},
      dir.path() / "tail.txt");
  ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
  tail.Signal(SIGINT);
  EXPECT_EQ(tail.Wait(kDeadline), 0);
  const std::string output = tail.Output();
  EXPECT_NE(output.find("kernel old_stream() grid 132x1x1 block 256x1x1 regs 64 smem 9216 "
                        "occupancy 0.50 (warps) device 0 stream 0 corr 31\n"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("kernel_time corr 31 device 0 stream 0 1.500 us\n"), std::string::npos)
      << output;
  EXPECT_NE(output.find("occupancy 1.00 device 0 stream 7 corr 32\n"), std::string::npos) << output;
  EXPECT_NE(output.find("pid 4242 process_crash SIGSEGV (signal 11, code 1) in thread 4243 at "
                        "0x10 launches 2 emitted 5 dropped 0\n"),
            std::string::npos)
      << output;
}

// A process under CUFLIGHT_TIMING=sampled: one launch in a timing window (gemm, corr 1), then
// more launches outside one than `tail` keeps streams for (LaunchStreams::kCapacity; their
// kernel events say timing_window false: "so none will come", schema/README.md), then the
// windowed launch's kernel_time (an activity flush after them). Its line names the stream its
// kernel line named: the launches outside a window kept no place, so they pushed nothing out.
// The kernel_time's own stream is set apart from its kernel's (7 against 16, as in logs of older
// producers) so that the line shows which it took. `interned`: the same events as a
// kernel_config per configuration and a short `launch` per launch (docs/protocol.md), which
// tail expands, timing_window included.
void SampledLaunchesKeepTheirKernelTimesStream(bool interned) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "logs");
  constexpr int32_t kPid = 4242;
  constexpr int64_t kTs = 1'700'000'000'000'100'000;
  uint64_t seq = 0;
  std::string text = Line(Start(kPid, seq++, 1));
  text += Line(Device(kPid, seq++));
  std::map<std::string, uint64_t> configs;  // a configuration's line -> its id
  auto add_kernel = [&](schema::OwnedKernelEvent k) {
    if (!interned) {
      k.header.seq = seq++;
      text += Line(k);
      return;
    }
    schema::OwnedKernelConfigEvent config;
    schema::OwnedLaunchEvent launch;
    schema::Split(k, 0, &config, &launch);
    config.header = {};
    auto [it, added] = configs.try_emplace(Line(config), configs.size() + 1);
    k.header.seq = seq + (added ? 1 : 0);
    schema::Split(k, it->second, &config, &launch);
    if (added) {
      config.header = {k.header.ts_ns, kPid, seq++};  // described before its first launch
      text += Line(config);
    }
    ++seq;
    text += Line(launch);
  };
  schema::OwnedKernelEvent timed =
      cli::Kernel(kPid, 0, kTs, 1, "gemm", schema::Resource::kRegisters);
  timed.stream = 16;
  timed.timing_window = true;
  add_kernel(timed);
  constexpr uint64_t kOutside = LaunchStreams::kCapacity + 10;
  for (uint64_t i = 0; i < kOutside; ++i) {
    schema::OwnedKernelEvent k = cli::Kernel(kPid, 0, kTs + 1000 + static_cast<int64_t>(i), 2 + i,
                                             "copy", schema::Resource::kWarps);
    k.stream = 16;
    k.timing_window = false;
    add_kernel(k);
  }
  schema::OwnedKernelTimeEvent time =
      Time(kPid, seq++, 1, 1'700'000'000'200'000'000, 1'700'000'000'200'001'500);
  time.stream = 7;
  text += Line(time);
  if (interned) {
    ASSERT_EQ(configs.size(), 2u);
    ASSERT_EQ(text.find("\"kernel\""), std::string::npos);  // launches only
  }
  Append(dir.path() / "logs" / "a.jsonl", text);

  ChildProcess tail(
      CUFLIGHT_CLI_PATH,
      {"tail", "--log-dir", (dir.path() / "logs").string(), "--from-start", "--interval", "20"},
      dir.path() / "tail.txt");
  ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output().substr(0, 4096);
  tail.Signal(SIGINT);
  EXPECT_EQ(tail.Wait(kDeadline), 0);
  const std::string output = tail.Output();
  // Every launch was shown, the windowed one and the last outside a window among them.
  EXPECT_NE(output.find("kernel gemm() grid 132x1x1 block 256x1x1 regs 64 smem 9216 "
                        "occupancy 0.50 (registers) device 0 stream 16 corr 1\n"),
            std::string::npos);
  EXPECT_NE(output.find(" stream 16 corr " + std::to_string(1 + kOutside) + "\n"),
            std::string::npos);
  EXPECT_EQ(output.find("skipped"), std::string::npos) << output.substr(output.size() - 2048);
  const size_t at = output.find(" kernel_time ");
  ASSERT_NE(at, std::string::npos);
  const std::string line = output.substr(at, output.find('\n', at) - at);
  EXPECT_EQ(line, " kernel_time corr 1 device 0 stream 16 1.500 us");
}

TEST(TailTest, LaunchesOutsideAWindowKeepNoStreamSoATimeNamesItsKernelsStream) {
  SampledLaunchesKeepTheirKernelTimesStream(/*interned=*/false);
}

TEST(TailTest, InternedLaunchesOutsideAWindowKeepNoStreamEither) {
  SampledLaunchesKeepTheirKernelTimesStream(/*interned=*/true);
}

// The first processes of two containers, both pid 1 (report::testing::WriteTwoProcessesOfPidOne):
// A's file is there when tail starts, B's arrives after (moved in, so that A's lines are read
// first whatever order a directory lists them in). --kernel shows a_kernel and b_kernel. A's
// corr 7 kernel (shown) has no kernel_time; B's kernel_time of corr 7 (5 us) has no kernel in the
// logs: it is B's, so not shown, though its pid and correlation id are those of A's shown kernel.
// B's own kernel_times (3 and 4 us) are shown, each once.
TEST(TailTest, ProcessesSharingAPidDoNotTakeEachOthersKernelTimes) {
  TempDir dir;
  report::testing::WriteTwoProcessesOfPidOne(dir.path() / "all");
  const std::filesystem::path day = dir.path() / "logs" / "2025-11-21";
  std::filesystem::create_directories(day);
  const std::string a = "node1-trainer-1-1763708400000000000-161-u0.jsonl";
  const std::string b = "node1-worker-1-1763708400000000000-178-u0.jsonl";
  std::filesystem::rename(dir.path() / "all" / "2025-11-21" / a, day / a);
  ChildProcess tail(CUFLIGHT_CLI_PATH,
                    {"tail", "--log-dir", (dir.path() / "logs").string(), "--from-start",
                     "--kernel", "a_kernel|b_kernel", "--interval", "20"},
                    dir.path() / "tail.txt");
  ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
  std::filesystem::rename(dir.path() / "all" / "2025-11-21" / b, day / b);
  // B's corr 6 time: its file's line before the kernel_time of corr 7, read in the same pass.
  ASSERT_TRUE(tail.WaitForOutput("kernel_time corr 6 device 0 stream 0 4.000 us\n", kDeadline))
      << tail.Output();
  tail.Signal(SIGINT);
  EXPECT_EQ(tail.Wait(kDeadline), 0);
  std::vector<std::string> times;  // the kernel_time lines, from " kernel_time " on
  std::istringstream lines(tail.Output());
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(" kernel_time ");
    if (at != std::string::npos) times.push_back(line.substr(at + 1));
  }
  EXPECT_EQ(times, (std::vector<std::string>{
                       "kernel_time corr 5 device 0 stream 0 1.000 us",  // A
                       "kernel_time corr 6 device 0 stream 0 2.000 us",  // A
                       "kernel_time corr 5 device 0 stream 0 3.000 us",  // B
                       "kernel_time corr 6 device 0 stream 0 4.000 us",  // B
                   }))
      << tail.Output();
}

// A kernel_time names its own process's launch's stream. Two processes of pid 1 in files whose
// names state no process (so told apart by their process_start: start_ns and instance id), the
// same correlation id 7: A launches on stream 16 and has no kernel_time; B's kernel_time (stream
// 32, 5 us) has no kernel in the logs, so its line names its own stream 32, not A's 16.
TEST(TailTest, AKernelTimeNamesItsOwnProcesssLaunchStream) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "logs");
  std::filesystem::create_directories(dir.path() / "later");
  schema::OwnedProcessStartEvent start_a = Start(1, 0, 1'700'000'000'000'000'000);
  start_a.instance_id = 161;
  schema::OwnedKernelEvent launch =
      cli::Kernel(1, 2, 1'700'000'000'000'100'000, 7, "a_kernel", schema::Resource::kWarps);
  launch.stream = 16;
  Append(dir.path() / "logs" / "a.jsonl", Line(start_a) + Line(Device(1, 1)) + Line(launch));
  schema::OwnedProcessStartEvent start_b = Start(1, 0, 1'700'000'000'000'000'000);
  start_b.instance_id = 178;
  schema::OwnedKernelTimeEvent time =
      Time(1, 2, 7, 1'700'000'000'000'200'000, 1'700'000'000'000'205'000);
  time.stream = 32;
  Append(dir.path() / "later" / "b.jsonl", Line(start_b) + Line(Device(1, 1)) + Line(time));
  ChildProcess tail(
      CUFLIGHT_CLI_PATH,
      {"tail", "--log-dir", (dir.path() / "logs").string(), "--from-start", "--interval", "20"},
      dir.path() / "tail.txt");
  ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
  std::filesystem::rename(dir.path() / "later" / "b.jsonl", dir.path() / "logs" / "b.jsonl");
  ASSERT_TRUE(tail.WaitForOutput(" kernel_time ", kDeadline)) << tail.Output();
  tail.Signal(SIGINT);
  EXPECT_EQ(tail.Wait(kDeadline), 0);
  const std::string output = tail.Output();
  EXPECT_NE(output.find("pid 1 kernel a_kernel() grid 132x1x1 block 256x1x1 regs 64 smem 9216 "
                        "occupancy 0.50 (warps) device 0 stream 16 corr 7\n"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("pid 1 kernel_time corr 7 device 0 stream 32 5.000 us\n"),
            std::string::npos)
      << output;
}

// --limiter takes what `cuflight report --limiter` takes; a typo gets a suggestion. A kernel at
// full occupancy is limited by nothing, whatever resource would bind first.
TEST(TailTest, LimiterTakesReportsNamesAndSuggestsOnATypo) {
  TempDir dir;
  schema::OwnedKernelEvent full = cli::Kernel(4242, 4, 1'700'000'000'000'100'000, 33, "full_regs",
                                              schema::Resource::kRegisters);
  full.occupancy.occupancy = 1.0;
  std::filesystem::create_directories(dir.path() / "logs");
  Append(dir.path() / "logs" / "a.jsonl",
         Line(Start(4242, 0, 1)) + Line(Device(4242, 1)) +
             Line(cli::Kernel(4242, 2, 1'700'000'000'000'100'000, 31, "by_regs",
                              schema::Resource::kRegisters)) +
             Line(cli::Kernel(4242, 3, 1'700'000'000'000'100'000, 32, "by_smem",
                              schema::Resource::kSharedMem)) +
             Line(full));
  for (const char* limiter : {"regs", "REGISTERS"}) {
    ChildProcess tail(
        CUFLIGHT_CLI_PATH,
        {"tail", "--log-dir", (dir.path() / "logs").string(), "--from-start", "--limiter", limiter},
        dir.path() / (std::string("tail-") + limiter + ".txt"));
    ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
    tail.Signal(SIGINT);
    EXPECT_EQ(tail.Wait(kDeadline), 0);
    EXPECT_NE(tail.Output().find("by_regs()"), std::string::npos) << tail.Output();
    EXPECT_EQ(tail.Output().find("by_smem()"), std::string::npos) << tail.Output();
    EXPECT_EQ(tail.Output().find("full_regs()"), std::string::npos) << tail.Output();
  }
  const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                            {"tail", "--log-dir", dir.path().string(), "--limiter", "regsiters"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "cuflight tail: --limiter 'regsiters' is not a resource: use one of registers (regs), "
            "shared_mem (smem), warps, blocks, barriers, cluster, other; did you mean "
            "registers?\n");
}

// A collector's lock on its directory is seen from /proc/locks, without taking it.
TEST(TailTest, ADirectoryACollectorWritesIsInUse) {
  TempDir dir;
  EXPECT_FALSE(cli::LogDirInUse(dir.path()));
  {
    RunningCollector collector(collector::testing::TestOptions(dir.path()));
    ASSERT_NE(collector.collector(), nullptr);
    EXPECT_TRUE(cli::LogDirInUse(dir.path() / "logs"));
  }
  EXPECT_FALSE(cli::LogDirInUse(dir.path() / "logs"));  // the lock file stays, unlocked
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "logs" / ".cuflight-collector.lock"));
}

TEST(TailTest, BadInputIsOneLineAndExitTwo) {
  TempDir dir;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"tail", "--log-dir", (dir.path() / "none").string()},
        {"tail", "--log-dir", dir.path().string(), "--kernel", "("},
        {"tail", "--log-dir", dir.path().string(), "--limiter", "power"}}) {
    const auto r = RunProcess(CUFLIGHT_CLI_PATH, args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("cuflight tail: " + args[args.size() - 2], 0), 0u) << r.err;
  }
}

// ---- export --perfetto ----

// Host time of the first launch, and CUPTI times, ns since the epoch.
constexpr int64_t kLaunchA = 1'700'000'000'000'001'234;
constexpr int64_t kLaunchB = 1'700'000'000'000'100'000;
constexpr uint64_t kStartA = 1'700'000'000'000'050'500;
constexpr uint64_t kEndA = 1'700'000'000'000'053'000;

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path day = dir_.path() / "logs" / "2023-11-14";
    std::filesystem::create_directories(day);
    std::string text = Line(Start(100, 0, 5)) + Line(Device(100, 1)) +
                       Line(Kernel(100, 2, kLaunchA, 7, "gemm_timed", schema::Resource::kRegisters)) +
                       Line(Kernel(100, 3, kLaunchB, 8, "untimed", schema::Resource::kWarps)) +
                       Line(Time(100, 4, 7, kStartA, kEndA));
    Append(day / "node1-trainer-100-5.jsonl", text);
  }
  json Export() {
    const std::filesystem::path out = dir_.path() / "trace.json";
    const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                              {"export", "--perfetto", out.string(), (dir_.path() / "logs").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("2 kernels (1 timed, 1 without timing)"), std::string::npos) << r.err;
    std::ifstream in(out);
    return json::parse(in);
  }
  static const json* Find(const json& trace, const std::string& ph, const std::string& name,
                          const std::string& cat = "") {
    for (const json& e : trace["traceEvents"]) {
      if (e["ph"] == ph && e["name"] == name && (cat.empty() || e.value("cat", "") == cat)) {
        return &e;
      }
    }
    return nullptr;
  }
  TempDir dir_;
};

TEST_F(ExportTest, GpuAndStreamTracksAreNamedFromTheDeviceEvents) {
  const json trace = Export();
  EXPECT_EQ(trace["displayTimeUnit"], "ns");
  const int64_t gpu = int64_t{1} << 30;
  bool gpu_named = false;
  bool stream_named = false;
  bool host_named = false;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name" && e["pid"] == gpu) {
      EXPECT_EQ(e["args"]["name"], "GPU 0: NVIDIA H100 80GB HBM3");
      gpu_named = true;
    }
    if (e["name"] == "thread_name" && e["pid"] == gpu) {
      EXPECT_EQ(e["args"]["name"], "stream 0x10 (pid 100)");
      stream_named = true;
    }
    if (e["name"] == "process_name" && e["pid"] == 100) {
      EXPECT_EQ(e["args"]["name"], "trainer (pid 100)");
      host_named = true;
    }
  }
  EXPECT_TRUE(gpu_named && stream_named && host_named) << trace.dump(1);
}

TEST_F(ExportTest, TimedKernelsAreSlicesWithTheirOccupancyAndOthersInstants) {
  const json trace = Export();
  // Base: the earliest timestamp (launch A, 1234 ns past a microsecond) floored to 1 us.
  const int64_t base = 1'700'000'000'000'001'000;
  EXPECT_EQ(trace["otherData"]["time_base_ns"], base);
  const json* slice = Find(trace, "X", "gemm_timed()");
  ASSERT_NE(slice, nullptr) << trace.dump(1);
  EXPECT_EQ((*slice)["pid"], int64_t{1} << 30);
  EXPECT_DOUBLE_EQ((*slice)["ts"].get<double>(), 49.5);  // (50'500 - 1'000) ns
  EXPECT_DOUBLE_EQ((*slice)["dur"].get<double>(), 2.5);  // 2'500 ns
  const json& args = (*slice)["args"];
  EXPECT_EQ(args["max_active_blocks"], 4);
  EXPECT_DOUBLE_EQ(args["occupancy"].get<double>(), 0.5);
  EXPECT_EQ(args["limiting_resource"], "registers");
  EXPECT_EQ(args["regs"], 64);
  EXPECT_EQ(args["smem"], 9216);
  EXPECT_EQ(args["grid"], json::array({132, 1, 1}));
  EXPECT_EQ(args["block"], json::array({256, 1, 1}));
  EXPECT_EQ(args["correlation_id"], 7);
  EXPECT_EQ(args["duration_ns"], 2500);
  EXPECT_EQ(args["regs_for_next_block"], 48);
  EXPECT_TRUE(args["smem_for_next_block"].is_null());
  EXPECT_EQ(args["timed"], true);

  const json* instant = Find(trace, "i", "untimed()", "kernel");
  ASSERT_NE(instant, nullptr);
  EXPECT_EQ((*instant)["s"], "t");
  EXPECT_EQ((*instant)["tid"], (*slice)["tid"]);  // the same stream track
  EXPECT_DOUBLE_EQ((*instant)["ts"].get<double>(), 99.0);  // (100'000 - 1'000) ns
  EXPECT_EQ((*instant)["args"]["timed"], false);
  EXPECT_EQ((*instant)["args"]["limiting_resource"], "warps");

  const json* launch = Find(trace, "i", "gemm_timed()", "launch");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ((*launch)["pid"], 100);
  EXPECT_EQ((*launch)["tid"], 101);
  EXPECT_DOUBLE_EQ((*launch)["ts"].get<double>(), 0.234);
}

TEST_F(ExportTest, BadInputIsOneLineAndExitTwo) {
  const auto missing = RunProcess(
      CUFLIGHT_CLI_PATH, {"export", "--perfetto", (dir_.path() / "t.json").string(),
                          (dir_.path() / "nothing").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  EXPECT_EQ(missing.err.rfind("cuflight export: ", 0), 0u) << missing.err;

  Append(dir_.path() / "notes.jsonl", "this is not a log\n");
  const auto not_log =
      RunProcess(CUFLIGHT_CLI_PATH, {"export", "--perfetto", (dir_.path() / "t.json").string(),
                                     (dir_.path() / "notes.jsonl").string()});
  EXPECT_EQ(not_log.exit_code, 2);
  EXPECT_EQ(std::count(not_log.err.begin(), not_log.err.end(), '\n'), 1) << not_log.err;

  const auto no_flag = RunProcess(CUFLIGHT_CLI_PATH, {"export", (dir_.path() / "logs").string()});
  EXPECT_EQ(no_flag.exit_code, 2);
  EXPECT_NE(no_flag.err.find("--perfetto"), std::string::npos) << no_flag.err;

  const auto unwritable = RunProcess(
      CUFLIGHT_CLI_PATH, {"export", "--perfetto", (dir_.path() / "no" / "dir" / "t.json").string(),
                          (dir_.path() / "logs").string()});
  EXPECT_EQ(unwritable.exit_code, 2);
  EXPECT_EQ(std::count(unwritable.err.begin(), unwritable.err.end(), '\n'), 1) << unwritable.err;
}

}  // namespace
}  // namespace cuflight::cli
