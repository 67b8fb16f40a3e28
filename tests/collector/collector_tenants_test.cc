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
#include <cstdio>
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
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/spill/spill_writer.h"
#include "cuflight/transport/sender.h"
#include "http_get.h"
#include "run_as.h"
#include "subprocess.h"

namespace cuflight::collector {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AsUser;
using testing::ChildProcess;
using testing::Credentials;
using testing::FindLog;
using testing::LoggedLine;
using testing::ProducerIdentity;
using testing::RawClient;
using testing::ReadLog;
using testing::StoredSeqs;
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

ProducerIdentity Identity(const std::string& exe, int64_t start_ns, uint64_t instance_id = 0) {
  ProducerIdentity id = testing::Identity(exe, start_ns);
  id.instance_id = instance_id;
  return id;
}

// `line` (made with seq `made_with`) with seq `seq` instead; its ts_ns stays valid (the test
// helpers derive it from the seq).
std::string WithSeq(std::string line, uint64_t made_with, uint64_t seq) {
  const std::string from = "\"seq\":" + std::to_string(made_with) + ",";
  const size_t at = line.find(from);
  EXPECT_NE(at, std::string::npos) << line;
  if (at != std::string::npos)
    line.replace(at, from.size(), "\"seq\":" + std::to_string(seq) + ",");
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
    // As another user (a launcher), a copy that user may run: the build tree may sit under a
    // directory only its owner can enter.
    const std::string program = launcher.empty()
                                    ? std::string(CUFLIGHT_COLLECTOR_PATH)
                                    : test_support::SharedReadableCopy(CUFLIGHT_COLLECTOR_PATH);
    std::string command = shell_prefix + "exec " + launcher + " " + program + " --socket " +
                          socket_.string() + " --log-dir " + logs_.string() +
                          " --metrics 127.0.0.1:0";
    for (const std::string& a : extra) command += " " + a;
    // A file of its own: a second collector in the same directory must not find the first
    // one's metrics port in it.
    static int started = 0;
    child_.emplace("/bin/sh", std::vector<std::string>{"-c", command},
                   dir / ("collector" + std::to_string(++started) + ".out"));
  }
  // Serving, and WaitForSocket's probe connection gone (it would take a slot).
  bool Started() {
    if (!WaitForSocket(socket_, seconds(20))) return false;
    port_ = MetricsPort(*child_);
    return port_ > 0 && WaitUntil([&] {
             const std::string text = Scrape();
             return Value(text, "cuflight_producer_connections_total") >= 1 &&
                    Value(text, "cuflight_producers_connected") == 0;
           });
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

bool SendWithDescriptor(int fd, const std::string& bytes, int passed);
int WaitStatus(pid_t pid);

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
  stream += testing::StatsLine(forger, 4, 3, kMax, kMax);  // a count of 2^64-1, seq in order
  stream += WithSeq(testing::KernelLine(forger, 5, 9), 5, kHuge + 5);  // a seq far ahead
  stream += testing::StatsLine(forger, 5, 4, 7, 2);  // an honest report: 7 dropped
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
  EXPECT_NE(collector.child().Output().find("more than it can have made by now"), std::string::npos)
      << collector.child().Output();
}

// A forged black box does the same through recovery: it says its producer had used seqs up to
// 2^63 (its seq base) when it was killed. That gap is refused and counted; the process's
// process_lost says 0 lost.
TEST(CollectorTenantsTest, AForgedBlackBoxCannotClaimAGapOfTwoToTheSixtyThree) {
  blackbox::RegionOptions region_options;
  region_options.ring_capacity = 64;
  region_options.journal_capacity = 64;
  region_options.function_capacity = 64;
  region_options.names_bytes = 4096;
  std::string error;
  const std::unique_ptr<blackbox::RegionWriter> region =
      blackbox::RegionWriter::Create(region_options, &error);
  ASSERT_NE(region, nullptr) << error;
  region->PublishState({.seq_base = uint64_t{1} << 63, .handled_pos = 0, .announced_devices = 0});
  TempDir dir;
  Binary collector(dir.path(), {"--reconnect-grace", "0"});
  ASSERT_TRUE(collector.Started()) << collector.child().Output();
  ProducerIdentity id = Identity("forged-box", base::NowRealtimeNs());
  id.pid = 1;  // the collector names the stream by the kernel's pid
  const std::string bytes = testing::ProcessStartLine(id, 0) + testing::KernelLine(id, 1, 1);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, collector.socket().c_str(), sizeof(addr.sun_path) - 1);
  const int box = region->fd();
  const pid_t child = ::fork();
  if (child == 0) {
    // Only system calls from here (the parent has threads): pass the box, send, die.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(1);
    if (!SendWithDescriptor(fd, bytes, box)) _exit(2);
    char ack[256];
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0 || ::recv(fd, ack, sizeof(ack), 0) <= 0) _exit(3);
    ::raise(SIGKILL);
    _exit(4);
  }
  ASSERT_GT(child, 0);
  EXPECT_EQ(WaitStatus(child), 128 + SIGKILL);
  ASSERT_TRUE(WaitUntil([&] {
    return Value(collector.Scrape(), "cuflight_counts_refused_total{counter=\"events_lost\"}") == 1;
  })) << collector.child().Output();
  const std::string text = collector.Scrape();
  EXPECT_EQ(Value(text, "cuflight_events_lost_total"), 0) << text;
  EXPECT_EQ(collector.Stop(), 0);
  const fs::path log = FindLog(collector.logs(), "forged-box", child);
  ASSERT_FALSE(log.empty()) << collector.child().Output();
  const std::vector<LoggedLine> lines = ReadLog(log);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().type, "process_lost");
  EXPECT_NE(lines.back().text.find("\"events_lost\":0"), std::string::npos) << lines.back().text;
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
  const std::string labels =
      "cuflight_kernel_oldest_unfinished_seconds{hostname=\"testhost\",pid=\"" +
      std::to_string(getpid()) + "\",exe=\"worker\",stream=\"";
  const uid_t uid = ::geteuid();
  EXPECT_EQ(Occurrences(text, labels), 2u) << text;
  EXPECT_NE(text.find(labels + "1111-u" + std::to_string(uid) + "\",UUID=\"unknown\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(labels + "2222-u" + std::to_string(uid) + "\",UUID=\"unknown\"} 3"),
            std::string::npos)
      << text;
  EXPECT_EQ(Value(text, "cuflight_processes_stalled"), 2) << text;
  a.Close();
  b.Close();
  EXPECT_EQ(collector.Stop(), 0);
}

