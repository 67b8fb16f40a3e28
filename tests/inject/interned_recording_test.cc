// Interned configurations through the real library and the stand-in driver and CUPTI
// (docs/protocol.md, "Interned configurations"): what the library records by default
// (CUFLIGHT_INTERN_CONFIGS on) reads back, after expansion, as the whole events it writes with
// CUFLIGHT_INTERN_CONFIGS=0; and every boundary a description and its launches can be split
// across (a spill file's rotation, the hand-over from a collector to the spill, a collector
// restart, a SIGKILL and the black box) leaves every launch readable, each exactly once.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "log_files.h"
#include "running_collector.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace cuflight::inject::testing {
namespace {

using cuflight::testing::ProcessResult;
using cuflight::testing::RunProcess;
using test_support::DecodeLog;
using test_support::DecodeLogs;
using test_support::LogFiles;
using test_support::LoggedLine;
using test_support::ReadLog;
using test_support::StoringCollector;
using test_support::TempDir;
using test_support::TempSocketPath;

bool HasLine(const std::vector<std::string>& lines, const std::string& type) {
  const std::string needle = "\"type\":\"" + type + "\"";
  return std::any_of(lines.begin(), lines.end(), [&needle](const std::string& l) {
    return l.find(needle) != std::string::npos;
  });
}

// Every raw line under `log_dir`, file by file.
std::vector<LoggedLine> RawLines(const std::filesystem::path& log_dir) {
  std::vector<LoggedLine> lines;
  for (const auto& file : LogFiles(log_dir)) {
    for (auto& line : ReadLog(file)) lines.push_back(std::move(line));
  }
  return lines;
}

size_t CountType(const std::vector<LoggedLine>& lines, const std::string& type) {
  return static_cast<size_t>(std::count_if(
      lines.begin(), lines.end(), [&type](const LoggedLine& l) { return l.type == type; }));
}

// The `config` member of a raw launch line (0 when absent).
uint64_t ConfigIdOf(const LoggedLine& line) {
  const size_t at = line.text.find("\"config\":");
  return at == std::string::npos ? 0 : std::strtoull(line.text.c_str() + at + 9, nullptr, 10);
}

// Checks that each file under `dir` reads alone: every launch line names a configuration
// described earlier in that same file (docs/protocol.md: "each file reads alone"). Returns the
// configuration ids whose launches the files hold, file by file.
std::vector<std::set<uint64_t>> ExpectEachFileDescribesItsLaunches(
    const std::filesystem::path& dir) {
  std::vector<std::set<uint64_t>> used;
  for (const auto& file : LogFiles(dir)) {
    SCOPED_TRACE(file.string());
    std::set<uint64_t> described;
    std::set<uint64_t> named;
    for (const LoggedLine& line : ReadLog(file)) {
      if (line.type == "kernel_config") described.insert(ConfigIdOf(line));
      if (line.type == "launch") {
        const uint64_t id = ConfigIdOf(line);
        EXPECT_TRUE(described.count(id)) << "launch before its description: " << line.text;
        named.insert(id);
      }
    }
    used.push_back(std::move(named));
  }
  return used;
}

// The correlation ids of the kernel events in `events`, each with how often it came.
std::map<uint64_t, int> CorrelationIds(const std::vector<schema::OwnedEvent>& events,
                                       int* recovered = nullptr) {
  std::map<uint64_t, int> ids;
  for (const auto& e : events) {
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e)) {
      ++ids[k->correlation_id];
      if (recovered != nullptr && k->recovered) ++*recovered;
    }
  }
  return ids;
}

// Every correlation id 1..n exactly once (the fake CUPTI numbers launches 1, 2, ... over the
// process: fake_libcupti.cc, fake_cupti_launch_grid).
void ExpectEachLaunchOnce(const std::map<uint64_t, int>& ids, long n) {
  EXPECT_EQ(ids.size(), static_cast<size_t>(n));
  long missing = 0;
  long repeated = 0;
  for (long id = 1; id <= n; ++id) {
    const auto it = ids.find(static_cast<uint64_t>(id));
    if (it == ids.end()) {
      ++missing;
    } else if (it->second != 1) {
      ++repeated;
    }
  }
  EXPECT_EQ(missing, 0) << "launches missing of " << n;
  EXPECT_EQ(repeated, 0) << "launches read more than once of " << n;
}

