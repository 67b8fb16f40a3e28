// Taking turns with other CUPTI tools (docs/profilers.md, libinject/src/cupti_yield.h), through
// the real libcuflight_inject.so, the fake CUPTI and a real collector. The fake CUPTI has one
// subscriber at a time, as cupti_callbacks.h documents for cuptiSubscribe
// ("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED if there is already a CUPTI subscriber"); the
// test program (fake_app's `yield` mode) plays torch.profiler: it subscribes itself once cuflight
// let go, fires launches into its own callback, and unsubscribes after cuflight's first attempt to
// take CUPTI back was refused.
//
// Also the pure state machine (CuptiYield) with a hand-driven clock: the retry schedule documented
// in cupti_yield.h, point 3 (1 s, doubling, at most 60 s apart; at most max_attempts).
#include <grp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cupti_yield.h"
#include "cuflight/schema/decoder.h"
#include "running_collector.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "wait_until.h"
#include "log_files.h"

namespace cuflight::inject::testing {
namespace {

using cuflight::testing::ProcessResult;
using cuflight::testing::RunProcess;
using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::StoringCollector;
using test_support::TempDir;
using test_support::TempSocketPath;
using Clock = std::chrono::steady_clock;

// ---- The state machine, with a hand-driven clock ----

struct Hooks {
  int releases = 0;
  int takes = 0;
  bool free = false;  // whether a take succeeds
  CuptiYield::Hooks Make() {
    CuptiYield::Hooks h;
    h.release = [this] { ++releases; };
    h.take = [this] {
      ++takes;
      return free ? CUPTI_SUCCESS : CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    };
    return h;
  }
};

TEST(CuptiYieldTest, ARequestClosesTheGateAtOnceAndReleasesOnTheSendersStep) {
  Hooks hooks;
  const Clock::time_point t0 = Clock::now();
  CuptiYield y({}, hooks.Make(), t0);
  EXPECT_FALSE(y.gated());
  EXPECT_FALSE(y.off());
  y.Request(10'000, t0);
  EXPECT_TRUE(y.gated());  // the callback records nothing from now
  y.CountLaunch();
  EXPECT_EQ(y.Poll(t0), CuptiYield::Action::kRelease);
  EXPECT_EQ(hooks.releases, 0);  // the caller drains first
  y.Released(t0);
  EXPECT_EQ(hooks.releases, 1);
  EXPECT_EQ(y.yields(), 1u);
  EXPECT_EQ(y.launches_yielded(), 1u);
  // Held for the 10 s asked: no attempt before.
  hooks.free = true;
  EXPECT_EQ(y.Poll(t0 + milliseconds(9'999)), CuptiYield::Action::kNone);
  EXPECT_EQ(hooks.takes, 0);
  y.Poll(t0 + milliseconds(10'000));
  EXPECT_EQ(hooks.takes, 1);
  EXPECT_FALSE(y.gated());
  EXPECT_TRUE(y.TakeResumed());
  EXPECT_FALSE(y.TakeResumed());
  // Off from the release to the take: exactly 10 s.
  EXPECT_EQ(y.yielded_ns(t0 + seconds(60)), 10'000'000'000u);
}

TEST(CuptiYieldTest, RefusedAttemptsBackOffFromOneSecondDoublingToAMinuteThenGiveUp) {
  Hooks hooks;
  const Clock::time_point t0 = Clock::now();
  CuptiYield::Options options;
  options.max_attempts = 10;
  CuptiYield y(options, hooks.Make(), t0);
  y.Request(1'000, t0);
  y.Poll(t0);
  y.Released(t0);
  // cupti_yield.h, point 3: attempts at the end of the hold, then 1, 2, 4, 8, 16, 32, 60, 60,
  // 60 s apart (the tenth refused attempt gives up).
  const int64_t gaps_ms[] = {0, 1'000, 2'000, 4'000, 8'000, 16'000, 32'000, 60'000, 60'000, 60'000};
  Clock::time_point at = t0 + milliseconds(1'000);
  for (int i = 0; i < 10; ++i) {
    at += milliseconds(gaps_ms[i]);
    y.Poll(at - milliseconds(1));
    EXPECT_EQ(hooks.takes, i) << "attempt " << i + 1 << " came early";
    y.Poll(at);
    EXPECT_EQ(hooks.takes, i + 1) << "attempt " << i + 1 << " did not come";
  }
  // Given up: no more attempts, still off.
  y.Poll(at + seconds(3600));
  EXPECT_EQ(hooks.takes, 10);
  EXPECT_TRUE(y.gated());
  // `cuflight yield --resume` tries again at once.
  hooks.free = true;
  y.Request(0, at + seconds(3601));
  y.Poll(at + seconds(3601));
  EXPECT_EQ(hooks.takes, 11);
  EXPECT_FALSE(y.gated());
  EXPECT_EQ(y.yields(), 1u);
}

TEST(CuptiYieldTest, StartYieldedNeverReleasesAndFirstTriesAfterTheHold) {
  Hooks hooks;
  hooks.free = true;
  const Clock::time_point t0 = Clock::now();
  CuptiYield::Options options;
  options.start_yielded = true;
  options.start_hold = milliseconds(2'500);
  CuptiYield y(options, hooks.Make(), t0);
  EXPECT_TRUE(y.gated());
  EXPECT_EQ(y.yields(), 1u);
  EXPECT_EQ(y.Poll(t0 + milliseconds(2'499)), CuptiYield::Action::kNone);
  EXPECT_EQ(hooks.takes, 0);
  y.Poll(t0 + milliseconds(2'500));
  EXPECT_EQ(hooks.takes, 1);
  EXPECT_EQ(hooks.releases, 0);
  EXPECT_EQ(y.yielded_ns(t0 + seconds(9)), 2'500'000'000u);
}

TEST(CuptiYieldTest, ATriggerFileHoldsTheYieldWhileItExists) {
  TempDir dir;
  const std::string trigger = (dir.path() / "profiling").string();
  Hooks hooks;
  hooks.free = true;
  const Clock::time_point t0 = Clock::now();
  CuptiYield::Options options;
  options.trigger_file = trigger;
  CuptiYield y(options, hooks.Make(), t0);
  EXPECT_EQ(y.Poll(t0), CuptiYield::Action::kNone);
  std::FILE* f = std::fopen(trigger.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  // Looked at every 250 ms (trigger_poll): not before.
  EXPECT_EQ(y.Poll(t0 + milliseconds(249)), CuptiYield::Action::kNone);
  EXPECT_EQ(y.Poll(t0 + milliseconds(250)), CuptiYield::Action::kRelease);
  y.Released(t0 + milliseconds(250));
  y.Poll(t0 + seconds(100));  // still there: no attempt, however long
  EXPECT_EQ(hooks.takes, 0);
  ASSERT_EQ(std::remove(trigger.c_str()), 0);
  y.Poll(t0 + seconds(101));
  EXPECT_EQ(hooks.takes, 1);
  EXPECT_FALSE(y.gated());
}

// ---- Through the injected library ----

class Yield : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"FAKE_CUPTI_MODE", "FAKE_CUPTI_VERSION", "FAKE_CUPTI_ACTIVITY", "FAKE_CUPTI_CALL_LOG",
          "FAKE_CUPTI_POLLERS", "FAKE_CUPTI_MULTI_SUBSCRIBER", "FAKE_CUDA_DRIVER_VERSION",
          "CUFLIGHT_TIMING", "CUFLIGHT_STALL_MS", "CUFLIGHT_COLLECTOR", "CUFLIGHT_YIELD",
          "CUFLIGHT_YIELD_MS", "CUFLIGHT_STATS_MS", "CUFLIGHT_COLLECTOR_UID"}) {
      unsetenv(name);
    }
    setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
    setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
    // Each launch gets a kernel record, handed over by a forced flush (fake_libcupti.cc).
    setenv("FAKE_CUPTI_TIMING", "0,0,0", 1);
  }
};

// What one fake_app `yield` run printed.
int64_t Printed(const std::string& out, const std::string& key) {
  const size_t at = out.find(key + "=");
  if (at == std::string::npos) return -1;
  return std::stoll(out.substr(at + key.size() + 1));
}

struct Outcome {
  int kernels = 0;
  int kernel_times = 0;
  int64_t pid = 0;
  const schema::OwnedProcessEndEvent* end = nullptr;
  std::vector<schema::OwnedEvent> events;
  bool seqs_contiguous = true;
};

Outcome Read(const StoringCollector& collector) {
  Outcome o;
  o.events = collector.Events();
  for (const schema::OwnedEvent& e : o.events) {
    std::visit(
        [&](const auto& ev) {
          if constexpr (requires { ev.header; }) o.pid = ev.header.pid;
        },
        e);
    if (std::holds_alternative<schema::OwnedKernelEvent>(e)) ++o.kernels;
    if (std::holds_alternative<schema::OwnedKernelTimeEvent>(e)) ++o.kernel_times;
    if (const auto* end = std::get_if<schema::OwnedProcessEndEvent>(&e)) o.end = end;
  }
  // The seqs as stored: the configurations' descriptions, which readers keep to themselves, take
  // seqs of their own.
  const std::vector<uint64_t> seqs = collector.StoredSeqs(o.pid);
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i] != i) o.seqs_contiguous = false;
  }
  return o;
}

bool Ended(const std::vector<std::string>& lines) {
  return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
}

// The launches before the yield, the other tool's and the ones after, and what the logs say.
void ExpectTurnsTaken(const ProcessResult& r, const StoringCollector& collector,
                      int expected_kernels, uint64_t expected_yields) {
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Printed(r.out, "released"), 1);
  EXPECT_EQ(Printed(r.out, "other_subscribe"), 0) << "CUPTI_SUCCESS: cuflight had let go";
  EXPECT_EQ(Printed(r.out, "other_saw"), 7);
  EXPECT_EQ(Printed(r.out, "refused"), 1) << "cuflight's early attempt, refused";
  EXPECT_EQ(Printed(r.out, "retaken"), 1);
  // Every subscribe and unsubscribe of cuflight's ran on its own thread, never the application's.
  EXPECT_EQ(Printed(r.out, "app_thread_subscribe_calls"), 0);
  ASSERT_TRUE(collector.WaitFor(Ended));
  const Outcome o = Read(collector);
  ASSERT_NE(o.end, nullptr);
  EXPECT_TRUE(o.seqs_contiguous) << "nothing dropped";
  // The other tool's 7 launches are not cuflight's: neither recorded nor counted.
  EXPECT_EQ(o.kernels, expected_kernels);
  EXPECT_EQ(o.kernel_times, expected_kernels) << "flushed at the yield and at exit";
  EXPECT_EQ(o.end->launches, static_cast<uint64_t>(expected_kernels));
  EXPECT_EQ(o.end->yields, expected_yields);
  EXPECT_EQ(o.end->launches_yielded, 0u) << "no launch came between the request and the release";
  EXPECT_FALSE(o.end->yielded);
  // Off CUPTI for at least the first refused attempt's 1 s backoff (cupti_yield.h, point 3), and
  // no longer than the application saw it gone (plus its 1 ms polls and the thread's step).
  const int64_t off_ns = Printed(r.out, "off_ns");
  EXPECT_GE(o.end->yielded_ns, 1'000'000'000u);
  EXPECT_LE(static_cast<int64_t>(o.end->yielded_ns), off_ns + 50'000'000);
}

TEST_F(Yield, ATriggerFileHandsCuptiToAnotherToolAndCuflightTakesItBackOnceFree) {
  TempDir dir;
  const std::string trigger = (dir.path() / "profiling").string();
  const std::string path = TempSocketPath("yield");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("CUFLIGHT_YIELD", trigger.c_str(), 1);
  const std::string calls = (dir.path() / "calls").string();
  setenv("FAKE_CUPTI_CALL_LOG", calls.c_str(), 1);
  const ProcessResult r =
      RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "10", "yield", trigger, "5"});
  unsetenv("FAKE_CUPTI_CALL_LOG");
  ExpectTurnsTaken(r, collector, 15, 1);
  // The yield's order (cupti_yield.h, point 2): kernel activity off, buffers flushed (forced),
  // then the unsubscribe; CUPTI taken back later with cuptiSubscribe.
  std::vector<std::string> log;
  std::FILE* f = std::fopen(calls.c_str(), "r");
  ASSERT_NE(f, nullptr);
  for (char line[256]; std::fgets(line, sizeof(line), f) != nullptr;) {
    std::string s(line);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    log.push_back(s);
  }
  std::fclose(f);
  const auto first = [&](const std::string& name, size_t from = 0) {
    for (size_t i = from; i < log.size(); ++i) {
      if (log[i] == name) return i;
    }
    return log.size();
  };
  const size_t unsubscribe = first("cuptiUnsubscribe");
  ASSERT_LT(unsubscribe, log.size());
  size_t disable = log.size();
  size_t forced = log.size();
  for (size_t i = 0; i < unsubscribe; ++i) {
    if (log[i] == "cuptiActivityDisable") disable = i;
    if (log[i] == "cuptiActivityFlushAll(forced)") forced = i;
  }
  EXPECT_LT(disable, forced);
  EXPECT_LT(forced, unsubscribe);
  EXPECT_LT(first("cuptiSubscribe", unsubscribe), log.size());
}

TEST_F(Yield, StartYieldedLeavesCuptiToTheProgramThenTakesItWhenFree) {
  const std::string path = TempSocketPath("yield");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("CUFLIGHT_YIELD", "start", 1);
  setenv("CUFLIGHT_YIELD_MS", "200", 1);
  // The 10 first launches find no subscriber at all (cuflight never subscribed): not delivered.
  const ProcessResult r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "10", "yield", "-", "5"});
  EXPECT_EQ(Printed(r.out, "fired"), 0);
  ExpectTurnsTaken(r, collector, 5, 1);
}

// `cuflight yield` through the collector: a request of another user is refused and reaches no
// process; the owner's (root here) makes the process hand CUPTI over.
TEST_F(Yield, CuflightYieldAsksThroughTheCollectorOnlyForTheProcesssOwnUserOrRoot) {
  TempDir dir;
  // A collector that serves group 65534 (nogroup) too, so that another user can reach it at all
  // and only the uid check stands between it and the process.
  chmod(dir.path().c_str(), 0711);
  collector::CollectorOptions options = test_support::TestOptions(dir.path());
  const gid_t kGroup = 65534;
  const uid_t kOther = 65534;
  options.socket_group = kGroup;
  options.socket_group_name = std::to_string(kGroup);
  test_support::RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  const std::string path = options.socket.string();
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("CUFLIGHT_STATS_MS", "100", 1);

  ProcessResult app;
  std::thread runner([&] {
    app = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "10", "yield", "-", "5"});
  });
  const auto lines = [&] { return test_support::StoredLines(options.log_dir); };
  const auto count = [&](const std::string& needle) {
    int n = 0;
    for (const std::string& l : lines()) n += l.find(needle) != std::string::npos;
    return n;
  };
  // 10 launches stored: launch lines (interned, the default) or whole kernel lines.
  ASSERT_TRUE(test_support::WaitUntil(
      [&] { return count("\"type\":\"launch\"") + count("\"type\":\"kernel\"") >= 10; },
      seconds(20), milliseconds(5)));
  int64_t pid = 0;
  for (const std::string& l : lines()) {
    const schema::DecodeResult d = schema::Decode(l);
    if (d.ok() && std::holds_alternative<schema::OwnedProcessStartEvent>(d.event)) {
      pid = d.header->pid;
    }
  }
  ASSERT_GT(pid, 0);
  const std::vector<std::string> request = {"yield", "--pid", std::to_string(pid), "--for",
                                            "300ms", "--socket", path};

  std::string setpriv;
  std::string why;
  std::vector<std::string> as_other;
  if (geteuid() == 0) {
    setpriv = cuflight::testing::FindProgram("setpriv");
    if (!setpriv.empty()) {
      as_other = {"--reuid=" + std::to_string(kOther), "--regid=" + std::to_string(kGroup),
                  "--groups=" + std::to_string(kGroup)};
    }
  }
  if (!as_other.empty()) {
    std::vector<std::string> args = as_other;
    args.emplace_back(CUFLIGHT_CLI_PATH);
    args.insert(args.end(), request.begin(), request.end());
    const ProcessResult other = RunProcess(setpriv, args);
    EXPECT_EQ(other.exit_code, 1) << other.out << other.err;
    EXPECT_NE(other.out.find("refused: another user's process"), std::string::npos) << other.out;
    // The process was not asked: its next stats events still have it on CUPTI.
    const int stats_before = count("\"type\":\"stats\"");
    ASSERT_TRUE(test_support::WaitUntil(
        [&] { return count("\"type\":\"stats\"") >= stats_before + 3; }, seconds(20),
        milliseconds(5)));
    EXPECT_EQ(count("\"yielded\":true"), 0);
    EXPECT_EQ(count("\"yields\":"), 0);
  } else {
    std::fprintf(stderr, "another user's request not tried: needs root and setpriv\n");
  }

  const ProcessResult owner = RunProcess(CUFLIGHT_CLI_PATH, request);
  EXPECT_EQ(owner.exit_code, 0) << owner.out << owner.err;
  EXPECT_NE(owner.out.find("asked to yield CUPTI for at least 300 ms"), std::string::npos)
      << owner.out;
  runner.join();
  ASSERT_EQ(app.exit_code, 0) << app.out << app.err;
  EXPECT_EQ(Printed(app.out, "released"), 1);
  EXPECT_EQ(Printed(app.out, "other_saw"), 7);
  EXPECT_EQ(Printed(app.out, "retaken"), 1);
  EXPECT_EQ(Printed(app.out, "app_thread_subscribe_calls"), 0);
  ASSERT_TRUE(test_support::WaitUntil([&] { return Ended(lines()); }, seconds(20),
                                      milliseconds(5)));
  int kernels = 0;
  const schema::OwnedProcessEndEvent* end = nullptr;
  const std::vector<schema::OwnedEvent> events = test_support::DecodeLogs(options.log_dir);
  for (const schema::OwnedEvent& e : events) {
    kernels += std::holds_alternative<schema::OwnedKernelEvent>(e);
    if (const auto* p = std::get_if<schema::OwnedProcessEndEvent>(&e)) end = p;
  }
  EXPECT_EQ(kernels, 15);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->yields, 1u);
  EXPECT_FALSE(end->yielded);
  EXPECT_GE(end->yielded_ns, 300'000'000u) << "at least the 300 ms asked";
  // A stats event sent while off CUPTI says so.
  EXPECT_GE(count("\"yielded\":true"), 1);
}

}  // namespace
}  // namespace cuflight::inject::testing
