#include "cuflight/transport/sender.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/schema/ack.h"
#include "log_files.h"
#include "pump.h"
#include "recording_peer.h"
#include "running_collector.h"
#include "temp_dir.h"
#include "test_lines.h"
#include "wait_until.h"

namespace cuflight::transport {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using test_support::Range;
using test_support::RecordingPeer;
using testing::EnqueuePolling;
using testing::EventLine;
using testing::MakeLine;
using testing::Pump;
using testing::StartLine;
using testing::WriteInPlace;

constexpr auto kTimeout = seconds(20);

std::string Ack(uint64_t seq) {
  char buf[schema::kMaxAckLineBytes];
  return std::string(buf, schema::EncodeAck(seq, buf, sizeof(buf)));
}

// Line `seq` of a stream of `size`-byte lines that the Sender sends without a preamble: the
// process_start first, as the collector requires (docs/protocol.md).
std::string StreamLine(uint64_t seq, size_t size) {
  return seq == 0 ? StartLine(size) : EventLine(seq, size);
}

// The accounting identity of SenderStats, with nothing spilled.
void ExpectBalanced(const Sender& s) {
  testing::ExpectStatsBalance(s);
  const SenderStats st = s.stats();
  EXPECT_EQ(st.spilled, 0u);  // no spill sink in these tests
  EXPECT_EQ(st.spill_refusals, 0u);
}

// The Sender with a collector at its path from the start (testing::SenderFixture); Stored() is
// the stream of exe "trainer".
class SenderTest : public testing::SenderFixture {
 protected:
  void SetUp() override {
    SenderFixture::SetUp();
    StartStoringCollector();
  }

  // Waits until the collector stored `seq` of this process: what a peer read may still be on
  // its way to the collector.
  bool WaitStored(uint64_t seq) const {
    return test_support::WaitUntil([&] {
      const std::vector<uint64_t> stored = Stored();
      return std::find(stored.begin(), stored.end(), seq) != stored.end();
    });
  }
  // The seqs stored in the stream of the process named /opt/app/bin/<exe> (StartLine).
  std::vector<uint64_t> StoredOf(std::string_view exe) const {
    const auto file = test_support::FindLog(collector_->log_dir(), exe, getpid());
    if (file.empty()) return {};
    return test_support::StoredSeqs(test_support::ReadLog(file));
  }
  // Valid lines whose seq the collector had stored already. Stops the collector first (it reads
  // what it was sent to the end): it publishes its counts after the acks of a turn, so only then
  // do they cover every line it acknowledged.
  uint64_t Duplicates() const {
    collector_->Stop();
    return collector_->stats().duplicates;
  }
};

TEST_F(SenderTest, CollectorAbsentAtStartThenAppearing) {
  Sender s(Options());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.address_valid());
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  ASSERT_TRUE(s.AddPreamble(1, EventLine(1, 360, "device")));
  for (uint64_t seq = 2; seq < 202; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));

  ASSERT_TRUE(Pump(s, [&] { return s.stats().connect_failures >= 3; }));
  EXPECT_FALSE(s.connected());
  EXPECT_EQ(s.fd(), -1);
  EXPECT_EQ(s.unacked_lines(), 202u);
  EXPECT_EQ(s.stats().connects, 0u);

  auto collector = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  const auto conns = collector->connections();
  ASSERT_EQ(conns.size(), 1u);
  EXPECT_EQ(conns[0].pid, getpid());
  ASSERT_EQ(conns[0].seqs, Range(0, 201));
  EXPECT_EQ(conns[0].lines[0], StartLine(280));
  EXPECT_EQ(conns[0].lines[1], EventLine(1, 360, "device"));
  for (uint64_t seq = 2; seq < 202; ++seq) EXPECT_EQ(conns[0].lines[seq], EventLine(seq, 400));
  const SenderStats st = s.stats();
  EXPECT_EQ(st.acked, 202u);
  EXPECT_EQ(st.enqueued, 200u);
  EXPECT_EQ(st.preamble_lines, 2u);
  EXPECT_EQ(st.dropped_disconnected, 0u);
  EXPECT_EQ(st.connects, 1u);
  EXPECT_EQ(st.retransmitted, 0u);
  EXPECT_TRUE(s.connected());
  ExpectBalanced(s);
}

// pass_fd goes with the first bytes of every Unix connection, once each, and after it a pidfd of
// the process itself (design point 11); never over TCP.
TEST_F(SenderTest, PassesItsDescriptorWithTheFirstBytesOfEveryConnection) {
  char name[] = "/tmp/cuflight-passed-XXXXXX";
  const int file = mkstemp(name);
  ASSERT_GE(file, 0);
  unlink(name);
  struct stat st {};
  ASSERT_EQ(fstat(file, &st), 0);
  SenderOptions o = Options();
  o.pass_fd = file;
  auto collector = StartCollector();
  Sender s(o);
  EXPECT_FALSE(s.written_seq().has_value());
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  for (uint64_t seq = 1; seq < 50; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  EXPECT_EQ(s.written_seq(), 49u);
  collector->Kill();  // a new collector, a new connection: the descriptor again
  collector = StartCollector();
  for (uint64_t seq = 50; seq < 60; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0 && s.stats().connects == 2; }));
  const auto conns = collector->connections();
  ASSERT_EQ(conns.size(), 1u);
  ASSERT_EQ(conns[0].passed.size(), 2u);
  EXPECT_EQ(conns[0].passed[0].at_byte, 0u);
  EXPECT_EQ(conns[0].passed[0].ino, static_cast<uint64_t>(st.st_ino));
  EXPECT_EQ(conns[0].passed[0].dev, static_cast<uint64_t>(st.st_dev));
  EXPECT_EQ(conns[0].passed[0].pidfd_pid, 0);
  EXPECT_EQ(conns[0].passed[1].at_byte, 0u);
  EXPECT_EQ(conns[0].passed[1].pidfd_pid, getpid());  // this kernel has pidfd_open (5.3+)
  EXPECT_EQ(s.stats().fds_passed, 2u);
  EXPECT_EQ(s.stats().fd_pass_failures, 0u);
  close(file);

  // TCP carries no descriptor.
  RecordingPeer tcp(RecordingPeer::TcpTag{}, upstream());
  SenderOptions t = Options();
  t.socket_path = "tcp:127.0.0.1:" + std::to_string(tcp.port());
  t.pass_fd = 0;
  Sender over_tcp(t);
  ASSERT_TRUE(over_tcp.AddPreamble(0, StartLine(280)));
  ASSERT_TRUE(Pump(over_tcp, [&] { return over_tcp.unacked_lines() == 0; }));
  EXPECT_EQ(over_tcp.stats().fds_passed, 0u);
  EXPECT_TRUE(tcp.connections().at(0).passed.empty());
}

