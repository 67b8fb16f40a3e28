// The collector as a node service for processes of many users, under the conditions that broke
// it in production trials, each reproduced here:
//   - a full disk, then freed: writing resumes on the collector's own timer, and what it could
//     not store is counted (a small tmpfs in a mount namespace of the test's own);
//   - identified connections that go silent are closed, heartbeating ones are kept, and one
//     user cannot take every connection slot;
//   - a slow fdatasync (strace --inject) does not pile up descriptors;
//   - a slow directory scan (strace --inject on getdents64) does not stall acknowledgements;
//   - a thousand idle scrape connections neither starve /metrics nor the producers;
//   - the collector as a user of its own with --socket-group: members' processes are served,
//     other users' are refused (by the socket's mode, and by the collector when it was loosened).
// A test that needs a privilege or a tool the machine lacks skips, saying which.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
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
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collector.h"
#include "collector_process.h"
#include "collector_test_util.h"
#include "cuflight/metrics/metrics.h"
#include "http_get.h"
#include "run_as.h"
#include "subprocess.h"

namespace cuflight::collector {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AsUser;
using testing::CapturedLog;
using testing::ChildProcess;
using testing::Credentials;
using testing::FindLog;
using testing::Identity;
using testing::LoggedLine;
using testing::ProducerIdentity;
using testing::Range;
using testing::RawClient;
using testing::ReadLog;
using testing::RunningCollector;
using testing::StoredSeqs;
using testing::TempDir;
using testing::TestOptions;
using testing::WaitForSocket;
using testing::WaitUntil;

// process_start, then kernel events up to seq `last`.
std::string KernelStream(const ProducerIdentity& id, uint64_t last) {
  std::string out = testing::ProcessStartLine(id, 0);
  for (uint64_t seq = 1; seq <= last; ++seq) out += testing::KernelLine(id, seq, seq);
  return out;
}

// ---- a small disk of the test's own ----

// Moves this process into a mount namespace of its own (unshare(2) with CLONE_NEWNS, what
// `unshare -m` does) and mounts a tmpfs of `size` bytes on `dir`, mode 0700. Threads started
// afterwards (the collector's) share the namespace; the rest of the machine never sees the mount.
// Returns why it cannot, or "".
std::string MountSmallDisk(const fs::path& dir, const std::string& size) {
  if (::unshare(CLONE_NEWNS) != 0) {
    return std::string(
               "cannot make a mount namespace (unshare CLONE_NEWNS needs CAP_SYS_ADMIN): ") +
           std::strerror(errno);
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return std::string("cannot make the mounts private: ") + std::strerror(errno);
  }
  fs::create_directories(dir);
  const std::string data = "size=" + size + ",mode=0700";
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, data.c_str()) != 0) {
    return std::string("cannot mount a tmpfs: ") + std::strerror(errno);
  }
  return "";
}

bool ResizeDisk(const fs::path& dir, const std::string& size) {
  const std::string data = "size=" + size + ",mode=0700";
  return ::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT, data.c_str()) == 0;
}

