// libcuflight_inject.so as the driver loads it: only InitializeInjection exported, no shared
// dependency besides glibc, no glibc newer than 2.28, one clear line on stderr when it cannot work,
// and the whole path (entry -> CUPTI subscription -> callbacks -> sender thread -> socket -> atexit
// process_end) with stand-in libcuda.so.1 and libcupti.so.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "cuflight/env/attribution.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "running_collector.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

using test_support::StoringCollector;
using test_support::TempSocketPath;

using cuflight::testing::RunProcess;

std::string Shell(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class Injection : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("FAKE_CUPTI_MODE");
    unsetenv("FAKE_CUPTI_TIMING");
    unsetenv("FAKE_CUPTI_VERSION");
    unsetenv("FAKE_CUPTI_ACTIVITY");
    unsetenv("FAKE_CUPTI_CALL_LOG");
    unsetenv("FAKE_CUPTI_FIRST_CORRELATION_ID");
    unsetenv("FAKE_CUPTI_POLLERS");
    unsetenv("FAKE_CUPTI_ACTIVITY_LOG");
    unsetenv("FAKE_CUPTI_MULTI_SUBSCRIBER");
    unsetenv("FAKE_CUDA_DRIVER_VERSION");
    unsetenv("FAKE_CUPTI_KERNEL_RECORD_BYTES");
    unsetenv("FAKE_CUDA_GREEN_SMS");
    unsetenv("CUFLIGHT_TIMING");
    unsetenv("CUFLIGHT_TIMING_WINDOW_MS");
    unsetenv("CUFLIGHT_TIMING_PERIOD_MS");
    unsetenv("CUFLIGHT_TIMING_NEW_CONFIGS");
    unsetenv("CUFLIGHT_STALL_MS");
    unsetenv("CUFLIGHT_CUPTI_PATH");
    unsetenv("CUFLIGHT_COLLECTOR");
    unsetenv("CUFLIGHT_RING_SIZE");
    setenv("LD_LIBRARY_PATH", "/nonexistent", 1);
  }
  void UseFakes() {
    setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
    setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
  }
};

TEST_F(Injection, ExportsOnlyInitializeInjection) {
  const std::string symbols =
      Shell(std::string("nm -D --defined-only ") + CUFLIGHT_INJECT_SO + " | awk '{print $3}'");
  EXPECT_EQ(symbols, "InitializeInjection\n");
}

// glibc's own files only: libpthread.so.0 and libdl.so.2 hold, before glibc 2.34, the functions
// libinject/src/glibc_baseline.cc pins (later glibcs keep both as stubs).
TEST_F(Injection, NeedsNoSharedLibraryBesidesGlibc) {
  if (CUFLIGHT_SANITIZED) GTEST_SKIP() << "a sanitizer build links the sanitizer runtime";
  const std::string needed = Shell(std::string("readelf -d ") + CUFLIGHT_INJECT_SO +
                                   " | grep NEEDED | sed 's/.*\\[\\(.*\\)\\]/\\1/'");
  std::istringstream lines(needed);
  std::string lib;
  int count = 0;
  while (std::getline(lines, lib)) {
    ++count;
    EXPECT_TRUE(lib == "libc.so.6" || lib == "libm.so.6" || lib == "ld-linux-x86-64.so.2" ||
                lib == "libpthread.so.0" || lib == "libdl.so.2")
        << "unexpected dependency " << lib;
  }
  EXPECT_GT(count, 0);
}

// The library loads with glibc 2.28 (RHEL 8) and later: every symbol version it needs, as
// readelf lists the .gnu.version_r section, is GLIBC_2.28 or older, and it needs no other
// library's versions (GLIBCXX, CXXABI, GCC: the C++ runtime is linked in). A new call that needs
// a newer glibc fails here, naming the version; libinject/src/glibc_baseline.cc pins it.
TEST_F(Injection, NeedsNoGlibcNewerThan228) {
  if (CUFLIGHT_SANITIZED) GTEST_SKIP() << "a sanitizer build is not pinned (glibc_baseline.cc)";
#if !defined(__x86_64__)
  GTEST_SKIP() << "the glibc floor is pinned on x86_64 only (glibc_baseline.cc)";
#endif
  const std::string names = Shell(std::string("readelf -V --wide ") + CUFLIGHT_INJECT_SO +
                                  " | sed -n 's/.*Name: \\([^ ]*\\).*/\\1/p'");
  std::istringstream lines(names);
  std::string name;
  int count = 0;
  std::string too_new;
  while (std::getline(lines, name)) {
    ++count;
    unsigned major = 0, minor = 0;
    if (std::sscanf(name.c_str(), "GLIBC_%u.%u", &major, &minor) != 2) {
      too_new += " " + name;  // not glibc's
      continue;
    }
    if (major > 2 || (major == 2 && minor > 28)) too_new += " " + name;
  }
  EXPECT_GT(count, 0) << "readelf listed no needed versions";
  EXPECT_EQ(too_new, "") << "versions above GLIBC_2.28 needed:" << too_new;
}

TEST_F(Injection, WithoutADriverItSaysSoOnceAndTheAppRunsOn) {
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("init=1"), std::string::npos);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("cuflight: error: cannot open libcuda.so.1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("runs without cuflight"), std::string::npos);
}

TEST_F(Injection, AnotherCuptiSubscriberMeansOneLineAndNoRecording) {
  UseFakes();
  setenv("FAKE_CUPTI_MODE", "taken", 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("init=1"), std::string::npos);
  EXPECT_NE(r.out.find("fired=0"), std::string::npos);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("already holds the CUPTI subscriber"), std::string::npos) << r.err;
  // cuptiSubscribe_v2 (CUPTI 12.6+) names the holder.
  EXPECT_NE(r.err.find("(Nsight Systems)"), std::string::npos) << r.err;
}

TEST_F(Injection, ABadSettingFallsBackWithOneWarning) {
  UseFakes();
  setenv("CUFLIGHT_RING_SIZE", "lots", 1);
  setenv("CUFLIGHT_COLLECTOR", "/nonexistent/dir/c.sock", 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fired=3"), std::string::npos);
  EXPECT_NE(r.err.find("CUFLIGHT_RING_SIZE"), std::string::npos) << r.err;
  // The bad value, and the exit without a collector (at most 1 s), each get one line.
  EXPECT_LE(CountLines(r.err), 2) << r.err;
}

TEST_F(Injection, LaunchesReachTheCollectorAndExitSendsProcessEnd) {
  UseFakes();
  const std::string path = TempSocketPath("inject");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "25"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("fired=25"), std::string::npos);
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  // Every stored line (the configuration's description too) in seq order, without a gap.
  uint64_t expected_seq = 0;
  for (const std::string& line : collector.Lines()) {
    const schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    EXPECT_EQ(d.header->seq, expected_seq++);
  }
  int kernels = 0;
  for (const std::string& line : collector.ExpandedLines()) {
    const schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&d.event)) {
      ++kernels;
      EXPECT_EQ(k->demangled, "vecadd(float const*, float const*, float*, int)");
      // By hand, H100: 64 regs x 256 threads = 16384 regs/block -> 4 blocks by registers;
      // smem 8 KiB static + 1 KiB reserved = 9 KiB/block; warps: 2048/256 = 8 blocks.
      EXPECT_EQ(k->occupancy.max_active_blocks, 4);
      EXPECT_EQ(k->occupancy.limiting_resource, schema::Resource::kRegisters);
    }
    if (const auto* e = std::get_if<schema::OwnedProcessEndEvent>(&d.event)) {
      EXPECT_EQ(e->launches, 25u);
      EXPECT_EQ(e->dropped, 0u);
    }
  }
  EXPECT_EQ(kernels, 25);
}

// Timing through the real library: CUPTI's buffer callbacks take the injector's pool, the exit's
// forced flush hands over the records (the last two of kernels still running), CUPTI reports 3
// records dropped and one buffer request is refused (the pool of 8 is then all taken).
TEST_F(Injection, TimingRecordsLostAtExitAreCountedInProcessEnd) {
  UseFakes();
  const std::string path = TempSocketPath("timing");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("FAKE_CUPTI_TIMING", "2,3,1", 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  std::map<uint64_t, uint64_t> durations;  // correlation id -> duration_ns
  std::optional<schema::OwnedProcessEndEvent> end;
  for (const std::string& line : collector.Lines()) {
    schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&d.event)) {
      durations[t->correlation_id] = t->duration_ns;
    }
    if (auto* e = std::get_if<schema::OwnedProcessEndEvent>(&d.event)) end = std::move(*e);
  }
  // Launches 1-3 finished; 4 and 5 were still running.
  EXPECT_EQ(durations, (std::map<uint64_t, uint64_t>{{1, 500}, {2, 500}, {3, 500}}));
  ASSERT_TRUE(end.has_value());
  // 2 incomplete + 3 dropped by CUPTI; the refused request's records are among CUPTI's 3.
  EXPECT_EQ(end->timing_dropped, 5u);
  EXPECT_EQ(end->dropped, 0u);
  EXPECT_EQ(end->launches, 5u);
}

// What a hang test's process left once its process_end is stored: the correlation ids timed
// (kernel_time), the stall events and the process_end.
struct StallRun {
  std::vector<uint64_t> timed;
  std::vector<schema::OwnedStallEvent> stalls;
  std::optional<schema::OwnedProcessEndEvent> end;
};

void ReadStallRun(const StoringCollector& collector, StallRun* run) {
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  for (const std::string& line : collector.Lines()) {
    schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&d.event)) {
      run->timed.push_back(t->correlation_id);
    }
    if (auto* st = std::get_if<schema::OwnedStallEvent>(&d.event)) {
      run->stalls.push_back(std::move(*st));
    }
    if (auto* e = std::get_if<schema::OwnedProcessEndEvent>(&d.event)) run->end = std::move(*e);
  }
}

// Correlation ids are 32 bits and wrap (cupti_callbacks.h: "uint32_t correlationId;"). A process
// whose ids are about to wrap: the fake hands out 0xFFFFFFF0 (4294967280) first, so 22 launches
// get 0xFFFFFFF0..0xFFFFFFFF (16) and then 0..5 (6). The first 16 kernels end; the 6 after the
// wrap never do (FAKE_CUPTI_TIMING=6,0,0: the forced flush that confirms the stall hands their
// records over incomplete). The stall is reported, naming the launches after the wrap, oldest
// first. Were ids compared as plain integers, 0xFFFFFFFF ending would "finish" 0..5 and nothing
// would be reported.
TEST_F(Injection, AHangJustAfterTheCorrelationIdsWrapIsReported) {
  UseFakes();
  const std::string path = TempSocketPath("wrap");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("FAKE_CUPTI_TIMING", "6,0,0", 1);
  setenv("FAKE_CUPTI_FIRST_CORRELATION_ID", "4294967280", 1);
  setenv("CUFLIGHT_STALL_MS", "300", 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "22", "sleep", "1500"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The exit's flush gets the buffer the confirmation's flush used, given back zeroed
  // (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER is set: the fake checks).
  EXPECT_EQ(r.err.find("activity buffer not zero"), std::string::npos) << r.err;
  StallRun run;
  ASSERT_NO_FATAL_FAILURE(ReadStallRun(collector, &run));
  const std::vector<uint64_t>& timed = run.timed;
  const std::vector<schema::OwnedStallEvent>& stalls = run.stalls;
  const std::optional<schema::OwnedProcessEndEvent>& end = run.end;
  std::vector<uint64_t> before_wrap;
  for (uint64_t id = 0xFFFFFFF0u; id <= 0xFFFFFFFFu; ++id) before_wrap.push_back(id);
  EXPECT_EQ(timed, before_wrap);
  ASSERT_FALSE(stalls.empty());
  EXPECT_EQ(stalls[0].state, schema::StallState::kStalled);
  ASSERT_EQ(stalls[0].streams.size(), 1u);
  EXPECT_EQ(stalls[0].streams[0].unfinished, 6);
  std::vector<uint64_t> named;
  for (const schema::OwnedStallLaunch& l : stalls[0].streams[0].launches) {
    named.push_back(l.correlation_id);
  }
  // The oldest kMaxStallLaunches of 0..5.
  std::vector<uint64_t> expected = {0, 1, 2, 3, 4, 5};
  expected.resize(std::min(expected.size(), schema::kMaxStallLaunches));
  EXPECT_EQ(named, expected);
  for (const schema::OwnedStallEvent& s : stalls) EXPECT_EQ(s.state, schema::StallState::kStalled);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->timing_dropped, 6u);
  EXPECT_EQ(end->launches, 22u);
}

