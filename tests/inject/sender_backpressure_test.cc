// The sender thread under back-pressure (sender_thread.h, "Back-pressure"): launch records
// meet a transport buffer far smaller than their events, and a collector that acknowledges, one
// that is connected and silent, or none.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/schema/ack.h"
#include "cuflight/schema/decoder.h"
#include "inject_test_support.h"
#include "running_collector.h"
#include "sender_thread.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

using test_support::StoringCollector;
using test_support::TempSocketPath;

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr uint64_t kF = 0x2000;
constexpr auto kStallLimit = milliseconds(200);

// A collector socket the test drives: listening, so a producer connects at once, but accepting
// (and then reading and acknowledging) only when told to.
class ManualCollector {
 public:
  explicit ManualCollector(std::string path) : path_(std::move(path)) {
    unlink(path_.c_str());
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 4) != 0) {
      std::perror("ManualCollector");
      std::abort();
    }
  }
  ~ManualCollector() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    close(listen_fd_);
    unlink(path_.c_str());
  }

  // Accepts the waiting connection and from then on reads it, acknowledging the highest seq
  // after each read.
  void StartAcking() {
    thread_ = std::thread([this] {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::string pending;
      uint64_t highest = 0;
      while (!stop_) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 10) <= 0) continue;
        char buf[65536];
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        pending.append(buf, static_cast<size_t>(n));
        size_t start = 0;
        for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
          const size_t at = pending.find("\"seq\":", start);
          if (at < nl) highest = std::strtoull(pending.c_str() + at + 6, nullptr, 10);
          std::lock_guard<std::mutex> lock(mu_);
          seqs_.push_back(highest);
        }
        pending.erase(0, start);
        char ack[schema::kMaxAckLineBytes];
        (void)!send(fd, ack, schema::EncodeAck(highest, ack, sizeof(ack)), MSG_NOSIGNAL);
      }
      close(fd);
    });
  }
  std::vector<uint64_t> seqs() {
    std::lock_guard<std::mutex> lock(mu_);
    return seqs_;
  }

 private:
  std::string path_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<uint64_t> seqs_;  // of every line read, in order
};

// A harness, a sender thread with a 64 KiB transport buffer (about 60 kernel events), and a
// function to launch.
struct Pipeline {
  Harness h;
  SenderThread sender;

  Pipeline(const std::string& socket, OnFull on_full, size_t ring_slots = 4096)
      : h(ring_slots),
        sender(Options(socket, on_full, &h.driver), ReadProcessFacts(), h.ring.get(),
               h.recorder.get(), &h.functions, &h.devices, nullptr, nullptr) {
    h.fake.functions[kF] = FakeFunction{};
  }

  static SenderThreadOptions Options(const std::string& socket, OnFull on_full,
                                     const DriverApi* driver) {
    SenderThreadOptions o;
    o.driver = driver;
    o.on_full = on_full;
    o.block_stall_limit = kStallLimit;
    o.transport.socket_path = socket;
    o.transport.buffer_bytes = 64 << 10;
    o.transport.backoff_min = milliseconds(1);
    o.transport.backoff_max = milliseconds(20);
    o.stats_interval = std::chrono::hours(1);
    return o;
  }

  void Launch(uint32_t count) {
    cuLaunchKernel_params params{Fn(kF), 132, 1, 1, 256, 1, 1, 0, St(kStream), nullptr, nullptr};
    for (uint32_t i = 0; i < count; ++i) {
      h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z6vecaddPKfS0_Pfi", ++corr);
    }
  }

  // Every event the sender thread made is held by the transport or counted: `emitted` is what
  // the transport took and did not drop for room (those are counted as dropped, once).
  void ExpectAccounted() {
    const PipelineCounters c = sender.counters();
    const transport::SenderStats t = sender.transport().stats();
    EXPECT_EQ(c.emitted + t.dropped_disconnected + t.dropped_backpressure,
              t.enqueued + t.preamble_lines);
    EXPECT_EQ(c.emitted, t.acked + t.spilled + sender.transport().unacked_lines());
    EXPECT_EQ(c.dropped_backpressure, t.dropped_backpressure);
    EXPECT_EQ(c.dropped_disconnected, t.dropped_disconnected);  // nothing else was refused
  }

  uint32_t corr = 0;
};

bool HasProcessEnd(const std::vector<std::string>& lines) {
  return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
}

// The records left in the ring at exit make 4,000 kernel events, some 60 times what the transport
// holds: the exit drain waits for room while the collector acknowledges, in both modes, and loses
// nothing (it used to drop the oldest never-sent events for room).
void ExitDrainWaitsForRoom(OnFull on_full) {
  const std::string path = TempSocketPath("drain");
  StoringCollector collector(path);
  Pipeline p(path, on_full);
  p.Launch(4000);
  ASSERT_EQ(p.h.ring->SizeApprox(), 4000u);
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(20)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  const std::vector<std::string> lines = collector.Lines();
  // process_start, the device, 4,000 kernels, process_end: seqs 0..4002 in order.
  ASSERT_EQ(lines.size(), 4003u);
  for (size_t i = 0; i < lines.size(); ++i) {
    const schema::DecodeResult d = schema::Decode(lines[i]);
    ASSERT_TRUE(d.ok()) << d.message;
    ASSERT_EQ(d.header->seq, i);
  }
  const schema::DecodeResult end = schema::Decode(lines.back());
  const auto& e = std::get<schema::OwnedProcessEndEvent>(end.event);
  EXPECT_EQ(e.dropped, 0u);
  EXPECT_EQ(e.emitted, 4002u);
  p.ExpectAccounted();
}