// A descriptor the kernel refuses to pass (here: not open) costs nothing but the passing: the
// lines go out without it, one warning says so, and no later connection tries again.
TEST_F(SenderTest, ADescriptorTheKernelRefusesIsDroppedWithOneWarning) {
  SenderOptions o = Options();
  o.pass_fd = 1 << 20;  // beyond any open descriptor: EBADF
  std::vector<std::string> warnings;
  o.warn = [&warnings](std::string_view w) { warnings.emplace_back(w); };
  auto collector = StartCollector();
  Sender s(o);
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  for (uint64_t seq = 1; seq < 20; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  collector->Kill();
  collector = StartCollector();
  ASSERT_TRUE(s.Enqueue(20, EventLine(20, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0 && s.stats().connects == 2; }));
  EXPECT_EQ(Stored(), Range(0, 20));
  EXPECT_EQ(s.stats().fds_passed, 0u);
  EXPECT_EQ(s.stats().fd_pass_failures, 1u);
  EXPECT_EQ(s.stats().write_errors, 0u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cannot pass the black box"), std::string::npos) << warnings[0];
  ExpectBalanced(s);
}

TEST_F(SenderTest, CollectorKilledMidStreamAndRestarted) {
  Sender s(Options());
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  ASSERT_TRUE(s.AddPreamble(1, EventLine(1, 360, "device")));
  auto a = StartCollector();
  for (uint64_t seq = 2; seq <= 101; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  // The collector stores 102..151 but dies before acking them.
  a->SetHoldAcks(true);
  for (uint64_t seq = 102; seq <= 151; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->last_seq(0) == 151; }));
  ASSERT_TRUE(WaitStored(151));
  EXPECT_EQ(s.unacked_lines(), 50u);
  a->Kill();

  // Lines made while no collector exists wait.
  for (uint64_t seq = 152; seq <= 201; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().disconnects == 1; }));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().connect_failures >= 1; }));
  EXPECT_EQ(s.unacked_lines(), 100u);

  auto b = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  const auto conns = b->connections();
  ASSERT_EQ(conns.size(), 1u);
  // Preamble first again, then the unacked lines (retransmitted), then the waiting ones.
  std::vector<uint64_t> expected = {0, 1};
  for (uint64_t seq = 102; seq <= 201; ++seq) expected.push_back(seq);
  EXPECT_EQ(conns[0].seqs, expected);
  EXPECT_EQ(Stored(), Range(0, 201));
  EXPECT_EQ(Duplicates(), 52u);  // the preamble and 102..151
  const SenderStats st = s.stats();
  EXPECT_EQ(st.retransmitted, 50u);
  EXPECT_EQ(st.dropped_disconnected, 0u);
  EXPECT_EQ(st.acked, 202u);
  EXPECT_EQ(st.connects, 2u);
  ExpectBalanced(s);
}

TEST_F(SenderTest, LinesUnreadWhenTheCollectorDiesAreSentAgain) {
  Sender s(Options());
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto a = StartCollector();
  for (uint64_t seq = 1; seq <= 10; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  // Written into the socket, never read: lost with the collector.
  a->SetPaused(true);
  for (uint64_t seq = 11; seq <= 40; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().bytes_written == 280 + 40 * 400; }));
  a->Kill();
  auto b = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  EXPECT_EQ(Stored(), Range(0, 40));
  EXPECT_EQ(s.stats().retransmitted, 30u);
  EXPECT_EQ(Duplicates(), 1u);  // the preamble
  ExpectBalanced(s);
}

// A restarted collector may ack (from its log) lines the sender is still retransmitting, one of
// them half written: that line is finished before it is released, so the stream stays whole.
TEST_F(SenderTest, AckDuringRetransmissionKeepsTheStreamWhole) {
  Sender s(Options(4 << 20, 1 << 20));
  auto size_of = [](uint64_t seq) { return 4001 + seq % 7; };
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto a = StartCollector();
  a->SetHoldAcks(true);
  for (uint64_t seq = 1; seq <= 250; ++seq)
    ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, size_of(seq))));
  ASSERT_TRUE(Pump(s, [&] { return a->last_seq(0) == 250; }));
  ASSERT_TRUE(WaitStored(250));
  a->Kill();
  for (uint64_t seq = 251; seq <= 260; ++seq) {
    ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, size_of(seq))));
  }

  // The new collector reads nothing yet: the retransmission stops when the socket is full.
  auto b = StartCollector();
  b->SetPaused(true);
  const uint64_t written_before = s.stats().bytes_written;
  ASSERT_TRUE(Pump(s, [&] {
    return s.connected() && s.WantsWrite() && s.stats().bytes_written > written_before + 50000 &&
           b->connection_count() == 1;
  }));
  for (int i = 0; i < 10; ++i) s.Poll(steady_clock::now());
  b->SendRaw(0, Ack(250));  // everything A stored
  ASSERT_TRUE(Pump(s, [&] { return s.stats().acks == 1; }));
  // Lines behind a half-written one wait for it (the window is a FIFO).
  EXPECT_GT(s.stats().acked, 0u);

  b->SetPaused(false);
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  const auto conns = b->connections();
  ASSERT_EQ(conns.size(), 1u);
  ASSERT_FALSE(conns[0].seqs.empty());
  EXPECT_EQ(conns[0].seqs.front(), 0u);
  EXPECT_EQ(conns[0].seqs.back(), 260u);
  EXPECT_LT(conns[0].seqs.size(), 200u);  // acked lines not yet written were skipped
  for (size_t i = 1; i < conns[0].seqs.size(); ++i) {
    const uint64_t seq = conns[0].seqs[i];
    ASSERT_EQ(conns[0].lines[i], EventLine(seq, size_of(seq))) << "line " << i;
  }
  EXPECT_EQ(Stored(), Range(0, 260));
  ExpectBalanced(s);
}

