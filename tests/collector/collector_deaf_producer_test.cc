// Producers that stop reading: they close their socket without reading their acks, or are
// killed with acks pending, as a crashed or killed process does. The collector's ack writes to
// them then fail (EPIPE, ECONNRESET); every complete line they sent before the end of their
// stream must still be stored, and the loss figures (process_lost, events_lost) stay exact.
//
// Two kinds of test:
//  - deterministic, with the cuflight-collector binary stopped (SIGSTOP) while the producers
//    queue more than one read chunk (Collector::kReadChunkBytes) in its socket and then close or
//    die: after SIGCONT the collector reads one chunk, stores it, acknowledges it to a peer that
//    is gone (the write fails), and must go on reading the rest;
//  - the same situation as it arises in a live run: many producers at once, each writing its
//    whole stream in small writes and closing at once, never reading an ack (a small receive
//    buffer on their side), over a Unix socket and over TCP.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "collector.h"
#include "collector_process.h"
#include "collector_test_util.h"

namespace cuflight::collector {
namespace {

using testing::ChildProcess;
using testing::FindLog;
using testing::LoggedLine;
using testing::ProducerIdentity;
using testing::ReadLog;
using testing::RunningCollector;
using testing::StoredSeqs;
using testing::TempDir;
using testing::WaitForSocket;
using testing::WaitUntil;

constexpr auto kStartTimeout = std::chrono::seconds(20);
constexpr auto kExitTimeout = std::chrono::seconds(20);

// A producer's send buffer: large, so that far more than one read chunk waits in the collector's
// socket (Linux caps it at net.core.wmem_max, 208 KiB by default, and doubles it: 416 KiB).
constexpr int kProducerSendBuffer = 4 << 20;
// Its receive buffer: the smallest Linux allows (it rounds up to its minimum), so that acks the
// producer never reads fill it.
constexpr int kProducerReceiveBuffer = 1;

std::vector<std::string> CollectorArgs(const TempDir& dir) {
  return {"--socket",          (dir.path() / "run" / "c.sock").string(),
          "--log-dir",         (dir.path() / "logs").string(),
          "--reconnect-grace", "0",
          "--log-level",       "warn"};
}

ProducerIdentity Identity(const std::string& exe, int32_t pid, int64_t start_ns) {
  ProducerIdentity id;
  id.pid = pid;
  id.exe = "/opt/bin/" + exe;
  id.start_ns = start_ns;
  return id;
}

// A producer's stream as lines: process_start (seq 0), then kernel events with the seqs
// `first`..`last` except those `skip` says are missing (the producer dropped them: gaps), then
// process_end (seq last + 1) when `with_end`.
struct Stream {
  std::vector<std::string> lines;
  std::vector<uint64_t> seqs;  // of each line
};

Stream MakeStream(const ProducerIdentity& id, uint64_t last, bool with_end,
                  bool (*skip)(uint64_t) = nullptr) {
  Stream s;
  s.lines.push_back(testing::ProcessStartLine(id, 0));
  s.seqs.push_back(0);
  for (uint64_t seq = 1; seq <= last; ++seq) {
    if (skip != nullptr && skip(seq)) continue;
    s.lines.push_back(testing::KernelLine(id, seq, seq));
    s.seqs.push_back(seq);
  }
  if (with_end) {
    s.lines.push_back(testing::ProcessEndLine(id, last + 1, s.lines.size() + 1, 0));
    s.seqs.push_back(last + 1);
  }
  return s;
}

std::string Join(const std::vector<std::string>& lines, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += lines[i];
  return out;
}

// Complete lines among the first `bytes` bytes of `lines` joined.
size_t CompleteLines(const std::vector<std::string>& lines, size_t bytes) {
  size_t n = 0;
  size_t end = 0;
  while (n < lines.size() && end + lines[n].size() <= bytes) end += lines[n++].size();
  return n;
}

int ConnectUnix(const std::filesystem::path& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kProducerSendBuffer, sizeof(kProducerSendBuffer));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kProducerReceiveBuffer, sizeof(kProducerReceiveBuffer));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int ConnectTcp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  // Before connect: the receive buffer sets the window the producer offers for acks.
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kProducerReceiveBuffer, sizeof(kProducerReceiveBuffer));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Writes as much of `bytes` as the socket takes without blocking; returns how much.
size_t SendWhatFits(int fd, std::string_view bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n =
        send(fd, bytes.data() + sent, bytes.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // EAGAIN: the socket is full
    }
    sent += static_cast<size_t>(n);
  }
  return sent;
}