long ParseCount(const std::string& out, const std::string& key) {
  const size_t at = out.find(key + "=");
  if (at == std::string::npos) return -1;
  return std::atol(out.c_str() + at + key.size() + 1);
}

class InternedRecording : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
    setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
    for (const char* name : kVariables) unsetenv(name);
  }
  void TearDown() override {
    for (const char* name : kVariables) unsetenv(name);
  }

  static constexpr const char* kVariables[] = {
      "CUFLIGHT_COLLECTOR",          "CUFLIGHT_INTERN_CONFIGS", "CUFLIGHT_STATS_MS",
      "CUFLIGHT_SPILL_DIR",          "CUFLIGHT_SPILL_ROTATE_BYTES", "CUFLIGHT_ON_FULL",
      "CUFLIGHT_FLUSH_MS",           "FAKE_CUPTI_TIMING",       "FAKE_CUPTI_MODE"};
};

// Three launch configurations of the one function (block 256 and 128, and 256 with 4 KiB of
// dynamic shared memory: cuda.h, cuLaunchKernel_params blockDimX and sharedMemBytes), two grids
// each, as many launches of each shape as before them (fake_app "shapes": kEach).
const std::vector<std::string> kShapesArgs = {"shapes", "132:256:0", "1000:256:0",
                                              "132:128:0", "264:128:0", "132:256:4096",
                                              "7:256:4096"};
constexpr long kEach = 5;
constexpr long kShapes = 6;
constexpr long kConfigs = 3;

// The members that differ between two runs of the same program for reasons of their own, and
// the one interning changes (the rest must match member for member):
//   header ts_ns  the clock when the event was made;
//   header pid    each run is a process of its own;
//   header seq    each description takes a seq of its own, before its first launch's, so later
//                 seqs shift by the descriptions sent before them (checked on its own below);
//   kernel tid    the launching thread, a thread of each process;
//   process_start start_ns and instance_id (the process's own), config.intern_configs (the
//                 setting compared);
//   process_end/stats emitted: every line handed to the transport, descriptions included
//                 (checked on its own below); stats cpu_ns and ring_high_water (scheduling).
std::string Normalized(schema::OwnedEvent event) {
  std::visit(
      [](auto& e) {
        e.header.ts_ns = 0;
        e.header.pid = 0;
        e.header.seq = 0;
      },
      event);
  if (auto* k = std::get_if<schema::OwnedKernelEvent>(&event)) k->tid = 0;
  if (auto* s = std::get_if<schema::OwnedProcessStartEvent>(&event)) {
    s->start_ns = 0;
    s->instance_id = 0;
    std::erase_if(s->config, [](const auto& kv) { return kv.first == "intern_configs"; });
  }
  if (auto* e = std::get_if<schema::OwnedProcessEndEvent>(&event)) e->emitted = 0;
  if (auto* s = std::get_if<schema::OwnedStatsEvent>(&event)) {
    s->emitted = 0;
    s->cpu_ns = 0;
    s->ring_high_water = 0;
  }
  std::string line(64 << 10, '\0');
  line.resize(schema::Encode(event, line.data(), line.size()));
  return line;
}

struct Recording {
  std::vector<schema::OwnedEvent> events;  // expanded, as every reader gives them
  std::vector<LoggedLine> lines;           // as stored
};

