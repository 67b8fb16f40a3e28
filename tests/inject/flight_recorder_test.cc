// The flight-recorder guarantees with the real collector: the injected library (real .so, stand-in
// driver and CUPTI) in a process that crashes or is killed, the collector in this process writing
// its log. What the log holds afterwards is what a post-mortem review sees.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "collector_test_util.h"
#include "cuflight/report/report_options.h"
#include "cuflight/report/run_report.h"
#include "cuflight/schema/decoder.h"
#include "subprocess.h"

namespace cuflight::inject::testing {
namespace {

using collector::testing::CapturedLog;
using collector::testing::LogFiles;
using collector::testing::RunningCollector;
using collector::testing::TempDir;
using collector::testing::TestOptions;
using collector::testing::WaitUntil;
using cuflight::testing::RunProcess;
using test_support::DecodeLogs;

bool HasType(const std::vector<schema::OwnedEvent>& events, schema::EventType type) {
  return std::any_of(events.begin(), events.end(),
                     [type](const schema::OwnedEvent& e) { return schema::TypeOf(e) == type; });
}

class FlightRecorder : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
    setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
    unsetenv("FAKE_CUPTI_MODE");
    unsetenv("CUFLIGHT_CRASH_HANDLER");
    unsetenv("CUFLIGHT_FLUSH_MS");
  }
  void TearDown() override {
    unsetenv("CUFLIGHT_COLLECTOR");
    unsetenv("CUFLIGHT_FLUSH_MS");
    unsetenv("CUFLIGHT_BLACKBOX");
  }
};

TEST_F(FlightRecorder, ACrashedProcessLeavesItsKernelsTheCrashAndProcessLost) {
  if (CUFLIGHT_SANITIZED) GTEST_SKIP() << "the sanitizer runtimes handle fatal signals themselves";
  TempDir dir;
  const collector::CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  setenv("CUFLIGHT_COLLECTOR", options.socket.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "40", "segv"});
  EXPECT_EQ(r.exit_code, 128 + SIGSEGV) << r.err;
  std::vector<schema::OwnedEvent> events;
  ASSERT_TRUE(WaitUntil([&] {
    events = DecodeLogs(options.log_dir);
    return HasType(events, schema::EventType::kProcessLost);
  }));
  const auto kernels = std::count_if(events.begin(), events.end(), [](const auto& e) {
    return schema::TypeOf(e) == schema::EventType::kKernel;
  });
  EXPECT_EQ(kernels, 40);
  ASSERT_TRUE(HasType(events, schema::EventType::kProcessCrash));
  const auto& lost = std::get<schema::OwnedProcessLostEvent>(events.back());
  EXPECT_EQ(lost.events_lost, 0u);  // nothing between the crash event and the end
}

TEST_F(FlightRecorder, WithoutACollectorACrashLeavesEverythingInTheSpillFile) {
  if (CUFLIGHT_SANITIZED) GTEST_SKIP() << "the sanitizer runtimes handle fatal signals themselves";
  TempDir dir;
  const std::filesystem::path spill = dir.path() / "spill";
  setenv("CUFLIGHT_COLLECTOR", (dir.path() / "nobody-listens.sock").c_str(), 1);
  setenv("CUFLIGHT_SPILL_DIR", spill.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "25", "abrt"});
  unsetenv("CUFLIGHT_SPILL_DIR");
  EXPECT_EQ(r.exit_code, 128 + SIGABRT) << r.err;
  ASSERT_EQ(LogFiles(spill).size(), 1u);
  const std::vector<schema::OwnedEvent> events = DecodeLogs(spill);
  ASSERT_GE(events.size(), 3u);
  // A complete stream: process_start first, every kernel, the crash last, no seq missing.
  EXPECT_EQ(schema::TypeOf(events.front()), schema::EventType::kProcessStart);
  ASSERT_EQ(schema::TypeOf(events.back()), schema::EventType::kProcessCrash);
  EXPECT_EQ(std::get<schema::OwnedProcessCrashEvent>(events.back()).signal, SIGABRT);
  const auto kernels = std::count_if(events.begin(), events.end(), [](const auto& e) {
    return schema::TypeOf(e) == schema::EventType::kKernel;
  });
  EXPECT_EQ(kernels, 25);
  // No seq missing among the lines (the configuration's description, which readers keep to
  // themselves, takes one of its own: docs/protocol.md, "Interned configurations").
  const std::vector<test_support::LoggedLine> lines = test_support::ReadLog(LogFiles(spill)[0]);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i].seq, i) << lines[i].text;

  // cuflight report reads the spill file like a collector log: the crash comes first.
  report::ReportOptions options;
  options.paths = {spill.string()};
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(report::RunReport(options, out, err), report::kReportOk) << err.str();
  EXPECT_NE(out.str().find("crash: SIGABRT"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("vecadd"), std::string::npos) << out.str();
}

