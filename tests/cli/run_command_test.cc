// `cuflight run` end to end: the built cuflight binary (with lib/libcuflight_inject.so beside its
// bin/) runs the fake application, which loads the injector named by CUDA_INJECTION64_PATH the
// way the driver does and fires launches through the stand-in libcupti; the private collector
// writes the logs to --out.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "collector_process.h"
#include "collector_test_util.h"
#include "cuflight/logread/log_reader.h"
#include "cuflight/schema/events.h"
#include "subprocess.h"

namespace cuflight::cli {
namespace {

using collector::testing::ChildProcess;
using collector::testing::RunningCollector;
using collector::testing::TempDir;
using cuflight::testing::RunProcess;

constexpr std::chrono::seconds kDeadline{30};

// The test's working directory is `dir` while it lives.
class ScopedCwd {
 public:
  explicit ScopedCwd(const std::filesystem::path& dir) : old_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~ScopedCwd() { std::filesystem::current_path(old_); }

 private:
  std::filesystem::path old_;
};

// Environment variable `name` is `value` while it lives (the programs the test runs inherit it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A shell command line that runs the fake application on the injector cuflight passed.
std::string FakeApp(int launches, const std::string& mode = "") {
  return std::string("exec ") + CUFLIGHT_FAKE_APP + " \"$CUDA_INJECTION64_PATH\" " +
         std::to_string(launches) + (mode.empty() ? "" : " " + mode);
}

struct Recorded {
  std::vector<std::filesystem::path> files;
  std::map<int32_t, std::vector<schema::OwnedEvent>> by_pid;
};

Recorded ReadAll(const std::filesystem::path& dir) {
  Recorded r;
  std::string error;
  if (!logread::ExpandLogPaths({dir.string()}, &r.files, &error)) {
    ADD_FAILURE() << error;
    return r;
  }
  logread::ReadSummary summary;
  for (const auto& file : r.files) {
    EXPECT_TRUE(logread::ReadLogFile(
        file,
        [&r](const schema::OwnedEvent& e, const logread::Origin&) {
          r.by_pid[schema::HeaderOf(e).pid].push_back(e);
        },
        &summary, &error))
        << error;
  }
  EXPECT_EQ(summary.rejected_lines, 0u);
  EXPECT_EQ(summary.torn_lines, 0u);
  return r;
}

template <class T>
int Count(const std::vector<schema::OwnedEvent>& events) {
  return static_cast<int>(std::count_if(events.begin(), events.end(), [](const auto& e) {
    return std::holds_alternative<T>(e);
  }));
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class RunCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // `cuflight run` records its directory under $XDG_STATE_HOME (log_dir_locator.h): the
    // test's, not the user's.
    setenv("XDG_STATE_HOME", (dir_.path() / "state").c_str(), 1);
    setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
    unsetenv("CUFLIGHT_COLLECTOR");
    unsetenv("CUDA_INJECTION64_PATH");
    unsetenv("CUFLIGHT_SAMPLE");
  }
  std::filesystem::path Out() const { return dir_.path() / "logs"; }
  std::vector<std::string> Args(std::vector<std::string> command) const {
    std::vector<std::string> args = {"run", "--out", Out().string(), "--cupti-path",
                                     CUFLIGHT_FAKE_LIBCUPTI};
    args.insert(args.end(), command.begin(), command.end());
    return args;
  }

  TempDir dir_;
};

TEST_F(RunCommandTest, RecordsTheApplicationIntoOutAndPassesItsExitCodeAndSettings) {
  const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                            Args({"--sample", "2", "--", "sh", "-c", FakeApp(5) + "; exit 0"}));
  // `exec` replaces the shell, so the fake's own status (0) is the application's.
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fired=5"), std::string::npos) << r.out;  // stdout untouched
  EXPECT_NE(r.err.find("application exited with status 0; 1 process recorded"), std::string::npos)
      << r.err;
  // The summary is the run's report: the kernel and its 3 recorded launches.
  EXPECT_NE(r.err.find("vecadd"), std::string::npos) << r.err;

  const Recorded rec = ReadAll(Out());
  ASSERT_EQ(rec.files.size(), 1u);
  ASSERT_EQ(rec.by_pid.size(), 1u);
  const auto& events = rec.by_pid.begin()->second;
  const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&events.front());
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(std::filesystem::path(start->exe).filename(), "fake_app");
  // --sample 2 reached the injector: launches 1, 3 and 5 of the 5 are recorded.
  EXPECT_EQ(Count<schema::OwnedKernelEvent>(events), 3);
  const auto sample = std::find_if(start->config.begin(), start->config.end(),
                                   [](const auto& kv) { return kv.first == "sample"; });
  ASSERT_NE(sample, start->config.end());
  EXPECT_EQ(sample->second, "2");
  const auto* end = std::get_if<schema::OwnedProcessEndEvent>(&events.back());
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->launches, 5u);
}