// With kernel timing off (CUFLIGHT_TIMING=0) and api_error events off (so only the
// driver callbacks the recorder names are enabled), a program whose cuStreamSynchronize waits
// 1.5 s for its 5 launches is reported stalled after 300 ms, from that call: the stream, the
// thread inside it, the call, and the last launches, said to be the last ones recorded (which of
// them runs is not known); then resolved when the call returns.
TEST_F(Injection, WithTimingOffAHungSynchronizeIsReportedFromTheCall) {
  UseFakes();
  const std::string path = TempSocketPath("synchang");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("CUFLIGHT_TIMING", "0", 1);
  setenv("CUFLIGHT_API_ERRORS", "0", 1);
  setenv("CUFLIGHT_STALL_MS", "300", 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", "sync-hang", "1500"});
  unsetenv("CUFLIGHT_TIMING");
  unsetenv("CUFLIGHT_API_ERRORS");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("synchronized=1"), std::string::npos) << r.out;
  StallRun run;
  ASSERT_NO_FATAL_FAILURE(ReadStallRun(collector, &run));
  EXPECT_TRUE(run.timed.empty());
  ASSERT_GE(run.stalls.size(), 2u);
  const schema::OwnedStallEvent& s = run.stalls[0];
  EXPECT_EQ(s.state, schema::StallState::kStalled);
  ASSERT_EQ(s.streams.size(), 1u);
  const schema::OwnedStallStream& st = s.streams[0];
  EXPECT_EQ(st.stream, 7u);  // the fake's NULL stream (cuptiGetStreamIdEx)
  EXPECT_EQ(st.evidence, schema::kStallEvidenceSyncCall);
  EXPECT_EQ(st.launches_from, schema::kStallLaunchesFromRecent);
  EXPECT_EQ(st.sync_api, "cuStreamSynchronize");
  ASSERT_TRUE(st.sync_tid.has_value());
  EXPECT_GT(*st.sync_tid, 0);
  ASSERT_TRUE(st.sync_waited_ms.has_value());
  EXPECT_GE(*st.sync_waited_ms, 300);
  EXPECT_EQ(st.unfinished, 5);
  std::vector<uint64_t> ids;
  for (const schema::OwnedStallLaunch& l : st.launches) ids.push_back(l.correlation_id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{2, 3, 4, 5}));  // the last 4 of launches 1..5
  EXPECT_EQ(run.stalls.back().state, schema::StallState::kResolved);
  ASSERT_TRUE(run.end.has_value());
  EXPECT_EQ(run.end->timing_dropped, 0u);
}

// A poll-heavy process: 16 threads each poll cuStreamQuery every millisecond on work that has not
// completed (FAKE_CUPTI_POLLERS), while 8 kernels run and the last hangs (FAKE_CUPTI_TIMING=1,0,0).
// Were synchronization records collected with CUPTI's default (a record for every query), the 16
// threads would each hold one of the library's 8 activity buffers (per-thread buffers), the
// kernel records would find none and be dropped, and the hang would go unreported. They are
// collected only from the stall's confirmation on, and then without queries of work not
// completed (cuptiActivityEnableAllSyncRecords(0)): no record is dropped, the 7 kernels that
// ended are timed, and the hang is reported.
TEST_F(Injection, APollHeavyProcessKeepsItsKernelRecordsAndItsStallDetection) {
  UseFakes();
  setenv("FAKE_CUPTI_TIMING", "1,0,0", 1);
  setenv("FAKE_CUPTI_POLLERS", "16,600", 1);
  setenv("CUFLIGHT_STALL_MS", "300", 1);
  const std::string log = TempSocketPath("polls") + ".log";
  std::remove(log.c_str());
  setenv("FAKE_CUPTI_CALL_LOG", log.c_str(), 1);
  const std::string path = TempSocketPath("polls");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "8", "sleep", "2000"});
  unsetenv("FAKE_CUPTI_CALL_LOG");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  StallRun run;
  ASSERT_NO_FATAL_FAILURE(ReadStallRun(collector, &run));
  const std::vector<uint64_t>& timed = run.timed;
  const std::vector<schema::OwnedStallEvent>& stalls = run.stalls;
  const std::optional<schema::OwnedProcessEndEvent>& end = run.end;
  EXPECT_EQ(timed, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7}));
  ASSERT_FALSE(stalls.empty());
  EXPECT_EQ(stalls[0].state, schema::StallState::kStalled);
  ASSERT_EQ(stalls[0].streams.size(), 1u);
  ASSERT_FALSE(stalls[0].streams[0].launches.empty());
  EXPECT_EQ(stalls[0].streams[0].launches[0].correlation_id, 8u);
  ASSERT_TRUE(end.has_value());
  // Only the hung kernel's record, handed over incomplete by the confirming flush.
  EXPECT_EQ(end->timing_dropped, 1u);
  // The calls that made it so: synchronization records enabled once, after the kernel records,
  // with queries of work not completed left out first.
  std::ifstream in(log);
  std::vector<std::string> calls;
  for (std::string line; std::getline(in, line);) calls.push_back(line);
  std::remove(log.c_str());
  const auto first = [&](const std::string& name) {
    return std::find(calls.begin(), calls.end(), name) - calls.begin();
  };
  ASSERT_LT(first("cuptiActivityEnableAllSyncRecords"), static_cast<ptrdiff_t>(calls.size()));
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "cuptiActivityEnable"), 2);
  EXPECT_LT(first("cuptiActivityEnableAllSyncRecords"),
            std::find(calls.begin() + first("cuptiActivityEnable") + 1, calls.end(),
                      "cuptiActivityEnable") -
                calls.begin());
}

// An older libcupti (CUDA 12.9's reports API version 28, cupti_version.h) writes activity records
// in another layout than the CUpti_ActivityKernel10 this build reads: timing is turned off with
// one line instead of misreading them, and launches are still recorded.
TEST_F(Injection, AnOlderLibcuptiTurnsTimingOffWithOneLine) {
  UseFakes();
  const std::string path = TempSocketPath("oldcupti");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);
  setenv("FAKE_CUPTI_VERSION", "28", 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("API version 28"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kernel timing and graph-node events are off, stalls are seen from "
                       "synchronising calls only"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  int kernels = 0;
  int times = 0;
  for (const std::string& line : collector.ExpandedLines()) {
    kernels += line.find("\"type\":\"kernel\"") != std::string::npos;
    times += line.find("\"type\":\"kernel_time\"") != std::string::npos;
    // Stall detection stays, from synchronising calls (stall_tracker.h, point 10).
    if (line.find("\"type\":\"process_start\"") != std::string::npos) {
      EXPECT_NE(line.find("\"stall_ms\":\"10000\""), std::string::npos) << line;
      EXPECT_NE(line.find("\"timing\":\"off\""), std::string::npos) << line;
    }
  }
  EXPECT_EQ(kernels, 4);
  EXPECT_EQ(times, 0);
}

// Each CUPTI 13 libcupti writes kernel records in its own CUpti_ActivityKernelN (CUPTI release
// notes: Kernel11 from 13.1, Kernel13 from 13.4; Kernel12 in CUPTI Python 13.3): the fake writes
// records of that layout's size with its later members filled (fake_libcupti.cc, RecordBytes), and
// every launch's kernel_time comes out as the fake timed it: start 1000 x its correlation id, 500 ns
// long (fake_libcupti.cc, FAKE_CUPTI_TIMING), stream 7 in context 1. The sizes 216, 224, 224, 240
// are the four layouts'; FAKE_CUPTI_KERNEL_RECORD_BYTES would set another.
class KernelRecordLayouts : public Injection,
                            public ::testing::WithParamInterface<const char*> {};

TEST_P(KernelRecordLayouts, EachKnownLayoutIsReadRight) {
  UseFakes();
  const std::string path = TempSocketPath("layout");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);
  setenv("FAKE_CUPTI_VERSION", GetParam(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> times;  // correlation id -> start, duration
  for (const std::string& line : collector.Lines()) {
    schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&d.event)) {
      times[t->correlation_id] = {t->start_ns, t->duration_ns};
      EXPECT_EQ(t->context, 1u);
      EXPECT_EQ(t->stream, 7u);
      EXPECT_FALSE(t->graph_id.has_value());
    }
  }
  // The start is on the event clock (an offset from CUPTI's), so only its spacing is compared:
  // 1000 ns per correlation id.
  ASSERT_EQ(times.size(), 4u);
  uint64_t id = 1;
  for (const auto& [correlation_id, time] : times) {
    EXPECT_EQ(correlation_id, id);
    EXPECT_EQ(time.second, 500u);
    EXPECT_EQ(time.first - times.begin()->second.first, 1000u * (id - 1));
    ++id;
  }
}

INSTANTIATE_TEST_SUITE_P(Cupti13, KernelRecordLayouts,
                         ::testing::Values("130001",    // Kernel10, 216 bytes
                                           "130100",    // Kernel11, 224 bytes
                                           "130300",    // Kernel12, 224 bytes
                                           "130400"));  // Kernel13, 240 bytes

// A libcupti newer than the newest layout this build knows (13.4's Kernel13): its kernel records
// are not read at a guessed offset: timing is off with one line, and launches are still recorded.
TEST_F(Injection, ANewerKernelRecordLayoutTurnsTimingOffWithOneLine) {
  UseFakes();
  const std::string path = TempSocketPath("newcupti");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);
  setenv("FAKE_CUPTI_VERSION", "130500", 1);
  setenv("FAKE_CUPTI_KERNEL_RECORD_BYTES", "256", 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("API version 130500, newer than the newest kernel record layout"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("kernel timing and graph-node events are off"), std::string::npos) << r.err;
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  int kernels = 0;
  int times = 0;
  for (const std::string& line : collector.ExpandedLines()) {
    kernels += line.find("\"type\":\"kernel\"") != std::string::npos;
    times += line.find("\"type\":\"kernel_time\"") != std::string::npos;
    if (line.find("\"type\":\"process_start\"") != std::string::npos) {
      EXPECT_NE(line.find("\"timing\":\"off\""), std::string::npos) << line;
    }
  }
  EXPECT_EQ(kernels, 4);
  EXPECT_EQ(times, 0);
}