// One run of the fake app's stream-kill mode (a launch every ~100 us for 300 ms, then SIGKILL)
// against a collector of its own: what the log holds afterwards.
struct KillRun {
  long launches = 0;          // every launch's callback returned before the kill
  long kernels = 0;           // kernel events in the log
  long recovered = 0;         // of which made from the black box
  long duplicates = 0;        // kernel events whose correlation id came twice (must be none)
  double sent_window_ms = 0;  // the kill minus the last kernel that arrived as a line
  double log_window_ms = 0;   // the kill minus the last kernel in the log
  schema::OwnedProcessLostEvent lost;
  uint64_t seqs = 0;  // distinct seqs in the log (process_lost's own aside)
  bool seqs_unique = true;
  // For a failure's message: the application's stderr and what the collector logged.
  std::string diagnostics;
};

// `sources`: how the collector may learn the producer's end (producer_blackbox.h); `wrapper`: a
// program and its arguments the application runs under (strace), if any.
KillRun RunStreamKill(const collector::ProducerEndSources& sources = {},
                      const std::vector<std::string>& wrapper = {}) {
  KillRun run;
  TempDir dir;
  collector::CollectorOptions options = TestOptions(dir.path());
  options.producer_end_sources = sources;
  CapturedLog log;
  RunningCollector running(options, nullptr, log.logger());
  EXPECT_NE(running.collector(), nullptr);
  setenv("CUFLIGHT_COLLECTOR", options.socket.c_str(), 1);
  std::vector<std::string> args = {CUFLIGHT_INJECT_SO, "1", "stream-kill"};
  std::string program = CUFLIGHT_FAKE_APP;
  if (!wrapper.empty()) {
    args.insert(args.begin(), CUFLIGHT_FAKE_APP);
    args.insert(args.begin(), wrapper.begin() + 1, wrapper.end());
    program = wrapper.front();
  }
  const auto r = RunProcess(program, args);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  const auto diagnose = [&run, &r, &log] {
    run.diagnostics =
        "\nthe application's stderr:\n" + r.err + "the collector's log:\n" + log.text();
  };
  long streamed = 0;
  long long kill_ns = 0;
  const size_t at = r.out.find("streamed=");
  EXPECT_NE(at, std::string::npos) << r.out;
  if (at == std::string::npos ||
      std::sscanf(r.out.c_str() + at, "streamed=%ld kill_ns=%lld", &streamed, &kill_ns) != 2) {
    diagnose();
    return run;
  }
  run.launches = streamed + 1;  // the one launch before the stream
  std::vector<schema::OwnedEvent> events;
  EXPECT_TRUE(WaitUntil([&] {
    events = DecodeLogs(options.log_dir);
    return HasType(events, schema::EventType::kProcessLost);
  }));
  int64_t last_sent_ns = 0;
  int64_t last_ns = 0;
  std::set<uint64_t> correlation_ids;
  std::set<uint64_t> seqs;
  for (const auto& e : events) {
    if (schema::TypeOf(e) == schema::EventType::kProcessLost) {
      run.lost = std::get<schema::OwnedProcessLostEvent>(e);
      continue;
    }
    run.seqs_unique = seqs.insert(schema::HeaderOf(e).seq).second && run.seqs_unique;
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e)) {
      ++run.kernels;
      if (!correlation_ids.insert(k->correlation_id).second) ++run.duplicates;
      last_ns = std::max(last_ns, k->header.ts_ns);
      if (k->recovered) {
        ++run.recovered;
      } else {
        last_sent_ns = std::max(last_sent_ns, k->header.ts_ns);
      }
    }
  }
  // The seqs as stored: the configuration's description, which readers keep to themselves, takes
  // one of its own (docs/protocol.md, "Interned configurations"); process_lost's aside.
  std::set<uint64_t> stored;
  for (const auto& file : LogFiles(options.log_dir)) {
    for (const auto& line : test_support::ReadLog(file)) {
      if (line.type == "process_lost") continue;
      run.seqs_unique = stored.insert(line.seq).second && run.seqs_unique;
    }
  }
  run.seqs = stored.size();
  run.sent_window_ms = static_cast<double>(kill_ns - last_sent_ns) / 1e6;
  run.log_window_ms = static_cast<double>(kill_ns - last_ns) / 1e6;
  diagnose();
  return run;
}

