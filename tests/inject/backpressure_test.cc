// Back-pressure end to end: the injected library (real .so, stand-in driver and CUPTI) fires
// launches as fast as it can into a small ring and a small transport buffer, so that the
// collector (the real one, in this process, on the same cores) cannot keep up.
//  - CUFLIGHT_ON_FULL=block: the launching thread waits; every seq reaches the log.
//  - CUFLIGHT_ON_FULL=drop: launches are dropped, each counted under its reason, and the gaps in
//    the log's seqs are exactly the count.
//  - block without a collector: the wait is bounded; the application finishes.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collector_test_util.h"
#include "cuflight/schema/decoder.h"
#include "subprocess.h"

namespace cuflight::inject::testing {
namespace {

using collector::testing::LogFiles;
using collector::testing::RunningCollector;
using collector::testing::TempDir;
using collector::testing::TestOptions;
using collector::testing::WaitUntil;
using cuflight::testing::RunProcess;

// Far more launches than the ring (1024 records) and the transport buffer (256 KiB, about 250
// kernel events) hold; a run takes about a second on two shared cores.
constexpr int kLaunches = 200000;
constexpr uint64_t kRingSize = 1024;

// What the process's log holds: every seq, and the counters of its stats and process_end.
struct Log {
  std::vector<uint64_t> seqs;
  // The lowest seq of a launch in the log: a launch line (interned configurations, the default:
  // docs/protocol.md) or a whole kernel line.
  std::optional<uint64_t> first_kernel_seq;
  size_t configs = 0;  // kernel_config lines: each takes a seq of its own
  uint64_t ring_high_water = 0;  // highest of every stats event
  size_t stats_events = 0;
  std::optional<schema::OwnedProcessEndEvent> end;
};

Log ReadLog(const std::filesystem::path& log_dir) {
  Log log;
  const auto files = LogFiles(log_dir);
  EXPECT_EQ(files.size(), 1u);
  for (const auto& file : files) {
    FILE* f = std::fopen(file.c_str(), "r");
    if (f == nullptr) continue;
    char* text = nullptr;
    size_t cap = 0;
    ssize_t n = 0;
    while ((n = getline(&text, &cap, f)) > 0) {
      const std::string_view line(text, static_cast<size_t>(n));
      constexpr std::string_view kSeq = "\"seq\":";
      const size_t at = line.find(kSeq);
      uint64_t seq = 0;
      if (at == std::string_view::npos ||
          std::from_chars(line.data() + at + kSeq.size(), line.data() + line.size(), seq).ec !=
              std::errc()) {
        ADD_FAILURE() << "no seq: " << line.substr(0, 200);
        continue;
      }
      log.seqs.push_back(seq);
      if (line.find("\"type\":\"launch\"") != std::string_view::npos ||
          line.find("\"type\":\"kernel\"") != std::string_view::npos) {  // most lines
        if (!log.first_kernel_seq) log.first_kernel_seq = seq;
        continue;
      }
      schema::DecodeResult d = schema::Decode(line);
      EXPECT_TRUE(d.ok()) << d.message;
      if (std::holds_alternative<schema::OwnedKernelConfigEvent>(d.event)) ++log.configs;
      if (const auto* s = std::get_if<schema::OwnedStatsEvent>(&d.event)) {
        ++log.stats_events;
        log.ring_high_water = std::max(log.ring_high_water, s->ring_high_water);
      }
      if (auto* e = std::get_if<schema::OwnedProcessEndEvent>(&d.event)) log.end = std::move(*e);
    }
    std::free(text);
    std::fclose(f);
  }
  return log;
}

class Backpressure : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
    setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
    setenv("CUFLIGHT_RING_SIZE", std::to_string(kRingSize).c_str(), 1);
    setenv("CUFLIGHT_BUFFER_BYTES", "256K", 1);
    setenv("CUFLIGHT_STATS_MS", "100", 1);
    unsetenv("FAKE_CUPTI_MODE");
    unsetenv("FAKE_CUPTI_TIMING");
  }
  void TearDown() override {
    for (const char* name : {"CUFLIGHT_COLLECTOR", "CUFLIGHT_ON_FULL", "CUFLIGHT_RING_SIZE",
                             "CUFLIGHT_BUFFER_BYTES", "CUFLIGHT_STATS_MS",
                             "CUFLIGHT_INTERN_CONFIGS"}) {
      unsetenv(name);
    }
  }

  // Runs the application with `on_full` against a collector in this process; returns its log.
  Log Run(const char* on_full) {
    TempDir dir;
    const collector::CollectorOptions options = TestOptions(dir.path());
    RunningCollector running(options);
    EXPECT_NE(running.collector(), nullptr);
    setenv("CUFLIGHT_COLLECTOR", options.socket.c_str(), 1);
    setenv("CUFLIGHT_ON_FULL", on_full, 1);
    const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, std::to_string(kLaunches)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("fired=" + std::to_string(kLaunches)), std::string::npos) << r.out;
    EXPECT_EQ(r.err, "");  // no exit warning: everything was acknowledged
    EXPECT_TRUE(WaitUntil([&] { return running.stats().processes_ended == 1; }));
    running.Stop();
    return ReadLog(options.log_dir);
  }
};

