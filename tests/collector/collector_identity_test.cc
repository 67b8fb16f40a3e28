// Who a connection writes for (producer_identity.h), with the collector in process and raw
// producer sockets: producers that share pid, start time and exe (containers, exec()) are kept
// apart by their instance id; a TCP connection writes only a stream of its own; a Unix
// connection of another uid never reaches a stream; a long process_start is not lost to
// --max-line-bytes. The namespaces and uids of real processes: tests/inject/identity_test.cc.
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collector.h"
#include "collector_test_util.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/events.h"

namespace cuflight::collector {
namespace {

using testing::LogFiles;
using testing::LoggedLine;
using testing::ProducerIdentity;
using testing::Range;
using testing::RawClient;
using testing::ReadLog;
using testing::RunningCollector;
using testing::StoredSeqs;
using testing::TempDir;
using testing::TestOptions;
using testing::WaitUntil;

// A pid namespace other than the collector's (containers report their own).
constexpr uint64_t kContainerPidNs = 4026599999;

ProducerIdentity Container(uint64_t instance_id) {
  ProducerIdentity id;
  id.pid = 1;  // every container's first process
  id.exe = "/app/bin/server";
  id.start_ns = 1'760'000'000'010'000'000;  // /proc start times resolve to 10 ms
  id.instance_id = instance_id;
  id.pid_ns = kContainerPidNs;
  return id;
}

std::string Stream(const ProducerIdentity& id, uint64_t first, uint64_t last, bool end) {
  std::string out = testing::ProcessStartLine(id, 0);
  for (uint64_t seq = std::max<uint64_t>(first, 1); seq <= last; ++seq) {
    out += testing::KernelTimeLine(id, seq, seq);
  }
  if (end) out += testing::ProcessEndLine(id, last + 1, last + 2, 0);
  return out;
}

// The log files whose name carries this instance id ("-<instance>-<owner>.jsonl").
std::vector<std::filesystem::path> FilesOf(const std::filesystem::path& log_dir,
                                           uint64_t instance_id) {
  std::vector<std::filesystem::path> out;
  const std::string needle = "-" + std::to_string(instance_id) + "-";
  for (const auto& f : LogFiles(log_dir)) {
    if (f.filename().string().find(needle) != std::string::npos) out.push_back(f);
  }
  return out;
}

bool HasType(const std::vector<LoggedLine>& lines, const std::string& type) {
  for (const LoggedLine& l : lines) {
    if (l.type == type) return true;
  }
  return false;
}

// In a fork()ed child: connects to `path`, writes `bytes` and reads until the acks contain
// `ack` (or 20 s pass). System calls only.
bool SendAndAwaitAck(const char* path, const std::string& bytes, const char* ack) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return false;
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = write(fd, bytes.data() + sent, bytes.size() - sent);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  char in[4096];
  size_t len = 0;
  for (int waited = 0; waited < 20000; ++waited) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 1) <= 0) continue;
    if (len == sizeof(in)) len = 0;
    const ssize_t n = read(fd, in + len, sizeof(in) - len);
    if (n <= 0) return false;
    len += static_cast<size_t>(n);
    if (memmem(in, len, ack, std::strlen(ack)) != nullptr) return true;
  }
  return false;
}

// Eight containers whose first process has the same pid, exe and start time (to /proc's 10 ms):
// eight logs, each named and stored with the pid the process reported.
TEST(CollectorIdentityTest, ContainersWithTheSamePidAndStartAreKeptApart) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  constexpr int kContainers = 8;
  std::vector<RawClient> clients;
  for (int i = 0; i < kContainers; ++i) {
    clients.push_back(RawClient::Unix(options.socket));
    ASSERT_TRUE(clients.back().Send(Stream(Container(1000 + i), 1, 50, true)));
  }
  for (auto& c : clients) ASSERT_EQ(c.WaitAck(51), 51u);
  running.Stop();
  const IngestStats s = running.stats();
  EXPECT_EQ(s.duplicates, 0u);
  EXPECT_EQ(s.events_lost, 0u);
  EXPECT_EQ(s.processes_seen, static_cast<uint64_t>(kContainers));
  EXPECT_EQ(s.pid_mismatch, 0u);
  ASSERT_EQ(LogFiles(options.log_dir).size(), static_cast<size_t>(kContainers));
  for (int i = 0; i < kContainers; ++i) {
    const auto files = FilesOf(options.log_dir, 1000 + i);
    ASSERT_EQ(files.size(), 1u) << i;
    // <host>-<exe>-<pid>-<start_ns>-<instance>-u<uid>: what the process reported, and the uid
    // the kernel reported for the connection.
    EXPECT_EQ(files[0].filename().string(), "testhost-server-1-1760000000010000000-" +
                                                std::to_string(1000 + i) + "-u" +
                                                std::to_string(geteuid()) + ".jsonl");
    const std::vector<LoggedLine> lines = ReadLog(files[0]);
    EXPECT_EQ(StoredSeqs(lines), Range(0, 51));
    for (const LoggedLine& l : lines) EXPECT_EQ(l.pid, 1) << l.text;
  }
}