// Writes all of `bytes` in writes of at most `piece` bytes (blocking); false on an error.
bool SendAll(int fd, std::string_view bytes, size_t piece) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), std::min(piece, bytes.size()), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::vector<uint64_t> Prefix(const std::vector<uint64_t>& seqs, size_t n) {
  return std::vector<uint64_t>(seqs.begin(), seqs.begin() + static_cast<ptrdiff_t>(n));
}

// The stored seqs are exactly `expected`; on a difference, the counts and the first mismatch.
void ExpectSeqs(const std::vector<uint64_t>& stored, const std::vector<uint64_t>& expected) {
  if (stored == expected) return;
  size_t i = 0;
  while (i < stored.size() && i < expected.size() && stored[i] == expected[i]) ++i;
  ADD_FAILURE() << stored.size() << " seqs stored, " << expected.size() << " expected; first "
                << "difference at index " << i << ": stored "
                << (i < stored.size() ? std::to_string(stored[i]) : "none") << ", expected "
                << (i < expected.size() ? std::to_string(expected[i]) : "none");
}

// The log of (exe_base, pid) ends with process_end or process_lost. Read while the collector
// writes: a last line still being written is not a failure, just not the end.
bool LogEnded(const std::filesystem::path& log_dir, const std::string& exe_base, int32_t pid) {
  const auto file = FindLog(log_dir, exe_base, pid);
  if (file.empty()) return false;
  std::string all;
  if (FILE* f = std::fopen(file.c_str(), "rb")) {
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) all.append(buf, n);
    std::fclose(f);
  }
  if (all.empty() || all.back() != '\n') return false;
  const size_t last = all.rfind('\n', all.size() - 2);
  const std::string_view line =
      std::string_view(all).substr(last == std::string::npos ? 0 : last + 1);
  return line.find(R"("type":"process_end")") != std::string_view::npos ||
         line.find(R"("type":"process_lost")") != std::string_view::npos;
}

// Producers that close their socket while the collector is stopped, with several read chunks of
// lines still in its socket and no ack read: after SIGCONT every complete line is stored; a
// stream that got its process_end ends with it, one that was cut ends with process_lost counting
// what was stored, nothing lost.
TEST(CollectorDeafProducerTest, LinesQueuedBeforeTheProducerClosedAreAllStored) {
  TempDir dir;
  ChildProcess collector(CUFLIGHT_COLLECTOR_PATH, CollectorArgs(dir), dir.path() / "out.txt");
  const auto socket = dir.path() / "run" / "c.sock";
  const auto logs = dir.path() / "logs";
  ASSERT_TRUE(WaitForSocket(socket, kStartTimeout)) << collector.Output();

  constexpr int kProducers = 8;
  // 3,000 kernel lines of 951 bytes: 2.9 MB. Where net.core.wmem_max is at its default the
  // socket takes 416 KiB of it and the stream is cut (it ends with process_lost); where it is
  // larger the whole stream may fit (it ends with process_end).
  constexpr uint64_t kLast = 3000;
  collector.Signal(SIGSTOP);
  struct Sent {
    Stream stream;
    size_t bytes = 0;
    size_t lines = 0;  // complete lines sent
  };
  std::vector<Sent> sent(kProducers);
  for (int i = 0; i < kProducers; ++i) {
    Sent& s = sent[static_cast<size_t>(i)];
    s.stream = MakeStream(Identity("closer" + std::to_string(i), getpid(), 100 + i), kLast, true);
    const int fd = ConnectUnix(socket);  // the kernel queues the connection for accept
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const std::string all = Join(s.stream.lines, 0, s.stream.lines.size());
    s.bytes = SendWhatFits(fd, all);
    s.lines = CompleteLines(s.stream.lines, s.bytes);
    close(fd);  // unread acks: there are none yet, the collector has not run
    ASSERT_GT(s.bytes, Collector::kReadChunkBytes) << "the test needs more than one read";
  }
  collector.Signal(SIGCONT);
  for (int i = 0; i < kProducers; ++i) {
    ASSERT_TRUE(WaitUntil([&] { return LogEnded(logs, "closer" + std::to_string(i), getpid()); }))
        << i;
  }
  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(kExitTimeout), 0) << collector.Output();

  for (int i = 0; i < kProducers; ++i) {
    SCOPED_TRACE("producer " + std::to_string(i));
    const Sent& s = sent[static_cast<size_t>(i)];
    const std::vector<LoggedLine> lines =
        ReadLog(FindLog(logs, "closer" + std::to_string(i), getpid()));
    ExpectSeqs(StoredSeqs(lines), Prefix(s.stream.seqs, s.lines));
    if (s.lines == s.stream.lines.size()) {
      EXPECT_EQ(lines.back().type, "process_end");
    } else {
      ASSERT_FALSE(lines.empty());
      const nlohmann::json lost = nlohmann::json::parse(lines.back().text);
      EXPECT_EQ(lost["type"], "process_lost");
      EXPECT_EQ(lost["reason"], "disconnected");
      EXPECT_EQ(lost["last_seq"], s.stream.seqs[s.lines - 1]);
      EXPECT_EQ(lost["events_stored"], s.lines);
      EXPECT_EQ(lost["events_lost"], 0);
    }
  }
}

