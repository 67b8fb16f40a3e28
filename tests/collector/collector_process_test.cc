// The cuflight-collector binary as an operator runs it: exit codes and one-line errors, SIGTERM
// (drain, flush, exit 0), SIGHUP (reopen), a second instance on a live socket, and kill -9 in the
// middle of a stream with the injector's own Sender as producers: after a restart, for every
// producer, events sent = events logged + events the producer reported dropped.
#include "collector_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collector_test_util.h"
#include "cuflight/transport/sender.h"
#include "subprocess.h"

namespace cuflight::collector {
namespace {

using testing::ChildProcess;
using testing::FindLog;
using testing::LoggedLine;
using testing::ProducerIdentity;
using testing::RawClient;
using testing::ReadLog;
using testing::TempDir;
using testing::WaitForSocket;
using testing::WaitUntil;

constexpr auto kStartTimeout = std::chrono::seconds(20);
constexpr auto kExitTimeout = std::chrono::seconds(20);

std::vector<std::string> Args(const TempDir& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--socket",          (dir.path() / "run" / "c.sock").string(),
                                   "--log-dir",         (dir.path() / "logs").string(),
                                   "--reconnect-grace", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// testing::Identity installed under /usr/local/bin.
ProducerIdentity Identity(const std::string& exe, int64_t start_ns) {
  ProducerIdentity id = testing::Identity(exe, start_ns);
  id.exe = "/usr/local/bin/" + exe;
  return id;
}

size_t CountLines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

TEST(CollectorProcessTest, BadFlagsAndConfigValuesExitTwoWithOneLineNamingThem) {
  TempDir dir;
  const auto config = dir.path() / "bad.json";
  std::ofstream(config) << R"({"max-connections": "lots"})";
  std::filesystem::create_directory(dir.path() / "open");
  std::filesystem::permissions(dir.path() / "open", std::filesystem::perms::all);

  struct Case {
    std::string binary;
    std::vector<std::string> args;
    std::string line;
  };
  const std::vector<Case> cases = {
      {CUFLIGHT_COLLECTOR_PATH,
       {"--rotate-bytes", "lots"},
       "cuflight-collector: --rotate-bytes: 'lots' is not a byte count"},
      {CUFLIGHT_COLLECTOR_PATH,
       {"--config", config.string()},
       "cuflight-collector: --config '" + config.string() +
           "': key 'max-connections': 'lots' is not a non-negative integer"},
      {CUFLIGHT_COLLECTOR_PATH, Args(dir, {"--tcp", "0.0.0.0:0"}),
       "cuflight-collector: --tcp: 0.0.0.0 is not a loopback address"},
      {CUFLIGHT_COLLECTOR_PATH,
       {"--socket", (dir.path() / "open" / "c.sock").string(), "--log-dir",
        (dir.path() / "logs").string()},
       "cuflight-collector: --socket: directory " + (dir.path() / "open").string() +
           " is writable by group or others"},
      {CUFLIGHT_CLI_PATH,
       {"collect", "--fsync-interval", "soon"},
       "cuflight collect: --fsync-interval: 'soon' is not a non-negative integer"},
      {CUFLIGHT_CLI_PATH, {"collect", "--bogus"}, "cuflight collect: "},
  };
  for (const Case& c : cases) {
    const cuflight::testing::ProcessResult r = cuflight::testing::RunProcess(c.binary, c.args);
    EXPECT_EQ(r.exit_code, 2) << c.line << "\n" << r.err;
    EXPECT_EQ(r.err.rfind(c.line, 0), 0u) << "got: " << r.err;
    EXPECT_EQ(CountLines(r.err), 1u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(CollectorProcessTest, HelpListsTheFlagsAndExitsZero) {
  const cuflight::testing::ProcessResult r =
      cuflight::testing::RunProcess(CUFLIGHT_COLLECTOR_PATH, {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--socket", "--log-dir", "--rotate-bytes", "--retain-bytes",
                           "--retain-days", "--metrics", "--tcp", "--fsync-interval", "--config"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
  const cuflight::testing::ProcessResult cli =
      cuflight::testing::RunProcess(CUFLIGHT_CLI_PATH, {"collect", "--help"});
  EXPECT_EQ(cli.exit_code, 0);
  EXPECT_NE(cli.out.find("--rotate-bytes"), std::string::npos);
}

TEST(CollectorProcessTest, SigtermDrainsFlushesRemovesTheSocketAndExitsZero) {
  TempDir dir;
  ChildProcess collector(CUFLIGHT_COLLECTOR_PATH, Args(dir), dir.path() / "out.txt");
  ASSERT_TRUE(collector.running());
  const auto socket = dir.path() / "run" / "c.sock";
  ASSERT_TRUE(WaitForSocket(socket, kStartTimeout)) << collector.Output();

  const ProducerIdentity id = Identity("trainer", 1);
  RawClient client = RawClient::Unix(socket);
  std::string stream = testing::ProcessStartLine(id, 0);
  for (uint64_t seq = 1; seq <= 2000; ++seq) stream += testing::KernelTimeLine(id, seq, seq);
  ASSERT_TRUE(client.Send(stream));  // in the collector's receive queue when this returns
  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(kExitTimeout), 0) << collector.Output();
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(socket)));

  const std::vector<LoggedLine> lines = ReadLog(FindLog(dir.path() / "logs", "trainer", getpid()));
  ASSERT_EQ(lines.size(), 2002u);
  for (uint64_t seq = 0; seq <= 2000; ++seq) EXPECT_EQ(lines[seq].seq, seq);
  const nlohmann::json lost = nlohmann::json::parse(lines.back().text);
  EXPECT_EQ(lost["type"], "process_lost");
  EXPECT_EQ(lost["reason"], "collector_shutdown");
  EXPECT_EQ(lost["last_seq"], 2000);
}

TEST(CollectorProcessTest, CuflightCollectRunsTheSameDaemonAndStopsOnSigint) {
  TempDir dir;
  ChildProcess collector(
      CUFLIGHT_CLI_PATH,
      [&] {
        std::vector<std::string> args = Args(dir);
        args.insert(args.begin(), "collect");
        return args;
      }(),
      dir.path() / "out.txt");
  const auto socket = dir.path() / "run" / "c.sock";
  ASSERT_TRUE(WaitForSocket(socket, kStartTimeout)) << collector.Output();
  const ProducerIdentity id = Identity("viacli", 2);
  RawClient client = RawClient::Unix(socket);
  ASSERT_TRUE(client.Send(testing::ProcessStartLine(id, 0) + testing::KernelLine(id, 1, 1) +
                          testing::ProcessEndLine(id, 2, 3, 0)));
  ASSERT_EQ(client.WaitAck(2), 2u);
  collector.Signal(SIGINT);
  EXPECT_EQ(collector.Wait(kExitTimeout), 0) << collector.Output();
  EXPECT_EQ(ReadLog(FindLog(dir.path() / "logs", "viacli", getpid())).size(), 3u);
}

TEST(CollectorProcessTest, SighupReopensTheLogFiles) {
  TempDir dir;
  ChildProcess collector(CUFLIGHT_COLLECTOR_PATH, Args(dir), dir.path() / "out.txt");
  const auto socket = dir.path() / "run" / "c.sock";
  ASSERT_TRUE(WaitForSocket(socket, kStartTimeout)) << collector.Output();
  const ProducerIdentity id = Identity("rotating", 3);
  RawClient client = RawClient::Unix(socket);
  ASSERT_TRUE(client.Send(testing::ProcessStartLine(id, 0) + testing::KernelLine(id, 1, 1)));
  ASSERT_EQ(client.WaitAck(1), 1u);
  const auto file = FindLog(dir.path() / "logs", "rotating", getpid());
  ASSERT_FALSE(file.empty());
  std::filesystem::rename(file, file.string() + ".1");
  collector.Signal(SIGHUP);
  ASSERT_TRUE(collector.WaitForOutput("reopening the log files", kStartTimeout));
  // The reopen is logged before it runs: the next lines may only be stored after it.
  ASSERT_TRUE(client.Send(testing::KernelLine(id, 2, 2) + testing::ProcessEndLine(id, 3, 4, 0)));
  ASSERT_EQ(client.WaitAck(3), 3u);
  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(kExitTimeout), 0);
  EXPECT_EQ(ReadLog(file.string() + ".1").size(), 2u);
  const std::vector<LoggedLine> reopened = ReadLog(file);
  ASSERT_EQ(reopened.size(), 2u);
  EXPECT_EQ(reopened[0].seq, 2u);
}

TEST(CollectorProcessTest, ASecondCollectorLeavesALiveOneAlone) {
  TempDir dir;
  ChildProcess first(CUFLIGHT_COLLECTOR_PATH, Args(dir), dir.path() / "first.txt");
  const auto socket = dir.path() / "run" / "c.sock";
  ASSERT_TRUE(WaitForSocket(socket, kStartTimeout)) << first.Output();
  const cuflight::testing::ProcessResult second =
      cuflight::testing::RunProcess(CUFLIGHT_COLLECTOR_PATH, Args(dir));
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("another collector is listening on " + socket.string()),
            std::string::npos)
      << second.err;
  EXPECT_EQ(CountLines(second.err), 1u) << second.err;
  EXPECT_TRUE(RawClient::Unix(socket).connected());
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(kExitTimeout), 0);
}

// Before: the socket existed before the stop signals were handled, so a SIGTERM that came as soon
// as the socket appeared (systemctl stop right after start, or a test's) killed the collector by
// the signal's default action (exit status 143) instead of stopping it. Now it is a clean stop.
TEST(CollectorProcessTest, AStopSignalAsSoonAsTheSocketExistsIsACleanStop) {
  for (int i = 0; i < 20; ++i) {
    TempDir dir;
    ChildProcess collector(CUFLIGHT_COLLECTOR_PATH, Args(dir), dir.path() / "out.txt");
    const auto socket = dir.path() / "run" / "c.sock";
    std::error_code ec;
    const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
    while (!std::filesystem::exists(socket, ec) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ASSERT_TRUE(std::filesystem::exists(socket, ec)) << collector.Output();
    collector.Signal(SIGTERM);
    EXPECT_EQ(collector.Wait(kExitTimeout), 0) << i << ": " << collector.Output();
  }
}

// One producer process as the injector runs it: a Sender fed at a steady rate.
struct ProducerRun {
  ProducerIdentity id;
  uint64_t events = 0;           // seqs 0..events-1 emitted
  uint64_t enqueue_refused = 0;  // Enqueue returned false: the caller's own drop
  transport::SenderStats stats{};
  bool flushed = false;
  std::atomic<uint64_t> progress{0};  // seqs emitted so far
};

void Produce(const std::filesystem::path& socket, ProducerRun* run,
             std::chrono::microseconds interval) {
  transport::SenderOptions options;
  options.socket_path = socket.string();
  options.buffer_bytes = 256 << 10;  // a few thousand lines: the outage overflows it
  options.window_bytes = 64 << 10;
  options.flush_interval = std::chrono::milliseconds(2);
  options.batch_bytes = 8 << 10;
  options.backoff_min = std::chrono::milliseconds(5);
  options.backoff_max = std::chrono::milliseconds(50);
  transport::Sender sender(options);
  ASSERT_TRUE(sender.ok());
  ASSERT_TRUE(sender.AddPreamble(0, testing::ProcessStartLine(run->id, 0)));
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t seq = 1; seq < run->events; ++seq) {
    const std::string line = seq + 1 == run->events
                                 ? testing::ProcessEndLine(run->id, seq, run->events, 0)
                                 : testing::KernelTimeLine(run->id, seq, seq);
    if (!sender.Enqueue(seq, line)) ++run->enqueue_refused;
    run->progress.store(seq + 1, std::memory_order_release);
    const auto due = start + interval * static_cast<int64_t>(seq);
    sender.Poll(std::chrono::steady_clock::now());
    if (seq % 16 == 0) std::this_thread::sleep_until(due);  // the workload's pace
  }
  run->flushed = sender.Flush(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  run->stats = sender.stats();
}

TEST(CollectorProcessTest, Kill9MidStreamThenRestartAccountsForEveryEvent) {
  TempDir dir;
  const auto socket = dir.path() / "run" / "c.sock";
  auto collector =
      std::make_unique<ChildProcess>(CUFLIGHT_COLLECTOR_PATH, Args(dir), dir.path() / "first.txt");
  ASSERT_TRUE(WaitForSocket(socket, kStartTimeout)) << collector->Output();

  constexpr int kProducers = 4;
  constexpr uint64_t kEvents = 24000;
  std::vector<std::unique_ptr<ProducerRun>> runs;
  std::vector<std::thread> threads;
  for (int i = 0; i < kProducers; ++i) {
    auto run = std::make_unique<ProducerRun>();
    run->id = Identity("producer" + std::to_string(i), 100 + i);
    run->events = kEvents;
    runs.push_back(std::move(run));
  }
  for (auto& run : runs) {
    threads.emplace_back(Produce, socket, run.get(), std::chrono::microseconds(100));
  }
  auto all_reached = [&](uint64_t n) {
    for (const auto& run : runs) {
      if (run->progress.load(std::memory_order_acquire) < n) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitUntil([&] { return all_reached(kEvents / 3); }, std::chrono::seconds(60)));
  collector->Signal(SIGKILL);
  EXPECT_EQ(collector->Wait(kExitTimeout), 128 + SIGKILL);
  // The producers go on alone (buffering, then dropping the oldest unsent lines), then a new
  // collector takes over the stale socket and the logs.
  ASSERT_TRUE(WaitUntil([&] { return all_reached(2 * kEvents / 3); }, std::chrono::seconds(60)));
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::symlink_status(socket)));
  collector =
      std::make_unique<ChildProcess>(CUFLIGHT_COLLECTOR_PATH, Args(dir), dir.path() / "second.txt");
  for (auto& t : threads) t.join();
  collector->Signal(SIGTERM);
  EXPECT_EQ(collector->Wait(kExitTimeout), 0) << collector->Output();

  for (const auto& run : runs) {
    SCOPED_TRACE(run->id.exe);
    EXPECT_TRUE(run->flushed);
    const std::string exe_base = std::filesystem::path(run->id.exe).filename().string();
    const std::vector<LoggedLine> lines = ReadLog(FindLog(dir.path() / "logs", exe_base, getpid()));
    std::set<uint64_t> logged;
    size_t duplicates = 0;
    uint64_t previous = 0;
    bool ordered = true;
    for (const LoggedLine& line : lines) {
      if (line.type == "process_lost") continue;
      if (!logged.empty() && line.seq <= previous) ordered = false;
      duplicates += logged.insert(line.seq).second ? 0 : 1;
      previous = line.seq;
    }
    EXPECT_EQ(duplicates, 0u);
    EXPECT_TRUE(ordered);
    const uint64_t dropped =
        run->stats.dropped_disconnected + run->stats.dropped_backpressure + run->enqueue_refused;
    EXPECT_EQ(logged.size() + dropped, run->events)
        << "logged " << logged.size() << ", dropped_disconnected "
        << run->stats.dropped_disconnected << ", dropped_backpressure "
        << run->stats.dropped_backpressure << ", refused " << run->enqueue_refused;
    EXPECT_GT(run->stats.dropped_disconnected, 0u) << "the outage should overflow the buffer";
    EXPECT_EQ(logged.count(0), 1u);
    EXPECT_EQ(logged.count(run->events - 1), 1u);
    EXPECT_EQ(lines.back().type, "process_end");
  }
}

}  // namespace
}  // namespace cuflight::collector