TEST(SenderBackpressure, ExitDrainWaitsForRoomInDropMode) { ExitDrainWaitsForRoom(OnFull::kDrop); }

TEST(SenderBackpressure, ExitDrainWaitsForRoomInBlockMode) {
  ExitDrainWaitsForRoom(OnFull::kBlock);
}

// Steps the thread until the ring is empty or `timeout`; returns when the ring emptied.
Clock::duration StepUntilRingEmpty(Pipeline& p, Clock::duration timeout) {
  const Clock::time_point start = Clock::now();
  while (p.h.ring->SizeApprox() > 0 && Clock::now() - start < timeout) {
    p.sender.Step(Clock::now());
    std::this_thread::sleep_for(milliseconds(1));
  }
  return Clock::now() - start;
}

// Block mode and a collector that is connected but acknowledges nothing (hung): the thread leaves
// records in the ring (the launching threads would wait) for the stall bound, then takes them,
// the transport dropping for room, counted as back-pressure. When the collector acknowledges
// again the thread waits again, and drops no more.
TEST(SenderBackpressure, BlockModeWaitsTheStallBoundThenCountsBackpressureUntilAcksResume) {
  const std::string path = TempSocketPath("hung");
  ManualCollector collector(path);
  Pipeline p(path, OnFull::kBlock);
  p.Launch(2000);
  const Clock::time_point start = Clock::now();
  p.sender.Step(Clock::now());
  ASSERT_TRUE(p.sender.transport().connected());
  // Within the bound the buffer is full and records stay in the ring.
  while (Clock::now() - start < kStallLimit / 2) {
    p.sender.Step(Clock::now());
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_GT(p.h.ring->SizeApprox(), 1000u);
  EXPECT_EQ(p.sender.counters().dropped_backpressure, 0u);
  // Past it the ring empties, each event beyond the buffer counted.
  StepUntilRingEmpty(p, std::chrono::seconds(20));
  EXPECT_EQ(p.h.ring->SizeApprox(), 0u);
  EXPECT_GE(Clock::now() - start, kStallLimit);
  const PipelineCounters stalled = p.sender.counters();
  EXPECT_GT(stalled.dropped_backpressure, 1000u);
  EXPECT_EQ(stalled.dropped_disconnected, 0u);
  EXPECT_EQ(stalled.dropped_ring_full, 0u);
  p.ExpectAccounted();

  // The collector catches up. Once the thread has seen an acknowledgement it waits for room
  // again (the ring is empty meanwhile, so nothing is taken before).
  collector.StartAcking();
  const Clock::time_point resumed = Clock::now();
  while (p.sender.transport().stats().acked == 0 &&
         Clock::now() - resumed < std::chrono::seconds(20)) {
    p.sender.Step(Clock::now());
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_GT(p.sender.transport().stats().acked, 0u);
  p.Launch(2000);
  StepUntilRingEmpty(p, std::chrono::seconds(20));
  ASSERT_EQ(p.h.ring->SizeApprox(), 0u);
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(20)));
  EXPECT_EQ(p.sender.counters().dropped_backpressure, stalled.dropped_backpressure);
  p.ExpectAccounted();
  // What the collector read: seqs 0..4002 (process_start, the device, 2 x 2,000 kernels,
  // process_end) but the ones dropped, in order; the later 2,000 kernels and process_end all.
  const std::vector<uint64_t> seqs = collector.seqs();
  ASSERT_EQ(seqs.size(), 4003 - stalled.dropped_backpressure);
  for (size_t i = 1; i < seqs.size(); ++i) ASSERT_LT(seqs[i - 1], seqs[i]) << i;
  ASSERT_GE(seqs.size(), 2001u);
  for (size_t i = 0; i <= 2000; ++i) {
    ASSERT_EQ(seqs[seqs.size() - 1 - i], 4002 - i);
  }
}

// Block mode and no collector at all: after the stall bound the drops are counted as
// disconnected.
TEST(SenderBackpressure, BlockModeWithoutACollectorCountsDisconnectedAfterTheBound) {
  Pipeline p(TempSocketPath("absent"), OnFull::kBlock);
  p.Launch(2000);
  const Clock::duration took = StepUntilRingEmpty(p, std::chrono::seconds(20));
  EXPECT_EQ(p.h.ring->SizeApprox(), 0u);
  EXPECT_GE(took, kStallLimit);
  const PipelineCounters c = p.sender.counters();
  EXPECT_GT(c.dropped_disconnected, 1000u);
  EXPECT_EQ(c.dropped_backpressure, 0u);
  p.ExpectAccounted();
}

}  // namespace
}  // namespace cuflight::inject::testing