// One run of fake_app "shapes" with CUFLIGHT_INTERN_CONFIGS=`intern`, against a collector of its
// own listening on `path` (the same for both runs: process_start carries it).
Recording RecordShapes(const std::string& path, const char* intern) {
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("CUFLIGHT_INTERN_CONFIGS", intern, 1);
  std::vector<std::string> args = {CUFLIGHT_INJECT_SO, std::to_string(kEach)};
  args.insert(args.end(), kShapesArgs.begin(), kShapesArgs.end());
  const ProcessResult r = RunProcess(CUFLIGHT_FAKE_APP, args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(ParseCount(r.out, "shapes"), kShapes * kEach) << r.out;
  EXPECT_TRUE(collector.WaitFor([](const auto& lines) { return HasLine(lines, "process_end"); }));
  collector.Stop();
  Recording rec;
  rec.events = collector.Events();
  rec.lines = RawLines(collector.log_dir());
  return rec;
}

// (Done means: "a recording through the fakes is identical event for event after expansion to
// what the library would have written before".) The same program run twice, once with the
// default and once with CUFLIGHT_INTERN_CONFIGS=0, with kernel timing (FAKE_CUPTI_TIMING: a
// kernel_time per launch at the exit's forced flush) and no periodic stats.
TEST_F(InternedRecording, ReadsBackEventForEventAsTheWholeForm) {
  setenv("CUFLIGHT_STATS_MS", "3600000", 1);
  setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);
  const std::string path = TempSocketPath("shapes");
  const Recording whole = RecordShapes(path, "0");
  const Recording interned = RecordShapes(path, "");  // blank: the default
  const long launches = kEach + kShapes * kEach;

  // As stored: the whole form has kernel lines only; the default has one description per
  // configuration (the first launches' is 132:256:0's: fake_cupti_launch, grid 132, block 256)
  // and a launch line per launch.
  EXPECT_EQ(CountType(whole.lines, "kernel"), static_cast<size_t>(launches));
  EXPECT_EQ(CountType(whole.lines, "kernel_config"), 0u);
  EXPECT_EQ(CountType(whole.lines, "launch"), 0u);
  EXPECT_EQ(CountType(interned.lines, "kernel"), 0u);
  EXPECT_EQ(CountType(interned.lines, "kernel_config"), static_cast<size_t>(kConfigs));
  EXPECT_EQ(CountType(interned.lines, "launch"), static_cast<size_t>(launches));
  size_t whole_bytes = 0;
  size_t launch_bytes = 0;
  for (const auto& l : whole.lines) whole_bytes += l.type == "kernel" ? l.text.size() + 1 : 0;
  for (const auto& l : interned.lines) launch_bytes += l.type == "launch" ? l.text.size() + 1 : 0;
  std::printf("[ measured ] %ld launches: %.0f bytes per kernel line, %.0f per launch line\n",
              launches, static_cast<double>(whole_bytes) / launches,
              static_cast<double>(launch_bytes) / launches);

  // Event for event, after expansion.
  ASSERT_EQ(interned.events.size(), whole.events.size());
  size_t kernels = 0;
  size_t kernel_times = 0;
  for (size_t i = 0; i < whole.events.size(); ++i) {
    EXPECT_EQ(Normalized(interned.events[i]), Normalized(whole.events[i])) << "event " << i;
    if (schema::TypeOf(whole.events[i]) == schema::EventType::kKernel) ++kernels;
    if (schema::TypeOf(whole.events[i]) == schema::EventType::kKernelTime) ++kernel_times;
  }
  EXPECT_EQ(kernels, static_cast<size_t>(launches));
  EXPECT_EQ(kernel_times, static_cast<size_t>(launches));

  // The members left out above. Seqs: the whole form's run 0, 1, 2, ...; the interned one's
  // the same with one more before each configuration's first launch.
  uint64_t descriptions = 0;
  for (size_t i = 0, line = 0; i < interned.events.size(); ++i, ++line) {
    while (line < interned.lines.size() && interned.lines[line].type == "kernel_config") {
      ++line;
      ++descriptions;
    }
    EXPECT_EQ(schema::HeaderOf(whole.events[i]).seq, i);
    EXPECT_EQ(schema::HeaderOf(interned.events[i]).seq, i + descriptions) << "event " << i;
  }
  EXPECT_EQ(descriptions, static_cast<uint64_t>(kConfigs));
  const auto config_of = [](const Recording& rec) {
    const auto& start = std::get<schema::OwnedProcessStartEvent>(rec.events.front());
    for (const auto& [key, value] : start.config) {
      if (key == "intern_configs") return value;
    }
    return std::string("(absent)");
  };
  EXPECT_EQ(config_of(whole), "false");
  EXPECT_EQ(config_of(interned), "true");
  const auto& whole_end = std::get<schema::OwnedProcessEndEvent>(whole.events.back());
  const auto& interned_end = std::get<schema::OwnedProcessEndEvent>(interned.events.back());
  EXPECT_EQ(interned_end.emitted, whole_end.emitted + kConfigs);
  EXPECT_EQ(whole_end.launches, static_cast<uint64_t>(launches));
}