// The application runs in a green context of 16 SMs of the fake's 132-SM device
// (FAKE_CUDA_GREEN_SMS: cuCtxGetDevResource says 16, fake_libcuda.cc): through the real
// library's cuCtxGetDevResource lookup, every kernel event says 16 SMs and counts its waves over
// them: grid blocks / (16 x max_active_blocks) (engine.h, ComputeWaves: a wave is every resident
// block slot of the SMs). The device event still says the device's 132.
TEST_F(Injection, AGreenContextsLaunchesCountWavesOverItsSms) {
  UseFakes();
  const std::string path = TempSocketPath("green");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("FAKE_CUDA_GREEN_SMS", "16", 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  int kernels = 0;
  for (const std::string& line : collector.ExpandedLines()) {
    schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    if (const auto* device = std::get_if<schema::OwnedDeviceEvent>(&d.event)) {
      EXPECT_EQ(device->sm_count, 132);
    }
    const auto* k = std::get_if<schema::OwnedKernelEvent>(&d.event);
    if (k == nullptr) continue;
    ++kernels;
    ASSERT_TRUE(k->sm_count.has_value()) << line;
    EXPECT_EQ(*k->sm_count, 16);
    ASSERT_GT(k->occupancy.max_active_blocks, 0);
    const double blocks = static_cast<double>(k->grid.x) * k->grid.y * k->grid.z;
    EXPECT_DOUBLE_EQ(k->occupancy.waves, blocks / (16.0 * k->occupancy.max_active_blocks)) << line;
  }
  EXPECT_EQ(kernels, 3);
}

// What a run of the fake app under the library gave: the collector's events, and the CUPTI calls
// the fake libcupti saw, in order.
struct CuptiRun {
  cuflight::testing::ProcessResult r;
  std::vector<schema::OwnedEvent> events;
  std::vector<std::string> calls;
};

// `extra`: fake_app's arguments after the launch count (its mode and the mode's own).
CuptiRun RunWithCallLog(const std::string& name, int launches,
                        const std::vector<std::string>& extra = {}) {
  CuptiRun run;
  const std::string log = TempSocketPath(name) + ".log";
  std::remove(log.c_str());
  setenv("FAKE_CUPTI_CALL_LOG", log.c_str(), 1);
  const std::string path = TempSocketPath(name);
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  std::vector<std::string> args{CUFLIGHT_INJECT_SO, std::to_string(launches)};
  args.insert(args.end(), extra.begin(), extra.end());
  run.r = RunProcess(CUFLIGHT_FAKE_APP, args);
  unsetenv("FAKE_CUPTI_CALL_LOG");
  EXPECT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  for (const std::string& line : collector.ExpandedLines()) {
    schema::DecodeResult d = schema::Decode(line);
    EXPECT_TRUE(d.ok()) << d.message;
    if (d.ok()) run.events.push_back(std::move(d.event));
  }
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) run.calls.push_back(line);
  std::remove(log.c_str());
  return run;
}

template <class E>
std::vector<E> Of(const std::vector<schema::OwnedEvent>& events) {
  std::vector<E> out;
  for (const schema::OwnedEvent& e : events) {
    if (const auto* x = std::get_if<E>(&e)) out.push_back(*x);
  }
  return out;
}

bool Called(const std::vector<std::string>& calls, const std::string& name) {
  return std::find(calls.begin(), calls.end(), name) != calls.end();
}

// CUPTI 13.3 (API version 130300) with the subscriber-scoped activity API: the library uses that
// family for everything (CUPTI docs, "Enabling Multiple Subscribers": every subscriber must use
// the _v2 APIs; "V1 to V2 API Migration": mixing returns CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_
// SUPPORTED, which the fake does). Had one unversioned activity call slipped in, timing would be
// missing here. The driver supports CUDA 13.3 (r610, "Legacy Initialization (CUDA 13.2 and
// earlier)"). No forced flush: cuptiActivityFlushAll names no subscriber, and forced it would hand
// over other tools' incomplete buffers (sender_thread.h, ForcedFlushAllowed).
TEST_F(Injection, Cupti13_3UsesTheSubscriberScopedActivityApiThroughout) {
  UseFakes();
  setenv("FAKE_CUPTI_VERSION", "130300", 1);
  setenv("FAKE_CUDA_DRIVER_VERSION", "13030", 1);
  // The kernels end 1 ms after the first launch and the application exits 100 ms after it: a
  // default flush, not a forced one, hands their records over (the three-field form holds them
  // until a forced flush).
  // (No dropped records: in that form the fake reports them again at every flush after the
  // kernels ended, and how many flushes fall in 100 ms is not fixed.)
  setenv("FAKE_CUPTI_TIMING", "0,0,0,1", 1);
  const CuptiRun run = RunWithCallLog("cuptiv2", 5, {"sleep", "100"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.r.err, "");
  EXPECT_TRUE(Called(run.calls, "cuptiSubscribe_v2"));
  EXPECT_TRUE(Called(run.calls, "cuptiActivityRegisterCallbacks_v2"));
  EXPECT_TRUE(Called(run.calls, "cuptiActivityEnable_v2"));
  EXPECT_TRUE(Called(run.calls, "cuptiActivityGetNumDroppedRecords_v2"));
  EXPECT_FALSE(Called(run.calls, "cuptiSubscribe"));
  EXPECT_FALSE(Called(run.calls, "cuptiActivityRegisterCallbacks"));
  EXPECT_FALSE(Called(run.calls, "cuptiActivityEnable"));
  EXPECT_FALSE(Called(run.calls, "cuptiActivityGetNumDroppedRecords"));
  EXPECT_TRUE(Called(run.calls, "cuptiActivityFlushAll"));  // the default flushes
  EXPECT_FALSE(Called(run.calls, "cuptiActivityFlushAll(forced)"));
  EXPECT_EQ(Of<schema::OwnedKernelTimeEvent>(run.events).size(), 5u);
  const auto starts = Of<schema::OwnedProcessStartEvent>(run.events);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].cupti_activity_api, "subscriber");
  const auto ends = Of<schema::OwnedProcessEndEvent>(run.events);
  ASSERT_EQ(ends.size(), 1u);
  // The subscriber's dropped-record count (cuptiActivityGetNumDroppedRecords_v2, called above).
  EXPECT_EQ(ends[0].timing_dropped, 0u);
  EXPECT_EQ(ends[0].timing_stopped_reason, schema::TimingStoppedReason::kNone);
}

// CUPTI 13.2 had the _v2 activity calls as a preview, without multi-subscriber tracing: the
// unversioned family throughout, cuptiSubscribe included (cuptiSubscribe_v2 belongs to the other
// family from 13.2 on).
TEST_F(Injection, Cupti13_2KeepsTheUnversionedActivityApi) {
  UseFakes();
  setenv("FAKE_CUPTI_VERSION", "130200", 1);
  setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);
  const CuptiRun run = RunWithCallLog("cuptiv1", 4);
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.r.err, "");
  EXPECT_TRUE(Called(run.calls, "cuptiSubscribe"));
  EXPECT_TRUE(Called(run.calls, "cuptiActivityEnable"));
  EXPECT_FALSE(Called(run.calls, "cuptiSubscribe_v2"));
  EXPECT_FALSE(Called(run.calls, "cuptiActivityEnable_v2"));
  EXPECT_EQ(Of<schema::OwnedKernelTimeEvent>(run.events).size(), 4u);
}

// A CUPTI 13.3 libcupti (from a wheel) on a driver that supports CUDA 13.0 only (r580): multiple
// subscribers need r610 (CUPTI docs, "Legacy Initialization (CUDA 13.2 and earlier)": "with drivers
// older than r610, CUPTI limits activity tracing to a single subscriber"), so the library does not
// ask for them: the unversioned family throughout, as with CUPTI 13.2, and process_start says so.
TEST_F(Injection, Cupti13_3OnADriverOlderThanR610KeepsTheUnversionedApi) {
  UseFakes();
  setenv("FAKE_CUPTI_VERSION", "130300", 1);
  setenv("FAKE_CUDA_DRIVER_VERSION", "13020", 1);  // CUDA 13.2's driver
  setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);
  const CuptiRun run = RunWithCallLog("olddriver", 4);
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.r.err, "");
  EXPECT_TRUE(Called(run.calls, "cuptiSubscribe"));
  EXPECT_TRUE(Called(run.calls, "cuptiActivityEnable"));
  EXPECT_FALSE(Called(run.calls, "cuptiSubscribe_v2"));
  EXPECT_FALSE(Called(run.calls, "cuptiActivityEnable_v2"));
  EXPECT_EQ(Of<schema::OwnedKernelTimeEvent>(run.events).size(), 4u);
  const auto starts = Of<schema::OwnedProcessStartEvent>(run.events);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].cupti_activity_api, "global");
  EXPECT_EQ(starts[0].cuda_driver_version, 13020);
}

// The driver reports CUDA 13.3 but cuptiSubscribe_v2 refuses multiple subscribers, with either
// error the issue names: the library falls back to the unversioned family (cuptiSubscribe, then
// the unversioned activity calls) and records as before, rather than turning itself off.
TEST_F(Injection, ARefusedMultiSubscriberSubscriptionFallsBackToTheUnversionedApi) {
  for (const char* refusal : {"refuse", "not-supported"}) {
    SCOPED_TRACE(refusal);
    UseFakes();
    setenv("FAKE_CUPTI_VERSION", "130300", 1);
    setenv("FAKE_CUDA_DRIVER_VERSION", "13030", 1);
    setenv("FAKE_CUPTI_MULTI_SUBSCRIBER", refusal, 1);
    setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);
    const CuptiRun run = RunWithCallLog(std::string("refused-") + refusal, 3);
    ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
    EXPECT_EQ(run.r.err, "");
    const auto at = [&](const std::string& name) {
      return std::find(run.calls.begin(), run.calls.end(), name) - run.calls.begin();
    };
    ASSERT_TRUE(Called(run.calls, "cuptiSubscribe_v2"));
    ASSERT_TRUE(Called(run.calls, "cuptiSubscribe"));
    EXPECT_LT(at("cuptiSubscribe_v2"), at("cuptiSubscribe"));
    EXPECT_TRUE(Called(run.calls, "cuptiActivityRegisterCallbacks"));
    EXPECT_TRUE(Called(run.calls, "cuptiActivityEnable"));
    EXPECT_FALSE(Called(run.calls, "cuptiActivityRegisterCallbacks_v2"));
    EXPECT_FALSE(Called(run.calls, "cuptiActivityEnable_v2"));
    EXPECT_EQ(Of<schema::OwnedKernelEvent>(run.events).size(), 3u);
    EXPECT_EQ(Of<schema::OwnedKernelTimeEvent>(run.events).size(), 3u);
    const auto starts = Of<schema::OwnedProcessStartEvent>(run.events);
    ASSERT_EQ(starts.size(), 1u);
    EXPECT_EQ(starts[0].cupti_activity_api, "global");
    unsetenv("FAKE_CUPTI_MULTI_SUBSCRIBER");
  }
}

// Another tool holds kernel activity tracing: launches are recorded, timing is said to be
// unavailable once on stderr and in process_end, every launch counted.
TEST_F(Injection, ActivityHeldByAnotherToolIsReportedAsTimingUnavailable) {
  UseFakes();
  setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);
  setenv("FAKE_CUPTI_ACTIVITY", "held", 1);
  const CuptiRun run = RunWithCallLog("held", 6);
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(CountLines(run.r.err), 1) << run.r.err;
  EXPECT_NE(run.r.err.find("kernel timing unavailable"), std::string::npos) << run.r.err;
  EXPECT_NE(run.r.err.find("another CUPTI tool holds activity tracing"), std::string::npos)
      << run.r.err;
  EXPECT_EQ(Of<schema::OwnedKernelEvent>(run.events).size(), 6u);
  EXPECT_EQ(Of<schema::OwnedKernelTimeEvent>(run.events).size(), 0u);
  const auto ends = Of<schema::OwnedProcessEndEvent>(run.events);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].timing_stopped, 6u);
  EXPECT_EQ(ends[0].timing_stopped_reason, schema::TimingStoppedReason::kUnavailable);
}