class SmallDisk {
 public:
  SmallDisk(const fs::path& dir, const std::string& size) : dir_(dir) {
    skip_reason_ = MountSmallDisk(dir, size);
  }
  ~SmallDisk() {
    if (skip_reason_.empty()) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& skip_reason() const { return skip_reason_; }

 private:
  fs::path dir_;
  std::string skip_reason_;
};

// 800 kernel events are about 400 KiB, six times what the 64 KiB disk holds.
constexpr uint64_t kFillerLast = 800;

// Before: with the log dir full and the producer waiting for an ack (its window is full, it
// sends nothing), nothing more was written until the app exited. Now the collector retries on
// its own timer: once the disk has room, every event is written and acknowledged without the
// producer sending anything more.
TEST(CollectorHardeningTest, FullDiskThenFreedResumesOnItsOwnAndLosesNothing) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  SmallDisk disk(options.log_dir, "64k");
  if (!disk.skip_reason().empty()) GTEST_SKIP() << disk.skip_reason();
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);

  const ProducerIdentity id = Identity("filler", 1);
  RawClient client = RawClient::Unix(options.socket);
  ASSERT_TRUE(client.Send(KernelStream(id, kFillerLast)));
  ASSERT_TRUE(WaitUntil([&] { return running.stats().lines_stored == kFillerLast + 1; }));
  const LogSinkStats full = running.collector()->sink_stats();
  EXPECT_GT(full.write_errors, 0u);
  EXPECT_GT(full.pending_bytes, 0u);
  // Not everything is written, so not everything is acknowledged.
  EXPECT_EQ(client.WaitAck(kFillerLast, milliseconds(300)), std::nullopt);

  ASSERT_TRUE(ResizeDisk(options.log_dir, "16m"));
  EXPECT_EQ(client.WaitAck(kFillerLast, seconds(10)), kFillerLast);  // with no new input
  // The collector publishes its figures after the acks of the same turn.
  EXPECT_TRUE(WaitUntil([&] {
    return running.collector()->sink_stats().pending_bytes == 0 &&
           metrics.Render().find("\ncuflight_log_pending_bytes 0\n") != std::string::npos;
  }));
  EXPECT_EQ(running.collector()->sink_stats().pending_bytes, 0u);
  const std::string text = metrics.Render();
  EXPECT_EQ(text.find("\ncuflight_log_write_errors_total 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ncuflight_log_pending_bytes 0\n"), std::string::npos) << text;
  client.Close();
  EXPECT_EQ(running.Stop(), 0);

  const fs::path file = FindLog(options.log_dir, "filler", getpid());
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(StoredSeqs(ReadLog(file)), Range(0, kFillerLast));
  EXPECT_EQ(running.stats().events_lost, 0u);
}

// When the disk stays full long enough for the buffers to fill, the log refuses lines and the
// connection is closed; a producer that does not come back (it exited) has lines the collector
// received but never stored. They are counted: a warning, cuflight_events_unstored_total, and
// process_lost's events_lost.
TEST(CollectorHardeningTest, LinesTheFullLogRefusedAreCountedInProcessLost) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.max_pending_bytes = 64 << 10;
  SmallDisk disk(options.log_dir, "64k");
  if (!disk.skip_reason().empty()) GTEST_SKIP() << disk.skip_reason();
  Metrics metrics;
  CapturedLog log;
  RunningCollector running(options, &metrics, log.logger());
  ASSERT_NE(running.collector(), nullptr);

  const ProducerIdentity id = Identity("refused", 2);
  RawClient client = RawClient::Unix(options.socket);
  client.Send(KernelStream(id, kFillerLast));  // fails part-way: the collector hangs up
  EXPECT_TRUE(client.WaitClosedByPeer());
  client.Close();  // the producer is gone for good
  ASSERT_TRUE(WaitUntil([&] { return running.stats().processes_lost == 1; }));
  const IngestStats at_loss = running.stats();
  EXPECT_GT(at_loss.rejected_for(RejectReason::kStoreFailed), 0u);
  EXPECT_GT(at_loss.events_unstored, 0u);
  EXPECT_EQ(at_loss.events_lost, at_loss.events_unstored);  // no gap: only refused lines

  ASSERT_TRUE(ResizeDisk(options.log_dir, "16m"));  // process_lost waits in the buffers too
  ASSERT_TRUE(WaitUntil([&] { return running.collector()->sink_stats().pending_bytes == 0; }));
  EXPECT_EQ(running.Stop(), 0);

  const fs::path file = FindLog(options.log_dir, "refused", getpid());
  ASSERT_FALSE(file.empty());
  const std::vector<LoggedLine> lines = ReadLog(file);
  ASSERT_GE(lines.size(), 2u);
  const uint64_t last_stored = lines[lines.size() - 2].seq;
  EXPECT_EQ(StoredSeqs(lines), Range(0, last_stored));
  ASSERT_EQ(lines.back().type, "process_lost");
  const nlohmann::json lost = nlohmann::json::parse(lines.back().text);
  EXPECT_EQ(lost["last_seq"], last_stored);
  EXPECT_EQ(lost["events_stored"], last_stored + 1);
  EXPECT_EQ(lost["events_lost"], at_loss.events_unstored);
  // The refused lines follow the stored ones without a gap, up to the highest one read.
  EXPECT_LE(last_stored + at_loss.events_unstored, kFillerLast);
  EXPECT_NE(metrics.Render().find("\ncuflight_events_unstored_total " +
                                  std::to_string(at_loss.events_unstored) + "\n"),
            std::string::npos);
  EXPECT_NE(log.text().find("were received but not stored"), std::string::npos) << log.text();
}