TEST_F(SenderTest, OverflowWhileDisconnectedDropsOldestNeverSentLines) {
  Sender s(Options(16384, 4000));
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto a = StartCollector();
  for (uint64_t seq = 1; seq <= 20; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  // 21..30 fill the window exactly (10 x 400 bytes) and are never acked.
  a->SetHoldAcks(true);
  for (uint64_t seq = 21; seq <= 30; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->last_seq(0) == 30; }));
  EXPECT_EQ(s.held_bytes(), 4000u);
  a->Kill();
  ASSERT_TRUE(Pump(s, [&] { return s.stats().disconnects == 1; }));

  // 100 more lines while nothing listens: the window keeps its 4000 bytes, never-sent lines
  // get the other 12384 bytes, so 30 of them fit and the 70 oldest (31..100) are dropped.
  ASSERT_TRUE(EnqueuePolling(s, 31, 130, [](uint64_t seq) { return EventLine(seq, 400); }));
  EXPECT_FALSE(s.connected());
  EXPECT_EQ(s.stats().dropped_disconnected, 70u);
  EXPECT_EQ(s.held_bytes(), 16000u);
  EXPECT_EQ(s.unacked_lines(), 40u);
  EXPECT_FALSE(s.HasRoom(400));
  EXPECT_TRUE(s.HasRoom(384));
  ExpectBalanced(s);

  auto b = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  std::vector<uint64_t> expected = Range(0, 30);
  for (uint64_t seq = 101; seq <= 130; ++seq) expected.push_back(seq);
  EXPECT_EQ(Stored(), expected);
  const SenderStats st = s.stats();
  EXPECT_EQ(st.dropped_disconnected, 70u);
  EXPECT_EQ(st.retransmitted, 10u);
  EXPECT_EQ(st.acked, 61u);
  ExpectBalanced(s);
}

// A line dropped for room is counted by what was happening: the same overflow with a collector
// connected that does not acknowledge (it is behind) and with none at all.
TEST_F(SenderTest, DropsForRoomNameWhetherACollectorWasConnected) {
  Sender s(Options(16384, 4000));
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto a = StartCollector();
  a->SetHoldAcks(true);
  // 1..10 fill the window (10 x 400 bytes), sent and never acked.
  for (uint64_t seq = 1; seq <= 10; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->last_seq(0) == 10 && !s.WantsWrite(); }));
  ASSERT_TRUE(s.connected());

  // 100 more while connected: the window keeps 4000 bytes, never-sent lines get 12384, so 30 fit
  // and the 70 oldest (11..80) are dropped because the collector is behind.
  ASSERT_TRUE(EnqueuePolling(s, 11, 110, [](uint64_t seq) { return EventLine(seq, 400); }));
  ASSERT_TRUE(s.connected());
  SenderStats st = s.stats();
  EXPECT_EQ(st.dropped_backpressure, 70u);
  EXPECT_EQ(st.dropped_disconnected, 0u);
  ExpectBalanced(s);

  // The collector goes; 50 more: each pushes out one of the 30 held never-sent lines.
  a->Kill();
  ASSERT_TRUE(Pump(s, [&] { return s.stats().disconnects == 1; }));
  ASSERT_TRUE(EnqueuePolling(s, 111, 160, [](uint64_t seq) { return EventLine(seq, 400); }));
  ASSERT_FALSE(s.connected());
  st = s.stats();
  EXPECT_EQ(st.dropped_backpressure, 70u);
  EXPECT_EQ(st.dropped_disconnected, 50u);
  ExpectBalanced(s);

  // Back: the window (1..10), then the 30 newest (131..160); the gaps are the 120 counted.
  auto b = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  std::vector<uint64_t> expected = Range(0, 10);
  for (uint64_t seq = 131; seq <= 160; ++seq) expected.push_back(seq);
  EXPECT_EQ(Stored(), expected);
  ExpectBalanced(s);
}

// WaitForRoom sleeps until an ack makes room, and returns by its deadline when none comes.
TEST_F(SenderTest, WaitForRoomReturnsWhenAnAckMakesRoomOrAtItsDeadline) {
  Sender s(Options(8000, 4000));
  auto a = StartCollector();
  a->SetHoldAcks(true);
  for (uint64_t seq = 0; seq < 20; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->last_seq(0) == 9 && !s.WantsWrite(); }));
  ASSERT_FALSE(s.HasRoom(400));

  const auto start = steady_clock::now();
  EXPECT_FALSE(s.WaitForRoom(400, start + milliseconds(100)));
  const auto waited = steady_clock::now() - start;
  EXPECT_GE(waited, milliseconds(100));
  EXPECT_LT(waited, seconds(5));

  // An ack of 0..4 frees 2000 bytes of window: 5 never-sent lines go out, and 2000 bytes are free.
  std::thread acker([&] {
    std::this_thread::sleep_for(milliseconds(50));
    a->SendRaw(0, Ack(4));
  });
  EXPECT_TRUE(s.WaitForRoom(2000, steady_clock::now() + kTimeout));
  acker.join();
  EXPECT_FALSE(s.HasRoom(2001));
  const SenderStats st = s.stats();
  EXPECT_EQ(st.acked, 5u);
  EXPECT_EQ(st.dropped_backpressure + st.dropped_disconnected, 0u);
  ExpectBalanced(s);
}

TEST_F(SenderTest, EnqueueRefusesWhenEverythingHeldIsSentUnacked) {
  Sender s(Options(4000, 4000));
  auto a = StartCollector();
  a->SetHoldAcks(true);
  for (uint64_t seq = 0; seq < 10; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->received(0) == 10 && !s.WantsWrite(); }));
  EXPECT_EQ(s.held_bytes(), 4000u);
  EXPECT_FALSE(s.HasRoom(1));

  EXPECT_FALSE(s.Enqueue(10, EventLine(10, 400)));
  SenderStats st = s.stats();
  EXPECT_EQ(st.rejected_no_room, 1u);
  EXPECT_EQ(st.dropped_disconnected, 0u);
  EXPECT_EQ(s.unacked_lines(), 10u);

  a->SendRaw(0, Ack(4));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().acked == 5; }));
  EXPECT_TRUE(s.HasRoom(2000));
  EXPECT_FALSE(s.HasRoom(2001));
  EXPECT_TRUE(s.Enqueue(11, EventLine(11, 400)));
  ExpectBalanced(s);
}