// The timing policy (CUFLIGHT_TIMING) through the real library: the collector's events, the CUPTI
// calls (FAKE_CUPTI_CALL_LOG) and each enable or disable of kernel records with the thread that
// made it (FAKE_CUPTI_ACTIVITY_LOG).
struct TimingRun {
  cuflight::testing::ProcessResult r;
  std::vector<schema::OwnedEvent> events;
  std::vector<std::string> calls;
  std::vector<std::string> switches;
};

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::remove(path.c_str());
  return lines;
}

TimingRun RunTimingPolicy(const std::string& name, const std::vector<std::string>& args) {
  TimingRun run;
  const std::string calls = TempSocketPath(name) + ".calls";
  const std::string switches = TempSocketPath(name) + ".switches";
  std::remove(calls.c_str());
  std::remove(switches.c_str());
  setenv("FAKE_CUPTI_CALL_LOG", calls.c_str(), 1);
  setenv("FAKE_CUPTI_ACTIVITY_LOG", switches.c_str(), 1);
  const std::string path = TempSocketPath(name);
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  run.r = RunProcess(CUFLIGHT_FAKE_APP, args);
  unsetenv("FAKE_CUPTI_CALL_LOG");
  unsetenv("FAKE_CUPTI_ACTIVITY_LOG");
  EXPECT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  for (const std::string& line : collector.ExpandedLines()) {
    schema::DecodeResult d = schema::Decode(line);
    EXPECT_TRUE(d.ok()) << d.message;
    if (d.ok()) run.events.push_back(std::move(d.event));
  }
  run.calls = ReadLines(calls);
  run.switches = ReadLines(switches);
  return run;
}

std::set<uint64_t> TimedIds(const std::vector<schema::OwnedEvent>& events) {
  std::set<uint64_t> ids;
  for (const auto& t : Of<schema::OwnedKernelTimeEvent>(events)) ids.insert(t.correlation_id);
  return ids;
}

std::string ConfigTiming(const std::vector<schema::OwnedEvent>& events) {
  for (const auto& start : Of<schema::OwnedProcessStartEvent>(events)) {
    for (const auto& [key, value] : start.config) {
      if (key == "timing") return value;
    }
  }
  return "";
}

// A program whose kernel configuration changes twice (grids 100, 200, 300, 150 ms each, one launch
// every ~1 ms), under CUFLIGHT_TIMING=sampled with 30 ms windows and a periodic window once a day
// (none in the run). Kernels end 1 ms after the first launch (FAKE_CUPTI_TIMING=...,1): every
// flush hands their records over.
class SampledTiming : public Injection {
 protected:
  void SetUp() override {
    Injection::SetUp();
    UseFakes();
    setenv("CUFLIGHT_TIMING", "sampled", 1);
    setenv("CUFLIGHT_TIMING_WINDOW_MS", "30", 1);
    setenv("CUFLIGHT_TIMING_PERIOD_MS", "86400000", 1);
    setenv("FAKE_CUPTI_TIMING", "0,0,0,1", 1);
  }
  static std::vector<std::string> Phases() {
    return {CUFLIGHT_INJECT_SO, "0", "phases", "150", "100", "200", "300"};
  }
};

// Windows open at start and for each configuration not yet timed; every kernel event says whether
// it was made in one, and exactly those get a kernel_time; every configuration is timed; the
// counters in process_end agree with the events; every enable and disable of kernel records is
// made by a thread of the library, outside any callback, one at a time.
TEST_F(SampledTiming, EveryNewConfigurationIsTimedAndOnlyLaunchesInAWindowAre) {
  const TimingRun run = RunTimingPolicy("sampled", Phases());
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.r.err, "");
  EXPECT_EQ(ConfigTiming(run.events), "sampled");
  const auto kernels = Of<schema::OwnedKernelEvent>(run.events);
  ASSERT_GT(kernels.size(), 100u);  // up to ~450 (one every ~1 ms; fewer on a loaded machine)
  std::set<uint64_t> in_window;
  std::map<uint32_t, int> timed_by_grid;
  size_t outside = 0;
  for (const auto& k : kernels) {
    ASSERT_TRUE(k.timing_window.has_value()) << k.correlation_id;
    if (*k.timing_window) {
      in_window.insert(k.correlation_id);
      ++timed_by_grid[k.grid.x];
    } else {
      ++outside;
    }
  }
  EXPECT_EQ(TimedIds(run.events), in_window);
  // Each of the three configurations got durations, and most launches were not timed.
  EXPECT_GT(timed_by_grid[100], 0);
  EXPECT_GT(timed_by_grid[200], 0);
  EXPECT_GT(timed_by_grid[300], 0);
  EXPECT_GT(outside, in_window.size());
  const auto ends = Of<schema::OwnedProcessEndEvent>(run.events);
  ASSERT_EQ(ends.size(), 1u);
  const schema::OwnedProcessEndEvent& end = ends[0];
  EXPECT_EQ(end.timing_policy, schema::TimingPolicy::kSampled);
  EXPECT_EQ(end.launches_in_window, in_window.size());
  EXPECT_EQ(end.timing_stopped, 0u);
  // The start's window and one for each of grids 200 and 300 at least (grid 100's first launches
  // may fall before the start's window opens, and open one more).
  EXPECT_GE(end.timing_windows, 3u);
  EXPECT_LE(end.timing_windows, 4u);
  // Each window stays open 30 ms, closed within a sender step (10 ms idle wait) after.
  EXPECT_GE(end.timing_window_ns, end.timing_windows * 30'000'000);
  EXPECT_LE(end.timing_window_ns, end.timing_windows * 100'000'000);
  // One enable per window, each closed but perhaps the last; all off the application's threads.
  size_t enables = 0;
  size_t disables = 0;
  for (const std::string& line : run.switches) {
    EXPECT_NE(line.find("app=0 callback=0 overlap=0"), std::string::npos) << line;
    enables += line.starts_with("enable");
    disables += line.starts_with("disable");
  }
  EXPECT_EQ(enables, end.timing_windows);
  EXPECT_GE(disables + 1, enables);
  EXPECT_LE(disables, enables);
}

// CUFLIGHT_TIMING_NEW_CONFIGS=0: only the start's window (and the periodic ones, none here); the
// configurations that come later are never timed, and their kernel events say so.
TEST_F(SampledTiming, WithoutNewConfigurationWindowsLaterConfigurationsAreNotTimed) {
  setenv("CUFLIGHT_TIMING_NEW_CONFIGS", "0", 1);
  const TimingRun run = RunTimingPolicy("sampled_nonew", Phases());
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  std::set<uint64_t> in_window;
  for (const auto& k : Of<schema::OwnedKernelEvent>(run.events)) {
    ASSERT_TRUE(k.timing_window.has_value());
    if (k.grid.x != 100) {
      EXPECT_FALSE(*k.timing_window) << k.grid.x;
    }
    if (*k.timing_window) in_window.insert(k.correlation_id);
  }
  EXPECT_EQ(TimedIds(run.events), in_window);
  const auto ends = Of<schema::OwnedProcessEndEvent>(run.events);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].timing_windows, 1u);
  EXPECT_EQ(ends[0].launches_in_window, in_window.size());
}

// CUPTI before 13.0 Update 1 (API version 130000) may deadlock disabling kernel records (the fake
// then does): sampled falls back to all with one line, process_start says all, every launch is
// timed and kernel records are never disabled.
TEST_F(SampledTiming, BeforeCupti13_0Update1SampledFallsBackToAll) {
  setenv("FAKE_CUPTI_VERSION", "130000", 1);
  setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);  // records complete at the exit's forced flush
  const TimingRun run = RunTimingPolicy("sampled_old", {CUFLIGHT_INJECT_SO, "6"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(CountLines(run.r.err), 1) << run.r.err;
  EXPECT_NE(run.r.err.find("API version 130000"), std::string::npos) << run.r.err;
  EXPECT_NE(run.r.err.find("CUFLIGHT_TIMING=sampled falls back to all"), std::string::npos)
      << run.r.err;
  EXPECT_EQ(ConfigTiming(run.events), "all");
  for (const auto& k : Of<schema::OwnedKernelEvent>(run.events)) {
    EXPECT_FALSE(k.timing_window.has_value());
  }
  EXPECT_EQ(TimedIds(run.events), (std::set<uint64_t>{1, 2, 3, 4, 5, 6}));
  const auto ends = Of<schema::OwnedProcessEndEvent>(run.events);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].timing_policy, schema::TimingPolicy::kAll);
  EXPECT_EQ(ends[0].timing_windows, 0u);
  for (const std::string& line : run.switches) EXPECT_FALSE(line.starts_with("disable")) << line;
}

// Stalls under the sampled timing policy, end to end: 300 ms threshold, no window for new
// configurations and a periodic one once a day, so that the only windows are the start's and
// those the stall tracker asks for. The fake's kernels never end (FAKE_CUPTI_TIMING=0,0,0,<10
// min>: a default flush hands over nothing, a forced one every record incomplete, never again).
// The application (fake_app "late") launches one kernel every 10 ms on the NULL stream (the fake's
// stream 7) from `delay` ms on, for `for_ms`, then synchronizes or sleeps.
class SampledStall : public Injection {
 protected:
  void SetUp() override {
    Injection::SetUp();
    UseFakes();
    setenv("CUFLIGHT_TIMING", "sampled", 1);
    setenv("CUFLIGHT_TIMING_WINDOW_MS", "30", 1);
    setenv("CUFLIGHT_TIMING_PERIOD_MS", "86400000", 1);
    setenv("CUFLIGHT_TIMING_NEW_CONFIGS", "0", 1);
    setenv("CUFLIGHT_STALL_MS", "300", 1);
    setenv("FAKE_CUPTI_TIMING", "0,0,0,600000", 1);
  }
  struct Run {
    cuflight::testing::ProcessResult r;
    StallRun stalls;
    std::vector<schema::OwnedKernelEvent> kernels;
    int late = 0;  // launches the application fired
  };
  static Run Late(const std::string& name, const std::vector<std::string>& late_args) {
    Run run;
    const std::string path = TempSocketPath(name);
    StoringCollector collector(path);
    setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
    std::vector<std::string> args = {CUFLIGHT_INJECT_SO, "0", "late"};
    args.insert(args.end(), late_args.begin(), late_args.end());
    run.r = RunProcess(CUFLIGHT_FAKE_APP, args);
    EXPECT_EQ(run.r.exit_code, 0) << run.r.err;
    std::sscanf(run.r.out.c_str() + std::min(run.r.out.size(), run.r.out.find("late=") + 5),
                "%d", &run.late);
    ReadStallRun(collector, &run.stalls);
    for (const std::string& line : collector.ExpandedLines()) {
      schema::DecodeResult d = schema::Decode(line);
      if (auto* k = d.ok() ? std::get_if<schema::OwnedKernelEvent>(&d.event) : nullptr) {
        run.kernels.push_back(std::move(*k));
      }
    }
    return run;
  }
  static std::vector<uint64_t> Ids(const schema::OwnedStallStream& st) {
    std::vector<uint64_t> ids;
    for (const schema::OwnedStallLaunch& l : st.launches) ids.push_back(l.correlation_id);
    return ids;
  }
};

