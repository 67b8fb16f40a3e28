// The Sender with a spill sink (sender.h design point 8, docs/spill.md): with a recording sink
// for the exact sequence of calls, and with the real SpillWriter and, end to end, a recording peer
// in front of the real collector.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/spill/spill_writer.h"
#include "cuflight/transport/sender.h"
#include "cuflight/transport/spill_sink.h"
#include "log_files.h"
#include "pump.h"
#include "recording_peer.h"
#include "running_collector.h"
#include "spill_files.h"
#include "temp_dir.h"
#include "test_lines.h"

namespace cuflight::transport {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using test_support::Range;
using testing::EnqueuePolling;
using testing::EventLine;
using testing::MakeLine;
using testing::Pump;
using testing::ReadLines;
using testing::StartLine;
using testing::StreamFiles;

uint64_t SeqOf(const std::string& line) {
  const size_t at = line.find("\"seq\":");
  return at == std::string::npos ? UINT64_MAX : std::stoull(line.substr(at + 6));
}

std::vector<uint64_t> Seqs(const std::vector<std::string>& lines) {
  std::vector<uint64_t> out;
  for (const std::string& l : lines) out.push_back(SeqOf(l));
  return out;
}

// The accounting identity of SenderStats, spill included.
void ExpectBalanced(const Sender& s) { testing::ExpectStatsBalance(s); }

// A SpillSink that records every line per file in memory. A new file starts every
// `lines_per_file` lines; `refuse` makes it refuse everything.
class RecordingSink : public SpillSink {
 public:
  explicit RecordingSink(size_t lines_per_file = SIZE_MAX) : lines_per_file_(lines_per_file) {}
  uint64_t PrepareLine(size_t bytes) noexcept override {
    ++prepares;
    if (refuse || bytes == 0) return 0;
    if (files.empty() || (!files.back().empty() && in_file_ >= lines_per_file_)) {
      files.emplace_back();
      in_file_ = 0;
    }
    return files.size();
  }
  bool AppendLine(std::string_view first, std::string_view second) noexcept override {
    if (refuse || files.empty()) return false;
    files.back().push_back(std::string(first) + std::string(second));
    ++in_file_;
    return true;
  }
  std::vector<std::vector<std::string>> files;
  bool refuse = false;
  int prepares = 0;

 private:
  size_t lines_per_file_;
  size_t in_file_ = 0;
};

// The Sender with a spill sink; a collector at its path only where a test starts one
// (testing::SenderFixture).
class SpillTest : public testing::SenderFixture {
 protected:
  void SetUp() override {
    SenderFixture::SetUp();
    spill_dir_ = (dir_.path() / "spill").string();
  }

  SenderOptions Options(std::shared_ptr<SpillSink> sink) const {
    SenderOptions o = SenderFixture::Options();
    o.spill = std::move(sink);
    return o;
  }
  std::shared_ptr<spill::SpillWriter> Writer(uint64_t rotate_bytes, uint64_t max_bytes) {
    spill::SpillWriterOptions o;
    o.dir = spill_dir_;
    o.host = "testhost";
    o.exe = "/usr/bin/app";
    o.pid = 77;
    o.start_ns = 86400LL * 1000000000LL;  // 1970-01-02
    o.rotate_bytes = rotate_bytes;
    o.max_bytes = max_bytes;
    o.warn = [this](std::string_view line) { warnings_.emplace_back(line); };
    return std::make_shared<spill::SpillWriter>(std::move(o));
  }
  // The spill's files for Writer()'s process, in write order.
  std::vector<std::string> SpillFiles() const {
    return StreamFiles(spill_dir_ + "/1970-01-02", "testhost-app-77-86400000000000");
  }
  std::vector<std::string> AllSpilledLines() const {
    std::vector<std::string> all;
    for (const std::string& f : SpillFiles()) {
      const auto lines = ReadLines(f);
      all.insert(all.end(), lines.begin(), lines.end());
    }
    return all;
  }