// The producer dropped every 50th event (seq 49, 99, ...): gaps the collector must count.
bool EveryFiftieth(uint64_t seq) { return seq % 50 == 49; }

// Producer processes killed with SIGKILL with acks pending: each had an ack waiting unread in its
// socket, then queued more than a read chunk while the collector was stopped, and died. Every
// complete line it sent is stored, and process_lost counts them and the gaps exactly.
TEST(CollectorDeafProducerTest, KilledProducersWithAcksPendingHaveEveryLineStoredAndGapsCounted) {
  TempDir dir;
  ChildProcess collector(CUFLIGHT_COLLECTOR_PATH, CollectorArgs(dir), dir.path() / "out.txt");
  const auto socket = dir.path() / "run" / "c.sock";
  const auto logs = dir.path() / "logs";
  ASSERT_TRUE(WaitForSocket(socket, kStartTimeout)) << collector.Output();

  constexpr int kProducers = 4;
  constexpr uint64_t kLast = 3000;
  constexpr size_t kFirstLines = 20;  // sent, stored and acknowledged before the stop
  struct Child {
    pid_t pid = -1;
    int to_child = -1;    // a byte: the collector is stopped, send the rest
    int from_child = -1;  // a byte once an ack is waiting; then the bytes of the rest sent
  };
  std::vector<Child> children(kProducers);
  for (int i = 0; i < kProducers; ++i) {
    int down[2];
    int up[2];
    ASSERT_EQ(pipe2(down, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(up, O_CLOEXEC), 0);
    // The test process has no other thread here (the collector is a child process), so the
    // child may allocate.
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(down[1]);
      close(up[0]);
      const Stream s = MakeStream(Identity("killed" + std::to_string(i), getpid(), 200 + i), kLast,
                                  false, &EveryFiftieth);
      const int fd = ConnectUnix(socket);
      if (fd < 0 || !SendAll(fd, Join(s.lines, 0, kFirstLines), 1 << 16)) _exit(1);
      pollfd p{fd, POLLIN, 0};  // an ack arrived; it stays unread
      if (poll(&p, 1, 20000) != 1) _exit(2);
      char go = 1;
      if (write(up[1], &go, 1) != 1 || read(down[0], &go, 1) != 1) _exit(3);
      const uint64_t bytes = SendWhatFits(fd, Join(s.lines, kFirstLines, s.lines.size()));
      if (write(up[1], &bytes, sizeof(bytes)) != sizeof(bytes)) _exit(4);
      for (;;) pause();  // until SIGKILL
    }
    close(down[0]);
    close(up[1]);
    children[static_cast<size_t>(i)] = {pid, down[1], up[0]};
  }
  for (const Child& c : children) {
    char ready = 0;
    ASSERT_EQ(read(c.from_child, &ready, 1), 1);
  }
  collector.Signal(SIGSTOP);
  std::vector<uint64_t> rest_bytes(kProducers, 0);
  for (int i = 0; i < kProducers; ++i) {
    const Child& c = children[static_cast<size_t>(i)];
    const char go = 1;
    ASSERT_EQ(write(c.to_child, &go, 1), 1);
    ASSERT_EQ(read(c.from_child, &rest_bytes[static_cast<size_t>(i)], sizeof(uint64_t)),
              static_cast<ssize_t>(sizeof(uint64_t)));
    kill(c.pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(c.pid, &status, 0), c.pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(c.to_child);
    close(c.from_child);
  }
  collector.Signal(SIGCONT);
  for (const Child& c : children) {
    const int i = static_cast<int>(&c - children.data());
    ASSERT_TRUE(WaitUntil([&] { return LogEnded(logs, "killed" + std::to_string(i), c.pid); }));
  }
  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(kExitTimeout), 0) << collector.Output();

  for (int i = 0; i < kProducers; ++i) {
    SCOPED_TRACE("producer " + std::to_string(i));
    const Child& c = children[static_cast<size_t>(i)];
    const Stream s = MakeStream(Identity("killed" + std::to_string(i), c.pid, 200 + i), kLast,
                                false, &EveryFiftieth);
    const uint64_t first_bytes = Join(s.lines, 0, kFirstLines).size();
    const size_t complete = CompleteLines(s.lines, first_bytes + rest_bytes[i]);
    ASSERT_GT(rest_bytes[i], Collector::kReadChunkBytes) << "the test needs more than one read";
    const std::vector<LoggedLine> lines =
        ReadLog(FindLog(logs, "killed" + std::to_string(i), c.pid));
    ExpectSeqs(StoredSeqs(lines), Prefix(s.seqs, complete));
    ASSERT_FALSE(lines.empty());
    const nlohmann::json lost = nlohmann::json::parse(lines.back().text);
    EXPECT_EQ(lost["type"], "process_lost");
    EXPECT_EQ(lost["reason"], "disconnected");
    const uint64_t last_seq = s.seqs[complete - 1];
    EXPECT_EQ(lost["last_seq"], last_seq);
    EXPECT_EQ(lost["events_stored"], complete);
    // By hand: seqs 1..last_seq hold one skipped seq per full 50 (49, 99, ...).
    EXPECT_EQ(lost["events_lost"], (last_seq + 1) / 50);
    EXPECT_EQ(complete + (last_seq + 1) / 50, last_seq + 1);  // stored + lost = every seq
  }
}