// Launches made 200-300 ms after start, when the start's 30 ms window has closed, then a
// cuStreamSynchronize of their stream that waits 1.5 s: no record can come for them, and the
// stall is reported from the call (evidence sync_call), listing the last 4 launches (which of
// them runs is not known: launches_from recent). The call covers the stream, so no window is
// asked for it: the start's is the only one.
TEST_F(SampledStall, AHangOutsideAnyWindowIsReportedFromTheSynchronizeWithTheLastLaunches) {
  const Run run = Late("sampled-out", {"200", "10", "100", "sync", "1500"});
  ASSERT_GE(run.late, 4) << run.r.out;
  ASSERT_EQ(run.kernels.size(), static_cast<size_t>(run.late));
  for (const auto& k : run.kernels) EXPECT_EQ(k.timing_window, std::optional<bool>(false));
  EXPECT_TRUE(run.stalls.timed.empty());
  ASSERT_GE(run.stalls.stalls.size(), 2u);
  const schema::OwnedStallEvent& s = run.stalls.stalls[0];
  EXPECT_EQ(s.state, schema::StallState::kStalled);
  ASSERT_EQ(s.streams.size(), 1u);
  const schema::OwnedStallStream& st = s.streams[0];
  EXPECT_EQ(st.stream, 7u);
  EXPECT_EQ(st.evidence, schema::kStallEvidenceSyncCall);
  EXPECT_EQ(st.sync_api, "cuStreamSynchronize");
  EXPECT_EQ(st.launches_from, schema::kStallLaunchesFromRecent);
  EXPECT_EQ(st.unfinished, run.late);
  const auto n = static_cast<uint64_t>(run.late);  // ids 1..n: no launch before them
  EXPECT_EQ(Ids(st), (std::vector<uint64_t>{n - 3, n - 2, n - 1, n}));
  EXPECT_EQ(run.stalls.stalls.back().state, schema::StallState::kResolved);
  ASSERT_TRUE(run.stalls.end.has_value());
  EXPECT_EQ(run.stalls.end->timing_windows, 1u);
  EXPECT_EQ(run.stalls.end->launches_in_window, 0u);
}

// Launches made 100-200 ms after start inside the start's window (5 s here), then 1.5 s asleep:
// each launch is pending from its record. None finishes; the forced flush that confirms the stall
// hands every record over incomplete, and the stall is reported from the records (evidence and
// launches_from timing_records), naming the oldest pending launches, 1 to 4. Those records never
// come again: every launch is counted in timing_dropped.
TEST_F(SampledStall, AHangInsideAWindowIsReportedFromItsRecordsNamingThePendingLaunches) {
  setenv("CUFLIGHT_TIMING_WINDOW_MS", "5000", 1);
  const Run run = Late("sampled-in", {"100", "10", "100", "sleep", "1500"});
  ASSERT_GE(run.late, 4) << run.r.out;
  ASSERT_EQ(run.kernels.size(), static_cast<size_t>(run.late));
  for (const auto& k : run.kernels) EXPECT_EQ(k.timing_window, std::optional<bool>(true));
  EXPECT_TRUE(run.stalls.timed.empty());
  ASSERT_FALSE(run.stalls.stalls.empty());
  const schema::OwnedStallEvent& s = run.stalls.stalls[0];
  EXPECT_EQ(s.state, schema::StallState::kStalled);
  ASSERT_EQ(s.streams.size(), 1u);
  const schema::OwnedStallStream& st = s.streams[0];
  EXPECT_EQ(st.stream, 7u);
  EXPECT_EQ(st.evidence, schema::kStallEvidenceTimingRecords);
  EXPECT_EQ(st.launches_from, schema::kStallLaunchesFromTimingRecords);
  EXPECT_EQ(st.unfinished, run.late);
  EXPECT_EQ(Ids(st), (std::vector<uint64_t>{1, 2, 3, 4}));
  ASSERT_TRUE(run.stalls.end.has_value());
  EXPECT_EQ(run.stalls.end->launches_in_window, static_cast<uint64_t>(run.late));
  EXPECT_EQ(run.stalls.end->timing_dropped, static_cast<uint64_t>(run.late));
}

// A stream that nobody synchronizes and that makes no progress, its launches all made outside
// windows (one every 10 ms from 200 ms on, for 1.4 s): nothing could show it stalled. Once its
// first launch has waited the threshold (at about 500 ms) the stall tracker asks for a timing
// window (timing_windows.h, point 6): the launches made in it get records, never finish, and
// after another threshold the stall is confirmed and reported from the records (evidence
// timing_records), listing the stream's last launches (launches_from recent: an untimed launch
// before them may be the one that runs). Two windows in all: the start's and the stall's.
TEST_F(SampledStall, AStreamOfUntimedLaunchesThatStopsIsReportedThroughAWindowItAsksFor) {
  const Run run = Late("sampled-ask", {"200", "10", "1400"});
  ASSERT_GE(run.late, 40) << run.r.out;
  size_t in_window = 0;
  for (const auto& k : run.kernels) in_window += k.timing_window == std::optional<bool>(true);
  EXPECT_GT(in_window, 0u);
  EXPECT_LT(in_window, run.kernels.size());
  ASSERT_FALSE(run.stalls.stalls.empty());
  const schema::OwnedStallEvent& s = run.stalls.stalls[0];
  EXPECT_EQ(s.state, schema::StallState::kStalled);
  ASSERT_EQ(s.streams.size(), 1u);
  const schema::OwnedStallStream& st = s.streams[0];
  EXPECT_EQ(st.stream, 7u);
  EXPECT_EQ(st.evidence, schema::kStallEvidenceTimingRecords);
  EXPECT_EQ(st.launches_from, schema::kStallLaunchesFromRecent);
  // The last 4 launches handled before the event: consecutive ids.
  const std::vector<uint64_t> ids = Ids(st);
  ASSERT_EQ(ids.size(), 4u);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(ids[i], ids[i - 1] + 1);
  // Not before two thresholds: one to ask for the window, one for its launches to wait.
  EXPECT_GE(st.waiting_ms, 300);
  ASSERT_TRUE(run.stalls.end.has_value());
  EXPECT_EQ(run.stalls.end->timing_windows, 2u);
  EXPECT_EQ(run.stalls.end->launches_in_window, in_window);
}

// all (the default): every launch timed, no timing_window member, kernel records enabled once
// and never disabled.
TEST_F(Injection, TimingAllTimesEveryLaunchWithoutWindows) {
  UseFakes();
  setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);  // records complete at the exit's forced flush
  const TimingRun run = RunTimingPolicy("timing_all", {CUFLIGHT_INJECT_SO, "5"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.r.err, "");
  EXPECT_EQ(ConfigTiming(run.events), "all");
  for (const auto& k : Of<schema::OwnedKernelEvent>(run.events)) {
    EXPECT_FALSE(k.timing_window.has_value());
  }
  EXPECT_EQ(TimedIds(run.events), (std::set<uint64_t>{1, 2, 3, 4, 5}));
  const auto ends = Of<schema::OwnedProcessEndEvent>(run.events);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].timing_policy, schema::TimingPolicy::kAll);
  EXPECT_EQ(ends[0].launches_in_window, 0u);
  EXPECT_EQ(run.switches, (std::vector<std::string>{"enable app=0 callback=0 overlap=0"}));
}

// off: no CUPTI activity call at all, no kernel_time, and the policy said.
TEST_F(Injection, TimingOffMakesNoActivityCall) {
  UseFakes();
  setenv("CUFLIGHT_TIMING", "off", 1);
  setenv("FAKE_CUPTI_TIMING", "0,0,0,1", 1);
  const TimingRun run = RunTimingPolicy("timing_off", {CUFLIGHT_INJECT_SO, "5"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.r.err, "");
  EXPECT_EQ(ConfigTiming(run.events), "off");
  for (const std::string& call : run.calls) {
    EXPECT_FALSE(call.starts_with("cuptiActivity")) << call;
  }
  EXPECT_TRUE(run.switches.empty());
  EXPECT_EQ(Of<schema::OwnedKernelEvent>(run.events).size(), 5u);
  for (const auto& k : Of<schema::OwnedKernelEvent>(run.events)) {
    EXPECT_FALSE(k.timing_window.has_value());
  }
  EXPECT_TRUE(TimedIds(run.events).empty());
  const auto ends = Of<schema::OwnedProcessEndEvent>(run.events);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].timing_policy, schema::TimingPolicy::kOff);
}

// Splits the collector's lines by the pid in their header.
std::map<int, std::vector<schema::OwnedEvent>> ByPid(const std::vector<std::string>& lines) {
  std::map<int, std::vector<schema::OwnedEvent>> out;
  for (const std::string& line : lines) {
    schema::DecodeResult d = schema::Decode(line);
    EXPECT_TRUE(d.ok()) << d.message;
    if (d.ok()) out[d.header->pid].push_back(std::move(d.event));
  }
  return out;
}

size_t ProcessEnds(const std::vector<std::string>& lines) {
  return static_cast<size_t>(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("\"process_end\"") != std::string::npos;
  }));
}

TEST_F(Injection, AForkedChildThatLaunchesGetsItsOwnStream) {
  if (CUFLIGHT_THREAD_SANITIZED) {
    // ThreadSanitizer cannot run new threads in the child of a multi-threaded process
    // ("dup thread with used id"); the release and asan builds run this test.
    GTEST_SKIP() << "ThreadSanitizer does not support threads after a multi-threaded fork";
  }
  UseFakes();
  const std::string path = TempSocketPath("fork");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "4", "fork"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // LeakSanitizer notes the parent's threads missing in the child on stderr; nothing of ours.
  if (!CUFLIGHT_SANITIZED) {
    EXPECT_EQ(r.err, "");
  }
  ASSERT_TRUE(
      collector.WaitFor([](const std::vector<std::string>& l) { return ProcessEnds(l) == 2; }));
  const auto streams = ByPid(collector.ExpandedLines());
  ASSERT_EQ(streams.size(), 2u);
  for (const auto& [pid, events] : streams) {
    ASSERT_FALSE(events.empty());
    // Each process: its own process_start (seq 0, its own pid), its 4 kernels, its process_end.
    const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&events.front());
    ASSERT_NE(start, nullptr);
    EXPECT_EQ(start->header.seq, 0u);
    EXPECT_EQ(std::count_if(events.begin(), events.end(),
                            [](const schema::OwnedEvent& e) {
                              return std::holds_alternative<schema::OwnedKernelEvent>(e);
                            }),
              4);
    EXPECT_TRUE(std::holds_alternative<schema::OwnedProcessEndEvent>(events.back()));
  }
}