// ---- item: logs readable by the socket group ----

// Who a child process runs as.
// setpriv(1) with the options that run a program as `who`, as one shell word list; empty with
// *why set when it cannot (run_as.h).
std::string SetprivAs(const Credentials& who, std::string* why) {
  std::string setpriv;
  const std::vector<std::string> args = AsUser(who, &setpriv, why);
  if (args.empty()) return "";
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

// ---- item: descriptors with black boxes ----

// Sends `bytes` on `fd` passing `passed` with them (SCM_RIGHTS), as the injected library passes
// its black box with its first bytes.
bool SendWithDescriptor(int fd, const std::string& bytes, int passed) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &passed, sizeof(int));
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

size_t OpenDescriptors(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return n;
}

// Before: each black-box connection held a socket, a pidfd and a memfd, processes held for
// their grace kept their log files and black boxes without any bound, and the collector asked
// for 3 x --max-connections + 256 descriptors: 200 connections with 224 open log files ran out
// ("cannot dup the fd ... Too many open files"). Now it asks for 9 x --max-connections + 256
// (per connection: socket, memfd, pidfd, log file, its fsync duplicate; per process held without
// a connection, at most --max-connections of them: memfd, pidfd, log file, duplicate), and
// refuses, counted, what would go beyond. With a hard limit of exactly that, 40 black-box
// connections that end (held for 60 s), 40 more, 10 over the limit, the 40 ending, and 40 more
// that come and end, never meet EMFILE.
TEST(CollectorTenantsTest, BlackBoxConnectionsAndHeldProcessesStayWithinTheDescriptorBudget) {
  std::string error;
  blackbox::RegionOptions region_options;
  region_options.ring_capacity = 64;
  region_options.journal_capacity = 64;
  region_options.function_capacity = 64;
  region_options.names_bytes = 4096;
  region_options.pid = static_cast<int32_t>(getpid());
  const std::unique_ptr<blackbox::RegionWriter> region =
      blackbox::RegionWriter::Create(region_options, &error);
  ASSERT_NE(region, nullptr) << error;
  constexpr int kMax = 40;
  constexpr int kBudget = 9 * kMax + 256;  // 616, written out: docs/collector.md's formula
  rlimit own{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &own), 0);
  if (own.rlim_max < static_cast<rlim_t>(kBudget)) GTEST_SKIP() << "needs " << kBudget << " fds";
  if (own.rlim_cur < 1024 && own.rlim_max >= 1024) {
    own.rlim_cur = 1024;  // the test's own sockets
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &own), 0);
  }
  TempDir dir;
  Binary collector(dir.path(),
                   {"--max-connections", std::to_string(kMax), "--max-connections-per-uid",
                    std::to_string(kMax), "--reconnect-grace", "60000", "--fsync-interval", "20"},
                   "ulimit -Sn 64 && ulimit -Hn " + std::to_string(kBudget) + " && ");
  ASSERT_TRUE(collector.Started()) << collector.child().Output();
  const pid_t pid = collector.child().pid();  // sh exec'd the collector
  size_t most = 0;
  int next = 0;
  // `n` producers that pass the black box, identify and send a kernel; acked.
  const auto open_producers = [&](int n) {
    std::vector<RawClient> clients;
    for (int i = 0; i < n; ++i, ++next) {
      const ProducerIdentity id = Identity("boxed" + std::to_string(next), 1000 + next);
      clients.push_back(RawClient::Unix(collector.socket()));
      EXPECT_TRUE(SendWithDescriptor(
          clients.back().fd(), testing::ProcessStartLine(id, 0) + testing::KernelLine(id, 1, 1),
          region->fd()));
    }
    for (RawClient& c : clients) EXPECT_EQ(c.WaitAck(1), 1u) << collector.child().Output();
    most = std::max(most, OpenDescriptors(pid));
    return clients;
  };
  std::vector<RawClient> first = open_producers(kMax);
  for (RawClient& c : first) c.Close();  // held: alive producers, 60 s of grace
  ASSERT_TRUE(
      WaitUntil([&] { return Value(collector.Scrape(), "cuflight_producers_connected") == 0; }));
  std::vector<RawClient> second = open_producers(kMax);
  most = std::max(most, OpenDescriptors(pid));
  // Over --max-connections: refused, counted.
  std::vector<RawClient> over;
  for (int i = 0; i < 10; ++i) {
    over.push_back(RawClient::Unix(collector.socket()));
    EXPECT_TRUE(over.back().WaitClosedByPeer()) << i;
  }
  // These end too, with every held slot taken: written off at once, counted. And a third
  // round the same (held without a bound, as before, 120 processes would keep 360 descriptors).
  for (RawClient& c : second) c.Close();
  ASSERT_TRUE(WaitUntil([&] {
    return Value(collector.Scrape(), "cuflight_connections_refused_total{reason=\"linger_limit\"}") ==
           kMax;
  })) << collector.Scrape();
  std::vector<RawClient> third = open_producers(kMax);
  for (RawClient& c : third) c.Close();
  ASSERT_TRUE(WaitUntil([&] {
    return Value(collector.Scrape(), "cuflight_connections_refused_total{reason=\"linger_limit\"}") ==
           2 * kMax;
  })) << collector.Scrape();
  most = std::max(most, OpenDescriptors(pid));
  const std::string text = collector.Scrape();
  // One uid whose share is every slot: refused as over its share.
  EXPECT_EQ(Value(text, "cuflight_connections_refused_total{reason=\"uid_connection_limit\"}"), 10)
      << text;
  // Every black box was taken: none refused for want of a descriptor.
  EXPECT_EQ(text.find("cuflight_blackbox_errors_total{reason="), std::string::npos) << text;
  EXPECT_EQ(Value(text, "cuflight_log_write_errors_total"), 0) << text;
  EXPECT_LE(most, static_cast<size_t>(kBudget));
  RecordProperty("most_open_descriptors", static_cast<int>(most));
  std::printf("collector's open descriptors at most: %zu (budget %d)\n", most, kBudget);
  EXPECT_EQ(collector.Stop(), 0);
  const std::string out = collector.child().Output();
  EXPECT_EQ(out.find("Too many open files"), std::string::npos) << out;
  EXPECT_EQ(out.find("out of file descriptors"), std::string::npos) << out;
  EXPECT_EQ(out.find("descriptor limit"), std::string::npos) << out;  // raised to the budget
  // Every process's log has its two events.
  for (int i = 0; i < 3 * kMax; ++i) {
    const fs::path log = FindLog(collector.logs(), "boxed" + std::to_string(i), getpid());
    ASSERT_FALSE(log.empty()) << i;
    EXPECT_EQ(StoredSeqs(ReadLog(log)), (std::vector<uint64_t>{0, 1})) << i;
  }
}