// ---- idle connections and the per-uid share ----

TEST(CollectorHardeningTest, SilentConnectionsAreClosedAndHeartbeatingOnesKept) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.idle_timeout = milliseconds(700);
  options.reconnect_grace = seconds(10);
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);

  const ProducerIdentity quiet = Identity("quiet", 3);
  const ProducerIdentity beating = Identity("beating", 4);
  RawClient quiet_client = RawClient::Unix(options.socket);
  RawClient beating_client = RawClient::Unix(options.socket);
  ASSERT_TRUE(quiet_client.Send(KernelStream(quiet, 1)));
  ASSERT_EQ(quiet_client.WaitAck(1), 1u);
  ASSERT_TRUE(beating_client.Send(testing::ProcessStartLine(beating, 0)));
  // A stats event every 100 ms, as an idle injected process sends one every CUFLIGHT_STATS_MS.
  uint64_t seq = 0;
  const auto until = std::chrono::steady_clock::now() + milliseconds(1500);
  while (std::chrono::steady_clock::now() < until) {
    ++seq;
    ASSERT_TRUE(beating_client.Send(testing::StatsLine(beating, seq, seq, 0)));
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(quiet_client.WaitClosedByPeer(seconds(2)));
  EXPECT_EQ(beating_client.WaitAck(seq), seq);  // still served
  EXPECT_EQ(running.stats().idle_timeouts, 1u);
  EXPECT_NE(metrics.Render().find("cuflight_connections_closed_total{reason=\"idle_timeout\"} 1\n"),
            std::string::npos);

  // The quiet process reconnects when it has something to say: its log simply goes on.
  RawClient again = RawClient::Unix(options.socket);
  ASSERT_TRUE(again.Send(testing::ProcessStartLine(quiet, 0) + testing::KernelLine(quiet, 2, 2)));
  EXPECT_EQ(again.WaitAck(2), 2u);
  again.Close();
  beating_client.Close();
  quiet_client.Close();
  EXPECT_EQ(running.Stop(), 0);
  EXPECT_EQ(running.stats().processes_lost, 2u);  // both, at shutdown (collector_shutdown)
  EXPECT_EQ(StoredSeqs(ReadLog(FindLog(options.log_dir, "quiet", getpid()))), Range(0, 2));
}

// Exit statuses of StreamAs's child.
constexpr int kAcked = 0;
constexpr int kConnectDenied = 8;      // connect(2) failed with EACCES: the socket file's mode
constexpr int kClosedByCollector = 6;  // EOF, or a send or read refused (EPIPE, ECONNRESET)
constexpr const char* kStreamAsStatuses =
    "0: acked, 3: setuid, 4: connect, 5: send, 6: closed, 7: no ack, 8: connect EACCES";

// Connects to `socket` as `who` in a child process, sends `stream` and waits for the ack of
// `last`. Returns the child's exit status (kStreamAsStatuses); *child is its pid.
int StreamAs(const fs::path& socket, const Credentials& who, const std::string& stream,
             uint64_t last, pid_t* child) {
  const std::string ack = "\"seq\":" + std::to_string(last) + "}";
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls from here: the parent has threads.
    if (::setgroups(who.groups.size(), who.groups.data()) != 0 || ::setgid(who.gid) != 0 ||
        ::setuid(who.uid) != 0) {
      _exit(3);
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      _exit(errno == EACCES ? kConnectDenied : 4);
    }
    for (size_t done = 0; done < stream.size();) {
      const ssize_t n = ::send(fd, stream.data() + done, stream.size() - done, MSG_NOSIGNAL);
      if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) _exit(kClosedByCollector);
      if (n <= 0) _exit(5);
      done += static_cast<size_t>(n);
    }
    char buf[4096];
    size_t have = 0;
    for (int waits = 0; waits < 100; ++waits) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
      if (n <= 0) _exit(kClosedByCollector);
      have += static_cast<size_t>(n);
      buf[have] = '\0';
      if (std::strstr(buf, ack.c_str()) != nullptr) _exit(kAcked);
      if (have > sizeof(buf) / 2) have = 0;
    }
    _exit(7);
  }
  *child = pid;
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// StreamAs as uid `id` with `group` as its gid and only supplementary group.
int StreamAsAnotherUser(const fs::path& socket, uid_t id, gid_t group, const std::string& stream,
                        uint64_t last, pid_t* child) {
  return StreamAs(socket, Credentials{id, group, {group}}, stream, last, child);
}