// fork() while other threads are inside the library, on its slow paths too (a context destroyed
// and relaunched in a loop: its function and device tables' locks): no child may find a lock
// held by a thread it does not have. Each child launches, so each is a stream of its own.
TEST_F(Injection, ManyForksWhileThreadsLaunchNeverHangAChild) {
  if (CUFLIGHT_THREAD_SANITIZED) {
    GTEST_SKIP() << "ThreadSanitizer does not support threads after a multi-threaded fork";
  }
  constexpr int kForks = 200;
  constexpr int kChildLaunches = 3;
  UseFakes();
  const std::string path = TempSocketPath("forkstorm");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const char* const saved_asan = getenv("ASAN_OPTIONS");
  const std::string saved_asan_options = saved_asan != nullptr ? saved_asan : "";
  if (CUFLIGHT_SANITIZED) {
    // A child forked while the parent's threads allocate inherits memory only their stacks
    // point to; LeakSanitizer, run at the child's exit, reports it as leaked and fails the exit.
    setenv("ASAN_OPTIONS", (saved_asan_options + ":detect_leaks=0").c_str(), 1);
  }
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, std::to_string(kChildLaunches),
                                                "fork-storm", std::to_string(kForks)});
  if (saved_asan != nullptr) {
    setenv("ASAN_OPTIONS", saved_asan_options.c_str(), 1);
  } else {
    unsetenv("ASAN_OPTIONS");
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected =
      "forks=" + std::to_string(kForks) + " ok=" + std::to_string(kForks) + " hung=0\n";
  EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
  // The parent and every child end their streams (sanitized builds are several times slower).
  // A process's exit waits at most 1 s for its sender thread: a sanitized child on a loaded
  // machine may not be done by then, and then says so on stderr. Every stream missing must be
  // one such warning (none in other builds).
  const size_t warned = [&] {
    size_t n = 0;
    for (size_t at = r.err.find("cuflight: warning: exit: "); at != std::string::npos;
         at = r.err.find("cuflight: warning: exit: ", at + 1)) {
      ++n;
    }
    return n;
  }();
  const int may_miss = CUFLIGHT_SANITIZED ? static_cast<int>(warned) : 0;
  collector.WaitFor(
      [may_miss](const std::vector<std::string>& l) {
        return ProcessEnds(l) >= kForks + 1 - may_miss;
      },
      std::chrono::seconds(CUFLIGHT_SANITIZED ? 120 : 20));
  if (may_miss > 0) {  // the warned processes' lines may still come
    collector.WaitFor(
        [](const std::vector<std::string>& l) { return ProcessEnds(l) >= kForks + 1; },
        std::chrono::seconds(5));
  }
  const auto streams = ByPid(collector.ExpandedLines());
  ASSERT_GE(ProcessEnds(collector.Lines()), kForks + 1 - may_miss)
      << ProcessEnds(collector.Lines()) << " process_end events; streams without one:" <<
      [&] {
        std::string d;
        for (const auto& [pid, events] : streams) {
          if (std::holds_alternative<schema::OwnedProcessEndEvent>(events.back())) continue;
          d += " pid " + std::to_string(pid) + " events " + std::to_string(events.size()) +
               " last " + std::string(schema::EventTypeName(schema::TypeOf(events.back())));
        }
        return d;
      }()
      << "\nthe application's stderr:\n"
      << r.err;
  ASSERT_GE(streams.size(), static_cast<size_t>(kForks + 1 - may_miss));
  int children = 0;
  int not_ended = 0;  // streams that end with the collector's process_lost
  for (const auto& [pid, events] : streams) {
    ASSERT_FALSE(events.empty());
    const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&events.front());
    ASSERT_NE(start, nullptr) << pid;
    EXPECT_EQ(start->header.seq, 0u) << pid;
    if (!std::holds_alternative<schema::OwnedProcessEndEvent>(events.back())) ++not_ended;
    const auto kernels = std::count_if(events.begin(), events.end(), [](const auto& e) {
      return std::holds_alternative<schema::OwnedKernelEvent>(e);
    });
    if (kernels == kChildLaunches) ++children;  // the parent's threads launch far more
  }
  EXPECT_GE(children, kForks - may_miss);
  // Each process without its own end, missing or ended by the collector, was warned of.
  EXPECT_LE(static_cast<int>(kForks + 1 - streams.size()) + not_ended, may_miss) << r.err;
}

// A signal sent to the process goes to a thread of the application that takes it, never to the
// injector's threads: the application blocks SIGUSR1 in its threads after its first launches
// (the sender thread already runs), sends it, and takes it with sigwait() in a thread it starts
// then. A sender thread that left SIGUSR1 unblocked would be the only thread to take it, and its
// default action would kill the application (3 of 3 runs, before).
TEST_F(Injection, ASignalToTheProcessReachesTheApplicationsSigwaitThread) {
  UseFakes();
  const std::string path = TempSocketPath("sigwait");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "4", "sigwait"});
  ASSERT_EQ(r.exit_code, 0) << "killed by signal " << r.exit_code - 128 << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("sigwait=" + std::to_string(SIGUSR1)), std::string::npos) << r.out;
  ASSERT_TRUE(
      collector.WaitFor([](const std::vector<std::string>& l) { return ProcessEnds(l) == 1; }));
}

TEST_F(Injection, AForkedChildThatOnlyExecsIsNotDisturbed) {
  UseFakes();
  const std::string path = TempSocketPath("forkexec");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "4", "forkexec"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ASSERT_TRUE(
      collector.WaitFor([](const std::vector<std::string>& l) { return ProcessEnds(l) == 1; }));
  const auto streams = ByPid(collector.ExpandedLines());
  EXPECT_EQ(streams.size(), 1u);  // only the parent
}

}  // namespace
}  // namespace cuflight::inject::testing

namespace cuflight::inject::testing {
namespace {

// What a crashed fake_app left at the collector.
struct CrashOutcome {
  int kernels = 0;
  std::vector<schema::OwnedProcessCrashEvent> crashes;
  bool crash_is_last = false;  // of the lines the process sent
  bool seq_without_gaps = true;
  // The collector's own process_lost, after everything the process sent (a crashed process
  // ends its connection without process_end).
  bool lost_after_crash = false;
};

// `lines`: one process's stored lines, one sequence: its descriptions take seqs of their own, and
// its launches are expanded into kernel events as every reader does (docs/protocol.md, "Interned
// configurations").
CrashOutcome ReadCrashOutcome(const std::vector<std::string>& lines) {
  CrashOutcome out;
  uint64_t expected_seq = 0;
  schema::ConfigExpander configs;
  for (const std::string& line : lines) {
    schema::DecodeResult d = schema::Decode(line);
    EXPECT_TRUE(d.ok()) << d.message;
    if (!d.ok()) continue;
    const schema::ExpandVerdict verdict = configs.Feed(&d.event);
    EXPECT_FALSE(schema::Refused(verdict)) << schema::ExpandVerdictName(verdict) << ": " << line;
    if (verdict == schema::ExpandVerdict::kDescribed) {
      if (d.header->seq != expected_seq++) out.seq_without_gaps = false;
      out.lost_after_crash = false;
      out.crash_is_last = false;
      continue;
    }
    if (std::holds_alternative<schema::OwnedProcessLostEvent>(d.event)) {
      out.lost_after_crash = out.crash_is_last;
      continue;
    }
    out.lost_after_crash = false;
    if (d.header->seq != expected_seq++) out.seq_without_gaps = false;
    if (std::holds_alternative<schema::OwnedKernelEvent>(d.event)) ++out.kernels;
    out.crash_is_last = false;
    if (auto* c = std::get_if<schema::OwnedProcessCrashEvent>(&d.event)) {
      out.crashes.push_back(*c);
      out.crash_is_last = true;
    }
  }
  return out;
}

// Waits for the collector's process_lost of a process that ended without process_end.
bool WaitForLost(const StoringCollector& collector) {
  return collector.WaitFor([](const std::vector<std::string>& lines) {
    return std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
      return l.find("\"process_lost\"") != std::string::npos;
    });
  });
}

bool HasCrash(const std::vector<std::string>& lines) {
  return std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("\"process_crash\"") != std::string::npos;
  });
}

class CrashInjection : public Injection {
 protected:
  void SetUp() override {
    Injection::SetUp();
    unsetenv("CUFLIGHT_CRASH_HANDLER");
    UseFakes();
  }
};

// The sanitizer runtimes install their own handlers of the fatal signals, which report and exit
// instead of letting the default action run: tests of those signals skip under them.
#define CUFLIGHT_SKIP_FATAL_SIGNALS_UNDER_SANITIZERS()                                \
  if (CUFLIGHT_SANITIZED) {                                                           \
    GTEST_SKIP() << "the sanitizer runtimes install their own fatal-signal handlers"; \
  }

TEST_F(CrashInjection, EachFatalSignalSendsThePendingKernelsAndProcessCrashThenDiesAsBefore) {
  CUFLIGHT_SKIP_FATAL_SIGNALS_UNDER_SANITIZERS();
  struct Case {
    const char* mode;
    int signal;
    const char* name;
  };
  for (const Case& c : {Case{"segv", SIGSEGV, "SIGSEGV"}, Case{"bus", SIGBUS, "SIGBUS"},
                        Case{"fpe", SIGFPE, "SIGFPE"}, Case{"ill", SIGILL, "SIGILL"},
                        Case{"abrt", SIGABRT, "SIGABRT"}}) {
    SCOPED_TRACE(c.mode);
    const std::string path = TempSocketPath(std::string("crash-") + c.mode);
    StoringCollector collector(path);
    setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
    const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "30", c.mode});
    // The signal's default action still ends the process: same status as without cuflight.
    EXPECT_EQ(r.exit_code, 128 + c.signal) << r.err;
    EXPECT_EQ(r.err, "");
    ASSERT_TRUE(collector.WaitFor(HasCrash));
    const CrashOutcome o = ReadCrashOutcome(collector.Lines());
    EXPECT_EQ(o.kernels, 30);
    ASSERT_EQ(o.crashes.size(), 1u);
    EXPECT_TRUE(o.crash_is_last);
    EXPECT_TRUE(o.seq_without_gaps);
    EXPECT_TRUE(WaitForLost(collector));
    EXPECT_TRUE(ReadCrashOutcome(collector.Lines()).lost_after_crash);
    const schema::OwnedProcessCrashEvent& crash = o.crashes[0];
    EXPECT_EQ(crash.signal, c.signal);
    EXPECT_EQ(crash.signal_name, c.name);
    EXPECT_FALSE(crash.app_handler);
    EXPECT_EQ(crash.launches, 30u);
    EXPECT_EQ(crash.dropped, 0u);
    EXPECT_GT(crash.tid, 0);
    if (c.signal == SIGABRT) {
      EXPECT_LE(crash.code, 0);  // sent by abort(), not by a fault
    } else {
      EXPECT_GT(crash.code, 0);  // raised by the kernel for the faulting instruction
    }
    if (c.signal == SIGSEGV) {
      EXPECT_EQ(crash.addr, 0u);  // the null store
    }
  }
}

// The application's handler runs first and ends the process itself (_exit): cuflight never gets
// the signal back, so nothing is reported (crash_handler.h); the app's own exit status stands.
TEST_F(CrashInjection, AnEarlierAppHandlerRunsFirstAndItsOwnExitIsNotReported) {
  CUFLIGHT_SKIP_FATAL_SIGNALS_UNDER_SANITIZERS();
  const std::string path = TempSocketPath("crash-app-before");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", "handler-before-segv"});
  EXPECT_EQ(r.exit_code, 42) << r.err;
  EXPECT_NE(r.out.find("app handler"), std::string::npos);
  EXPECT_FALSE(HasCrash(collector.Lines()));
}

long long NumberAfter(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + "=");
  if (at == std::string::npos) return -1;
  return std::atoll(text.c_str() + at + key.size() + 1);
}