// After exec() the pid, start time and exe are the same and seq starts again at 0: the new
// image's instance id makes it a new stream, stored in full.
TEST(CollectorIdentityTest, AProcessAfterExecIsANewStreamRecordedInFull) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  ProducerIdentity before = Container(71);
  before.pid_ns = 0;  // not reported: the collector's own namespace is assumed
  before.pid = static_cast<int32_t>(getpid());
  ProducerIdentity after = before;
  after.instance_id = 72;
  {
    RawClient image1 = RawClient::Unix(options.socket);
    ASSERT_TRUE(image1.Send(Stream(before, 1, 30, false)));
    ASSERT_EQ(image1.WaitAck(30), 30u);
  }  // exec() closes the socket (SOCK_CLOEXEC)
  RawClient image2 = RawClient::Unix(options.socket);
  ASSERT_TRUE(image2.Send(Stream(after, 1, 20, true)));
  ASSERT_EQ(image2.WaitAck(21), 21u);
  running.Stop();
  EXPECT_EQ(running.stats().duplicates, 0u);
  EXPECT_EQ(running.stats().events_lost, 0u);
  const auto first = FilesOf(options.log_dir, 71);
  const auto second = FilesOf(options.log_dir, 72);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(StoredSeqs(ReadLog(first[0])), Range(0, 30));
  EXPECT_TRUE(HasType(ReadLog(first[0]), "process_lost"));
  const std::vector<LoggedLine> lines = ReadLog(second[0]);
  EXPECT_EQ(StoredSeqs(lines), Range(0, 21));
  EXPECT_EQ(lines.back().type, "process_end");
}

// The attack of the issue over --tcp on loopback: claim a Unix producer's identity, write a
// forged process_crash, jump seq far ahead. The victim's log holds only the victim's events,
// all of them, and its counts are its own.
TEST(CollectorIdentityTest, TcpCannotWriteIntoAnotherConnectionsStream) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.tcp = HostPort{"127.0.0.1", 0};
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  // A process in the collector's pid namespace: its log is named by its kernel-verified pid,
  // which any local user can read from /proc and claim.
  ProducerIdentity victim = Container(0x5eed);
  victim.pid = static_cast<int32_t>(getpid());
  victim.pid_ns = 0;

  RawClient real = RawClient::Unix(options.socket);
  ASSERT_TRUE(real.Send(Stream(victim, 1, 10, false)));
  ASSERT_EQ(real.WaitAck(10), 10u);

  RawClient forger = RawClient::Tcp(running.collector()->tcp_port());
  std::string forged = testing::ProcessStartLine(victim, 0);
  forged += testing::ProcessCrashLine(victim, 11);
  forged += testing::KernelTimeLine(victim, 1'000'000'000'000, 1);
  ASSERT_TRUE(forger.Send(forged));
  ASSERT_EQ(forger.WaitAck(1'000'000'000'000), 1'000'000'000'000u);
  forger.Close();

  // The victim goes on after the forger's seqs, and is then killed (no process_end).
  std::string more;
  for (uint64_t seq = 11; seq <= 40; ++seq) more += testing::KernelTimeLine(victim, seq, seq);
  ASSERT_TRUE(real.Send(more));
  ASSERT_EQ(real.WaitAck(40), 40u);
  real.Close();
  ASSERT_TRUE(WaitUntil([&] { return running.stats().processes_lost == 2; }));
  running.Stop();

  const std::string unix_owner = "-u" + std::to_string(geteuid()) + ".jsonl";
  std::filesystem::path victim_file;
  std::filesystem::path forged_file;
  for (const auto& f : FilesOf(options.log_dir, 0x5eed)) {
    (f.filename().string().ends_with(unix_owner) ? victim_file : forged_file) = f;
  }
  ASSERT_FALSE(victim_file.empty());
  ASSERT_FALSE(forged_file.empty()) << "the forger's lines go to a log of its own";
  EXPECT_NE(forged_file.filename().string().find("-t"), std::string::npos) << forged_file;

  const std::vector<LoggedLine> lines = ReadLog(victim_file);
  EXPECT_FALSE(HasType(lines, "process_crash"));
  EXPECT_EQ(StoredSeqs(lines), Range(0, 40)) << "no event of the victim was taken for a duplicate";
  const nlohmann::json lost = nlohmann::json::parse(lines.back().text);
  EXPECT_EQ(lost["type"], "process_lost");
  EXPECT_EQ(lost["events_stored"], 41);
  EXPECT_EQ(lost["events_lost"], 0);
  EXPECT_EQ(lost["last_seq"], 40);
  EXPECT_TRUE(HasType(ReadLog(forged_file), "process_crash"));
}