TEST_F(SenderTest, RefusesLinesTooLargeOrMalformed) {
  Sender s(Options(4096, 1000));
  EXPECT_FALSE(s.Enqueue(0, MakeLine(0, 1001)));
  EXPECT_EQ(s.stats().rejected_too_large, 1u);
  EXPECT_FALSE(s.HasRoom(1001));
  EXPECT_TRUE(s.Enqueue(1, MakeLine(1, 1000)));
  EXPECT_FALSE(s.Enqueue(2, "no newline"));
  EXPECT_FALSE(s.Enqueue(3, ""));
  EXPECT_FALSE(s.Enqueue(1, MakeLine(1, 100)));  // seq not increasing
  EXPECT_FALSE(s.AddPreamble(1, MakeLine(1, 100)));
  EXPECT_EQ(s.stats().rejected_invalid, 4u);
  EXPECT_TRUE(s.Enqueue(4, MakeLine(4, 100)));
  EXPECT_EQ(s.stats().enqueued, 2u);
  EXPECT_EQ(s.unacked_lines(), 2u);

  SenderOptions small = Options();
  small.preamble_bytes = 100;
  Sender p(small);
  EXPECT_TRUE(p.AddPreamble(0, MakeLine(0, 100)));
  EXPECT_FALSE(p.AddPreamble(1, MakeLine(1, 64)));  // preamble storage full
  EXPECT_EQ(p.stats().preamble_lines, 1u);
}

// Storage Reserve() offered and no Commit took holds no line (design point 13): a complete line
// written there and never committed is neither sent nor counted, and the next line is written
// over it, whether by Commit or by Enqueue.
TEST_F(SenderTest, AReservationNotCommittedIsNeverSent) {
  Sender s(Options());
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto a = StartCollector();
  auto write_uncommitted = [&](uint64_t seq) {
    const std::string line = EventLine(seq, 400);
    const std::span<char> room = s.Reserve();
    ASSERT_GE(room.size(), line.size());
    std::memcpy(room.data(), line.data(), line.size());
  };
  write_uncommitted(1);
  EXPECT_EQ(s.held_bytes(), 0u);
  EXPECT_EQ(s.unacked_lines(), 1u);  // the preamble alone
  bool in_place = false;
  ASSERT_TRUE(WriteInPlace(s, 2, EventLine(2, 400), &in_place));
  EXPECT_TRUE(in_place);
  write_uncommitted(3);
  ASSERT_TRUE(s.Enqueue(4, EventLine(4, 400)));  // ends the reservation
  EXPECT_FALSE(s.Commit(3, 400));
  write_uncommitted(5);  // and nothing takes this one
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  const auto conns = a->connections();
  ASSERT_EQ(conns.size(), 1u);
  EXPECT_EQ(conns[0].seqs, (std::vector<uint64_t>{0, 2, 4}));
  ASSERT_EQ(conns[0].lines.size(), 3u);
  EXPECT_EQ(conns[0].lines[1], EventLine(2, 400));
  EXPECT_EQ(conns[0].lines[2], EventLine(4, 400));
  const SenderStats st = s.stats();
  EXPECT_EQ(st.bytes_written, 280u + 400u + 400u);
  EXPECT_EQ(st.enqueued, 2u);
  EXPECT_EQ(st.rejected_invalid, 1u);
  EXPECT_EQ(Stored(), (std::vector<uint64_t>{0, 2, 4}));
  ExpectBalanced(s);
}

// A Commit of more than was reserved (an encoder that ran out of room wrote no line) is refused
// and counted, as are the other malformed ones, and uses no seq; the line then goes by copy.
TEST_F(SenderTest, ACommitBeyondItsReservationIsRefusedAndCounted) {
  // Nothing listens: nothing is sent, never-sent lines are dropped for room.
  Sender s(Options(4096, 1000));
  // The longest line is window_bytes (SenderOptions), so that is the most a reservation offers.
  std::span<char> room = s.Reserve();
  ASSERT_EQ(room.size(), 1000u);
  std::memset(room.data(), 'x', room.size());
  room[999] = '\n';
  EXPECT_FALSE(s.Commit(0, 1001));
  EXPECT_FALSE(s.Commit(0, 1000));  // the refusal ended the reservation
  room = s.Reserve();
  EXPECT_FALSE(s.Commit(0, 600));  // no final '\n'
  room = s.Reserve();
  EXPECT_FALSE(s.Commit(0, 0));
  SenderStats st = s.stats();
  EXPECT_EQ(st.rejected_invalid, 4u);
  EXPECT_EQ(st.enqueued, 0u);
  EXPECT_EQ(s.held_bytes(), 0u);

  // Seq 0 is still free. Then 3 lines of 1000 fill the storage to 3600 of its 4096 bytes.
  bool in_place = false;
  ASSERT_TRUE(WriteInPlace(s, 0, MakeLine(0, 600), &in_place));
  EXPECT_TRUE(in_place);
  for (uint64_t seq = 1; seq <= 3; ++seq) ASSERT_TRUE(WriteInPlace(s, seq, MakeLine(seq, 1000)));
  EXPECT_EQ(s.Reserve().size(), 496u);
  EXPECT_TRUE(s.HasRoom(496));
  EXPECT_FALSE(s.HasRoom(497));
  // A line that does not fit the reservation goes by copy: the oldest never-sent line (seq 0,
  // bytes 0..599) is dropped for it, and it wraps, from byte 3600 to byte 0 of the storage.
  ASSERT_TRUE(WriteInPlace(s, 4, MakeLine(4, 497), &in_place));
  EXPECT_FALSE(in_place);
  st = s.stats();
  EXPECT_EQ(st.dropped_disconnected, 1u);
  EXPECT_EQ(st.enqueued, 5u);
  EXPECT_EQ(s.held_bytes(), 3000u + 497u);
  // The next line starts at byte 1: 599 contiguous bytes up to the oldest line (seq 1, at 600).
  EXPECT_EQ(s.Reserve().size(), 599u);
  ExpectBalanced(s);
}

// Lines encoded in place around the storage's end, with the storage never empty (acks come
// three lines behind): each line that would cross the end goes by copy, wrapped, and the
// stream is every line whole and in order.
TEST_F(SenderTest, LinesEncodedInPlaceWrapAroundTheStorageAndArriveWhole) {
  Sender s(Options(4096, 2048));
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto a = StartCollector();
  a->SetHoldAcks(true);  // the test acks, three lines behind: at most 4 x 499 bytes held
  auto size_of = [](uint64_t seq) -> size_t { return 200 + (seq * 37) % 300; };
  int in_place_lines = 0;
  int copied_lines = 0;
  for (uint64_t seq = 1; seq <= 300; ++seq) {
    bool in_place = false;
    ASSERT_TRUE(WriteInPlace(s, seq, EventLine(seq, size_of(seq)), &in_place)) << seq;
    ++(in_place ? in_place_lines : copied_lines);
    ASSERT_TRUE(Pump(s, [&] { return a->last_seq(0) == static_cast<int64_t>(seq); })) << seq;
    if (seq > 3) a->SendRaw(0, Ack(seq - 3));
  }
  ASSERT_TRUE(WaitStored(300));
  a->SendRaw(0, Ack(300));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  // About 105,000 bytes through 4096: some 25 lines crossed the end.
  EXPECT_GT(copied_lines, 10);
  EXPECT_GT(in_place_lines, 200);
  const auto conns = a->connections();
  ASSERT_EQ(conns.size(), 1u);
  ASSERT_EQ(conns[0].seqs, Range(0, 300));
  for (uint64_t seq = 1; seq <= 300; ++seq) {
    ASSERT_EQ(conns[0].lines[seq], EventLine(seq, size_of(seq))) << seq;
  }
  const SenderStats st = s.stats();
  EXPECT_EQ(st.dropped_backpressure + st.dropped_disconnected, 0u);
  EXPECT_EQ(st.retransmitted, 0u);
  EXPECT_EQ(Stored(), Range(0, 300));
  ExpectBalanced(s);
}