  std::string spill_dir_;
  std::vector<std::string> warnings_;
};

TEST_F(SpillTest, NoCollectorEveryLineLandsInTheSpillInSeqOrderWithThePreambleFirst) {
  Sender s(Options(Writer(64 << 20, 1 << 30)));
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  ASSERT_TRUE(s.AddPreamble(1, MakeLine(1, 90, "device")));
  for (uint64_t seq = 2; seq <= 201; ++seq) ASSERT_TRUE(s.Enqueue(seq, MakeLine(seq, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  const auto files = SpillFiles();
  ASSERT_EQ(files.size(), 1u);
  const auto lines = ReadLines(files[0]);
  ASSERT_EQ(Seqs(lines), Range(0, 201));
  EXPECT_EQ(lines[0], MakeLine(0, 70, "process_start"));
  EXPECT_EQ(lines[1], MakeLine(1, 90, "device"));
  for (uint64_t seq = 2; seq <= 201; ++seq) EXPECT_EQ(lines[seq], MakeLine(seq, 100));

  const SenderStats st = s.stats();
  EXPECT_EQ(st.spilled, 202u);
  EXPECT_EQ(st.acked, 0u);
  EXPECT_EQ(st.dropped_disconnected, 0u);
  EXPECT_EQ(st.spill_refusals, 0u);
  EXPECT_EQ(st.connects, 0u);
  EXPECT_GE(st.connect_failures, 1u);
  ExpectBalanced(s);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(SpillTest, NothingIsSpilledBeforeAConnectAttemptFailsOrBeforeFlushInterval) {
  auto sink = std::make_shared<RecordingSink>();
  SenderOptions o = Options(sink);
  o.flush_interval = milliseconds(50);
  o.backoff_min = milliseconds(1000);
  o.backoff_max = milliseconds(1000);
  Sender s(o);
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  ASSERT_TRUE(s.Enqueue(1, MakeLine(1, 100)));
  const auto t0 = steady_clock::now();
  s.Poll(t0);  // the connect attempt fails; the line has not waited yet
  EXPECT_EQ(s.stats().connect_failures, 1u);
  EXPECT_TRUE(sink->files.empty());
  // The owner is woken when the line is due, not before (the next connect is ~1 s away).
  EXPECT_EQ(s.NextDeadline(), t0 + milliseconds(50));
  s.Poll(t0 + milliseconds(49));
  EXPECT_TRUE(sink->files.empty());
  s.Poll(t0 + milliseconds(50));
  ASSERT_EQ(sink->files.size(), 1u);
  EXPECT_EQ(sink->files[0],
            (std::vector<std::string>{MakeLine(0, 70, "process_start"), MakeLine(1, 100)}));
  EXPECT_EQ(s.unacked_lines(), 0u);
  EXPECT_GE(s.NextDeadline(), t0 + milliseconds(500));  // only the next connect attempt
  ExpectBalanced(s);
}

// A collector at `path` that accepts every connection and closes it at once, reading nothing,
// as the collector does with a connection over its limits (--max-connections, its per-uid share).
class RefusingCollector {
 public:
  explicit RefusingCollector(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 64), 0);
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        ::close(c);
        accepted_.fetch_add(1);
      }
    });
  }
  ~RefusingCollector() {
    stop_.store(true);
    thread_.join();
    ::close(fd_);
  }
  int accepted() const { return accepted_.load(); }