// Two TCP connections naming one process: each writes its own log (none can continue another's,
// even after it closed). A reconnect's retransmitted events follow its preamble without a gap
// being counted: the earlier events are in the earlier connection's log.
TEST(CollectorIdentityTest, EachTcpConnectionWritesALogOfItsOwn) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.tcp = HostPort{"127.0.0.1", 0};
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  ProducerIdentity id = Container(0x7c9);
  {
    RawClient first = RawClient::Tcp(running.collector()->tcp_port());
    ASSERT_TRUE(first.Send(Stream(id, 1, 30, false)));
    ASSERT_EQ(first.WaitAck(30), 30u);
  }
  RawClient second = RawClient::Tcp(running.collector()->tcp_port());
  // The preamble, then the events from 25 on (25..30 were stored but, say, not acknowledged).
  ASSERT_TRUE(second.Send(testing::ProcessStartLine(id, 0) + testing::DeviceLine(id, 1, 0)));
  std::string rest;
  for (uint64_t seq = 25; seq <= 60; ++seq) rest += testing::KernelTimeLine(id, seq, seq);
  rest += testing::ProcessEndLine(id, 61, 62, 0);
  ASSERT_TRUE(second.Send(rest));
  ASSERT_EQ(second.WaitAck(61), 61u);
  running.Stop();
  const auto files = FilesOf(options.log_dir, 0x7c9);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(running.stats().duplicates, 0u);
  EXPECT_EQ(running.stats().events_lost, 0u);
  std::vector<uint64_t> all;
  for (const auto& f : files) {
    const std::vector<uint64_t> seqs = StoredSeqs(ReadLog(f));
    all.insert(all.end(), seqs.begin(), seqs.end());
  }
  EXPECT_EQ(all.size(), 31u + 2u + 37u);  // every event of both connections, once per log
}

// --tcp-trust-identity (opt-in): a TCP connection continues the log its process_start names, as
// before; a TCP claim still never reaches a Unix producer's log.
TEST(CollectorIdentityTest, TrustingTcpIdentityLetsAReconnectContinueItsLog) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.tcp = HostPort{"127.0.0.1", 0};
  options.tcp_trust_identity = true;
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Container(0xabc);
  {
    RawClient first = RawClient::Tcp(running.collector()->tcp_port());
    ASSERT_TRUE(first.Send(Stream(id, 1, 30, false)));
    ASSERT_EQ(first.WaitAck(30), 30u);
  }
  RawClient second = RawClient::Tcp(running.collector()->tcp_port());
  std::string again = testing::ProcessStartLine(id, 0);
  for (uint64_t seq = 25; seq <= 60; ++seq) again += testing::KernelTimeLine(id, seq, seq);
  ASSERT_TRUE(second.Send(again));
  ASSERT_EQ(second.WaitAck(60), 60u);
  RawClient unix_claim = RawClient::Unix(options.socket);
  ASSERT_TRUE(unix_claim.Send(Stream(id, 1, 5, true)));
  ASSERT_EQ(unix_claim.WaitAck(6), 6u);
  running.Stop();
  std::filesystem::path tcp_file;
  for (const auto& f : FilesOf(options.log_dir, 0xabc)) {
    if (f.filename().string().ends_with("-tcp.jsonl")) tcp_file = f;
  }
  ASSERT_FALSE(tcp_file.empty());
  EXPECT_EQ(FilesOf(options.log_dir, 0xabc).size(), 2u);
  EXPECT_EQ(StoredSeqs(ReadLog(tcp_file)), Range(0, 60));
  EXPECT_EQ(running.stats().duplicates, 1u + 6u);  // the preamble and 25..30 again
}