// SIGKILL cannot be caught, but the black box survives it: every launch whose callback returned
// before the kill is in the log, sent or recovered, each once, and process_lost says how many
// were recovered. CUFLIGHT_KILL_RUNS runs (default 20).
TEST_F(FlightRecorder, AKilledProcessLosesNoRecordedLaunch) {
  const char* runs_env = std::getenv("CUFLIGHT_KILL_RUNS");
  const int runs = runs_env != nullptr ? std::max(1, std::atoi(runs_env)) : 20;
  long launches = 0;
  long kernels = 0;
  long recovered = 0;
  long most_recovered = 0;
  double widest_sent_window = 0;
  double widest_log_window = 0;
  for (int i = 0; i < runs; ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    const KillRun run = RunStreamKill();
    const std::string& why = run.diagnostics;
    ASSERT_GT(run.launches, 0) << why;
    EXPECT_EQ(run.kernels, run.launches) << "every recorded launch, sent or recovered" << why;
    EXPECT_EQ(run.duplicates, 0) << why;
    EXPECT_TRUE(run.seqs_unique) << why;
    EXPECT_EQ(run.lost.reason, schema::LostReason::kDisconnected) << why;
    ASSERT_TRUE(run.lost.events_recovered.has_value()) << "the black box was read" << why;
    EXPECT_GE(*run.lost.events_recovered, static_cast<uint64_t>(run.recovered)) << why;
    EXPECT_EQ(run.lost.events_stored, run.seqs) << why;
    // The seqs the log lacks below its last are counted; the stream's end may add more (events
    // made and never sent: stats).
    ASSERT_TRUE(run.lost.last_seq.has_value()) << why;
    EXPECT_GE(run.lost.events_lost, *run.lost.last_seq + 1 - run.seqs) << why;
    launches += run.launches;
    kernels += run.kernels;
    recovered += run.recovered;
    most_recovered = std::max(most_recovered, run.recovered);
    widest_sent_window = std::max(widest_sent_window, run.sent_window_ms);
    widest_log_window = std::max(widest_log_window, run.log_window_ms);
  }
  std::printf(
      "[ measured ] %d runs killed after %ld launches in all: %ld in the log, %ld "
      "missing; %ld recovered from the black box (at most %ld in one run, which covered "
      "up to %.1f ms before the kill); the last kernel in the log was launched at most "
      "%.1f ms before the kill\n",
      runs, launches, kernels, launches - kernels, recovered, most_recovered, widest_sent_window,
      widest_log_window);
}