 private:
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// Before: a collector that accepted and closed at once (its limits refused the connection) left
// the sender holding its events, reconnecting with a growing backoff, until they were dropped
// for room: the refused application lost them. Now a connection closed before any ack counts as
// a failed connect: the held events are spilled, every one.
TEST_F(SpillTest, ACollectorThatRefusesTheConnectionGetsTheEventsSpilled) {
  RefusingCollector refusing(path_);
  auto sink = std::make_shared<RecordingSink>();
  Sender s(Options(sink));
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  for (uint64_t seq = 1; seq <= 20; ++seq) ASSERT_TRUE(s.Enqueue(seq, MakeLine(seq, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  EXPECT_GE(refusing.accepted(), 1);
  std::vector<std::string> spilled;
  for (const auto& file : sink->files) spilled.insert(spilled.end(), file.begin(), file.end());
  EXPECT_EQ(Seqs(spilled), Range(0, 20));
  const SenderStats st = s.stats();
  EXPECT_EQ(st.spilled, 21u);
  EXPECT_EQ(st.dropped_disconnected, 0u);
  ExpectBalanced(s);
}

TEST_F(SpillTest, ThePreambleAloneWaitsForHeldLinesOutsideFlush) {
  auto sink = std::make_shared<RecordingSink>();
  Sender s(Options(sink));
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().connect_failures >= 3; }));
  EXPECT_TRUE(sink->files.empty());  // kept by the sender anyway: no file for it alone
  EXPECT_EQ(s.unacked_lines(), 1u);
  EXPECT_TRUE(s.Flush(steady_clock::now() + seconds(5)));
  ASSERT_EQ(sink->files.size(), 1u);
  EXPECT_EQ(sink->files[0], std::vector<std::string>{MakeLine(0, 70, "process_start")});
  EXPECT_EQ(s.stats().spilled, 1u);
  ExpectBalanced(s);
}

TEST_F(SpillTest, EveryNewFileStartsWithThePreambleMergedBySeq) {
  // A new file every 3 lines (whatever the sender writes into it).
  auto sink = std::make_shared<RecordingSink>(3);
  Sender s(Options(sink));
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  for (uint64_t seq = 1; seq <= 2; ++seq) ASSERT_TRUE(s.Enqueue(seq, MakeLine(seq, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  // A device seen mid-run: after the lines below its seq, before those above it.
  ASSERT_TRUE(s.AddPreamble(3, MakeLine(3, 90, "device")));
  for (uint64_t seq = 4; seq <= 7; ++seq) ASSERT_TRUE(s.Enqueue(seq, MakeLine(seq, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  std::vector<std::vector<uint64_t>> seqs;
  for (const auto& f : sink->files) seqs.push_back(Seqs(f));
  // File 1: 0 1 2 (full); file 2: preamble 0 3, then 4 (full); file 3: 0 3 5; file 4: 0 3 6;
  // file 5: 0 3 7.
  EXPECT_EQ(seqs, (std::vector<std::vector<uint64_t>>{
                      {0, 1, 2}, {0, 3, 4}, {0, 3, 5}, {0, 3, 6}, {0, 3, 7}}));
  EXPECT_EQ(sink->files[1][1], MakeLine(3, 90, "device"));
  const SenderStats st = s.stats();
  EXPECT_EQ(st.spilled, 8u);  // 6 lines and 2 preamble lines, each once
  EXPECT_EQ(st.preamble_lines, 2u);
  ExpectBalanced(s);
}

TEST_F(SpillTest, RotationGivesNumberedSegmentsThatTogetherHoldEveryLineOnce) {
  // 1000-byte files: the preamble (160 bytes) and up to 8 lines of 100 bytes each.
  auto writer = Writer(1000, 1 << 30);
  Sender s(Options(writer));
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  ASSERT_TRUE(s.AddPreamble(1, MakeLine(1, 90, "device")));
  for (uint64_t seq = 2; seq <= 101; ++seq) ASSERT_TRUE(s.Enqueue(seq, MakeLine(seq, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  const auto files = SpillFiles();
  ASSERT_EQ(files.size(), 13u);  // ceil(100 / 8) files: 12 segments and the active file
  for (size_t i = 0; i + 1 < files.size(); ++i) {
    char suffix[32];
    std::snprintf(suffix, sizeof(suffix), ".%06zu.jsonl", i + 1);
    EXPECT_TRUE(files[i].ends_with(suffix)) << files[i];
  }
  EXPECT_TRUE(files.back().ends_with("testhost-app-77-86400000000000.jsonl"));
  std::vector<uint64_t> events;
  for (const std::string& f : files) {
    const auto lines = ReadLines(f);
    ASSERT_GE(lines.size(), 3u) << f;
    EXPECT_EQ(lines[0], MakeLine(0, 70, "process_start")) << f;
    EXPECT_EQ(lines[1], MakeLine(1, 90, "device")) << f;
    EXPECT_LE(std::filesystem::file_size(f), 1000u) << f;
    for (size_t i = 2; i < lines.size(); ++i) {
      EXPECT_EQ(lines[i], MakeLine(SeqOf(lines[i]), 100));
      events.push_back(SeqOf(lines[i]));
    }
  }
  EXPECT_EQ(events, Range(2, 101));
  EXPECT_EQ(s.stats().spilled, 102u);
  ExpectBalanced(s);
}

TEST_F(SpillTest, AFullSpillRefusesAndTheRefusedLinesAreHeldThenDroppedAndCounted) {
  // Room for the preamble (70) and 9 lines of 100 bytes.
  auto writer = Writer(1 << 20, 1000);
  SenderOptions o = Options(writer);
  o.buffer_bytes = 2000;  // 20 lines held at most
  o.window_bytes = 1000;
  Sender s(o);
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  for (uint64_t seq = 1; seq <= 9; ++seq) ASSERT_TRUE(s.Enqueue(seq, MakeLine(seq, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  EXPECT_EQ(s.stats().spilled, 10u);
  ASSERT_TRUE(EnqueuePolling(s, 10, 59, [](uint64_t seq) { return MakeLine(seq, 100); }));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().spill_refusals >= 2; }));
  // The refused lines are still held (the newest 20), the older ones dropped for room.
  EXPECT_EQ(s.unacked_lines(), 20u);
  const SenderStats st = s.stats();
  EXPECT_EQ(st.spilled, 10u);
  EXPECT_EQ(st.dropped_disconnected, 30u);
  ExpectBalanced(s);
  EXPECT_GE(writer->stats().refused_full, 2u);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_EQ(Seqs(AllSpilledLines()), Range(0, 9));

  // A refusal is retried after a flush interval, not in a busy loop.
  const auto now = steady_clock::now();
  s.Poll(now);
  EXPECT_GT(s.NextDeadline(), now);
}

TEST_F(SpillTest, ACollectorThatAppearsLaterGetsTheNewLinesAndTheSpillHoldsTheEarlierOnes) {
  Sender s(Options(Writer(64 << 20, 1 << 30)));
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  ASSERT_TRUE(s.AddPreamble(1, EventLine(1, 360, "device")));
  for (uint64_t seq = 2; seq <= 50; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  EXPECT_EQ(s.stats().spilled, 51u);

  auto collector = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.connected(); }));
  for (uint64_t seq = 51; seq <= 100; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  // The collector: the preamble, then the new lines; 2..50 are a gap it sees.
  const auto conns = collector->connections();
  ASSERT_EQ(conns.size(), 1u);
  std::vector<uint64_t> expected = {0, 1};
  for (uint64_t seq = 51; seq <= 100; ++seq) expected.push_back(seq);
  EXPECT_EQ(conns[0].seqs, expected);
  EXPECT_EQ(Stored(), expected);
  // The spill: the preamble and 2..50, each once; nothing after.
  EXPECT_EQ(Seqs(AllSpilledLines()), Range(0, 50));

  const SenderStats st = s.stats();
  EXPECT_EQ(st.spilled, 51u);
  EXPECT_EQ(st.acked, 50u);  // 51..100; the preamble was released by the spill already
  EXPECT_EQ(st.retransmitted, 0u);
  ExpectBalanced(s);
}

TEST_F(SpillTest, UnackedLinesOfALostConnectionAreSpilledWhenNoCollectorComesBack) {
  Sender s(Options(Writer(64 << 20, 1 << 30)));
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto collector = StartCollector();
  for (uint64_t seq = 1; seq <= 10; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  collector->SetHoldAcks(true);
  for (uint64_t seq = 11; seq <= 20; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return collector->last_seq(0) == 20; }));
  collector->Kill();
  for (uint64_t seq = 21; seq <= 30; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));

  // 11..20 were sent but never acked: the spill has them (the dead collector may too).
  std::vector<uint64_t> expected = {0};
  for (uint64_t seq = 11; seq <= 30; ++seq) expected.push_back(seq);
  EXPECT_EQ(Seqs(AllSpilledLines()), expected);
  const SenderStats st = s.stats();
  EXPECT_EQ(st.acked, 11u);
  EXPECT_EQ(st.spilled, 20u);
  ExpectBalanced(s);
}

// Lines encoded in place (sender.h design point 13) are spilled from where they lie: the window
// of a lost connection (here moved aside, point 3, when a never-sent line was dropped for a line
// that went by copy, wrapped around the storage's end), then the never-sent ones, whole; storage
// reserved and never committed is not spilled.
TEST_F(SpillTest, LinesEncodedInPlaceAreSpilledWhole) {
  auto sink = std::make_shared<RecordingSink>();
  SenderOptions o = Options(sink);
  o.buffer_bytes = 4096;
  o.window_bytes = 2000;
  Sender s(o);
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  auto collector = StartCollector();
  collector->SetHoldAcks(true);
  bool in_place = false;
  // 1..5 fill the window (bytes 0..1999 of the storage), sent, never acked; 6..9 wait behind it.
  for (uint64_t seq = 1; seq <= 9; ++seq) {
    ASSERT_TRUE(testing::WriteInPlace(s, seq, EventLine(seq, 400), &in_place));
    ASSERT_TRUE(in_place);
    if (seq == 5) {
      ASSERT_TRUE(Pump(s, [&] { return collector->last_seq(0) == 5 && !s.WantsWrite(); }));
    }
  }
  // 496 bytes left at the storage's end: 10 goes by copy; 6 is dropped for it (the window
  // moved aside first), and it wraps.
  ASSERT_TRUE(testing::WriteInPlace(s, 10, EventLine(10, 600), &in_place));
  EXPECT_FALSE(in_place);
  EXPECT_EQ(s.stats().dropped_backpressure, 1u);
  const std::string never = EventLine(11, 250);
  const std::span<char> room = s.Reserve();
  ASSERT_GE(room.size(), never.size());
  std::memcpy(room.data(), never.data(), never.size());  // and never committed

  // The collector dies before any ack: it counts as refused, and everything held is spilled.
  collector->Kill();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  ASSERT_EQ(sink->files.size(), 1u);
  std::vector<std::string> expected = {StartLine(280)};
  for (uint64_t seq : {1, 2, 3, 4, 5, 7, 8, 9}) expected.push_back(EventLine(seq, 400));
  expected.push_back(EventLine(10, 600));
  EXPECT_EQ(sink->files[0], expected);
  const SenderStats st = s.stats();
  EXPECT_EQ(st.spilled, 10u);
  EXPECT_EQ(st.enqueued, 10u);
  EXPECT_EQ(st.acked, 0u);
  ExpectBalanced(s);
}

TEST_F(SpillTest, FlushWithoutACollectorSpillsAtOnce) {
  SenderOptions o;  // the defaults: 100 ms flush interval, 10 ms..1 s backoff
  o.socket_path = path_;
  o.spill = Writer(64 << 20, 1 << 30);
  Sender s(o);
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  for (uint64_t seq = 1; seq <= 10; ++seq) ASSERT_TRUE(s.Enqueue(seq, MakeLine(seq, 100)));
  const auto t0 = steady_clock::now();
  EXPECT_TRUE(s.Flush(t0 + seconds(10)));
  EXPECT_LT(steady_clock::now() - t0, milliseconds(500));  // not the 10 s deadline
  EXPECT_EQ(s.unacked_lines(), 0u);
  EXPECT_EQ(s.stats().spilled, 11u);
  EXPECT_EQ(Seqs(AllSpilledLines()), Range(0, 10));
  ExpectBalanced(s);
}

TEST_F(SpillTest, AnInvalidAddressSpills) {
  auto sink = std::make_shared<RecordingSink>();
  SenderOptions o = Options(sink);
  o.socket_path = "tcp:not-a-number:1";
  Sender s(o);
  ASSERT_FALSE(s.address_valid());
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  ASSERT_TRUE(s.Enqueue(1, MakeLine(1, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  ASSERT_EQ(sink->files.size(), 1u);
  EXPECT_EQ(Seqs(sink->files[0]), (std::vector<uint64_t>{0, 1}));
  ExpectBalanced(s);
}

TEST_F(SpillTest, AnUnwritableSpillDirectoryGivesOneMessageAndTheSenderBehavesAsWithout) {
  std::ofstream(spill_dir_) << "a file where the spill directory should be\n";
  SenderOptions o = Options(Writer(64 << 20, 1 << 30));
  o.buffer_bytes = 4000;
  o.window_bytes = 4000;
  Sender s(o);
  ASSERT_TRUE(s.AddPreamble(0, StartLine(280)));
  for (uint64_t seq = 1; seq <= 15; ++seq) ASSERT_TRUE(s.Enqueue(seq, EventLine(seq, 400)));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().spill_refusals >= 3; }));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(spill_dir_), std::string::npos) << warnings_[0];
  // As without a spill: the newest 10 held, the oldest 5 dropped for room.
  EXPECT_EQ(s.stats().dropped_disconnected, 5u);
  EXPECT_EQ(s.unacked_lines(), 11u);
  EXPECT_EQ(s.stats().spilled, 0u);
  EXPECT_FALSE(s.Flush(steady_clock::now() + milliseconds(50)));

  auto collector = StartCollector();
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  std::vector<uint64_t> expected = {0};
  for (uint64_t seq = 6; seq <= 15; ++seq) expected.push_back(seq);
  EXPECT_EQ(Stored(), expected);
  EXPECT_EQ(warnings_.size(), 1u);
  ExpectBalanced(s);
}

TEST_F(SpillTest, AfterResetAfterForkTheParentsSinkIsNotUsed) {
  auto parent_sink = std::make_shared<RecordingSink>();
  Sender s(Options(parent_sink));
  s.ResetAfterFork();
  ASSERT_TRUE(s.AddPreamble(0, MakeLine(0, 70, "process_start")));
  ASSERT_TRUE(s.Enqueue(1, MakeLine(1, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().connect_failures >= 3; }));
  EXPECT_EQ(parent_sink->prepares, 0);
  EXPECT_EQ(s.unacked_lines(), 2u);

  auto child_sink = std::make_shared<RecordingSink>();
  s.SetSpillSink(child_sink);
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  ASSERT_EQ(child_sink->files.size(), 1u);
  EXPECT_EQ(Seqs(child_sink->files[0]), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(parent_sink->prepares, 0);

  // A sink set again starts a new file with the preamble, even if it numbers files alike.
  auto another = std::make_shared<RecordingSink>();
  s.SetSpillSink(another);
  ASSERT_TRUE(s.Enqueue(2, MakeLine(2, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.unacked_lines() == 0; }));
  ASSERT_EQ(another->files.size(), 1u);
  EXPECT_EQ(Seqs(another->files[0]), (std::vector<uint64_t>{0, 2}));
  ExpectBalanced(s);

  s.SetSpillSink(nullptr);  // no sink: lines are held again
  ASSERT_TRUE(s.Enqueue(3, MakeLine(3, 100)));
  ASSERT_TRUE(Pump(s, [&] { return s.stats().connect_failures >= 6; }));
  EXPECT_EQ(s.unacked_lines(), 1u);
  ExpectBalanced(s);
}

}  // namespace
}  // namespace cuflight::transport