TEST_F(RunCommandTest, TheApplicationsExitStatusIsCuflightsAndTheLogDirIsCreated) {
  const auto r = RunProcess(CUFLIGHT_CLI_PATH, Args({"sh", "-c", "exit 42"}));
  EXPECT_EQ(r.exit_code, 42) << r.err;
  EXPECT_NE(r.err.find("exited with status 42"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_directory(Out()));
}

TEST_F(RunCommandTest, DeathBySignalIs128PlusTheSignal) {
  const auto r = RunProcess(CUFLIGHT_CLI_PATH, Args({"sh", "-c", "kill -KILL $$"}));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
}

// Killed right after 20 launches with a 10 s flush interval: whether its process_start got out
// first is a race with the library's sender thread, and the summary says what happened either
// way, never that the application used no GPU. (run_summary_test.cc checks both wordings
// without the race.)
TEST_F(RunCommandTest, AKilledApplicationsSummarySaysWhatReachedTheCollector) {
  const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                            Args({"--flush-ms", "10000", "--", "sh", "-c", FakeApp(20, "kill")}));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_NE(r.err.find("cuflight run: application killed by SIGKILL (status 137); "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("no CUDA"), std::string::npos) << r.err;
  if (r.err.find("; 0 processes recorded, 0 events in 0 files") != std::string::npos) {
    EXPECT_NE(r.err.find("nothing reached the collector: the application was killed by SIGKILL "
                         "before the injected library's first flush (it sends what it recorded "
                         "every 10000 ms"),
              std::string::npos)
        << r.err;
  } else {
    EXPECT_NE(r.err.find("; 1 process recorded, "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("lost: the connection ended without process_end"), std::string::npos)
        << r.err;
  }
}

TEST_F(RunCommandTest, AnApplicationNotFoundIs127WithOneLineLikeAShell) {
  const auto r = RunProcess(CUFLIGHT_CLI_PATH, Args({"cuflight-no-such-program", "x"}));
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.err, "cuflight run: cuflight-no-such-program: command not found\n");
  const auto path = RunProcess(CUFLIGHT_CLI_PATH, Args({"./no/such/program"}));
  EXPECT_EQ(path.exit_code, 127);
  EXPECT_EQ(path.err, "cuflight run: ./no/such/program: No such file or directory\n");
  const auto not_executable = RunProcess(CUFLIGHT_CLI_PATH, Args({"/etc/hostname"}));
  EXPECT_EQ(not_executable.exit_code, 126);
  EXPECT_EQ(CountLines(not_executable.err), 1) << not_executable.err;
}

TEST_F(RunCommandTest, BadFlagsAreOneLineAndExitTwoWithoutRunningAnything) {
  const std::string marker = (dir_.path() / "ran").string();
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--timing", "sometimes"},
                                                {"--ring-size", "100"},
                                                {"--include", "("},
                                                {"--on-full", "wait"},
                                                {"--drain-timeout", "soon"},
                                                {"--stall-ms", "50"},
                                                {"--collector", "/x.sock", "--out", "/tmp/x"}}) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "touch", marker});
    const auto r = RunProcess(CUFLIGHT_CLI_PATH, args);
    EXPECT_EQ(r.exit_code, 2) << flags[0] << ": " << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("cuflight run: " + flags[0], 0), 0u) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
  const auto none = RunProcess(CUFLIGHT_CLI_PATH, {"run", "--sample", "3"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no application given"), std::string::npos) << none.err;
}

// `--out` without a value is an error, not a directory named "--" (or after another flag).
TEST_F(RunCommandTest, OutWithoutAValueIsAnError) {
  const std::string marker = (dir_.path() / "ran").string();
  const ScopedCwd cwd(dir_.path());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--out", "--", "touch", marker},
        {"run", "--out", "--sample", "2", "touch", marker},
        {"run", "--out=", "--", "touch", marker},
        {"run", "--out"}}) {
    const auto r = RunProcess(CUFLIGHT_CLI_PATH, args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("cuflight run: --out", 0), 0u) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "--"));
  // With --collector the message names only flags run has.
  const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                            {"run", "--collector", "/x.sock", "--out", "/tmp/x", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("--log-dir"), std::string::npos) << r.err;
}