// The checks of one killed run whose black box was read: every launch in the log once.
void ExpectNothingLost(const KillRun& run) {
  const std::string& why = run.diagnostics;
  ASSERT_GT(run.launches, 0) << why;
  EXPECT_EQ(run.kernels, run.launches) << "every recorded launch, sent or recovered" << why;
  EXPECT_EQ(run.duplicates, 0) << why;
  EXPECT_TRUE(run.seqs_unique) << why;
  ASSERT_TRUE(run.lost.events_recovered.has_value()) << "the black box was read" << why;
  EXPECT_GE(*run.lost.events_recovered, static_cast<uint64_t>(run.recovered)) << why;
}

// A collector in a pid namespace of its own (a Kubernetes DaemonSet) on Linux 5.3 to 6.4 has
// neither SO_PEERPIDFD nor the producer's pid: it learns the end from the pidfd the injected
// library passes of itself with its black box (cuflight/transport/sender.h, design point 11).
TEST_F(FlightRecorder, BeforeLinux65InAPidNamespaceAKilledProcessLosesNoRecordedLaunch) {
  collector::ProducerEndSources sources;
  sources.peer_pidfd = false;
  sources.pidfd_of_peer = false;
  sources.passed_proc_dir = false;
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    ExpectNothingLost(RunStreamKill(sources));
  }
}

// Linux 4.18 (RHEL 8) has no pidfd: the library's pidfd_open(2) fails with ENOSYS (injected
// with strace, as that kernel answers an unknown system call) and it passes its /proc
// directory instead, which the collector asks on its tick.
TEST_F(FlightRecorder, OnLinux418AKilledProcessLosesNoRecordedLaunch) {
  std::string strace;
  std::string why;
  std::vector<std::string> wrapper =
      cuflight::testing::StraceInject("pidfd_open", "error=ENOSYS", &strace, &why);
  if (wrapper.empty()) GTEST_SKIP() << why;
  wrapper.insert(wrapper.begin(), strace);
  wrapper.push_back("--");
  collector::ProducerEndSources sources;
  sources.peer_pidfd = false;
  sources.pidfd_of_peer = false;
  sources.passed_pidfd = false;
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    ExpectNothingLost(RunStreamKill(sources, wrapper));
  }
}

// Without the black box (CUFLIGHT_BLACKBOX=0) a kill loses what was not yet sent: at most about
// one flush interval (CUFLIGHT_FLUSH_MS, 100 ms) plus the sender thread's 10 ms idle sleep.
TEST_F(FlightRecorder, WithoutTheBlackBoxAKillLosesAtMostAboutOneFlushInterval) {
  setenv("CUFLIGHT_BLACKBOX", "0", 1);
  const char* runs_env = std::getenv("CUFLIGHT_KILL_RUNS");
  const int runs = runs_env != nullptr ? std::max(1, std::atoi(runs_env)) : 3;
  long launches = 0;
  long kernels = 0;
  long most_missing = 0;
  double widest_window = 0;
  for (int i = 0; i < runs; ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    const KillRun run = RunStreamKill();
    ASSERT_GT(run.launches, 0);
    EXPECT_GT(run.kernels, 0);
    EXPECT_LE(run.kernels, run.launches);
    EXPECT_EQ(run.recovered, 0);
    EXPECT_FALSE(run.lost.events_recovered.has_value());
    // Generous slack for a loaded 2-core CI machine.
    EXPECT_LT(run.log_window_ms, 100.0 + 10.0 + 400.0);
    launches += run.launches;
    kernels += run.kernels;
    most_missing = std::max(most_missing, run.launches - run.kernels);
    widest_window = std::max(widest_window, run.log_window_ms);
  }
  unsetenv("CUFLIGHT_BLACKBOX");
  std::printf(
      "[ measured ] without the black box: %d runs killed after %ld launches in all: %ld "
      "in the log, %ld missing (at most %ld in one run); the last kernel in the log was "
      "launched up to %.1f ms before the kill (CUFLIGHT_FLUSH_MS=100)\n",
      runs, launches, kernels, launches - kernels, most_missing, widest_window);
}

}  // namespace
}  // namespace cuflight::inject::testing