// Lines encoded in place stay where they lie until acked: a new connection sends them again.
TEST_F(SenderTest, LinesEncodedInPlaceAreSentAgainAfterAReconnect) {
  Sender s(Options());
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto size_of = [](uint64_t seq) -> size_t { return 300 + seq; };
  auto a = StartCollector();
  a->SetHoldAcks(true);
  bool in_place = false;
  for (uint64_t seq = 1; seq <= 50; ++seq) {
    ASSERT_TRUE(WriteInPlace(s, seq, EventLine(seq, size_of(seq)), &in_place));
    ASSERT_TRUE(in_place);
  }
  ASSERT_TRUE(Pump(s, [&] { return a->last_seq(0) == 50; }));
  a->Kill();
  ASSERT_TRUE(Pump(s, [&] { return s.stats().disconnects == 1; }));
  for (uint64_t seq = 51; seq <= 60; ++seq) {
    ASSERT_TRUE(WriteInPlace(s, seq, EventLine(seq, size_of(seq)), &in_place));
    ASSERT_TRUE(in_place);
  }

  auto b = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  const auto conns = b->connections();
  ASSERT_EQ(conns.size(), 1u);
  ASSERT_EQ(conns[0].seqs, Range(0, 60));
  EXPECT_EQ(conns[0].lines[0], StartLine(280));
  for (uint64_t seq = 1; seq <= 60; ++seq) {
    ASSERT_EQ(conns[0].lines[seq], EventLine(seq, size_of(seq))) << seq;
  }
  EXPECT_EQ(s.stats().retransmitted, 50u);
  EXPECT_EQ(Stored(), Range(0, 60));
  ExpectBalanced(s);
}

// DropsForRoomNameWhetherACollectorWasConnected with lines encoded in place: the window's lines
// lie in front of the never-sent ones to drop, so they are moved aside first (design point 3),
// and a new connection still sends them again whole, in order, before the survivors.
TEST_F(SenderTest, WindowLinesMovedAsideForADropAreSentAgainWhole) {
  Sender s(Options(16384, 4000));
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto a = StartCollector();
  a->SetHoldAcks(true);
  // 1..10 fill the window (10 x 400 bytes), sent and never acked.
  for (uint64_t seq = 1; seq <= 10; ++seq) ASSERT_TRUE(WriteInPlace(s, seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->last_seq(0) == 10 && !s.WantsWrite(); }));
  // 100 more while connected: 30 fit beside the window, the 70 oldest (11..80) are dropped.
  int in_place_lines = 0;
  for (uint64_t seq = 11; seq <= 110; ++seq) {
    bool in_place = false;
    ASSERT_TRUE(WriteInPlace(s, seq, EventLine(seq, 400), &in_place));
    in_place_lines += in_place ? 1 : 0;
    s.Poll(steady_clock::now());
  }
  // 11..40 fit in bytes 4000..15999; from then on each line needs a drop, so goes by copy.
  EXPECT_EQ(in_place_lines, 30);
  ASSERT_TRUE(s.connected());
  EXPECT_EQ(s.stats().dropped_backpressure, 70u);
  EXPECT_EQ(s.held_bytes(), 16000u);
  ExpectBalanced(s);

  a->Kill();
  ASSERT_TRUE(Pump(s, [&] { return s.stats().disconnects == 1; }));
  auto b = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  std::vector<uint64_t> expected = Range(0, 10);
  for (uint64_t seq = 81; seq <= 110; ++seq) expected.push_back(seq);
  const auto conns = b->connections();
  ASSERT_EQ(conns.size(), 1u);
  ASSERT_EQ(conns[0].seqs, expected);
  for (size_t i = 1; i < expected.size(); ++i) {
    ASSERT_EQ(conns[0].lines[i], EventLine(expected[i], 400)) << expected[i];
  }
  EXPECT_EQ(s.stats().retransmitted, 10u);
  EXPECT_EQ(Stored(), expected);
  ExpectBalanced(s);
}

TEST_F(SenderTest, PartialWritesWithSmallSendBufferAndSlowReader) {
  Sender s(Options(2 << 20, 1 << 20));
  auto a = StartCollector();
  a->SetReadChunk(200);
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  ASSERT_TRUE(Pump(s, [&] { return s.connected(); }));
  const int small = 4096;
  ASSERT_EQ(setsockopt(s.fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);

  constexpr uint64_t kLines = 300;
  for (uint64_t seq = 1; seq <= kLines; ++seq) {
    ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 1000 + (seq * 37) % 3000)));
  }
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  const auto conns = a->connections();
  ASSERT_EQ(conns.size(), 1u);
  ASSERT_EQ(conns[0].seqs, Range(0, kLines));
  for (uint64_t seq = 1; seq <= kLines; ++seq) {
    ASSERT_EQ(conns[0].lines[seq], EventLine(seq, 1000 + (seq * 37) % 3000)) << seq;
  }
  EXPECT_GT(s.stats().partial_writes, 0u);
  EXPECT_EQ(s.stats().disconnects, 0u);
  ExpectBalanced(s);
}