// Before: identified connections never timed out, so one user with socket access could hold
// every --max-connections slot. Now each uid has a share; others still get in.
TEST(CollectorHardeningTest, OneUserCannotTakeEveryConnectionSlot) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.max_connections = 8;
  options.max_connections_per_uid = 2;
  options.tcp = HostPort{"127.0.0.1", 0};
  // Another user reaches the socket through its group (root's: gid 0, --socket-group): the
  // socket is 0660 in a directory the group may search.
  options.socket_group = 0;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0750), 0);
  fs::create_directory(dir.path() / "run");
  ASSERT_EQ(::chmod((dir.path() / "run").c_str(), 0750), 0);
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);

  std::vector<RawClient> mine;
  for (int i = 0; i < 2; ++i) {
    mine.push_back(RawClient::Unix(options.socket));
    ASSERT_TRUE(mine.back().Send(KernelStream(Identity("mine" + std::to_string(i), 5 + i), 3)));
    ASSERT_EQ(mine.back().WaitAck(3), 3u);
  }
  RawClient third = RawClient::Unix(options.socket);
  ASSERT_TRUE(third.connected());  // the kernel's backlog took it; the collector closes it
  EXPECT_TRUE(third.WaitClosedByPeer());
  EXPECT_TRUE(WaitUntil([&] { return running.stats().uid_limit_refusals == 1; }));
  EXPECT_NE(
      metrics.Render().find("cuflight_connections_refused_total{reason=\"uid_connection_limit\"} 1\n"),
      std::string::npos);

  // TCP peers have no uid: they share a bucket of their own.
  RawClient tcp = RawClient::Tcp(running.collector()->tcp_port());
  ASSERT_TRUE(tcp.Send(KernelStream(Identity("over-tcp", 9), 3)));
  EXPECT_EQ(tcp.WaitAck(3), 3u);

  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  constexpr uid_t kOtherUser = 4242;
  const ProducerIdentity other = Identity("other-user", 10);
  pid_t child = 0;
  const int status =
      StreamAsAnotherUser(options.socket, kOtherUser, 0, KernelStream(other, 4), 4, &child);
  EXPECT_EQ(status, kAcked) << kStreamAsStatuses;
  EXPECT_EQ(running.stats().uid_limit_refusals, 1u);
  EXPECT_EQ(running.Stop(), 0);
  // Logged under the child's pid (SO_PEERCRED), not the payload's.
  const fs::path file = FindLog(options.log_dir, "other-user", child);
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(StoredSeqs(ReadLog(file)), Range(0, 4));
}

// ---- the real binary, with one system call slowed down by strace ----

// The collector binary under strace. The tracee is killed with the test (killing strace alone
// would let it run on, detached).
class TracedCollector {
 public:
  TracedCollector(const std::string& strace, std::vector<std::string> strace_args,
                  const std::vector<std::string>& collector_args, const fs::path& output) {
    strace_args.push_back("--");
    strace_args.push_back(CUFLIGHT_COLLECTOR_PATH);
    strace_args.insert(strace_args.end(), collector_args.begin(), collector_args.end());
    child_.emplace(strace, strace_args, output);
  }
  ~TracedCollector() {
    // The collector outlives a killed strace (it is detached, not killed): kill it first, even
    // when the test never asked for its pid.
    if (pid_ <= 0) {
      std::ifstream in("/proc/" + std::to_string(child_->pid()) + "/task/" +
                       std::to_string(child_->pid()) + "/children");
      in >> pid_;
    }
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    child_->Signal(SIGKILL);  // strace may wait out a delay first; the tracee is gone already
    child_->Wait(seconds(10));
  }
  TracedCollector(const TracedCollector&) = delete;
  TracedCollector& operator=(const TracedCollector&) = delete;