// Spill (docs/spill.md) with no collector at all: 20,000 launches of one configuration spill
// past two rotations (CUFLIGHT_SPILL_ROTATE_BYTES=1M, the least). The description goes out once,
// in the first file; every later file starts with the preamble again, description included, so
// each file reads alone, and together they hold every launch once.
TEST_F(InternedRecording, SpillFilesSplitAtRotationEachReadAlone) {
  TempDir spill;
  const std::string path = TempSocketPath("nobody");  // nothing listens there
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("CUFLIGHT_SPILL_DIR", spill.path().c_str(), 1);
  setenv("CUFLIGHT_SPILL_ROTATE_BYTES", "1M", 1);
  setenv("CUFLIGHT_ON_FULL", "block", 1);
  constexpr long kLaunches = 20000;
  const ProcessResult r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO,
                                                         std::to_string(kLaunches)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto files = LogFiles(spill.path());
  ASSERT_GE(files.size(), 3u) << "20,000 launch lines of ~150-200 bytes are over 2 MiB";
  const std::vector<std::set<uint64_t>> used = ExpectEachFileDescribesItsLaunches(spill.path());
  // One configuration, its launches in every file: the description and its launches split.
  for (const auto& ids : used) EXPECT_EQ(ids, (std::set<uint64_t>{used.front()}));
  ASSERT_EQ(used.front().size(), 1u);
  std::map<uint64_t, int> ids;
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    EXPECT_EQ(CountType(ReadLog(file), "kernel_config"), 1u);
    for (const auto& [id, n] : CorrelationIds(DecodeLog(file))) ids[id] += n;
  }
  ExpectEachLaunchOnce(ids, kLaunches);
}

// The collector goes away after it stored the description and some launches: the launches made
// since spill (the sender's spill file starts with the preamble, the description in it). The
// collector's log and the spill files, each read alone, hold every launch; an event sent on the
// connection that died and spilled too is the same event twice (same seq: docs/spill.md), which
// `cuflight report` reads once.
TEST_F(InternedRecording, FromACollectorToTheSpillEveryLaunchExpands) {
  TempDir spill;
  TempDir logs;
  const std::string path = TempSocketPath("tospill");
  auto collector = std::make_unique<StoringCollector>(path, logs.path(),
                                                      std::chrono::milliseconds(0));
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("CUFLIGHT_SPILL_DIR", spill.path().c_str(), 1);
  // 5 launches, then one every 2 ms for 1.5 s (fake_app "late").
  auto app = std::async(std::launch::async, [] {
    return RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", "late", "0", "2", "1500"});
  });
  EXPECT_TRUE(collector->WaitFor([](const auto& lines) {
    return std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
             return l.find("\"type\":\"launch\"") != std::string::npos;
           }) >= 10;
  }));
  collector.reset();  // stops it
  const ProcessResult r = app.get();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const long launches = 5 + ParseCount(r.out, "late");
  ASSERT_GT(launches, 5) << r.out;

  const std::vector<LoggedLine> stored = RawLines(logs.path());
  EXPECT_EQ(CountType(stored, "kernel_config"), 1u);
  EXPECT_GE(CountType(stored, "launch"), 10u);
  ASSERT_FALSE(LogFiles(spill.path()).empty()) << "nothing spilled";
  const auto in_log = ExpectEachFileDescribesItsLaunches(logs.path());
  const auto in_spill = ExpectEachFileDescribesItsLaunches(spill.path());
  ASSERT_FALSE(in_spill.empty());
  EXPECT_EQ(in_spill.front(), in_log.front()) << "the same configuration on both sides";

  std::map<uint64_t, uint64_t> seq_of;  // correlation id -> seq
  std::map<uint64_t, int> ids;
  for (const auto* dir : {&logs.path(), &spill.path()}) {
    for (const auto& e : DecodeLogs(*dir)) {
      const auto* k = std::get_if<schema::OwnedKernelEvent>(&e);
      if (k == nullptr) continue;
      const auto [it, first] = seq_of.emplace(k->correlation_id, k->header.seq);
      if (first) {
        ids[k->correlation_id] = 1;
      } else {
        EXPECT_EQ(it->second, k->header.seq) << "a launch twice with two seqs";
      }
    }
  }
  ExpectEachLaunchOnce(ids, launches);
}

