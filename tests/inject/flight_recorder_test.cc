// The flight-recorder guarantees with the real collector: the injected library (real .so, stand-in
// driver and CUPTI) in a process that crashes or is killed, the collector in this process writing
// its log. What the log holds afterwards is what a post-mortem review sees.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

using collector::testing::LogFiles;
using collector::testing::RunningCollector;
using collector::testing::TempDir;
using collector::testing::TestOptions;
using collector::testing::WaitUntil;
using cuflight::testing::RunProcess;

std::vector<schema::OwnedEvent> ReadEvents(const std::filesystem::path& log_dir) {
  std::vector<schema::OwnedEvent> out;
  for (const auto& file : LogFiles(log_dir)) {
    FILE* f = std::fopen(file.c_str(), "r");
    if (f == nullptr) continue;
    char* line = nullptr;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
      schema::DecodeResult d = schema::Decode(line);
      EXPECT_TRUE(d.ok()) << d.message;
      if (d.ok()) out.push_back(std::move(d.event));
    }
    std::free(line);
    std::fclose(f);
  }
  return out;
}

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
    events = ReadEvents(options.log_dir);
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
  const std::vector<schema::OwnedEvent> events = ReadEvents(spill);
  ASSERT_GE(events.size(), 3u);
  // A complete stream: process_start first, every kernel, the crash last, no seq missing.
  EXPECT_EQ(schema::TypeOf(events.front()), schema::EventType::kProcessStart);
  ASSERT_EQ(schema::TypeOf(events.back()), schema::EventType::kProcessCrash);
  EXPECT_EQ(std::get<schema::OwnedProcessCrashEvent>(events.back()).signal, SIGABRT);
  const auto kernels = std::count_if(events.begin(), events.end(), [](const auto& e) {
    return schema::TypeOf(e) == schema::EventType::kKernel;
  });
  EXPECT_EQ(kernels, 25);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(schema::HeaderOf(events[i]).seq, i);

  // cuflight report reads the spill file like a collector log: the crash comes first.
  report::ReportOptions options;
  options.paths = {spill.string()};
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(report::RunReport(options, out, err), report::kReportOk) << err.str();
  EXPECT_NE(out.str().find("crash: SIGABRT"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("vecadd"), std::string::npos) << out.str();
}

TEST_F(FlightRecorder, AKilledProcessLosesAtMostAboutOneFlushInterval) {
  // SIGKILL cannot be caught: what the library had not sent yet is gone. Events wait at most
  // CUFLIGHT_FLUSH_MS (100 ms by default) before they are sent, so the log's last kernel is at
  // most about that long before the kill.
  TempDir dir;
  const collector::CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  setenv("CUFLIGHT_COLLECTOR", options.socket.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "1", "stream-kill"});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  long streamed = 0;
  long long kill_ns = 0;
  const size_t at = r.out.find("streamed=");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "streamed=%ld kill_ns=%lld", &streamed, &kill_ns), 2);
  std::vector<schema::OwnedEvent> events;
  ASSERT_TRUE(WaitUntil([&] {
    events = ReadEvents(options.log_dir);
    return HasType(events, schema::EventType::kProcessLost);
  }));
  int64_t last_kernel_ns = 0;
  long stored = 0;
  for (const auto& e : events) {
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e)) {
      ++stored;
      last_kernel_ns = std::max(last_kernel_ns, k->header.ts_ns);
    }
  }
  const long total = streamed + 1;  // the one launch before the stream
  const double window_ms = static_cast<double>(kill_ns - last_kernel_ns) / 1e6;
  std::printf("[ measured ] killed after %ld launches: %ld stored, %ld missing; the last stored "
              "kernel was launched %.1f ms before the kill (CUFLIGHT_FLUSH_MS=100)\n",
              total, stored, total - stored, window_ms);
  EXPECT_GT(stored, 0);
  EXPECT_LE(stored, total);
  // 100 ms flush interval plus the sender thread's 10 ms idle sleep; generous slack for a
  // loaded 2-core CI machine.
  EXPECT_LT(window_ms, 100.0 + 10.0 + 400.0);
  const auto& lost = std::get<schema::OwnedProcessLostEvent>(events.back());
  EXPECT_EQ(lost.reason, schema::LostReason::kDisconnected);
}

}  // namespace
}  // namespace cuflight::inject::testing