  // The collector's pid (strace's child), once it exists.
  pid_t pid() {
    if (pid_ > 0) return pid_;
    WaitUntil(
        [&] {
          std::ifstream in("/proc/" + std::to_string(child_->pid()) + "/task/" +
                           std::to_string(child_->pid()) + "/children");
          in >> pid_;
          return pid_ > 0;
        },
        seconds(10));
    return pid_;
  }
  ChildProcess& child() { return *child_; }

 private:
  std::optional<ChildProcess> child_;
  pid_t pid_ = 0;
};

size_t OpenDescriptors(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return n;
}

// The port in "metrics at http://127.0.0.1:PORT/metrics", once logged.
int MetricsPort(ChildProcess& child) {
  const std::string prefix = "metrics at http://127.0.0.1:";
  if (!child.WaitForOutput(prefix, seconds(20))) return 0;
  const std::string out = child.Output();
  return std::atoi(out.c_str() + out.find(prefix) + prefix.size());
}

// Before: with fdatasync taking 100 ms and 100 streams, every fsync round queued 100 more
// duplicated descriptors than the worker could sync: 1024 open descriptors in 9 s. Now a round
// is queued only when the previous one is done, and the skipped ones are counted.
TEST(CollectorHardeningTest, SlowFdatasyncDoesNotPileUpDescriptors) {
  std::string strace;
  std::string why;
  const std::vector<std::string> trace =
      cuflight::testing::StraceInject("fdatasync", "delay_enter=100000", &strace, &why);
  if (trace.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const fs::path socket = dir.path() / "run" / "c.sock";
  TracedCollector collector(
      strace, trace,
      {"--socket", socket.string(), "--log-dir", (dir.path() / "logs").string(), "--fsync-interval",
       "50", "--max-connections", "512", "--metrics", "127.0.0.1:0"},
      dir.path() / "collector.out");
  ASSERT_TRUE(WaitForSocket(socket, seconds(20))) << collector.child().Output();
  const pid_t pid = collector.pid();
  ASSERT_GT(pid, 0);
  const int port = MetricsPort(collector.child());
  ASSERT_GT(port, 0) << collector.child().Output();

  constexpr int kStreams = 100;
  std::vector<RawClient> clients;
  std::vector<ProducerIdentity> ids;
  for (int i = 0; i < kStreams; ++i) {
    ids.push_back(Identity("stream" + std::to_string(i), 100 + i));
    clients.push_back(RawClient::Unix(socket));
    ASSERT_TRUE(clients.back().Send(testing::ProcessStartLine(ids.back(), 0)));
  }
  // Every stream writes between two fsync rounds, for 2.5 s (50 rounds).
  size_t most = 0;
  uint64_t seq = 0;
  const auto until = std::chrono::steady_clock::now() + milliseconds(2500);
  while (std::chrono::steady_clock::now() < until) {
    ++seq;
    for (int i = 0; i < kStreams; ++i) {
      ASSERT_TRUE(clients[static_cast<size_t>(i)].Send(testing::KernelLine(ids[i], seq, seq)));
    }
    most = std::max(most, OpenDescriptors(pid));
    std::this_thread::sleep_for(milliseconds(25));
  }
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(clients[static_cast<size_t>(i)].WaitAck(seq), seq) << i;
  }
  // 100 connections, their 100 log files, at most one round of 100 duplicates, and the
  // collector's own handful (listener, epoll, eventfds, lock, log dir, metrics server, stdio).
  EXPECT_LE(most, 3u * kStreams + 40) << "open descriptors at most";
  const cuflight::collector::testing::HttpResponse r =
      cuflight::collector::testing::HttpGet(port, "/metrics");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body.find("\ncuflight_log_fsync_skipped_total 0\n"), std::string::npos) << r.body;
}

