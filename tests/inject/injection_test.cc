// libcuflight_inject.so as the driver loads it: only InitializeInjection exported, no shared
// dependency besides libc, one clear line on stderr when it cannot work, and the whole path
// (entry -> CUPTI subscription -> callbacks -> sender thread -> socket -> atexit process_end)
// with stand-in libcuda.so.1 and libcupti.so.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <map>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "cuflight/schema/decoder.h"
#include "subprocess.h"
#include "test_collector.h"

namespace cuflight::inject::testing {
namespace {

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

TEST_F(Injection, NeedsNoSharedLibraryBesidesLibc) {
  if (CUFLIGHT_SANITIZED) GTEST_SKIP() << "a sanitizer build links the sanitizer runtime";
  const std::string needed = Shell(std::string("readelf -d ") + CUFLIGHT_INJECT_SO +
                                 " | grep NEEDED | sed 's/.*\\[\\(.*\\)\\]/\\1/'");
  std::istringstream lines(needed);
  std::string lib;
  int count = 0;
  while (std::getline(lines, lib)) {
    ++count;
    EXPECT_TRUE(lib == "libc.so.6" || lib == "libm.so.6" || lib == "ld-linux-x86-64.so.2")
        << "unexpected dependency " << lib;
  }
  EXPECT_GT(count, 0);
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
  TestCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "25"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("fired=25"), std::string::npos);
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& lines) {
    return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
  }));
  int kernels = 0;
  uint64_t expected_seq = 0;
  for (const std::string& line : collector.Lines()) {
    const schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    EXPECT_EQ(d.header->seq, expected_seq++);
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
  TestCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "4", "fork"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // LeakSanitizer notes the parent's threads missing in the child on stderr; nothing of ours.
  if (!CUFLIGHT_SANITIZED) {
    EXPECT_EQ(r.err, "");
  }
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& l) { return ProcessEnds(l) == 2; }));
  const auto streams = ByPid(collector.Lines());
  ASSERT_EQ(streams.size(), 2u);
  for (const auto& [pid, events] : streams) {
    ASSERT_FALSE(events.empty());
    // Each process: its own process_start (seq 0, its own pid), its 4 kernels, its process_end.
    const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&events.front());
    ASSERT_NE(start, nullptr);
    EXPECT_EQ(start->header.seq, 0u);
    EXPECT_EQ(std::count_if(events.begin(), events.end(), [](const schema::OwnedEvent& e) {
                return std::holds_alternative<schema::OwnedKernelEvent>(e);
              }), 4);
    EXPECT_TRUE(std::holds_alternative<schema::OwnedProcessEndEvent>(events.back()));
  }
}

TEST_F(Injection, AForkedChildThatOnlyExecsIsNotDisturbed) {
  UseFakes();
  const std::string path = TempSocketPath("forkexec");
  TestCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  const auto r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "4", "forkexec"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& l) { return ProcessEnds(l) == 1; }));
  const auto streams = ByPid(collector.Lines());
  EXPECT_EQ(streams.size(), 1u);  // only the parent
}

}  // namespace
}  // namespace cuflight::inject::testing