// As a user first tries it: many producers at once, each writing process_start, 3,000 kernel
// events and process_end in small writes and closing at once without reading an ack. Every
// line is stored, every process ends with its process_end, nothing is counted lost.
void ConcurrentClosers(bool tcp) {
  TempDir dir;
  CollectorOptions options = testing::TestOptions(dir.path());
  if (tcp) options.tcp = HostPort{"127.0.0.1", 0};
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  const int port = running.collector()->tcp_port();

  constexpr int kProducers = 16;
  constexpr uint64_t kLast = 3000;
  std::vector<std::thread> producers;
  std::atomic<int> failures{0};
  for (int i = 0; i < kProducers; ++i) {
    producers.emplace_back([&, i] {
      const Stream s =
          MakeStream(Identity("crowd" + std::to_string(i), getpid(), 300 + i), kLast, true);
      const int fd = tcp ? ConnectTcp(port) : ConnectUnix(options.socket);
      if (fd < 0 || !SendAll(fd, Join(s.lines, 0, s.lines.size()), 4096)) {
        ++failures;
      } else if (tcp) {
        // TCP discards what is still in the sender's queue when it resets the connection (as
        // it does on a close with unread acks): wait until the collector's host has it all.
        int outq = 1;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (ioctl(fd, SIOCOUTQ, &outq) == 0 && outq > 0 &&
               std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        if (outq != 0) ++failures;
      }
      if (fd >= 0) close(fd);
    });
  }
  for (auto& t : producers) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_TRUE(WaitUntil([&] {
    const IngestStats s = running.stats();
    return s.processes_ended + s.processes_lost == kProducers && s.connections_open == 0;
  }));
  EXPECT_EQ(running.Stop(), 0);

  const IngestStats stats = running.stats();
  constexpr uint64_t kLinesEach = kLast + 2;
  ::testing::Test::RecordProperty("ack_write_failures", std::to_string(stats.ack_write_failures));
  EXPECT_EQ(stats.lines_received, kProducers * kLinesEach);
  EXPECT_EQ(stats.lines_stored, kProducers * kLinesEach);
  EXPECT_EQ(stats.lines_rejected, 0u);
  EXPECT_EQ(stats.events_lost, 0u);
  EXPECT_EQ(stats.processes_ended, static_cast<uint64_t>(kProducers));
  EXPECT_EQ(stats.processes_lost, 0u);
  for (int i = 0; i < kProducers; ++i) {
    const std::vector<LoggedLine> lines =
        ReadLog(FindLog(options.log_dir, "crowd" + std::to_string(i), getpid()));
    ASSERT_EQ(lines.size(), kLinesEach) << i;
    for (uint64_t seq = 0; seq < kLinesEach; ++seq) ASSERT_EQ(lines[seq].seq, seq) << i;
    EXPECT_EQ(lines.back().type, "process_end");
  }
}

TEST(CollectorDeafProducerTest, ManyProducersClosingWithoutReadingAcksLoseNothingUnix) {
  ConcurrentClosers(/*tcp=*/false);
}

TEST(CollectorDeafProducerTest, ManyProducersClosingWithoutReadingAcksLoseNothingTcp) {
  ConcurrentClosers(/*tcp=*/true);
}

}  // namespace
}  // namespace cuflight::collector