// Before: retention scanned the log directory on the ingest thread; with 280k files, acks
// stalled up to 989 ms every 10 s. Here every directory read takes 300 ms (a pass reads at least
// four times: the log dir and a date dir, each until the end), and a producer's acks still come
// within a fraction of that.
TEST(CollectorHardeningTest, ASlowRetentionScanDoesNotStallAcks) {
  std::string strace;
  std::string why;
  const std::vector<std::string> trace =
      cuflight::testing::StraceInject("getdents64", "delay_enter=300000", &strace, &why);
  if (trace.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const fs::path socket = dir.path() / "run" / "c.sock";
  const fs::path logs = dir.path() / "logs";
  fs::create_directories(logs / "2001-01-01");
  std::ofstream(logs / "2001-01-01" / "old-a-1-978307200000000000.jsonl") << "{}\n";
  ::chmod(logs.c_str(), 0750);
  TracedCollector collector(
      strace, trace,
      {"--socket", socket.string(), "--log-dir", logs.string(), "--retain-days", "36500",
       "--retention-interval", "300", "--reconnect-grace", "0"},
      dir.path() / "collector.out");
  ASSERT_TRUE(WaitForSocket(socket, seconds(30))) << collector.child().Output();

  const ProducerIdentity id = Identity("steady", 11);
  RawClient client = RawClient::Unix(socket);
  ASSERT_TRUE(client.Send(testing::ProcessStartLine(id, 0)));
  ASSERT_EQ(client.WaitAck(0), 0u);
  milliseconds worst{0};
  uint64_t seq = 0;
  const auto until = std::chrono::steady_clock::now() + milliseconds(2500);
  while (std::chrono::steady_clock::now() < until) {
    ++seq;
    const auto sent = std::chrono::steady_clock::now();
    ASSERT_TRUE(client.Send(testing::KernelLine(id, seq, seq)));
    ASSERT_EQ(client.WaitAck(seq), seq);
    worst = std::max(
        worst, std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - sent));
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_GT(seq, 50u);
  EXPECT_LT(worst, milliseconds(900)) << "slowest ack; a retention pass takes >= 1200 ms";
}

// Before: two idle scrape connections made /metrics time out, and about 1,000 of them exhausted
// the daemon's descriptors, so producers were refused. Here the collector has 256 descriptors,
// 1,000 scrape connections are opened and left idle, and producers and a scrape are served.
TEST(CollectorHardeningTest, IdleScrapeConnectionsStarveNeitherMetricsNorProducers) {
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  constexpr rlim_t kWanted = 1400;  // the test's own 1,000 connections and some
  if (limit.rlim_cur < kWanted) {
    if (limit.rlim_max < kWanted) GTEST_SKIP() << "needs " << kWanted << " descriptors";
    limit.rlim_cur = kWanted;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  }
  TempDir dir;
  const fs::path socket = dir.path() / "run" / "c.sock";
  const std::string command =
      "ulimit -n 256 && exec " + std::string(CUFLIGHT_COLLECTOR_PATH) + " --socket " +
      socket.string() + " --log-dir " + (dir.path() / "logs").string() +
      " --metrics 127.0.0.1:0 --max-connections 32 --max-connections-per-uid 32" +
      " --reconnect-grace 0";
  ChildProcess collector("/bin/sh", {"-c", command}, dir.path() / "collector.out");
  ASSERT_TRUE(WaitForSocket(socket, seconds(20))) << collector.Output();
  const int port = MetricsPort(collector);
  ASSERT_GT(port, 0) << collector.Output();

  std::vector<int> scrapers;
  for (int i = 0; i < 1000; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0) << i;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
    scrapers.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(500));  // the backlog drains into the server

  constexpr int kProducers = 20;
  std::vector<RawClient> producers;
  for (int i = 0; i < kProducers; ++i) {
    producers.push_back(RawClient::Unix(socket));
    ASSERT_TRUE(
        producers.back().Send(KernelStream(Identity("p" + std::to_string(i), 200 + i), 50)));
  }
  for (int i = 0; i < kProducers; ++i) {
    EXPECT_EQ(producers[static_cast<size_t>(i)].WaitAck(50, seconds(10)), 50u) << i;
  }
  const cuflight::collector::testing::HttpResponse r =
      cuflight::collector::testing::HttpGet(port, "/metrics");
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_NE(r.body.find("cuflight_producers_connected 20\n"), std::string::npos) << r.body;
  EXPECT_EQ(collector.Output().find("out of file descriptors"), std::string::npos)
      << collector.Output();
  for (const int fd : scrapers) ::close(fd);
  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(seconds(20)), 0) << collector.Output();
}

// ---- who may connect: the real binary as a user of its own, producers of other users ----