// ---- item: a few tenants can fill the node ----

// Exit statuses of a HoldAs child.
constexpr int kHeld = 0;
constexpr int kRefused = 6;  // the collector closed the connection before the ack

// A child process running as `who` that connects `n` times to `socket`, sends on each a
// process_start and kernels up to `last` (start_ns `start` + i: its own stream per connection)
// and waits for their acks; then, with `hold`, keeps the connections until killed (a tenant
// holding its slots), else exits. Exit status kHeld when every connection was acked, kRefused
// when the collector closed one first. With `hold`, the status pipe `*ready` gets one byte per
// connection acked, 'x' when one was refused.
pid_t HoldAs(const Credentials& who, const fs::path& socket, int n, int64_t start, uint64_t last,
             bool hold, int* ready) {
  std::vector<std::string> streams;
  for (int i = 0; i < n; ++i) {
    ProducerIdentity id = Identity("tenant", start + i, static_cast<uint64_t>(start + i));
    std::string s = testing::ProcessStartLine(id, 0);
    for (uint64_t seq = 1; seq <= last; ++seq) s += testing::KernelLine(id, seq, seq);
    streams.push_back(std::move(s));
  }
  const std::string ack = "\"seq\":" + std::to_string(last) + "}";
  int pipe_fds[2] = {-1, -1};
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid != 0) {
    ::close(pipe_fds[1]);
    *ready = pipe_fds[0];
    return pid;
  }
  // Only async-signal-safe calls from here: the parent has threads.
  if (::setgroups(who.groups.size(), who.groups.data()) != 0 || ::setgid(who.gid) != 0 ||
      ::setuid(who.uid) != 0) {
    _exit(3);
  }
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(4);
    const std::string& s = streams[static_cast<size_t>(i)];
    if (::send(fd, s.data(), s.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(s.size())) {
      [[maybe_unused]] const ssize_t w = ::write(pipe_fds[1], "x", 1);
      _exit(kRefused);
    }
    char buf[4096];
    size_t have = 0;
    bool acked = false;
    for (int waits = 0; waits < 200 && !acked; ++waits) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t r = ::recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
      if (r <= 0) {
        [[maybe_unused]] const ssize_t w = ::write(pipe_fds[1], "x", 1);
        _exit(kRefused);
      }
      have += static_cast<size_t>(r);
      buf[have] = '\0';
      acked = std::strstr(buf, ack.c_str()) != nullptr;
      if (have > sizeof(buf) / 2) have = 0;
    }
    if (!acked) _exit(7);
    [[maybe_unused]] const ssize_t w = ::write(pipe_fds[1], "a", 1);
  }
  if (!hold) _exit(kHeld);
  for (;;) ::pause();
}