// Two runs at once in one directory, like nsys's report1/report2: the second records beside the
// first, in cuflight-logs-2, and says so; naming the busy directory with --out is refused in one
// line, without running the application. `cuflight tail` with no arguments follows the latest
// run's output, and says that a collector is writing it.
TEST_F(RunCommandTest, ConcurrentRunsGetSeparateOutputsAndTailFindsTheLatest) {
  const ScopedCwd cwd(dir_.path());
  const ScopedEnv state("XDG_STATE_HOME", (dir_.path() / "state").string());
  const std::filesystem::path go = dir_.path() / "go";
  ChildProcess first(CUFLIGHT_CLI_PATH,
                     {"run", "--cupti-path", CUFLIGHT_FAKE_LIBCUPTI, "--", "sh", "-c",
                      "echo ready; while [ ! -e " + go.string() + " ]; do sleep 0.02; done"},
                     dir_.path() / "first.txt");
  ASSERT_TRUE(first.WaitForOutput("ready", kDeadline)) << first.Output();

  ChildProcess tail(CUFLIGHT_CLI_PATH, {"tail", "--interval", "20"}, dir_.path() / "tail.txt");
  ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
  EXPECT_NE(tail.Output().find("following " + (dir_.path() / "cuflight-logs").string() +
                               " (the latest cuflight run's output, a collector is writing it "
                               "now; --log-dir DIR for another)"),
            std::string::npos)
      << tail.Output();
  tail.Signal(SIGINT);
  EXPECT_EQ(tail.Wait(kDeadline), 0);

  const auto second = RunProcess(CUFLIGHT_CLI_PATH, {"run", "--cupti-path", CUFLIGHT_FAKE_LIBCUPTI,
                                                     "--", "sh", "-c", FakeApp(3)});
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("cuflight run: " + (dir_.path() / "cuflight-logs").string() +
                            " is being written by another run; recording to " +
                            (dir_.path() / "cuflight-logs-2").string() + "\n"),
            std::string::npos)
      << second.err;
  const Recorded rec = ReadAll(dir_.path() / "cuflight-logs-2");
  ASSERT_EQ(rec.by_pid.size(), 1u);
  EXPECT_EQ(Count<schema::OwnedKernelEvent>(rec.by_pid.begin()->second), 3);

  const std::string marker = (dir_.path() / "ran").string();
  const auto busy =
      RunProcess(CUFLIGHT_CLI_PATH, {"run", "--out", "cuflight-logs", "--", "touch", marker});
  EXPECT_EQ(busy.exit_code, 2) << busy.err;
  EXPECT_EQ(CountLines(busy.err), 1) << busy.err;
  EXPECT_EQ(busy.err.rfind("cuflight run: --out cuflight-logs is being written by another "
                           "cuflight run or collector",
                           0),
            0u)
      << busy.err;
  EXPECT_FALSE(std::filesystem::exists(marker));

  std::ofstream(go).put('\n');
  EXPECT_EQ(first.Wait(kDeadline), 0) << first.Output();

  // Nothing writes now: tail takes the latest run's output (cuflight-logs-2).
  ChildProcess later(CUFLIGHT_CLI_PATH, {"tail", "--from-start", "--interval", "20"},
                     dir_.path() / "later.txt");
  ASSERT_TRUE(later.WaitForOutput("following", kDeadline)) << later.Output();
  later.Signal(SIGINT);
  EXPECT_EQ(later.Wait(kDeadline), 0);
  EXPECT_NE(later.Output().find("following " + (dir_.path() / "cuflight-logs-2").string() +
                                " (the latest cuflight run's output; --log-dir DIR for another)"),
            std::string::npos)
      << later.Output();
  EXPECT_NE(later.Output().find("kernel vecadd"), std::string::npos) << later.Output();
}

