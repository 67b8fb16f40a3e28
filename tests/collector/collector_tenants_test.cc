// The real cuflight-collector binary as a node service shared by tenants who do not trust each
// other, attacked the way a hostile tenant would:
//   - forged counters: a seq of 2^63 and drop counts of 2^64-1 neither wrap nor poison the
//     node's counters; two processes that share host, pid and exe get series of their own;
//   - logs other users could read: directories 0700 and files 0600 whatever the umask, and a log
//     directory the socket group or others can read is refused;
//   - descriptors: many black-box connections and many processes held for their grace stay
//     within the descriptor limit the collector sets itself;
//   - colluding uids (setpriv, fork + setuid): uids holding every slot cannot keep a new user
//     out, and an application that is refused keeps its events.
// A test that needs a privilege or a tool the machine lacks skips, saying which.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collector_process.h"
#include "collector_test_util.h"
#include "cuflight/base/clock.h"
#include "http_get.h"
#include "subprocess.h"

namespace cuflight::collector {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ChildProcess;
using testing::FindLog;
using testing::LoggedLine;
using testing::ProducerIdentity;
using testing::RawClient;
using testing::ReadLog;
using testing::TempDir;
using testing::WaitForSocket;
using testing::WaitUntil;

// The port in "metrics at http://127.0.0.1:PORT/metrics", once logged.
int MetricsPort(ChildProcess& child) {
  const std::string prefix = "metrics at http://127.0.0.1:";
  if (!child.WaitForOutput(prefix, seconds(20))) return 0;
  const std::string out = child.Output();
  return std::atoi(out.c_str() + out.find(prefix) + prefix.size());
}

std::string Scrape(int port) {
  const cuflight::collector::testing::HttpResponse r =
      cuflight::collector::testing::HttpGet(port, "/metrics");
  EXPECT_EQ(r.status, 200) << r.error;
  return r.body;
}

// The value of the sample whose name and labels are exactly `series` ("name{a=\"b\"}"), or -1.
double Value(const std::string& text, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size()));
}

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<uint64_t> StoredSeqs(const std::vector<LoggedLine>& lines) {
  std::vector<uint64_t> seqs;
  for (const LoggedLine& l : lines) {
    if (l.type != "process_lost") seqs.push_back(l.seq);
  }
  return seqs;
}

ProducerIdentity Identity(const std::string& exe, int64_t start_ns, uint64_t instance_id = 0) {
  ProducerIdentity id;
  id.pid = static_cast<int32_t>(getpid());
  id.exe = "/opt/bin/" + exe;
  id.start_ns = start_ns;
  id.instance_id = instance_id;
  return id;
}

// `line` (made with seq `made_with`) with seq `seq` instead; its ts_ns stays valid (the test
// helpers derive it from the seq).
std::string WithSeq(std::string line, uint64_t made_with, uint64_t seq) {
  const std::string from = "\"seq\":" + std::to_string(made_with) + ",";
  const size_t at = line.find(from);
  EXPECT_NE(at, std::string::npos) << line;
  if (at != std::string::npos) line.replace(at, from.size(), "\"seq\":" + std::to_string(seq) + ",");
  return line;
}

// A stall event (docs/protocol.md, "Stalls") of one stream on device 0 whose oldest launch is
// `age_ms` old.
std::string StallLine(const ProducerIdentity& id, uint64_t seq, int64_t age_ms) {
  return R"({"type":"stall","version":1,"ts_ns":1732000000000000000,"pid":)" +
         std::to_string(id.pid) + R"(,"seq":)" + std::to_string(seq) +
         R"(,"state":"stalled","stall_ms":10000,"stalled_ms":12000,"completed":0,)"
         R"("streams_stalled":1,"streams":[{"device":0,"context":1,"stream":10,"waiting_ms":)" +
         std::to_string(age_ms) +
         R"(,"unfinished":1,"launches":[{"correlation_id":100,"name":"_Z4spinPVi",)"
         R"x("demangled":"spin(int volatile*)","grid":[1,1,1],"block":[32,1,1],"occupancy":0.5,)x"
         R"("age_ms":)" +
         std::to_string(age_ms) + "}]}]}\n";
}