// On the Unix socket the kernel's uid of the peer is part of the stream's name: a process of
// another user claiming the same identity writes a log of its own. Needs root (setuid).
TEST(CollectorIdentityTest, AUnixConnectionOfAnotherUidNeverReachesTheStream) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  constexpr uid_t kOther = 54321;
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.socket_group = kOther;  // the other uid's own group may connect
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  // Let the other uid reach the socket's directory.
  chmod(dir.path().c_str(), 0755);
  chmod(options.socket.parent_path().c_str(), 0755);
  const ProducerIdentity victim = Container(0xfeed);
  RawClient real = RawClient::Unix(options.socket);
  ASSERT_TRUE(real.Send(Stream(victim, 1, 10, false)));
  ASSERT_EQ(real.WaitAck(10), 10u);

  // Built before fork(): the child (of a process with threads) makes system calls only.
  std::string forged = testing::ProcessStartLine(victim, 0);
  forged += testing::ProcessCrashLine(victim, 11);
  forged += testing::KernelTimeLine(victim, 1'000'000, 1);
  const std::string socket_path = options.socket.string();
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(kOther) != 0 || setuid(kOther) != 0) _exit(2);
    _exit(SendAndAwaitAck(socket_path.c_str(), forged, R"("seq":1000000})") ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  std::string more;
  for (uint64_t seq = 11; seq <= 20; ++seq) more += testing::KernelTimeLine(victim, seq, seq);
  more += testing::ProcessEndLine(victim, 21, 22, 0);
  ASSERT_TRUE(real.Send(more));
  ASSERT_EQ(real.WaitAck(21), 21u);
  running.Stop();
  std::filesystem::path victim_file;
  std::filesystem::path other_file;
  for (const auto& f : FilesOf(options.log_dir, 0xfeed)) {
    (f.filename().string().ends_with("-u54321.jsonl") ? other_file : victim_file) = f;
  }
  ASSERT_FALSE(victim_file.empty());
  ASSERT_FALSE(other_file.empty());
  const std::vector<LoggedLine> lines = ReadLog(victim_file);
  EXPECT_FALSE(HasType(lines, "process_crash"));
  EXPECT_EQ(StoredSeqs(lines), Range(0, 21));
  EXPECT_EQ(running.stats().duplicates, 0u);
}

// A process_start longer than --max-line-bytes (up to kMaxProcessStartBytes) is still taken:
// the process is recorded; the limit applies to the lines after it.
TEST(CollectorIdentityTest, AProcessStartLongerThanMaxLineBytesIsStillTaken) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.max_line_bytes = 1024;
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  ProducerIdentity id = Container(0x10);
  id.exe = "/app/" + std::string(6000, 'e');  // a long field: a 6 KiB line
  const std::string start = testing::ProcessStartLine(id, 0);
  ASSERT_GT(start.size(), 6000u);
  ASSERT_LT(start.size(), schema::kMaxProcessStartBytes);
  RawClient client = RawClient::Unix(options.socket);
  ASSERT_TRUE(client.Send(start + testing::KernelTimeLine(id, 1, 1) + std::string(2000, 'x') +
                          "\n" + testing::KernelTimeLine(id, 2, 2)));
  ASSERT_EQ(client.WaitAck(2), 2u);
  running.Stop();
  EXPECT_EQ(running.stats().rejected_for(RejectReason::kLineTooLong), 1u);
  const auto files = FilesOf(options.log_dir, 0x10);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(StoredSeqs(ReadLog(files[0])), Range(0, 2));
}

}  // namespace
}  // namespace cuflight::collector
