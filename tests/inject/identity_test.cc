// Process identity end to end, with real processes: the injected library (real .so, stand-in
// driver and CUPTI) in the fake application, the real collector. The deployment cases of a
// node-wide collector: the collector in a pid namespace of its own (unshare), a process that
// exec()s, an argv of 63 KiB, a socket directory squatted by another user, and a socket group
// that lets one user's application in and not another's (setpriv). The
// cases that need unshare or setpriv skip, saying why, where they are missing or not permitted.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collector_process.h"
#include "collector_test_util.h"
#include "cuflight/report/build_report.h"
#include "cuflight/schema/decoder.h"
#include "subprocess.h"

namespace cuflight::inject::testing {
namespace {

namespace fs = std::filesystem;
using collector::testing::ChildProcess;
using collector::testing::LogFiles;
using collector::testing::RunningCollector;
using collector::testing::TempDir;
using collector::testing::TestOptions;
using collector::testing::WaitForSocket;
using collector::testing::WaitUntil;
using cuflight::testing::FindProgram;
using cuflight::testing::ProcessResult;
using cuflight::testing::RunProcess;
using test_support::DecodeLog;

size_t Count(const std::vector<schema::OwnedEvent>& events, schema::EventType type) {
  return static_cast<size_t>(std::count_if(
      events.begin(), events.end(), [type](const auto& e) { return schema::TypeOf(e) == type; }));
}

// The log files whose stream ended with process_end, read.
std::map<fs::path, std::vector<schema::OwnedEvent>> EndedLogs(const fs::path& log_dir) {
  std::map<fs::path, std::vector<schema::OwnedEvent>> out;
  for (const fs::path& file : LogFiles(log_dir)) {
    std::vector<schema::OwnedEvent> events = DecodeLog(file);
    if (Count(events, schema::EventType::kProcessEnd) > 0) out[file] = std::move(events);
  }
  return out;
}

// Every seq from 0 to the last, once, in order, among the lines of `file` (process_lost repeats
// the last one; the configurations' descriptions, which readers keep to themselves, take seqs of
// their own: docs/protocol.md, "Interned configurations").
void ExpectCompleteStream(const fs::path& file) {
  uint64_t expected = 0;
  for (const test_support::LoggedLine& line : test_support::ReadLog(file)) {
    if (line.type == "process_lost") continue;
    EXPECT_EQ(line.seq, expected) << file;
    ++expected;
  }
}

// What another uid runs and loads here (the collector, the application, the injected library,
// the stand-in driver and CUPTI), copied where it may read them (test_support::ReadableCopies);
// LD_LIBRARY_PATH and CUFLIGHT_CUPTI_PATH name the copies while it lives.
class SharedBinaries {
 public:
  SharedBinaries()
      : copies_({CUFLIGHT_COLLECTOR_PATH, CUFLIGHT_FAKE_APP, CUFLIGHT_INJECT_SO,
                 (fs::path(CUFLIGHT_FAKE_LIBCUDA_DIR) / "libcuda.so.1").string(),
                 CUFLIGHT_FAKE_LIBCUPTI}),
        collector(copies_.Of(CUFLIGHT_COLLECTOR_PATH)),
        app(copies_.Of(CUFLIGHT_FAKE_APP)),
        inject(copies_.Of(CUFLIGHT_INJECT_SO)) {
    setenv("LD_LIBRARY_PATH", copies_.dir().c_str(), 1);
    setenv("CUFLIGHT_CUPTI_PATH", copies_.Of(CUFLIGHT_FAKE_LIBCUPTI).c_str(), 1);
  }
  ~SharedBinaries() {
    setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
    setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
  }

 private:
  test_support::ReadableCopies copies_;

 public:
  const std::string collector, app, inject;
};

class IdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
    setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
    setenv("CUFLIGHT_FLUSH_MS", "10", 1);
    unsetenv("FAKE_CUPTI_MODE");
    unsetenv("CUFLIGHT_COLLECTOR_UID");
  }
  void TearDown() override {
    unsetenv("CUFLIGHT_COLLECTOR");
    unsetenv("CUFLIGHT_FLUSH_MS");
  }
};