TEST_F(SenderTest, AckSplitAcrossReads) {
  Sender s(Options());
  auto a = StartCollector();
  a->SetHoldAcks(true);
  for (uint64_t seq = 0; seq < 5; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->received(0) == 5; }));

  const std::string ack = Ack(4);
  a->SendRaw(0, ack.substr(0, 7));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().bytes_read == 7; }));
  EXPECT_EQ(s.stats().acked, 0u);
  a->SendRaw(0, ack.substr(7, ack.size() - 8));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().bytes_read == ack.size() - 1; }));
  EXPECT_EQ(s.stats().acked, 0u);
  EXPECT_EQ(s.unacked_lines(), 5u);
  a->SendRaw(0, ack.substr(ack.size() - 1));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().acked == 5; }));
  EXPECT_EQ(s.unacked_lines(), 0u);

  // Two acks in one read: the later one wins.
  for (uint64_t seq = 5; seq < 10; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->received(0) == 10; }));
  a->SendRaw(0, Ack(6) + Ack(9));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().acked == 10; }));
  EXPECT_EQ(s.stats().acks, 3u);
  EXPECT_EQ(s.stats().garbage_lines, 0u);
}

TEST_F(SenderTest, GarbageFromThePeerIsIgnored) {
  Sender s(Options());
  auto a = StartCollector();
  a->SetHoldAcks(true);
  for (uint64_t seq = 0; seq < 10; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->received(0) == 10; }));

  a->SendRaw(0, "hello\n");
  a->SendRaw(0, R"({"type":"ack","seq":01})"
                "\n");
  a->SendRaw(0, std::string(600, 'x'));  // longer than any ack, split over reads
  a->SendRaw(0, std::string(300, 'y') + "\n" + Ack(2));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().acked == 3; }));
  EXPECT_EQ(s.stats().garbage_lines, 3u);
  EXPECT_EQ(s.stats().acks, 1u);
  EXPECT_TRUE(s.connected());
  EXPECT_EQ(s.unacked_lines(), 7u);

  // An ack beyond anything written only covers what was written: later lines stay held.
  a->SendRaw(0, Ack(1000));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().acked == 10; }));
  for (uint64_t seq = 10; seq < 15; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->received(0) == 15 && !s.WantsWrite(); }));
  s.Poll(steady_clock::now());
  EXPECT_EQ(s.unacked_lines(), 5u);
  a->SendRaw(0, Ack(14));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  EXPECT_EQ(s.stats().disconnects, 0u);
  ExpectBalanced(s);
}

TEST_F(SenderTest, WindowLimitsUnackedBytes) {
  SenderOptions o = Options();
  o.window_bytes = 4000;
  Sender s(o);
  auto a = StartCollector();
  a->SetHoldAcks(true);
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  for (uint64_t seq = 1; seq <= 50; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->received(0) == 11 && !s.WantsWrite(); }));

  // However late the clock, nothing more goes out until an ack.
  const auto now = steady_clock::now();
  for (int i = 1; i <= 20; ++i) s.Poll(now + seconds(i));
  EXPECT_EQ(s.stats().bytes_written, 280u + 4000u);
  EXPECT_EQ(s.NextDeadline(), steady_clock::time_point::max());
  EXPECT_EQ(s.unacked_lines(), 51u);

  a->SendRaw(0, Ack(5));  // releases 0..5: 2000 bytes of window
  ASSERT_TRUE(Pump(s, [&] { return a->received(0) == 16 && !s.WantsWrite(); }));
  for (int i = 21; i <= 40; ++i) s.Poll(now + seconds(i));
  EXPECT_EQ(s.stats().bytes_written, 280u + 6000u);
  EXPECT_EQ(a->last_seq(0), 15);

  a->SetHoldAcks(false);
  a->SendRaw(0, Ack(15));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  EXPECT_EQ(Stored(), Range(0, 50));
  ExpectBalanced(s);
}

TEST_F(SenderTest, BatchesUntilFlushIntervalOrBatchBytes) {
  SenderOptions o = Options();
  o.flush_interval = milliseconds(100);
  o.batch_bytes = 4000;
  Sender s(o);
  auto a = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.connected(); }));
  const auto t0 = steady_clock::now();
  s.Poll(t0);
  for (uint64_t seq = 0; seq < 5; ++seq) ASSERT_TRUE(s.Enqueue(seq, StreamLine(seq, 400)));
  s.Poll(t0);  // first seen waiting at t0
  s.Poll(t0 + milliseconds(99));
  EXPECT_EQ(s.stats().bytes_written, 0u);
  EXPECT_EQ(s.NextDeadline(), t0 + milliseconds(100));
  s.Poll(t0 + milliseconds(100));
  EXPECT_EQ(s.stats().bytes_written, 2000u);

  // batch_bytes waiting go out at once.
  for (uint64_t seq = 5; seq < 14; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  s.Poll(t0 + milliseconds(101));
  EXPECT_EQ(s.stats().bytes_written, 2000u);
  ASSERT_TRUE(s.Enqueue(14, EventLine(14, 400)));
  s.Poll(t0 + milliseconds(102));
  EXPECT_EQ(s.stats().bytes_written, 6000u);
  EXPECT_TRUE(s.Flush(steady_clock::now() + kTimeout));
  EXPECT_EQ(Stored(), Range(0, 14));
}

// With a buffer too small for another batch_bytes, waiting for a batch is pointless (and would
// hold an owner waiting for room a flush interval per window): what waits goes out at once.
TEST_F(SenderTest, ABufferThatCannotHoldAnotherBatchSendsAtOnce) {
  SenderOptions o = Options();
  o.flush_interval = seconds(10);
  o.batch_bytes = 6000;
  o.buffer_bytes = 8000;
  o.window_bytes = 8000;
  Sender s(o);
  auto a = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.connected(); }));
  const auto t0 = steady_clock::now();
  // 1600 bytes wait; 1600 + 6000 <= 8000: a batch may still come.
  for (uint64_t seq = 0; seq < 4; ++seq) ASSERT_TRUE(s.Enqueue(seq, StreamLine(seq, 400)));
  s.Poll(t0);
  EXPECT_EQ(s.stats().bytes_written, 0u);
  EXPECT_EQ(s.NextDeadline(), t0 + seconds(10));
  // 2400 bytes wait; 2400 + 6000 > 8000: it cannot.
  for (uint64_t seq = 4; seq < 6; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  EXPECT_EQ(s.NextDeadline(), steady_clock::time_point::min());
  s.Poll(t0);
  EXPECT_EQ(s.stats().bytes_written, 2400u);
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  EXPECT_EQ(Stored(), Range(0, 5));
}