// JVMs, Mono and garbage collectors take SIGSEGV as part of their work and resume: a handler
// that fixes the fault (unprotects the page) or longjmps out is called at once, nothing is
// reported, and the process goes on to its normal end.
TEST_F(CrashInjection, AFaultTheAppsHandlerResumesFromIsNeitherReportedNorSlowed) {
  CUFLIGHT_SKIP_FATAL_SIGNALS_UNDER_SANITIZERS();
  for (const char* mode : {"handler-resume-segv", "handler-longjmp-segv"}) {
    SCOPED_TRACE(mode);
    const std::string path = TempSocketPath(std::string("crash-") + mode);
    StoringCollector collector(path);
    setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
    const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", mode});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(NumberAfter(r.out, "faults"), 20) << r.out;
    // 20 faults and handler calls take microseconds each; one report alone would wait for the
    // collector's acknowledgement. Generous for a loaded machine.
    EXPECT_LT(NumberAfter(r.out, "fault_ns"), 200'000'000) << r.out;
    ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
      return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
    }));
    EXPECT_FALSE(HasCrash(collector.Lines()));
    EXPECT_EQ(ReadCrashOutcome(collector.Lines()).kernels, 5);
  }
}

// A handler that gives up (restores the default and returns, has SA_RESETHAND, re-raises the
// signal, or aborts), or a SIGABRT handler that returns into abort(): the process ends, and the
// end is reported once, after the app's handler.
TEST_F(CrashInjection, AFaultTheAppsHandlerGivesUpOnIsReportedOnceAndEndsAsBefore) {
  CUFLIGHT_SKIP_FATAL_SIGNALS_UNDER_SANITIZERS();
  struct Case {
    const char* mode;
    int signal;  // what ends the process, as without cuflight
    // The SIGSEGV handler gave the signal back (app_handler); abort() from it raises SIGABRT,
    // for which the app has no handler.
    bool app_handler;
  };
  for (const Case& c :
       {Case{"handler-giveup-segv", SIGSEGV, true}, Case{"handler-resethand-segv", SIGSEGV, true},
        Case{"handler-reraise-segv", SIGSEGV, true}, Case{"handler-abort-segv", SIGABRT, false},
        Case{"handler-returns-abrt", SIGABRT, true}}) {
    SCOPED_TRACE(c.mode);
    const std::string path = TempSocketPath(std::string("crash-") + c.mode);
    StoringCollector collector(path);
    setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
    const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", c.mode});
    EXPECT_EQ(r.exit_code, 128 + c.signal) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("app handler"), std::string::npos);
    ASSERT_TRUE(collector.WaitFor(HasCrash));
    const CrashOutcome o = ReadCrashOutcome(collector.Lines());
    ASSERT_EQ(o.crashes.size(), 1u);
    EXPECT_TRUE(o.crash_is_last);
    EXPECT_EQ(o.crashes[0].signal, c.signal);
    EXPECT_EQ(o.crashes[0].app_handler, c.app_handler);
    EXPECT_EQ(o.kernels, 5);
  }
}

TEST_F(CrashInjection, AHandlerTheAppInstallsLaterReplacesCuflights) {
  CUFLIGHT_SKIP_FATAL_SIGNALS_UNDER_SANITIZERS();
  const std::string path = TempSocketPath("crash-app-after");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", "handler-after-segv"});
  EXPECT_EQ(r.exit_code, 43) << r.err;
  EXPECT_NE(r.out.find("app handler"), std::string::npos);
  EXPECT_FALSE(HasCrash(collector.Lines()));
}

TEST_F(CrashInjection, TheCrashHandlerCanBeTurnedOff) {
  CUFLIGHT_SKIP_FATAL_SIGNALS_UNDER_SANITIZERS();
  const std::string path = TempSocketPath("crash-off");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("CUFLIGHT_CRASH_HANDLER", "0", 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", "segv"});
  unsetenv("CUFLIGHT_CRASH_HANDLER");
  EXPECT_EQ(r.exit_code, 128 + SIGSEGV);
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(HasCrash(collector.Lines()));
}

TEST_F(CrashInjection, AStickyCudaErrorIsDeliveredBeforeTheFailingCallReturns) {
  // The process is SIGKILLed right after the failed call returns: whatever the collector has,
  // it had before the call returned.
  const std::string path = TempSocketPath("sticky");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "12", "sticky-kill"});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_NE(r.out.find("failed=1"), std::string::npos);
  int kernels = 0;
  std::vector<schema::OwnedApiErrorEvent> errors;
  for (const std::string& line : collector.ExpandedLines()) {
    schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    if (std::holds_alternative<schema::OwnedKernelEvent>(d.event)) ++kernels;
    if (auto* e = std::get_if<schema::OwnedApiErrorEvent>(&d.event)) errors.push_back(*e);
  }
  EXPECT_EQ(kernels, 12);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].api, "cuFakeCall");  // the fake CUPTI's callback name
  EXPECT_EQ(errors[0].code, 700);
  EXPECT_EQ(errors[0].error_name, "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ(errors[0].message, "an illegal memory access was encountered");
  EXPECT_EQ(errors[0].context, 1u);  // the fake libcupti's cuptiGetContextId of the context
  // The default history is the last 8 launches: fake_cupti_launch numbers them 1..12.
  EXPECT_EQ(errors[0].last_correlation_ids, (std::vector<uint64_t>{5, 6, 7, 8, 9, 10, 11, 12}));
}

TEST_F(CrashInjection, SigkillCannotBeCaughtAndLeavesNoCrashEvent) {
  const std::string path = TempSocketPath("crash-kill");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", "kill"});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_FALSE(HasCrash(collector.Lines()));
}

}  // namespace
}  // namespace cuflight::inject::testing

namespace cuflight::inject::testing {
namespace {

using Clock = std::chrono::steady_clock;

// fake_app under timeout(1): an injector that hangs shows as exit 137 instead of a hung test.
struct TimedRun {
  cuflight::testing::ProcessResult r;
  Clock::duration wall{};
};

TimedRun RunBounded(const std::vector<std::string>& args) {
  std::vector<std::string> full = {"-s", "KILL", "20", CUFLIGHT_FAKE_APP, CUFLIGHT_INJECT_SO};
  full.insert(full.end(), args.begin(), args.end());
  const Clock::time_point start = Clock::now();
  TimedRun t;
  t.r = RunProcess("/usr/bin/timeout", full);
  t.wall = Clock::now() - start;
  return t;
}

long long ValueAfter(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + "=");
  if (at == std::string::npos) return -1;
  return std::atoll(text.c_str() + at + key.size() + 1);
}

class BoundedInjection : public Injection {
 protected:
  void SetUp() override {
    Injection::SetUp();
    UseFakes();
    unsetenv("FAKE_CUPTI_FLUSH");
    unsetenv("FAKE_CUPTI_CALL_LOG");
    unsetenv("FAKE_CUPTI_SUBSCRIBE_DELAY_MS");
    unsetenv("CUFLIGHT_ON_FULL");
    setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);  // timing on: the sender flushes activity buffers
  }
  void TearDown() override {
    unsetenv("FAKE_CUPTI_FLUSH");
    unsetenv("FAKE_CUPTI_CALL_LOG");
    unsetenv("FAKE_CUPTI_SUBSCRIBE_DELAY_MS");
    unsetenv("FAKE_CUPTI_TIMING");
    unsetenv("CUFLIGHT_ON_FULL");
    unsetenv("CUFLIGHT_RING_SIZE");
  }
};

// The subscription takes 200 ms (as inside cuInit): the sender thread, which flushes CUPTI's
// activity buffers from its first step, makes no CUPTI call before the set-up's last one.
TEST_F(BoundedInjection, TheSenderCallsNoCuptiBeforeSubscriptionAndActivitySetUpFinished) {
  const std::string log = TempSocketPath("calls") + ".log";
  std::remove(log.c_str());
  setenv("FAKE_CUPTI_CALL_LOG", log.c_str(), 1);
  setenv("FAKE_CUPTI_SUBSCRIBE_DELAY_MS", "200", 1);
  const std::string path = TempSocketPath("order");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const TimedRun t = RunBounded({"3"});
  ASSERT_EQ(t.r.exit_code, 0) << t.r.err;
  std::vector<std::string> calls;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) calls.push_back(line);
  std::remove(log.c_str());
  const auto find = [&](const std::string& name) {
    return std::find(calls.begin(), calls.end(), name) - calls.begin();
  };
  // Either family of calls (the fake CUPTI has cuptiSubscribe_v2, as CUPTI has since 12.6).
  const auto subscribe = std::min(find("cuptiSubscribe"), find("cuptiSubscribe_v2"));
  const auto enable = find("cuptiActivityEnable");  // the set-up's last call (cupti_activity.h)
  const auto first_flush = find("cuptiActivityFlushAll");
  ASSERT_LT(subscribe, static_cast<long>(calls.size()));
  ASSERT_LT(enable, static_cast<long>(calls.size()));
  ASSERT_LT(first_flush, static_cast<long>(calls.size()));  // the exit's forced flush at least
  EXPECT_LT(subscribe, enable);
  EXPECT_GT(first_flush, enable);
  EXPECT_GT(find("cuptiActivityGetNumDroppedRecords"), enable);
}

// The exit's forced flush never returns (a faulted context): the launches already went out, and
// the process ends about 1 s after exit() began, without process_end.
TEST_F(BoundedInjection, ExitEndsWithinTheDeadlineWhenTheForcedFlushHangs) {
  setenv("FAKE_CUPTI_FLUSH", "hang-forced", 1);
  const std::string path = TempSocketPath("exit-hang-forced");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const TimedRun t = RunBounded({"10"});
  EXPECT_EQ(t.r.exit_code, 0) << t.r.err;
  EXPECT_NE(t.r.err.find("did not finish within 1 s"), std::string::npos) << t.r.err;
  // 1 s deadline + process start and end; before: no end at all (timeout's 20 s).
  EXPECT_LT(t.wall, std::chrono::milliseconds(1800));
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    // A launch stored: a launch line (interned, the default) or a whole kernel line.
    return std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
             return l.find("\"type\":\"launch\"") != std::string::npos ||
                    l.find("\"type\":\"kernel\"") != std::string::npos;
           }) == 10;
  }));
  EXPECT_EQ(ProcessEnds(collector.Lines()), 0u);
}

// Every flush hangs: the sender thread is stuck in its first periodic flush; exit still ends
// within the deadline.
TEST_F(BoundedInjection, ExitEndsWithinTheDeadlineWhenTheSenderIsStuckInAFlush) {
  setenv("FAKE_CUPTI_FLUSH", "hang", 1);
  const std::string path = TempSocketPath("exit-hang");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const TimedRun t = RunBounded({"10"});
  EXPECT_EQ(t.r.exit_code, 0) << t.r.err;
  EXPECT_LT(t.wall, std::chrono::milliseconds(1800));
}

// A forced flush that is slow (300 ms) but returns: everything, process_end included, arrives.
TEST_F(BoundedInjection, ASlowForcedFlushStillDeliversEverythingAtExit) {
  setenv("FAKE_CUPTI_FLUSH", "slow:300", 1);
  const std::string path = TempSocketPath("exit-slow");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const TimedRun t = RunBounded({"4"});
  EXPECT_EQ(t.r.exit_code, 0) << t.r.err;
  EXPECT_EQ(t.r.err, "");
  ASSERT_TRUE(
      collector.WaitFor([](const std::vector<std::string>& l) { return ProcessEnds(l) == 1; }));
  int times = 0;
  for (const std::string& line : collector.Lines()) {
    times += line.find("\"type\":\"kernel_time\"") != std::string::npos;
  }
  EXPECT_EQ(times, 4);  // the forced flush hands over the 4 completed kernels
}