// The experiment: the collector under `unshare --pid --fork --mount-proc` sees pid 0
// for every producer (SO_PEERCRED of a peer outside its namespace). Eight applications started
// together are still eight logs, each named and stored with the pid the process has.
TEST_F(IdentityTest, ACollectorInItsOwnPidNamespaceKeepsConcurrentProcessesApart) {
  const std::string unshare = FindProgram("unshare");
  if (unshare.empty()) GTEST_SKIP() << "unshare(1) is not installed";
  const ProcessResult probe = RunProcess(unshare, {"--pid", "--fork", "--mount-proc", "true"});
  if (probe.exit_code != 0) {
    GTEST_SKIP() << "unshare --pid --fork --mount-proc is not permitted here: " << probe.err;
  }
  TempDir dir;
  const fs::path socket = dir.path() / "run" / "c.sock";
  const fs::path logs = dir.path() / "logs";
  ChildProcess collector(
      unshare,
      {"--pid", "--fork", "--mount-proc", "--kill-child", CUFLIGHT_COLLECTOR_PATH, "--socket",
       socket.string(), "--log-dir", logs.string(), "--reconnect-grace", "0"},
      dir.path() / "collector.out");
  ASSERT_TRUE(WaitForSocket(socket, std::chrono::seconds(20))) << collector.Output();
  setenv("CUFLIGHT_COLLECTOR", socket.c_str(), 1);

  constexpr int kApps = 8;
  constexpr int kLaunches = 25;
  std::vector<ProcessResult> results(kApps);
  std::vector<std::thread> apps;
  for (int i = 0; i < kApps; ++i) {
    apps.emplace_back([&results, i] {
      results[i] = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, std::to_string(kLaunches)});
    });
  }
  for (auto& t : apps) t.join();
  for (const ProcessResult& r : results) ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  std::map<fs::path, std::vector<schema::OwnedEvent>> ended;
  ASSERT_TRUE(WaitUntil([&] {
    ended = EndedLogs(logs);
    return ended.size() >= kApps;
  })) << ended.size()
      << " logs ended\n"
      << collector.Output();
  EXPECT_EQ(LogFiles(logs).size(), static_cast<size_t>(kApps));
  std::set<int32_t> pids;
  std::set<uint64_t> instances;
  for (const auto& [file, events] : ended) {
    ASSERT_FALSE(events.empty());
    const auto& start = std::get<schema::OwnedProcessStartEvent>(events.front());
    const int32_t pid = start.header.pid;
    EXPECT_NE(pid, 0) << file;
    pids.insert(pid);
    instances.insert(start.instance_id);
    EXPECT_NE(file.filename().string().find("-" + std::to_string(pid) + "-"), std::string::npos)
        << file;
    for (const auto& e : events) EXPECT_EQ(schema::HeaderOf(e).pid, pid) << file;
    EXPECT_EQ(Count(events, schema::EventType::kKernel), static_cast<size_t>(kLaunches)) << file;
    ExpectCompleteStream(file);
  }
  EXPECT_EQ(pids.size(), static_cast<size_t>(kApps));
  EXPECT_EQ(instances.size(), static_cast<size_t>(kApps));
}

// A fork()ed child does not keep its parent's connection open: when the parent is killed, the
// collector sees its stream end (process_lost) at once, while the children (sleeping 4 s) still
// live and later end their own streams normally.
TEST_F(IdentityTest, AKilledParentIsLostAtOnceWhileItsForkedChildrenLive) {
  TempDir dir;
  const collector::CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  setenv("CUFLIGHT_COLLECTOR", options.socket.c_str(), 1);
  const ProcessResult r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5", "fork-sleep"});
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(r.exit_code, 128 + SIGKILL) << r.out << r.err;
  int child[2] = {0, 0};
  const size_t at = r.out.find("children=");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "children=%d,%d", &child[0], &child[1]), 2) << r.out;
  ASSERT_TRUE(WaitUntil([&] { return running.stats().processes_lost >= 1; }));
  const auto lost_after = std::chrono::steady_clock::now() - killed;
  // Well within the children's 4 s: their copies of the parent's socket are closed.
  EXPECT_LT(lost_after, std::chrono::milliseconds(1500));
  for (int pid : child) EXPECT_EQ(kill(pid, 0), 0) << "child " << pid << " ended early";
  // Then each child ends its own stream: process_start of its own pid, 5 kernels, process_end.
  std::map<fs::path, std::vector<schema::OwnedEvent>> ended;
  ASSERT_TRUE(WaitUntil([&] {
    ended = EndedLogs(options.log_dir);
    return ended.size() >= 2;
  }));
  std::set<int32_t> ended_pids;
  for (const auto& [file, events] : ended) {
    ended_pids.insert(schema::HeaderOf(events.front()).pid);
    EXPECT_EQ(Count(events, schema::EventType::kKernel), 5u) << file;
    ExpectCompleteStream(file);
  }
  EXPECT_EQ(ended_pids, (std::set<int32_t>{child[0], child[1]}));
  EXPECT_EQ(running.stats().processes_lost, 1u);
  running.Stop();
}