TEST_F(SenderTest, PreambleLineAddedLaterKeepsSeqOrderOnEveryConnection) {
  Sender s(Options());
  auto a = StartCollector();
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  for (uint64_t seq = 1; seq <= 5; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  a->SetHoldAcks(true);
  for (uint64_t seq = 6; seq <= 8; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(s.AddPreamble(9, EventLine(9, 360, "device")));
  for (uint64_t seq = 10; seq <= 11; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->last_seq(0) == 11; }));
  EXPECT_EQ(a->connections()[0].seqs, Range(0, 11));
  a->Kill();

  auto b = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  // process_start first; the device line after the held lines below its seq.
  ASSERT_EQ(b->connections()[0].seqs, (std::vector<uint64_t>{0, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(b->connections()[0].lines[4], EventLine(9, 360, "device"));
  EXPECT_EQ(Stored(), Range(0, 11));
  b->Kill();

  // Everything acked: a new connection carries the preamble alone.
  auto c = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return c->received(0) == 2; }));
  EXPECT_EQ(c->connections()[0].seqs, (std::vector<uint64_t>{0, 9}));
  ExpectBalanced(s);
}

TEST_F(SenderTest, FlushReturnsByItsDeadlineWithoutCollector) {
  SenderOptions o;  // default backoff and flush interval
  o.socket_path = path_;
  Sender s(o);
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  for (uint64_t seq = 1; seq <= 10; ++seq) ASSERT_TRUE(s.Enqueue(seq, MakeLine(seq, 100)));
  const auto t0 = steady_clock::now();
  EXPECT_FALSE(s.Flush(t0 + seconds(1)));
  const auto elapsed = steady_clock::now() - t0;
  EXPECT_GE(elapsed, seconds(1));
  EXPECT_LT(elapsed, milliseconds(1200));
  EXPECT_EQ(s.unacked_lines(), 11u);
  EXPECT_GE(s.stats().connect_failures, 3u);   // backoff 10 ms doubling: attempts kept going
  EXPECT_LE(s.stats().connect_failures, 12u);  // ... but not spinning

  Sender empty(o);
  const auto t1 = steady_clock::now();
  EXPECT_TRUE(empty.Flush(t1 + seconds(1)));
  EXPECT_LT(steady_clock::now() - t1, milliseconds(100));
}

TEST_F(SenderTest, NoSigpipeWhenThePeerStopsReadingOrCloses) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGPIPE, &dfl, &old), 0);

  Sender s(Options());
  auto a = StartCollector();
  ASSERT_TRUE(s.Enqueue(0, EventLine(0, 400)));
  ASSERT_TRUE(Pump(s, [&] { return a->received(0) == 1; }));
  a->ShutdownRead(0);  // our next send gets EPIPE (a SIGPIPE without MSG_NOSIGNAL)
  uint64_t seq = 1;
  ASSERT_TRUE(Pump(s, [&] {
    (void)s.Enqueue(seq, EventLine(seq, 400));
    ++seq;
    return s.stats().write_errors >= 1;
  }));
  EXPECT_GE(s.stats().disconnects, 1u);

  // Reconnected; now the collector goes away with lines unread.
  ASSERT_TRUE(Pump(s, [&] { return a->connection_count() == 2 && a->received(1) > 0; }));
  a->SetPaused(true);
  for (int i = 0; i < 100; ++i, ++seq) (void)s.Enqueue(seq, EventLine(seq, 1000));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().bytes_written > 50000; }));
  const uint64_t disconnects = s.stats().disconnects;
  a->Kill();
  ASSERT_TRUE(Pump(s, [&] {
    (void)s.Enqueue(seq, EventLine(seq, 400));
    ++seq;
    return s.stats().disconnects > disconnects;
  }));
  ASSERT_EQ(sigaction(SIGPIPE, &old, nullptr), 0);
  ExpectBalanced(s);
}