// A producer of today: with an instance id, so its stream's name ends in its owner (u<uid>).
ProducerIdentity Current(const std::string& exe, int64_t start_ns) {
  ProducerIdentity id = Identity(exe, start_ns);
  id.instance_id = 0x5eed0000 + static_cast<uint64_t>(start_ns);
  return id;
}

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

struct FileFacts {
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

FileFacts Stat(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return FileFacts{st.st_mode & 07777, st.st_uid, st.st_gid};
}

// The collector as a service user of its own with --socket-group: a process of a member (by a
// supplementary group or by its gid) is served and recorded under its own uid and gid; another
// user's is refused by the socket's mode and, when the file is loosened by hand, by the
// collector itself, with one log line naming the peer and a count in the metrics.
TEST(CollectorHardeningTest, ASocketGroupLetsItsMembersInAndNobodyElse) {
  constexpr uid_t kService = 54370;
  constexpr gid_t kSocketGroup = 54371;
  const Credentials member{54372, 54372, {kSocketGroup}};
  const Credentials member_by_gid{54373, kSocketGroup, {}};
  const Credentials outsider{54374, 54374, {}};
  std::string setpriv;
  std::string why;
  std::vector<std::string> args = AsUser({kService, kService, {kSocketGroup}}, &setpriv, &why);
  if (args.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ASSERT_EQ(::chown(dir.path().c_str(), kService, kService), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);
  const fs::path socket = dir.path() / "run" / "collector.sock";
  const fs::path logs = dir.path() / "logs";
  for (const std::string& a :
       {test_support::SharedReadableCopy(CUFLIGHT_COLLECTOR_PATH), std::string("--socket"),
        socket.string(), std::string("--log-dir"), logs.string(), std::string("--socket-group"),
        std::to_string(kSocketGroup), std::string("--metrics"), std::string("127.0.0.1:0"),
        std::string("--reconnect-grace"), std::string("0")}) {
    args.push_back(a);
  }
  ChildProcess collector(setpriv, args, dir.path() / "collector.out");
  ASSERT_TRUE(WaitForSocket(socket, seconds(20))) << collector.Output();
  const int port = MetricsPort(collector);
  ASSERT_GT(port, 0) << collector.Output();
  const FileFacts sock = Stat(socket);
  EXPECT_EQ(sock.mode, 0660u);
  EXPECT_EQ(sock.uid, kService);
  EXPECT_EQ(sock.gid, kSocketGroup);
  const FileFacts run = Stat(socket.parent_path());
  EXPECT_EQ(run.mode, 0710u);
  EXPECT_EQ(run.gid, kSocketGroup);

  pid_t member_pid = 0;
  EXPECT_EQ(StreamAs(socket, member, KernelStream(Current("member", 1), 3), 3, &member_pid), kAcked)
      << kStreamAsStatuses << "\n"
      << collector.Output();
  pid_t by_gid_pid = 0;
  EXPECT_EQ(StreamAs(socket, member_by_gid, KernelStream(Current("by-gid", 2), 3), 3, &by_gid_pid),
            kAcked)
      << kStreamAsStatuses << "\n"
      << collector.Output();
  pid_t outsider_pid = 0;
  EXPECT_EQ(StreamAs(socket, outsider, KernelStream(Current("outsider", 3), 3), 3, &outsider_pid),
            kConnectDenied)
      << kStreamAsStatuses;
  EXPECT_EQ(collector.Output().find("refused a connection"), std::string::npos);

  // An operator loosens the socket by hand: the collector itself still refuses the outsider.
  ASSERT_EQ(::chmod(socket.c_str(), 0666), 0);
  ASSERT_EQ(::chmod(socket.parent_path().c_str(), 0711), 0);
  EXPECT_EQ(StreamAs(socket, outsider, KernelStream(Current("outsider", 3), 3), 3, &outsider_pid),
            kClosedByCollector)
      << kStreamAsStatuses;
  const std::string refusal = "refused a connection: pid " + std::to_string(outsider_pid) +
                              " uid 54374 gid 54374 may not connect: only uid 54370 (this "
                              "collector's user) and root and members of group 54371 (gid "
                              "54371, --socket-group) may";
  EXPECT_TRUE(collector.WaitForOutput(refusal, seconds(10))) << collector.Output();
  const cuflight::collector::testing::HttpResponse scrape =
      cuflight::collector::testing::HttpGet(port, "/metrics");
  EXPECT_NE(scrape.body.find("cuflight_connections_refused_total{reason=\"peer_not_allowed\"} 1\n"),
            std::string::npos)
      << scrape.body;

  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(seconds(20)), 0) << collector.Output();
  const std::string out = collector.Output();
  EXPECT_EQ(Occurrences(out, "refused a connection"), 1u) << out;
  // Recorded as before: SO_PEERCRED's pid, uid and gid in the collector's log, the uid in the
  // stream's name; nothing of the outsider.
  EXPECT_NE(out.find("pid " + std::to_string(member_pid) + " uid 54372 gid 54372"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("pid " + std::to_string(by_gid_pid) + " uid 54373 gid 54371"),
            std::string::npos)
      << out;
  const fs::path member_log = FindLog(logs, "member", member_pid);
  ASSERT_FALSE(member_log.empty());
  EXPECT_TRUE(member_log.filename().string().ends_with("-u54372.jsonl")) << member_log;
  EXPECT_EQ(StoredSeqs(ReadLog(member_log)), Range(0, 3));
  const fs::path by_gid_log = FindLog(logs, "by-gid", by_gid_pid);
  ASSERT_FALSE(by_gid_log.empty());
  EXPECT_TRUE(by_gid_log.filename().string().ends_with("-u54373.jsonl")) << by_gid_log;
  EXPECT_TRUE(FindLog(logs, "outsider", outsider_pid).empty());
}

// Without --socket-group nobody but the collector's user and root is served: not the members of
// its own group, not anyone the file's mode was loosened for by hand.
TEST(CollectorHardeningTest, WithoutASocketGroupOnlyTheCollectorsUserAndRootAreServed) {
  constexpr uid_t kService = 54375;
  const Credentials same_group{54376, kService, {kService}};
  std::string setpriv;
  std::string why;
  std::vector<std::string> args = AsUser({kService, kService, {}}, &setpriv, &why);
  if (args.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ASSERT_EQ(::chown(dir.path().c_str(), kService, kService), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);
  const fs::path socket = dir.path() / "run" / "collector.sock";
  const fs::path logs = dir.path() / "logs";
  for (const std::string& a : {test_support::SharedReadableCopy(CUFLIGHT_COLLECTOR_PATH),
                               std::string("--socket"), socket.string(), std::string("--log-dir"),
                               logs.string(), std::string("--reconnect-grace"), std::string("0")}) {
    args.push_back(a);
  }
  ChildProcess collector(setpriv, args, dir.path() / "collector.out");
  ASSERT_TRUE(WaitForSocket(socket, seconds(20))) << collector.Output();
  EXPECT_EQ(Stat(socket).mode, 0600u);
  EXPECT_EQ(Stat(socket.parent_path()).mode, 0700u);

  pid_t pid = 0;
  EXPECT_EQ(StreamAs(socket, same_group, KernelStream(Current("same-group", 4), 3), 3, &pid),
            kConnectDenied)
      << kStreamAsStatuses;
  ASSERT_EQ(::chmod(socket.c_str(), 0666), 0);
  ASSERT_EQ(::chmod(socket.parent_path().c_str(), 0755), 0);
  EXPECT_EQ(StreamAs(socket, same_group, KernelStream(Current("same-group", 4), 3), 3, &pid),
            kClosedByCollector)
      << kStreamAsStatuses;
  EXPECT_TRUE(collector.WaitForOutput(
      "refused a connection: pid " + std::to_string(pid) +
          " uid 54376 gid 54375 may not connect: only uid 54375 (this collector's user) and root "
          "may; let a group's members in with --socket-group",
      seconds(10)))
      << collector.Output();
  // Root is served (the test's own process).
  RawClient root = RawClient::Unix(socket);
  ASSERT_TRUE(root.Send(KernelStream(Identity("root", 5), 2)));
  EXPECT_EQ(root.WaitAck(2), 2u);
  root.Close();
  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(seconds(20)), 0) << collector.Output();
  EXPECT_TRUE(FindLog(logs, "same-group", pid).empty());
  EXPECT_FALSE(FindLog(logs, "root", getpid()).empty());
}

}  // namespace
}  // namespace cuflight::collector