// The same with the fork() landing while the parent's sender thread is between connect() and
// recording its new socket (strace holds connect's return for 300 ms, and the application forks
// 100 ms after its launches, the first of which started the sender thread). The child must not keep
// an unrecorded copy of that socket: fork waits for the connect to be recorded, and the child
// closes the parent's socket.
TEST_F(IdentityTest, AForkDuringTheParentsConnectLeavesTheChildNoCopyOfItsSocket) {
  std::string strace;
  std::string why;
  std::vector<std::string> args =
      cuflight::testing::StraceInject("connect", "delay_exit=300000", &strace, &why);
  if (args.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const collector::CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  setenv("CUFLIGHT_COLLECTOR", options.socket.c_str(), 1);
  for (const char* arg : {"--", CUFLIGHT_FAKE_APP, CUFLIGHT_INJECT_SO, "5", "fork-sleep", "100"}) {
    args.emplace_back(arg);
  }
  ChildProcess app(strace, args, dir.path() / "app.out");
  // The parent prints its children's pids, then kills itself 300 ms later; the children live 4 s.
  // The first connection to close is the parent's (a slow build may not have sent its
  // process_start by then, so it need not end with process_lost).
  ASSERT_TRUE(app.WaitForOutput("children=", std::chrono::seconds(20))) << app.Output();
  const auto printed = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return running.stats().connections_closed >= 1; })) << app.Output();
  const auto closed_after = std::chrono::steady_clock::now() - printed;
  EXPECT_LT(closed_after, std::chrono::milliseconds(1800)) << "the parent's socket outlived it";
  ASSERT_TRUE(app.Wait(std::chrono::seconds(20)).has_value());  // strace ends with the children
  std::map<fs::path, std::vector<schema::OwnedEvent>> ended;
  ASSERT_TRUE(WaitUntil([&] {
    ended = EndedLogs(options.log_dir);
    return ended.size() >= 2;
  }));
  EXPECT_LE(running.stats().processes_lost, 1u);
  running.Stop();
}

// exec() keeps pid, start time and exe and starts seq at 0 again: the new image is a stream of
// its own, stored in full, and the old one ends with process_lost.
TEST_F(IdentityTest, AProcessAfterExecIsRecordedInFullAsANewStream) {
  TempDir dir;
  const collector::CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  setenv("CUFLIGHT_COLLECTOR", options.socket.c_str(), 1);
  const ProcessResult r = RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "12", "exec"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::map<fs::path, std::vector<schema::OwnedEvent>> ended;
  ASSERT_TRUE(WaitUntil([&] {
    ended = EndedLogs(options.log_dir);
    return !ended.empty() && running.stats().processes_lost >= 1;
  }));
  const std::vector<fs::path> files = LogFiles(options.log_dir);
  ASSERT_EQ(files.size(), 2u);
  ASSERT_EQ(ended.size(), 1u);
  const fs::path new_image = ended.begin()->first;
  const fs::path old_image = files[0] == new_image ? files[1] : files[0];
  const auto& after = ended.begin()->second;
  const std::vector<schema::OwnedEvent> before = DecodeLog(old_image);
  ASSERT_FALSE(before.empty());
  const auto& start_before = std::get<schema::OwnedProcessStartEvent>(before.front());
  const auto& start_after = std::get<schema::OwnedProcessStartEvent>(after.front());
  EXPECT_EQ(start_before.header.pid, start_after.header.pid);
  EXPECT_EQ(start_before.start_ns, start_after.start_ns);
  EXPECT_EQ(start_before.exe, start_after.exe);
  EXPECT_NE(start_before.instance_id, start_after.instance_id);
  // The new image: every event, from seq 0, none taken for a duplicate.
  EXPECT_EQ(Count(after, schema::EventType::kKernel), 12u);
  ExpectCompleteStream(new_image);
  EXPECT_EQ(Count(before, schema::EventType::kKernel), 12u);
  EXPECT_EQ(schema::TypeOf(before.back()), schema::EventType::kProcessLost);
  running.Stop();
  EXPECT_EQ(running.stats().duplicates, 0u);
  EXPECT_EQ(running.stats().events_lost, 0u);

  // The report keeps the two images apart too (same pid and start time, other instance ids).
  report::Report model;
  std::string error;
  ASSERT_TRUE(report::BuildReport(report::ReportOptions(), files, &model, &error)) << error;
  EXPECT_EQ(model.processes.size(), 2u);
  EXPECT_EQ(model.duplicate_events, 0u);
}