TEST_F(Backpressure, BlockModeLosesNothingWhileTheCollectorKeepsUp) {
  // Whole kernel lines (about 0.9 KB each): the heavier stream keeps the collector behind the
  // launches for about a second, past a stats interval, so the full ring shows in a stats event.
  // Interned launch lines (about 140 bytes) can finish the run inside the first 100 ms.
  setenv("CUFLIGHT_INTERN_CONFIGS", "0", 1);
  const Log log = Run("block");
  ASSERT_TRUE(log.end.has_value());
  // process_start, one device event, a kernel line per launch,
  // the stats events, process_end: seqs 0..last, each once, in order.
  const uint64_t last = log.seqs.empty() ? 0 : log.seqs.back();
  ASSERT_EQ(log.seqs.size(), last + 1);
  for (uint64_t i = 0; i <= last; ++i) ASSERT_EQ(log.seqs[i], i);
  EXPECT_EQ(log.configs, 0u);  // whole kernel lines: no description
  EXPECT_EQ(last, 2 + log.configs + kLaunches + log.stats_events);
  EXPECT_EQ(log.end->launches, static_cast<uint64_t>(kLaunches));
  EXPECT_EQ(log.end->dropped, 0u);
  EXPECT_EQ(log.end->dropped_ring_full, 0u);
  EXPECT_EQ(log.end->dropped_disconnected, 0u);
  EXPECT_EQ(log.end->dropped_backpressure, 0u);
  EXPECT_EQ(log.end->emitted, last);  // every event before process_end
  // The collector could not keep up: the ring was full, the launching thread waited.
  ASSERT_GT(log.stats_events, 0u);
  EXPECT_EQ(log.ring_high_water, kRingSize);
}

TEST_F(Backpressure, DropModeCountsEveryLossUnderItsReasonAndTheGapsMatch) {
  const Log log = Run("drop");
  ASSERT_TRUE(log.end.has_value());
  const schema::OwnedProcessEndEvent& end = *log.end;
  uint64_t gaps = 0;
  for (size_t i = 1; i < log.seqs.size(); ++i) {
    ASSERT_GT(log.seqs[i], log.seqs[i - 1]);
    gaps += log.seqs[i] - log.seqs[i - 1] - 1;
  }
  EXPECT_GT(end.dropped, 0u) << "the run should outpace the collector";
  EXPECT_EQ(gaps, end.dropped);
  EXPECT_EQ(end.dropped,
            end.dropped_ring_full + end.dropped_disconnected + end.dropped_backpressure);
  // The sender thread connects while the application already launches: on a loaded machine
  // the buffer can fill before the first connection, and what is dropped then is counted as
  // disconnected. Those are the oldest kernel lines, so they are among the seqs missing below the
  // first kernel line the log holds; after the connection, nothing is dropped as disconnected.
  ASSERT_TRUE(log.first_kernel_seq.has_value());
  const uint64_t missing_before_first_kernel = static_cast<uint64_t>(
      *log.first_kernel_seq - std::count_if(log.seqs.begin(), log.seqs.end(), [&](uint64_t seq) {
        return seq < *log.first_kernel_seq;
      }));
  EXPECT_LE(end.dropped_disconnected, missing_before_first_kernel)
      << "lines dropped as disconnected after the first connection";
  EXPECT_EQ(end.emitted + end.dropped, log.seqs.back())  // every seq before process_end
      << "emitted " << end.emitted << " ring_full " << end.dropped_ring_full << " disconnected "
      << end.dropped_disconnected << " backpressure " << end.dropped_backpressure << " seqs "
      << log.seqs.size() << " gaps " << (log.seqs.back() + 1 - log.seqs.size());
  EXPECT_EQ(end.launches, static_cast<uint64_t>(kLaunches));
}

// No collector at all: the transport buffer fills, the sender thread stops taking records, the
// ring fills, and the launching thread waits at most the ring's block stall limit (1 s without the
// consumer taking a record: MpscRing::kDefaultBlockStallLimit), after which launches are dropped
// and counted until the sender moves again; exit adds at most its 1 s. The application finishes.
TEST_F(Backpressure, BlockModeWithoutACollectorWaitsOnlyItsBound) {
  TempDir dir;
  setenv("CUFLIGHT_COLLECTOR", (dir.path() / "nobody.sock").c_str(), 1);
  setenv("CUFLIGHT_ON_FULL", "block", 1);
  const auto start = std::chrono::steady_clock::now();
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, std::to_string(kLaunches)});
  const auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fired=" + std::to_string(kLaunches)), std::string::npos) << r.out;
  EXPECT_GE(seconds, 1.0);  // it did wait, once
  EXPECT_LT(seconds, 10.0);
}

}  // namespace
}  // namespace cuflight::inject::testing