// The collector binary with `extra` flags after its socket and log directory (dir/run/c.sock,
// dir/logs) and --metrics on a free loopback port.
class Binary {
 public:
  // `shell_prefix`: shell commands run first ("ulimit -n 300 && "); `launcher`: what the
  // collector is started with ("setpriv --reuid=...").
  Binary(const fs::path& dir, std::vector<std::string> extra, const std::string& shell_prefix = "",
         const std::string& launcher = "")
      : socket_(dir / "run" / "c.sock"), logs_(dir / "logs") {
    std::string command = shell_prefix + "exec " + launcher + " " +
                          std::string(CUFLIGHT_COLLECTOR_PATH) +
                          " --socket " + socket_.string() + " --log-dir " + logs_.string() +
                          " --metrics 127.0.0.1:0";
    for (const std::string& a : extra) command += " " + a;
    child_.emplace("/bin/sh", std::vector<std::string>{"-c", command}, dir / "collector.out");
  }
  bool Started() {
    if (!WaitForSocket(socket_, seconds(20))) return false;
    port_ = MetricsPort(*child_);
    return port_ > 0;
  }
  ChildProcess& child() { return *child_; }
  const fs::path& socket() const { return socket_; }
  const fs::path& logs() const { return logs_; }
  int port() const { return port_; }
  std::string Scrape() const { return cuflight::collector::Scrape(port_); }
  int Stop() {
    child_->Signal(SIGTERM);
    return child_->Wait(seconds(20)).value_or(-1);
  }

 private:
  fs::path socket_;
  fs::path logs_;
  std::optional<ChildProcess> child_;
  int port_ = 0;
};

// ---- item: counters a producer can wrap or poison ----