int WaitStatus(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Reads `n` status bytes from `fd`; the count of 'a' (acked) among them.
int AckedOf(int fd, int n) {
  int acked = 0;
  for (int i = 0; i < n; ++i) {
    char c = 0;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30000) <= 0 || ::read(fd, &c, 1) != 1) break;
    if (c == 'a') ++acked;
  }
  return acked;
}

// Before: the per-uid share is a quarter of --max-connections, so four uids holding their
// connections (alive, with stats heartbeats) refused a fifth user's application, which lost its
// events. Now, with every slot taken, a user holding fewer connections than another by two or
// more gets one by closing the newest connection of the one holding the most: the fifth user is
// served, each colluder keeps at least one, and a colluder asking for more is refused, so the
// shares settle instead of flapping.
TEST(CollectorTenantsTest, ColludingUsersCannotKeepANewUserOut) {
  constexpr uid_t kService = 54391;
  constexpr gid_t kSocketGroup = 54390;
  std::string why;
  // The collector as the deploy recipes run it: a user of its own, --socket-group.
  const std::string as_service = SetprivAs({kService, kSocketGroup, {kSocketGroup}}, &why);
  if (as_service.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ASSERT_EQ(::chown(dir.path().c_str(), kService, kSocketGroup), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);
  // 8 slots, a share of 2 (a quarter) per uid.
  Binary collector(dir.path(),
                   {"--max-connections", "8", "--socket-group", std::to_string(kSocketGroup),
                    "--reconnect-grace", "0"},
                   "", as_service);
  ASSERT_TRUE(collector.Started()) << collector.child().Output();
  std::vector<pid_t> colluders;
  std::vector<int> pipes;
  for (int u = 0; u < 4; ++u) {
    const Credentials who{static_cast<uid_t>(54392 + u), kSocketGroup, {kSocketGroup}};
    int ready = -1;
    colluders.push_back(HoldAs(who, collector.socket(), 2, 100 * (u + 1), 1, true, &ready));
    ASSERT_GT(colluders.back(), 0);
    pipes.push_back(ready);
    EXPECT_EQ(AckedOf(ready, 2), 2) << "colluder " << u;
  }
  EXPECT_EQ(Value(collector.Scrape(), "cuflight_producers_connected"), 8);

  // A fifth user's application: served, every event stored.
  const Credentials fifth{54400, kSocketGroup, {kSocketGroup}};
  int fifth_pipe = -1;
  const pid_t app = HoldAs(fifth, collector.socket(), 1, 900, 20, false, &fifth_pipe);
  EXPECT_EQ(WaitStatus(app), kHeld) << collector.child().Output();
  ::close(fifth_pipe);
  std::string text = collector.Scrape();
  EXPECT_EQ(Value(text, "cuflight_connections_closed_total{reason=\"fair_share\"}"), 1) << text;
  EXPECT_EQ(Value(text, "cuflight_connections_refused_total{reason=\"connection_limit\"}"), -1)
      << text;

  // A colluder asking for one more connection is refused: the one that lost a connection holds
  // 1 and nobody holds 3, the others hold their share of 2 already. The shares settle.
  const Credentials first_colluder{54392, kSocketGroup, {kSocketGroup}};
  int again_pipe = -1;
  const pid_t again = HoldAs(first_colluder, collector.socket(), 1, 5000, 1, false, &again_pipe);
  EXPECT_EQ(WaitStatus(again), kRefused);
  ::close(again_pipe);
  text = collector.Scrape();
  EXPECT_EQ(Value(text, "cuflight_connections_closed_total{reason=\"fair_share\"}"), 1) << text;
  // Connection refusals are their own metric: summed over reasons, the one refusal.
  EXPECT_EQ(
      std::max(Value(text, "cuflight_connections_refused_total{reason=\"connection_limit\"}"),
               0.0) +
          std::max(
              Value(text, "cuflight_connections_refused_total{reason=\"uid_connection_limit\"}"),
              0.0),
      1)
      << text;
  for (size_t i = 0; i < colluders.size(); ++i) {
    ::kill(colluders[i], SIGKILL);
    WaitStatus(colluders[i]);
    ::close(pipes[i]);
  }
  EXPECT_EQ(collector.Stop(), 0) << collector.child().Output();
  const fs::path log = FindLog(collector.logs(), "tenant", app);
  ASSERT_FALSE(log.empty());
  std::vector<uint64_t> all(21);
  for (uint64_t s = 0; s <= 20; ++s) all[s] = s;
  EXPECT_EQ(StoredSeqs(ReadLog(log)), all);
}

// When the node's slots are all held, one connection per user (only --max-connections users
// can do that), the next user's application is refused; with a spill directory (docs/spill.md)
// it keeps its events: the injector's own sender, refused by the real collector, spills every
// one and drops none.
TEST(CollectorTenantsTest, ARefusedApplicationSpillsItsEventsInsteadOfLosingThem) {
  constexpr uid_t kService = 54410;
  constexpr gid_t kSocketGroup = 54411;
  std::string why;
  const std::string as_service = SetprivAs({kService, kSocketGroup, {kSocketGroup}}, &why);
  if (as_service.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ASSERT_EQ(::chown(dir.path().c_str(), kService, kSocketGroup), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);
  Binary collector(dir.path(),
                   {"--max-connections", "4", "--max-connections-per-uid", "1", "--socket-group",
                    std::to_string(kSocketGroup), "--reconnect-grace", "0"},
                   "", as_service);
  ASSERT_TRUE(collector.Started()) << collector.child().Output();
  std::vector<pid_t> holders;
  std::vector<int> pipes;
  for (int u = 0; u < 4; ++u) {
    const Credentials who{static_cast<uid_t>(54412 + u), kSocketGroup, {kSocketGroup}};
    int ready = -1;
    holders.push_back(HoldAs(who, collector.socket(), 1, 100 * (u + 1), 1, true, &ready));
    ASSERT_GT(holders.back(), 0);
    pipes.push_back(ready);
    EXPECT_EQ(AckedOf(ready, 1), 1) << "holder " << u;
  }

  // This process (root, holding no connection) as an injected application with a spill.
  const fs::path spill = dir.path() / "spill";
  const ProducerIdentity id = Identity("refused-app", 77);
  spill::SpillWriterOptions spill_options;
  spill_options.dir = spill.string();
  spill_options.host = id.hostname;
  spill_options.exe = id.exe;
  spill_options.pid = id.pid;
  spill_options.start_ns = id.start_ns;
  transport::SenderOptions options;
  options.socket_path = collector.socket().string();
  options.trusted_collector_uid = kService;
  options.flush_interval = milliseconds(1);
  options.backoff_min = milliseconds(1);
  options.backoff_max = milliseconds(50);
  options.spill = std::make_shared<spill::SpillWriter>(spill_options);
  transport::Sender sender(options);
  ASSERT_TRUE(sender.AddPreamble(0, testing::ProcessStartLine(id, 0)));
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    ASSERT_TRUE(sender.Enqueue(seq, testing::KernelLine(id, seq, seq)));
  }
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (sender.unacked_lines() > 0 && std::chrono::steady_clock::now() < deadline) {
    sender.Poll(std::chrono::steady_clock::now());
    std::this_thread::sleep_for(milliseconds(2));
  }
  const transport::SenderStats st = sender.stats();
  EXPECT_EQ(sender.unacked_lines(), 0u);
  EXPECT_EQ(st.spilled, 21u);
  EXPECT_EQ(st.acked, 0u);
  EXPECT_EQ(st.dropped_disconnected + st.dropped_backpressure, 0u);
  EXPECT_GE(st.connects, 1u);  // it reached the collector, which refused it
  const std::string text = collector.Scrape();
  EXPECT_GE(Value(text, "cuflight_connections_refused_total{reason=\"connection_limit\"}"), 1) << text;
  const fs::path spilled = FindLog(spill, "refused-app", id.pid);
  ASSERT_FALSE(spilled.empty());
  std::vector<uint64_t> all(21);
  for (uint64_t seq = 0; seq <= 20; ++seq) all[seq] = seq;
  EXPECT_EQ(StoredSeqs(ReadLog(spilled)), all);
  for (size_t i = 0; i < holders.size(); ++i) {
    ::kill(holders[i], SIGKILL);
    WaitStatus(holders[i]);
    ::close(pipes[i]);
  }
  EXPECT_EQ(collector.Stop(), 0) << collector.child().Output();
}

}  // namespace
}  // namespace cuflight::collector
