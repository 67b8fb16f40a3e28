// The sender thread under back-pressure (sender_thread.h, "Back-pressure"): launch records
// meet a transport buffer far smaller than their events, and a collector that acknowledges, one
// that is connected and silent, or none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "inject_test_support.h"
#include "recording_peer.h"
#include "running_collector.h"
#include "sender_thread.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

using test_support::RecordingPeer;

using std::chrono::milliseconds;
constexpr uint64_t kF = 0x2000;
constexpr auto kStallLimit = milliseconds(200);

// A harness, a sender thread with a 64 KiB transport buffer (about 60 kernel events), and a
// function to launch.
struct Pipeline {
  Harness h;
  SenderThread sender;

  Pipeline(const std::string& socket, env::OnFull on_full, size_t ring_slots = 4096)
      : h(ring_slots), sender(h.Sender(Options(socket, on_full, &h.driver), ReadProcessFacts())) {
    h.fake.functions[kF] = FakeFunction{};
  }

  static SenderThreadOptions Options(const std::string& socket, env::OnFull on_full,
                                     const DriverApi* driver) {
    SenderThreadOptions o = QuickSenderOptions(socket, driver);
    // The whole form (CUFLIGHT_INTERN_CONFIGS=0): these tests size the launches against the
    // transport's 64 KiB in kernel lines (~0.9 KB each) and count one seq per launch; the
    // transport treats launch lines the same way, and the interned form is read back whole in
    // interned_recording_test.cc.
    o.intern_configs = false;
    o.on_full = on_full;
    o.block_stall_limit = kStallLimit;
    o.transport.buffer_bytes = 64 << 10;
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

// The stream ended: its last stored line is the process_end.
bool EndsWithProcessEnd(const std::vector<std::string>& lines) {
  return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
}

// The records left in the ring at exit make 4,000 kernel events, some 60 times what the transport
// holds: the exit drain waits for room while the collector acknowledges, in both modes, and loses
// nothing (it used to drop the oldest never-sent events for room).
void ExitDrainWaitsForRoom(env::OnFull on_full) {
  const std::string path = TempSocketPath("drain");
  StoringCollector collector(path);
  Pipeline p(path, on_full);
  p.Launch(4000);
  ASSERT_EQ(p.h.ring->SizeApprox(), 4000u);
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(20)));
  ASSERT_TRUE(collector.WaitFor(EndsWithProcessEnd));
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

TEST(SenderBackpressure, ExitDrainWaitsForRoomInDropMode) {
  ExitDrainWaitsForRoom(env::OnFull::kDrop);
}

TEST(SenderBackpressure, ExitDrainWaitsForRoomInBlockMode) {
  ExitDrainWaitsForRoom(env::OnFull::kBlock);
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
  const std::string store_path = TempSocketPath("hung-store");
  StoringCollector store(store_path);
  // The collector the producer connects to reads nothing, so acknowledges nothing: a paused
  // peer in front of the real one.
  RecordingPeer collector(path, store_path);
  collector.SetPaused(true);
  Pipeline p(path, env::OnFull::kBlock);
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
  collector.SetPaused(false);  // the real collector behind it reads, stores and acknowledges
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
  ASSERT_EQ(collector.connection_count(), 1u);
  const std::vector<uint64_t> seqs = collector.connections()[0].seqs;
  // ... and stored each once.
  EXPECT_TRUE(store.WaitFor(
      [&](const std::vector<std::string>&) { return store.StoredSeqs(getpid()) == seqs; }));
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
  Pipeline p(TempSocketPath("absent"), env::OnFull::kBlock);
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