// CloseAfterFork closes the connected socket and nothing else: no byte is sent (the collector
// sees no line from it), and a descriptor number that is no longer that socket (here a pipe put
// in its place with dup2, as when the number was closed and reused) is left open.
TEST_F(SenderTest, CloseAfterForkClosesOnlyItsOwnSocket) {
  auto a = StartCollector();
  {
    Sender s(Options());
    ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
    ASSERT_TRUE(s.Enqueue(1, EventLine(1, 400)));
    ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
    const int fd = s.fd();
    ASSERT_GE(fd, 0);
    const size_t received = a->received(0);
    // Held, not written: CloseAfterFork sends nothing.
    ASSERT_TRUE(s.Enqueue(2, EventLine(2, 400)));
    s.CloseAfterFork();
    EXPECT_EQ(s.fd(), -1);
    errno = 0;
    EXPECT_EQ(fcntl(fd, F_GETFD), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(a->received(0), received);
  }
  {
    // Another process's stream: the collector stored the first one's seqs 0 and 1 already.
    Sender s(Options());
    ASSERT_TRUE(s.AddPreamble(0, StartLine(280, "second")));
    ASSERT_TRUE(s.Enqueue(1, EventLine(1, 400)));
    ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
    const int fd = s.fd();
    ASSERT_GE(fd, 0);
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    ASSERT_EQ(dup2(pipe_fds[0], fd), fd);  // the number now names the pipe
    s.CloseAfterFork();
    EXPECT_NE(fcntl(fd, F_GETFD), -1) << "closed a descriptor that was not its socket";
    close(pipe_fds[0]);
    close(pipe_fds[1]);
  }
}

TEST_F(SenderTest, ResetAfterForkChildConnectsOnItsOwn) {
  Sender s(Options());
  auto a = StartCollector();
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280, "parent")));
  for (uint64_t seq = 1; seq <= 50; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  // Everything the child uses is built before fork(): it allocates nothing.
  std::vector<std::string> child_lines;
  for (uint64_t seq = 0; seq <= 100; ++seq) {
    child_lines.push_back(seq == 0 ? StartLine(480, "child") : EventLine(seq, 480, "child"));
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    s.ResetAfterFork();
    if (s.fd() != -1 || s.unacked_lines() != 0 || s.stats().connects != 0) _exit(2);
    if (!s.AddPreamble(0, child_lines[0])) _exit(3);
    for (uint64_t seq = 1; seq <= 100; ++seq) {
      if (!s.Enqueue(seq, child_lines[seq])) _exit(4);
    }
    if (!s.Flush(steady_clock::now() + kTimeout)) _exit(5);
    const SenderStats st = s.stats();
    _exit(st.acked == 101 && st.connects == 1 ? 0 : 6);
  }

  // The parent keeps using its connection meanwhile.
  for (uint64_t seq = 51; seq <= 150; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  int status = 0;
  bool reaped = false;
  ASSERT_TRUE(Pump(s, [&] {
    if (!reaped) reaped = waitpid(child, &status, WNOHANG) == child;
    return reaped && s.unacked_lines() == 0;
  }));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  const SenderStats st = s.stats();
  EXPECT_EQ(st.connects, 1u);
  EXPECT_EQ(st.disconnects, 0u);
  size_t parent_conns = 0, child_conns = 0;
  for (const auto& c : a->connections()) {
    if (c.pid == getpid()) {
      ++parent_conns;
      ASSERT_EQ(c.seqs, Range(0, 150));
      EXPECT_EQ(c.lines[0], StartLine(280, "parent"));
      for (uint64_t seq = 1; seq <= 150; ++seq) EXPECT_EQ(c.lines[seq], EventLine(seq, 400));
    } else {
      ++child_conns;
      EXPECT_EQ(c.pid, child);
      ASSERT_EQ(c.seqs, Range(0, 100));
      for (uint64_t seq = 0; seq <= 100; ++seq) EXPECT_EQ(c.lines[seq], child_lines[seq]);
    }
  }
  EXPECT_EQ(parent_conns, 1u);
  EXPECT_EQ(child_conns, 1u);
  // The collector behind the peer sees the peer's connections, all of this process: each
  // process's stream is told apart by its process_start (exe "parent", "child").
  EXPECT_EQ(StoredOf("child"), Range(0, 100));
  EXPECT_EQ(StoredOf("parent"), Range(0, 150));
}

TEST_F(SenderTest, StatsReadableFromAnotherThread) {
  Sender s(Options());
  auto a = StartCollector();
  std::atomic<bool> done{false};
  uint64_t last_seen = 0;
  bool monotonic = true;
  std::thread reader([&] {
    while (!done.load()) {
      const uint64_t acked = s.stats().acked;
      monotonic = monotonic && acked >= last_seen;
      last_seen = acked;
    }
  });
  for (uint64_t seq = 0; seq < 2000; ++seq) {
    ASSERT_TRUE(s.Enqueue(seq, StreamLine(seq, 400)));
    if (seq % 100 == 0) s.Poll(steady_clock::now());
  }
  const bool flushed = s.Flush(steady_clock::now() + kTimeout);
  done.store(true);
  reader.join();
  EXPECT_TRUE(flushed);
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(s.stats().acked, 2000u);
}

TEST_F(SenderTest, TcpLoopback) {
  RecordingPeer a(RecordingPeer::TcpTag{}, upstream());
  SenderOptions o = Options();
  o.socket_path = "tcp:127.0.0.1:" + std::to_string(a.port());
  Sender s(o);
  ASSERT_TRUE(s.address_valid());
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  for (uint64_t seq = 1; seq <= 100; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 300)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  ASSERT_EQ(a.connections().size(), 1u);
  EXPECT_EQ(a.connections()[0].seqs, Range(0, 100));
}

TEST_F(SenderTest, InvalidAddressesNeverConnect) {
  const std::vector<std::string> bad_addresses = {
      "",           "tcp:example.com:80", "tcp:127.0.0.1:0", "tcp:127.0.0.1:x", "tcp:127.0.0.1",
      "tcp:[::1:9", std::string(200, 'a')};
  for (const std::string& bad : bad_addresses) {
    SenderOptions o = Options();
    o.socket_path = bad;
    Sender s(o);
    EXPECT_FALSE(s.address_valid()) << bad;
    EXPECT_TRUE(s.Enqueue(1, MakeLine(1, 100)));
    s.Poll(steady_clock::now());
    EXPECT_EQ(s.stats().connect_failures, 0u);
    EXPECT_FALSE(s.Flush(steady_clock::now() + milliseconds(20)));
  }
  for (const char* good : {"tcp:localhost:9", "tcp:[::1]:9", "/x/y.sock"}) {
    SenderOptions o = Options();
    o.socket_path = good;
    EXPECT_TRUE(Sender(o).address_valid()) << good;
  }
}

// Many kills and restarts, paused readers, a small buffer and random line sizes: every accepted
// seq is stored exactly once or counted as dropped, and nothing else.
TEST_F(SenderTest, RestartsKeepExactAccounting) {
  Sender s(Options(32 << 10, 16 << 10));
  std::mt19937_64 rng(12345);  // NOLINT(cert-msc32-c,cert-msc51-cpp): reproducible schedule
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  std::set<uint64_t> accepted = {0};
  uint64_t seq = 1;
  auto collector = StartCollector();
  for (int round = 0; round < 8; ++round) {
    // At least 150 lines of at least 256 bytes: more than the 16 KiB a full window leaves.
    const int lines = 150 + static_cast<int>(rng() % 150);
    for (int i = 0; i < lines; ++i, ++seq) {
      if (s.Enqueue(seq, EventLine(seq, 256 + rng() % 1600))) accepted.insert(seq);
      if (rng() % 4 == 0) s.Poll(steady_clock::now());
    }
    if (collector) {
      switch (round == 0 ? 0 : rng() % 3) {
        case 0: {
          // Stored, never acked: sent again on the next connection.
          ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
          collector->SetHoldAcks(true);
          const uint64_t marker = seq++;
          ASSERT_TRUE(s.Enqueue(marker, EventLine(marker, 400)));
          accepted.insert(marker);
          ASSERT_TRUE(Pump(s, [&] {
            const auto stored = Stored();
            return !stored.empty() && stored.back() == marker;
          }));
          break;
        }
        case 1:
          collector->SetPaused(true);
          break;
        default:
          break;
      }
      ASSERT_TRUE(Pump(s, [&] { return s.held_bytes() == 0 || !s.WantsWrite(); }));
      collector->Kill();
      collector.reset();
    } else {
      collector = StartCollector();
    }
  }
  if (!collector) collector = StartCollector();
  ASSERT_TRUE(s.Flush(steady_clock::now() + kTimeout));

  const std::vector<uint64_t> stored = Stored();
  const std::set<uint64_t> stored_set(stored.begin(), stored.end());
  ASSERT_EQ(stored_set.size(), stored.size());  // each at most once
  for (uint64_t v : stored) EXPECT_TRUE(accepted.count(v)) << v;
  const SenderStats st = s.stats();
  EXPECT_EQ(accepted.size() - stored.size(), st.dropped_disconnected + st.dropped_backpressure);
  EXPECT_EQ(st.enqueued + 1, accepted.size());
  EXPECT_EQ(st.acked, stored.size());
  EXPECT_GT(st.dropped_disconnected, 0u);
  EXPECT_GT(st.retransmitted, 0u);
  ExpectBalanced(s);
}

}  // namespace
}  // namespace cuflight::transport