// The collector restarts after the description was delivered, with logs of its own (another
// machine's collector, or the old logs gone): the producer's new connection starts with its
// preamble, the description in it, so the new log describes the launches it holds, and every
// launch in either log expands. Unacknowledged events sent again are the same events (same seq).
TEST_F(InternedRecording, AfterAReconnectEveryLaunchStillExpands) {
  TempDir first_logs;
  TempDir second_logs;
  const std::string path = TempSocketPath("reconnect");
  auto collector = std::make_unique<StoringCollector>(path, first_logs.path(),
                                                      std::chrono::milliseconds(0));
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  auto app = std::async(std::launch::async, [] {
    return RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", "late", "0", "2", "2000"});
  });
  EXPECT_TRUE(collector->WaitFor([](const auto& lines) {
    return std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
             return l.find("\"type\":\"launch\"") != std::string::npos;
           }) >= 10;
  }));
  collector.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // launches held meanwhile
  collector = std::make_unique<StoringCollector>(path, second_logs.path(),
                                                 std::chrono::milliseconds(0));
  const ProcessResult r = app.get();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(collector->WaitFor([](const auto& lines) { return HasLine(lines, "process_end"); }));
  const collector::IngestStats second = collector->stats();
  collector.reset();
  EXPECT_EQ(second.lines_rejected, 0u) << "no launch refused (unknown_config)";
  const long launches = 5 + ParseCount(r.out, "late");

  const auto before = ExpectEachFileDescribesItsLaunches(first_logs.path());
  const auto after = ExpectEachFileDescribesItsLaunches(second_logs.path());
  ASSERT_EQ(before.size(), 1u);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after.front(), before.front()) << "the configuration keeps its id";
  EXPECT_EQ(CountType(RawLines(second_logs.path()), "kernel_config"), 1u);

  std::map<uint64_t, uint64_t> seq_of;
  std::map<uint64_t, int> ids;
  size_t after_reconnect = 0;
  for (const auto* dir : {&first_logs.path(), &second_logs.path()}) {
    for (const auto& e : DecodeLogs(*dir)) {
      const auto* k = std::get_if<schema::OwnedKernelEvent>(&e);
      if (k == nullptr) continue;
      if (dir == &second_logs.path()) ++after_reconnect;
      const auto [it, first] = seq_of.emplace(k->correlation_id, k->header.seq);
      if (first) {
        ids[k->correlation_id] = 1;
      } else {
        EXPECT_EQ(it->second, k->header.seq) << "a launch twice with two seqs";
      }
    }
  }
  EXPECT_GT(after_reconnect, 10u);
  ExpectEachLaunchOnce(ids, launches);
}

// SIGKILL after the description and some launches were delivered (fake_app stream-kill: one
// launch, then one every ~100 us for 300 ms, then SIGKILL). The launches the collector recovers
// from the black box are whole kernel events (recovered: the box holds launch records and
// function descriptors, not lines: docs/crash.md), the delivered ones launch lines; read back,
// every launch whose callback returned is there exactly once.
TEST_F(InternedRecording, AKillSplitsLaunchesBetweenLinesAndTheBlackBox) {
  if (CUFLIGHT_SANITIZED) GTEST_SKIP() << "the sanitizer runtimes slow the stream past the kill";
  long recovered_in_all = 0;
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const std::string path = TempSocketPath("kill");
    StoringCollector collector(path);
    setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
    const ProcessResult r =
        RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "1", "stream-kill"});
    ASSERT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
    const long launches = 1 + ParseCount(r.out, "streamed");
    ASSERT_GT(launches, 1) << r.out;
    ASSERT_TRUE(
        collector.WaitFor([](const auto& lines) { return HasLine(lines, "process_lost"); }));
    collector.Stop();
    const std::vector<LoggedLine> lines = RawLines(collector.log_dir());
    EXPECT_EQ(CountType(lines, "kernel_config"), 1u);
    EXPECT_GT(CountType(lines, "launch"), 0u) << "launches delivered before the kill";
    size_t recovered_lines = 0;
    for (const LoggedLine& l : lines) {
      if (l.type != "kernel") continue;
      EXPECT_NE(l.text.find("\"recovered\":true"), std::string::npos) << l.text;
      ++recovered_lines;
    }
    int recovered = 0;
    const auto ids = CorrelationIds(collector.Events(), &recovered);
    EXPECT_EQ(static_cast<size_t>(recovered), recovered_lines);
    ExpectEachLaunchOnce(ids, launches);
    // Seqs stay unique with the descriptions' among them (a recovered launch never takes the
    // seq of a description sent just before it).
    std::set<uint64_t> seqs;
    for (const LoggedLine& l : lines) {
      if (l.type != "process_lost") {
        EXPECT_TRUE(seqs.insert(l.seq).second) << l.text;
      }
    }
    recovered_in_all += recovered;
  }
  // A kill within 100 ms of the last flush leaves launches only the black box holds.
  EXPECT_GT(recovered_in_all, 0);
}

}  // namespace
}  // namespace cuflight::inject::testing