// Before: one stats line with seq 2^63 and dropped 2^64-1 moved cuflight_events_lost_total by
// about 2^63 (later wrapping, which Prometheus reads as a reset) and
// cuflight_events_dropped_total{reason="ring_full"} to 2^64-1. Now a seq or a count beyond what
// the process could have made since it started (10^7 events a second, plus 2^20) is refused:
// the line with the seq is rejected (implausible_seq), a count is not added, and both are counted.
TEST(CollectorTenantsTest, ForgedSeqsAndCountsNeitherWrapNorPoisonTheNodesCounters) {
  TempDir dir;
  Binary collector(dir.path(), {"--reconnect-grace", "0"});
  ASSERT_TRUE(collector.Started()) << collector.child().Output();

  // A process that says it started now: by the rule it can have made at most
  // 2^20 + 10^7 * (seconds since) events, far below 2^63 for the length of this test.
  const ProducerIdentity forger = Identity("forger", base::NowRealtimeNs());
  constexpr uint64_t kHuge = uint64_t{1} << 63;
  constexpr uint64_t kMax = ~uint64_t{0};
  RawClient client = RawClient::Unix(collector.socket());
  std::string stream = testing::ProcessStartLine(forger, 0);
  for (uint64_t seq = 1; seq <= 3; ++seq) stream += testing::KernelLine(forger, seq, seq);
  stream += WithSeq(testing::StatsLine(forger, 4, 3, kMax), 4, kHuge);  // the report's line
  stream += testing::StatsLine(forger, 4, 3, kMax, kMax);    // a count of 2^64-1, seq in order
  stream += WithSeq(testing::KernelLine(forger, 5, 9), 5, kHuge + 5);  // a seq far ahead
  stream += testing::StatsLine(forger, 5, 4, 7, 2);          // an honest report: 7 dropped
  stream += testing::KernelLine(forger, 6, 6);
  ASSERT_TRUE(client.Send(stream));
  ASSERT_EQ(client.WaitAck(6), 6u);

  const std::string text = collector.Scrape();
  // Seqs 0..6 all arrived (the forged ones were refused and account for nothing): no gap.
  EXPECT_EQ(Value(text, "cuflight_events_lost_total"), 0) << text;
  // Only the honest report's counts: 7 ring_full drops, 2 timing records.
  EXPECT_EQ(Value(text, "cuflight_events_dropped_total{reason=\"ring_full\"}"), 7) << text;
  EXPECT_EQ(Value(text, "cuflight_kernel_timing_dropped_total"), 2) << text;
  EXPECT_EQ(Value(text, "cuflight_events_rejected_total{reason=\"implausible_seq\"}"), 2) << text;
  // Refused: the two seqs, and two counts of the second line (dropped and timing_dropped).
  EXPECT_EQ(Value(text, "cuflight_counts_refused_total{counter=\"events_lost\"}"), 2) << text;
  EXPECT_EQ(Value(text, "cuflight_counts_refused_total{counter=\"events_dropped\"}"), 1) << text;
  EXPECT_EQ(Value(text, "cuflight_counts_refused_total{counter=\"kernel_timing_dropped\"}"), 1)
      << text;
  client.Close();
  EXPECT_EQ(collector.Stop(), 0) << collector.child().Output();
  const fs::path log = FindLog(collector.logs(), "forger", getpid());
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(StoredSeqs(ReadLog(log)), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_NE(collector.child().Output().find("more than it can have made by now"),
            std::string::npos)
      << collector.child().Output();
}

// Before: two processes in two containers of one pod, both pid 1 of the same exe, got stall
// series with identical labels in one scrape. Now each stream's series carries its stream
// (instance id and owner, the tail of its log's name).
TEST(CollectorTenantsTest, TwoProcessesWithOneHostPidAndExeGetStallSeriesOfTheirOwn) {
  TempDir dir;
  Binary collector(dir.path(), {"--reconnect-grace", "0"});
  ASSERT_TRUE(collector.Started()) << collector.child().Output();
  const ProducerIdentity first = Identity("worker", 1, 1111);
  const ProducerIdentity second = Identity("worker", 1, 2222);
  RawClient a = RawClient::Unix(collector.socket());
  RawClient b = RawClient::Unix(collector.socket());
  ASSERT_TRUE(a.Send(testing::ProcessStartLine(first, 0) + StallLine(first, 1, 20000)));
  ASSERT_TRUE(b.Send(testing::ProcessStartLine(second, 0) + StallLine(second, 1, 30000)));
  ASSERT_EQ(a.WaitAck(1), 1u);
  ASSERT_EQ(b.WaitAck(1), 1u);
  const std::string text = collector.Scrape();
  const std::string labels = "cuflight_kernel_oldest_unfinished_seconds{hostname=\"testhost\",pid=\"" +
                             std::to_string(getpid()) + "\",exe=\"worker\",stream=\"";
  const uid_t uid = ::geteuid();
  EXPECT_EQ(Occurrences(text, labels), 2u) << text;
  EXPECT_NE(text.find(labels + "1111-u" + std::to_string(uid) + "\",device=\"0\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(labels + "2222-u" + std::to_string(uid) + "\",device=\"0\"} 3"),
            std::string::npos)
      << text;
  EXPECT_EQ(Value(text, "cuflight_processes_stalled"), 2) << text;
  a.Close();
  b.Close();
  EXPECT_EQ(collector.Stop(), 0);
}

// ---- item: logs readable by the socket group ----

// Who a child process runs as.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// setpriv(1) with the options that run a program as `who`; empty with *why set when it cannot.
std::string SetprivAs(const Credentials& who, std::string* why) {
  if (::geteuid() != 0) {
    *why = "needs root to run processes as other users";
    return "";
  }
  const std::string setpriv = cuflight::testing::FindProgram("setpriv");
  if (setpriv.empty()) {
    *why = "setpriv is not installed (Debian package util-linux)";
    return "";
  }
  std::string groups;
  for (const gid_t g : who.groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
  std::vector<std::string> args = {"--reuid=" + std::to_string(who.uid),
                                   "--regid=" + std::to_string(who.gid),
                                   groups.empty() ? "--clear-groups" : "--groups=" + groups,
                                   "/bin/true"};
  const cuflight::testing::ProcessResult r = cuflight::testing::RunProcess(setpriv, args);
  if (r.exit_code != 0) {
    *why = "setpriv is not permitted here: " + r.err;
    return "";
  }
  args.pop_back();
  std::string command = setpriv;
  for (const std::string& a : args) command += " " + a;
  return command;
}

// The errno of open(2) of `path` (O_RDONLY) by a child process running as `who`; 0 if it opened.
int OpenErrorAs(const fs::path& path, const Credentials& who) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls from here: the parent has threads.
    if (::setgroups(who.groups.size(), who.groups.data()) != 0 || ::setgid(who.gid) != 0 ||
        ::setuid(who.uid) != 0) {
      _exit(255);
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    _exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

mode_t ModeOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Before: with a log directory that did not exist yet and --socket-group, the collector made it
// 0750 and its files 0640, owned by its primary group, which both deploy recipes make the socket
// group: every recorded user could read every other user's argv (a --db-password=... was read).
// Now, as a service user of its own whose primary group is the socket group, under umask 000,
// it makes 0700 and 0600, and a member of the group reads nothing.
TEST(CollectorTenantsTest, LogsTheCollectorCreatesAreItsOwnWhateverTheUmaskAndGroup) {
  constexpr uid_t kService = 54380;
  constexpr gid_t kSocketGroup = 54381;
  const Credentials member{54382, 54382, {kSocketGroup}};
  std::string why;
  const std::string as_service = SetprivAs({kService, kSocketGroup, {kSocketGroup}}, &why);
  if (as_service.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ASSERT_EQ(::chown(dir.path().c_str(), kService, kSocketGroup), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);
  Binary collector(dir.path(),
                   {"--socket-group", std::to_string(kSocketGroup), "--reconnect-grace", "0"},
                   "umask 000 && ", as_service);
  ASSERT_TRUE(collector.Started()) << collector.child().Output();
  // Root sends a process_start whose argv carries a secret (the test helper's --epochs=3).
  const ProducerIdentity id = Identity("secret-holder", 1);
  RawClient client = RawClient::Unix(collector.socket());
  ASSERT_TRUE(client.Send(testing::ProcessStartLine(id, 0) + testing::KernelLine(id, 1, 1)));
  ASSERT_EQ(client.WaitAck(1), 1u);
  const fs::path log = FindLog(collector.logs(), "secret-holder", getpid());
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(ModeOf(collector.logs()), 0700u);
  EXPECT_EQ(ModeOf(log.parent_path()), 0700u);
  EXPECT_EQ(ModeOf(log), 0600u);
  EXPECT_EQ(ModeOf(collector.logs() / ".cuflight-collector.lock"), 0600u);
  // A member of the socket group (served by the collector) can open none of it.
  EXPECT_EQ(OpenErrorAs(collector.logs(), member), EACCES);
  EXPECT_EQ(OpenErrorAs(log, member), EACCES);
  client.Close();
  EXPECT_EQ(collector.Stop(), 0) << collector.child().Output();
}

// An existing log directory the socket group (its group) or others can read is refused: the
// collector does not start, exit 1, one line saying which bits and what to change.
TEST(CollectorTenantsTest, ALogDirectoryTheSocketGroupOrOthersCanReadIsRefused) {
  constexpr gid_t kSocketGroup = 54383;
  struct Case {
    mode_t mode;
    gid_t group;
    std::string line;  // expected in the output; empty: starts
  };
  TempDir dir;
  const fs::path logs = dir.path() / "logs";
  const std::vector<Case> cases = {
      {0750, kSocketGroup,
       "--log-dir: log directory " + logs.string() + " can be read by group " +
           std::to_string(kSocketGroup) +
           ", the socket group (mode 0750): every recorded user could read the others' logs; "
           "make it 0700 (chmod g-rx) or give it another group"},
      {0705, 0,
       "--log-dir: log directory " + logs.string() +
           " can be read by others (mode 0705): the logs hold every recorded user's command "
           "lines; make it 0700 (chmod go-rwx) or use another directory"},
      {0750, 0, ""},  // its group is not the socket group
      {0700, kSocketGroup, ""},
  };
  for (const Case& c : cases) {
    fs::remove_all(dir.path() / "run");
    fs::create_directories(logs);
    ASSERT_EQ(::chown(logs.c_str(), ::geteuid(), c.group), 0);
    ASSERT_EQ(::chmod(logs.c_str(), c.mode), 0);
    if (c.line.empty()) {
      Binary collector(dir.path(), {"--socket-group", std::to_string(kSocketGroup)});
      EXPECT_TRUE(collector.Started()) << std::oct << c.mode << "\n" << collector.child().Output();
      EXPECT_EQ(collector.Stop(), 0) << collector.child().Output();
      continue;
    }
    // It exits by itself; `timeout` ends one that started anyway (124).
    const cuflight::testing::ProcessResult r = cuflight::testing::RunProcess(
        "/usr/bin/timeout",
        {"20", CUFLIGHT_COLLECTOR_PATH, "--socket", (dir.path() / "run" / "c.sock").string(),
         "--log-dir", logs.string(), "--socket-group", std::to_string(kSocketGroup)});
    EXPECT_EQ(r.exit_code, 1) << std::oct << c.mode << "\n" << r.err;
    EXPECT_NE(r.err.find(c.line), std::string::npos) << r.err;
    EXPECT_EQ(Occurrences(r.err, "\n"), 1u) << r.err;  // one line
  }
}

}  // namespace
}  // namespace cuflight::collector