// With nothing to follow, tail says where it looked and how to name a directory.
TEST_F(RunCommandTest, TailWithNothingToFollowSaysHow) {
  if (geteuid() == 0 && std::filesystem::exists("/var/log/cuflight")) {
    GTEST_SKIP() << "a system collector's /var/log/cuflight exists here";
  }
  const ScopedEnv state("XDG_STATE_HOME", (dir_.path() / "state").string());
  const auto r = RunProcess(CUFLIGHT_CLI_PATH, {"tail"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("cuflight tail: no log directory to follow: no cuflight run recorded", 0),
            0u)
      << r.err;
  EXPECT_NE(r.err.find("name one with --log-dir DIR"), std::string::npos) << r.err;
}

TEST_F(RunCommandTest, TheApplicationsFlagsAreNotTakenForCuflights) {
  const auto r = RunProcess(CUFLIGHT_CLI_PATH, Args({"echo", "--sample", "x", "--out", "y"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "--sample x --out y\n");
}

TEST_F(RunCommandTest, WithoutTheInjectedLibraryBesideItItSaysWhereItLooked) {
  const std::filesystem::path bin = dir_.path() / "bin";
  std::filesystem::create_directories(bin);
  std::filesystem::copy_file(CUFLIGHT_CLI_PATH, bin / "cuflight");
  const auto r = RunProcess((bin / "cuflight").string(), {"run", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find((bin / "libcuflight_inject.so").string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((dir_.path() / "lib" / "libcuflight_inject.so").string()),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find((dir_.path() / "lib" / "cuflight" / "libcuflight_inject.so").string()),
            std::string::npos)
      << r.err;
}

TEST_F(RunCommandTest, AForkedChildOfTheApplicationIsRecordedUnderItsOwnPid) {
  if (CUFLIGHT_THREAD_SANITIZED) {
    GTEST_SKIP() << "ThreadSanitizer does not support threads after a multi-threaded fork";
  }
  const auto r = RunProcess(CUFLIGHT_CLI_PATH, Args({"sh", "-c", FakeApp(4, "fork")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Recorded rec = ReadAll(Out());
  ASSERT_EQ(rec.files.size(), 2u);
  ASSERT_EQ(rec.by_pid.size(), 2u);
  std::map<int32_t, int32_t> parent_of;
  for (const auto& [pid, events] : rec.by_pid) {
    const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&events.front());
    ASSERT_NE(start, nullptr);
    EXPECT_EQ(start->header.seq, 0u);
    parent_of[pid] = start->ppid;
    EXPECT_EQ(Count<schema::OwnedKernelEvent>(events), 4) << pid;
    EXPECT_TRUE(std::holds_alternative<schema::OwnedProcessEndEvent>(events.back())) << pid;
  }
  // One of the two is the other's child.
  const auto first = *parent_of.begin();
  const auto second = *parent_of.rbegin();
  EXPECT_TRUE(first.second == second.first || second.second == first.first);
}

TEST_F(RunCommandTest, SignalsSentToCuflightReachTheApplication) {
  const std::filesystem::path output = dir_.path() / "output.txt";
  ChildProcess run(CUFLIGHT_CLI_PATH,
                   Args({"sh", "-c",
                         "trap 'echo got-usr1; exit 3' USR1; echo ready; "
                         "while :; do sleep 0.05; done"}),
                   output);
  ASSERT_TRUE(run.running());
  ASSERT_TRUE(run.WaitForOutput("ready", kDeadline)) << run.Output();
  run.Signal(SIGUSR1);
  EXPECT_EQ(run.Wait(kDeadline), 3) << run.Output();
  EXPECT_NE(run.Output().find("got-usr1"), std::string::npos) << run.Output();

  ChildProcess term(CUFLIGHT_CLI_PATH, Args({"sh", "-c", "echo ready; exec sleep 60"}),
                    dir_.path() / "term.txt");
  ASSERT_TRUE(term.WaitForOutput("ready", kDeadline)) << term.Output();
  term.Signal(SIGTERM);
  EXPECT_EQ(term.Wait(kDeadline), 128 + SIGTERM) << term.Output();
}

TEST_F(RunCommandTest, AGivenCollectorIsUsedAndNoPrivateOneIsStarted) {
  RunningCollector collector(collector::testing::TestOptions(dir_.path() / "shared"));
  ASSERT_NE(collector.collector(), nullptr);
  const std::string socket = collector.collector()->socket_path().string();
  const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                            {"run", "--collector", socket, "--cupti-path", CUFLIGHT_FAKE_LIBCUPTI,
                             "--", "sh", "-c", FakeApp(3)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("events went to the collector at " + socket), std::string::npos) << r.err;
  // The process exited after its process_end was acknowledged, so it is stored; the collector
  // publishes its counters at the end of the loop turn that acknowledged it.
  EXPECT_TRUE(collector::testing::WaitUntil(
      [&collector] { return collector.stats().processes_ended == 1; }));
  EXPECT_EQ(collector.stats().processes_ended, 1u);
  EXPECT_EQ(collector.stats().connections_accepted, 1u);
  const Recorded rec = ReadAll(dir_.path() / "shared" / "logs");
  ASSERT_EQ(rec.by_pid.size(), 1u);
  EXPECT_EQ(Count<schema::OwnedKernelEvent>(rec.by_pid.begin()->second), 3);
  EXPECT_FALSE(std::filesystem::exists(Out()));
}

}  // namespace
}  // namespace cuflight::cli