// CUFLIGHT_ON_FULL=block with the sender stuck inside a CUPTI flush (it never takes a record):
// the launches wait at most the ring's block stall limit (1 s) in all, the sticky error's
// callback at most the urgent-flush wait (2 s), and exit at most 1 s. Before: the launches
// blocked forever.
TEST_F(BoundedInjection, StickyErrorInBlockModeWithAStuckSenderReturnsWithinTheBound) {
  setenv("FAKE_CUPTI_FLUSH", "hang", 1);
  setenv("CUFLIGHT_ON_FULL", "block", 1);
  setenv("CUFLIGHT_RING_SIZE", "64", 1);
  const std::string path = TempSocketPath("sticky-block");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const TimedRun t = RunBounded({"200", "sticky-exit"});
  EXPECT_EQ(t.r.exit_code, 3) << t.r.out << t.r.err;
  EXPECT_NE(t.r.out.find("fired=200"), std::string::npos) << t.r.out;
  const long long launch_ns = ValueAfter(t.r.out, "launch_ns");
  const long long fail_ns = ValueAfter(t.r.out, "fail_ns");
  EXPECT_GE(launch_ns, 900'000'000LL) << t.r.out;    // the 65th launch waited for the stall limit
  EXPECT_LT(launch_ns, 1'500'000'000LL) << t.r.out;  // once, not once per launch
  EXPECT_LT(fail_ns, 2'500'000'000LL) << t.r.out;
  EXPECT_LT(t.wall, std::chrono::milliseconds(5500));
}

}  // namespace
}  // namespace cuflight::inject::testing

namespace cuflight::inject::testing {
namespace {

// Every variable the attribution may read is unset, so that the test's own environment (a Slurm
// job, a pod) cannot leak into what a test expects; the names a test set are unset after it.
class Attribution : public Injection {
 protected:
  void SetUp() override {
    Injection::SetUp();
    for (std::string_view name : env::kAttributionVariables) Unset(std::string(name));
    Unset("CUDA_VISIBLE_DEVICES");
    Unset("NVIDIA_VISIBLE_DEVICES");
    Unset("CUFLIGHT_ATTRIBUTION_ENV");
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  void Set(const std::string& name, const std::string& value) {
    Save(name);
    setenv(name.c_str(), value.c_str(), 1);
  }
  void Unset(const std::string& name) {
    Save(name);
    unsetenv(name.c_str());
  }

  // The run's events, once its process_end arrived.
  std::vector<schema::OwnedEvent> Record(StoringCollector* collector, const std::string& program,
                                         const std::vector<std::string>& args) {
    const auto r = RunProcess(program, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("fired=2"), std::string::npos) << r.out << r.err;
    EXPECT_TRUE(collector->WaitFor([](const std::vector<std::string>& lines) {
      return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
    })) << r.err;
    std::vector<schema::OwnedEvent> events;
    for (const std::string& line : collector->ExpandedLines()) {
      EXPECT_LE(line.size() + 1, schema::kMaxProcessStartBytes);
      schema::DecodeResult d = schema::Decode(line);
      EXPECT_TRUE(d.ok()) << d.message << ": " << line.substr(0, 200);
      if (d.ok()) events.push_back(std::move(d.event));
    }
    return events;
  }

 private:
  void Save(const std::string& name) {
    if (saved_.count(name)) return;
    const char* v = getenv(name.c_str());
    saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

template <class T>
const T* First(const std::vector<schema::OwnedEvent>& events) {
  for (const auto& e : events) {
    if (const auto* t = std::get_if<T>(&e)) return t;
  }
  return nullptr;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

// The pairs without the two the host's own /proc/self/cgroup may give (this test runs where it
// runs: a container's cgroup is its own business; CgroupOfAPodThroughTheRealLibrary sets it).
Pairs WithoutCgroupIds(const Pairs& pairs) {
  Pairs out;
  for (const auto& p : pairs) {
    if (p.first != "container_id" && p.first != "pod_uid") out.push_back(p);
  }
  return out;
}

// A torchrun worker of a Slurm job in a pod, one name added by CUFLIGHT_ATTRIBUTION_ENV, one
// variable not allowed, on a MIG instance: process_start and device say so.
TEST_F(Attribution, ProcessStartAndDeviceSayWhoAndWhichGpu) {
  UseFakes();
  const std::string path = TempSocketPath("attrib");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  Set("SLURM_JOB_ID", "4242");
  Set("SLURM_PROCID", "1");
  Set("RANK", "03");
  Set("LOCAL_RANK", "3");
  Set("WORLD_SIZE", "8");
  Set("POD_NAME", "trainer-3");
  Set("POD_NAMESPACE", "ml");
  Set("CUFLIGHT_ATTRIBUTION_ENV", "MY_TEAM");
  Set("MY_TEAM", "vision");
  Set("SECRET_TOKEN", "never-carried");
  Set("FAKE_CUDA_UUID", "4c9a1e2f0b3d4e5f8a7b6c5d4e3f2a1b");
  Set("CUDA_VISIBLE_DEVICES", "MIG-4C9A1E2F-0B3D-4E5F-8A7B-6C5D4E3F2A1B");
  const auto events = Record(&collector, CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "2"});
  const auto* start = First<schema::OwnedProcessStartEvent>(events);
  ASSERT_NE(start, nullptr);
  // Decode gives the members sorted by name (bytewise: upper case first). By hand: rank from
  // RANK before SLURM_PROCID, without its leading zero; job from SLURM_JOB_ID.
  const Pairs expected = {{"LOCAL_RANK", "3"},
                          {"MY_TEAM", "vision"},
                          {"POD_NAME", "trainer-3"},
                          {"POD_NAMESPACE", "ml"},
                          {"RANK", "03"},
                          {"SLURM_JOB_ID", "4242"},
                          {"SLURM_PROCID", "1"},
                          {"WORLD_SIZE", "8"},
                          {"job", "4242"},
                          {"local_rank", "3"},
                          {"pod_name", "trainer-3"},
                          {"pod_namespace", "ml"},
                          {"rank", "3"},
                          {"world_size", "8"}};
  EXPECT_EQ(WithoutCgroupIds(start->attribution), expected);
  EXPECT_TRUE(start->truncated.empty());
  bool has_config_name = false;
  for (const auto& [k, v] : start->config)
    has_config_name |= k == "attribution_env" && v == "MY_TEAM";
  EXPECT_TRUE(has_config_name);
  const auto* device = First<schema::OwnedDeviceEvent>(events);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->uuid, "MIG-4c9a1e2f-0b3d-4e5f-8a7b-6c5d4e3f2a1b");
  EXPECT_EQ(device->pci_bus_id, "00000000:19:00.0");
  for (const std::string& line : collector.Lines()) {
    EXPECT_EQ(line.find("never-carried"), std::string::npos) << "a variable outside the list";
  }
}

// Without a MIG name in the environment the UUID is the GPU's; a PCI domain past 16 bits (VMD).
TEST_F(Attribution, AGpuOutsideMigKeepsGpuAndItsDomain) {
  UseFakes();
  const std::string path = TempSocketPath("attrib");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  Set("FAKE_CUDA_PCI_DOMAIN", "10000");
  Set("NVIDIA_VISIBLE_DEVICES", "MIG-00000000-0000-0000-0000-000000000000");
  const auto events = Record(&collector, CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "2"});
  const auto* device = First<schema::OwnedDeviceEvent>(events);
  ASSERT_NE(device, nullptr);
  // fake_libcuda.cc's octets 0x00, 0x11, ... 0xff.
  EXPECT_EQ(device->uuid, "GPU-00112233-4455-6677-8899-aabbccddeeff");
  EXPECT_EQ(device->pci_bus_id, "00010000:19:00.0");
  const auto* start = First<schema::OwnedProcessStartEvent>(events);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(WithoutCgroupIds(start->attribution), Pairs{});
}

// The pod's and container's ids from a cgroup file: the fixture bind-mounted over the app's own
// /proc/<pid>/cgroup in a mount namespace of its own (needs root and unshare).
TEST_F(Attribution, CgroupOfAPodThroughTheRealLibrary) {
  const std::string unshare = cuflight::testing::FindProgram("unshare");
  if (geteuid() != 0 || unshare.empty()) GTEST_SKIP() << "needs root and unshare(1)";
  const auto probe = RunProcess(unshare, {"-m", "true"});
  if (probe.exit_code != 0) GTEST_SKIP() << "unshare -m is not permitted here: " << probe.err;
  UseFakes();
  const std::string path = TempSocketPath("attrib");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  Set("POD_UID", "00000000-0000-4000-8000-000000000000");  // the cgroup's comes first
  const std::string fixture =
      std::string(CUFLIGHT_CGROUP_FIXTURES) + "/k8s-systemd-v2-containerd.txt";
  const std::string script = "mount --bind '" + fixture + "' /proc/$$/cgroup && exec '" +
                             CUFLIGHT_FAKE_APP + "' '" + CUFLIGHT_INJECT_SO + "' 2";
  const auto events = Record(&collector, unshare, {"-m", "sh", "-c", script});
  const auto* start = First<schema::OwnedProcessStartEvent>(events);
  ASSERT_NE(start, nullptr);
  const Pairs expected = {
      {"POD_UID", "00000000-0000-4000-8000-000000000000"},
      {"container_id", "3b7a9d0c1e2f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b"},
      {"pod_uid", "5f1c7d1a-9c3e-4b8f-a2d1-0e9a8b7c6d5e"}};
  EXPECT_EQ(start->attribution, expected);
}

// A hostile environment: every allowed variable and 16 added ones at 8 KiB of quotes, bytes that
// are not UTF-8 and control characters, and 500 variables outside the list. The application runs
// as ever; process_start stays within 16 KiB, valid, with its identity, says the attribution was
// cut, and carries nothing outside the list.
TEST_F(Attribution, AHostileEnvironmentStaysBoundedAndValid) {
  UseFakes();
  const std::string path = TempSocketPath("attrib");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  std::string added;
  std::vector<std::string> names(env::kAttributionVariables.begin(),
                                 env::kAttributionVariables.end());
  for (int i = 0; i < 16; ++i) {
    names.push_back("EXTRA_" + std::to_string(i));
    added += names.back() + ",";
  }
  Set("CUFLIGHT_ATTRIBUTION_ENV", added);
  std::string hostile;
  for (int i = 0; i < 1024; ++i) hostile += "\"\\\xff\x01\xc3\xa9\xe2\x80\xa8\x80";
  for (const std::string& name : names) Set(name, hostile);
  for (int i = 0; i < 500; ++i) Set("OUTSIDE_" + std::to_string(i), std::string(1000, 'o'));
  const auto events = Record(&collector, CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "2"});
  for (int i = 0; i < 500; ++i) Unset("OUTSIDE_" + std::to_string(i));
  const auto* start = First<schema::OwnedProcessStartEvent>(events);
  ASSERT_NE(start, nullptr);
  EXPECT_FALSE(start->exe.empty());
  EXPECT_FALSE(start->argv.empty());
  ASSERT_FALSE(start->truncated.empty());
  EXPECT_EQ(start->truncated.back(), "attribution");
  ASSERT_FALSE(start->attribution.empty());
  for (const auto& [k, v] : start->attribution) {
    EXPECT_LE(v.size(), env::kMaxAttributionValueBytes) << k;
    EXPECT_EQ(k.rfind("OUTSIDE_", 0), std::string::npos) << k;
    for (unsigned char c : v) EXPECT_GE(c, 0x20) << k;
  }
  for (const std::string& line : collector.Lines()) {
    EXPECT_EQ(line.find("ooooooooooooooooooooooo"), std::string::npos);
  }
}

}  // namespace
}  // namespace cuflight::inject::testing