// An argv of 63 KiB made a process_start over 64 KiB: the collector refused the line and never
// recorded the process. Now the library cuts argv, marks the cut and names it in `truncated`.
TEST_F(IdentityTest, AProcessWithA63KiBArgvIsRecorded) {
  TempDir dir;
  const collector::CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  setenv("CUFLIGHT_COLLECTOR", options.socket.c_str(), 1);
  std::vector<std::string> args = {CUFLIGHT_INJECT_SO, "7", "", "--api-key=abc123"};
  size_t bytes = 0;
  for (int i = 0; bytes < 63 * 1024; ++i) {
    args.push_back("--input=/datasets/shard-" + std::to_string(i) + std::string(100, 'z'));
    bytes += args.back().size() + 1;
  }
  const ProcessResult r = RunProcess(CUFLIGHT_FAKE_APP, args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::map<fs::path, std::vector<schema::OwnedEvent>> ended;
  ASSERT_TRUE(WaitUntil([&] {
    ended = EndedLogs(options.log_dir);
    return !ended.empty();
  })) << "the process was not recorded";
  const auto& events = ended.begin()->second;
  const auto& start = std::get<schema::OwnedProcessStartEvent>(events.front());
  EXPECT_EQ(start.truncated, std::vector<std::string>{"argv"});
  ASSERT_GE(start.argv.size(), 5u);
  EXPECT_EQ(start.argv[4], "--api-key=abc123");
  EXPECT_TRUE(start.argv.back().ends_with("...[truncated]")) << start.argv.back();
  EXPECT_EQ(Count(events, schema::EventType::kKernel), 7u);
  EXPECT_EQ(running.stats().rejected_for(collector::RejectReason::kLineTooLong), 0u);
}

// Another user made /tmp/cuflight-<victim uid>/ first and runs a collector there. The victim's
// application (no XDG_RUNTIME_DIR, no CUFLIGHT_COLLECTOR) sends it nothing and says why; the
// victim's own collector refuses the directory and says who made it.
TEST_F(IdentityTest, ASquattedDefaultSocketDirectoryGetsNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run processes as other uids (setpriv)";
  const std::string setpriv = FindProgram("setpriv");
  if (setpriv.empty()) GTEST_SKIP() << "setpriv(1) is not installed";
  const ProcessResult probe =
      RunProcess(setpriv, {"--reuid=54321", "--regid=54321", "--clear-groups", "true"});
  if (probe.exit_code != 0) GTEST_SKIP() << "setpriv is not permitted here: " << probe.err;
  const std::vector<std::string> as_victim = {"--reuid=54321", "--regid=54321", "--clear-groups"};
  const std::vector<std::string> as_squatter = {"--reuid=54322", "--regid=54322", "--clear-groups"};
  const fs::path squatted = "/tmp/cuflight-54321";  // the victim's default directory
  fs::remove_all(squatted);
  const SharedBinaries bin;
  TempDir dir;
  chmod(dir.path().c_str(), 0755);
  const fs::path squatter_logs = dir.path() / "squatter-logs";
  fs::create_directory(squatter_logs);
  ASSERT_EQ(chown(squatter_logs.c_str(), 54322, 54322), 0);

  std::vector<std::string> args = as_squatter;
  for (const std::string& a :
       {bin.collector, std::string("--socket"), (squatted / "collector.sock").string(),
        std::string("--log-dir"), squatter_logs.string()}) {
    args.push_back(a);
  }
  ChildProcess squatter(setpriv, args, dir.path() / "squatter.out");
  ASSERT_TRUE(WaitForSocket(squatted / "collector.sock", std::chrono::seconds(20)))
      << squatter.Output();

  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  const std::string saved_runtime_dir = runtime_dir != nullptr ? runtime_dir : "";
  unsetenv("XDG_RUNTIME_DIR");
  unsetenv("CUFLIGHT_COLLECTOR");
  args = as_victim;
  for (const std::string& a : {bin.app, bin.inject, std::string("5")}) args.push_back(a);
  const ProcessResult app = RunProcess(setpriv, args);
  EXPECT_EQ(app.exit_code, 0) << app.out << app.err;
  EXPECT_NE(app.err.find("not sending to the collector at /tmp/cuflight-54321/collector.sock"),
            std::string::npos)
      << app.err;
  EXPECT_NE(app.err.find("is owned by uid 54322"), std::string::npos) << app.err;

  args = as_victim;
  for (const std::string& a :
       {bin.collector, std::string("--log-dir"), (dir.path() / "victim-logs").string()}) {
    args.push_back(a);
  }
  const ProcessResult own = RunProcess(setpriv, args);
  if (!saved_runtime_dir.empty()) setenv("XDG_RUNTIME_DIR", saved_runtime_dir.c_str(), 1);
  EXPECT_EQ(own.exit_code, 2) << own.err;
  EXPECT_NE(own.err.find("directory /tmp/cuflight-54321 is owned by uid 54322"), std::string::npos)
      << own.err;

  squatter.Signal(SIGTERM);
  squatter.Wait(std::chrono::seconds(10));
  EXPECT_TRUE(LogFiles(squatter_logs).empty()) << "the squatter stored the victim's events";
  fs::remove_all(squatted);
}

// A node collector as a service user of its own, with --socket-group: the application of a
// member of the group is recorded under its uid; another user's is refused by the socket's mode
// and says so in one line on stderr, then runs on. (The collector's own refusal of a peer the
// mode let in: tests/collector/collector_hardening_test.cc.)
TEST_F(IdentityTest, ANodeCollectorRecordsItsSocketGroupAndTellsOthersWhyNot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run processes as other uids (setpriv)";
  const std::string setpriv = FindProgram("setpriv");
  if (setpriv.empty()) GTEST_SKIP() << "setpriv(1) is not installed";
  const std::vector<std::string> as_service = {"--reuid=54380", "--regid=54380",
                                               "--groups=54381"};
  const std::vector<std::string> as_member = {"--reuid=54382", "--regid=54382", "--groups=54381"};
  const std::vector<std::string> as_outsider = {"--reuid=54383", "--regid=54383",
                                                "--clear-groups"};
  std::vector<std::string> args = as_service;
  args.emplace_back("true");
  const ProcessResult probe = RunProcess(setpriv, args);
  if (probe.exit_code != 0) GTEST_SKIP() << "setpriv is not permitted here: " << probe.err;

  const SharedBinaries bin;
  TempDir dir;
  ASSERT_EQ(chown(dir.path().c_str(), 54380, 54380), 0);
  ASSERT_EQ(chmod(dir.path().c_str(), 0711), 0);
  const fs::path socket = dir.path() / "run" / "collector.sock";
  const fs::path logs = dir.path() / "logs";
  args = as_service;
  for (const std::string& a :
       {bin.collector, std::string("--socket"), socket.string(), std::string("--log-dir"),
        logs.string(), std::string("--socket-group"), std::string("54381")}) {
    args.push_back(a);
  }
  ChildProcess collector(setpriv, args, dir.path() / "collector.out");
  ASSERT_TRUE(WaitForSocket(socket, std::chrono::seconds(20))) << collector.Output();
  setenv("CUFLIGHT_COLLECTOR", socket.c_str(), 1);
  setenv("CUFLIGHT_COLLECTOR_UID", "54380", 1);  // what deploy/ tells the node's jobs

  args = as_member;
  for (const std::string& a : {bin.app, bin.inject, std::string("5")}) args.push_back(a);
  const ProcessResult member = RunProcess(setpriv, args);
  EXPECT_EQ(member.exit_code, 0) << member.out << member.err;
  EXPECT_EQ(member.err.find("cannot connect"), std::string::npos) << member.err;

  args = as_outsider;
  for (const std::string& a : {bin.app, bin.inject, std::string("5")}) args.push_back(a);
  const ProcessResult outsider = RunProcess(setpriv, args);
  unsetenv("CUFLIGHT_COLLECTOR_UID");
  EXPECT_EQ(outsider.exit_code, 0) << outsider.out << outsider.err;
  const std::string why = "cannot connect to the collector at " + socket.string() +
                          ": permission denied (uid 54383 and its groups may not use the socket";
  const size_t first = outsider.err.find(why);
  EXPECT_NE(first, std::string::npos) << outsider.err;
  EXPECT_EQ(outsider.err.find(why, first + 1), std::string::npos) << "said twice: "
                                                                   << outsider.err;

  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(std::chrono::seconds(20)), 0) << collector.Output();
  const std::vector<fs::path> files = LogFiles(logs);
  ASSERT_EQ(files.size(), 1u) << collector.Output();
  EXPECT_TRUE(files[0].filename().string().ends_with("-u54382.jsonl")) << files[0];
  const std::vector<schema::OwnedEvent> events = DecodeLog(files[0]);
  EXPECT_EQ(Count(events, schema::EventType::kKernel), 5u);
  EXPECT_EQ(Count(events, schema::EventType::kProcessEnd), 1u);
  ExpectCompleteStream(files[0]);
  EXPECT_NE(collector.Output().find(" uid 54382 gid 54382"), std::string::npos)
      << collector.Output();
}

}  // namespace
}  // namespace cuflight::inject::testing
