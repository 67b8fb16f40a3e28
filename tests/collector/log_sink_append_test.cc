// Appending, flushing, dedup by seq, recovery of the highest seq from the active file, release
// and reacquire, and Reopen after logrotate moved the files.
#include <gtest/gtest.h>

#include <string>

#include "log_sink.h"
#include "log_sink_test_util.h"

namespace cuflight::collector {
namespace {

using testing::MakeLine;
using testing::ReadFile;
using testing::TempDir;

// 2023-11-14 (date -u -d @1700000000).
const ProcessKey kKey{"node1", "/usr/bin/python3", 42, 1'700'000'000'123'456'789};
constexpr char kActiveRel[] = "2023-11-14/node1-python3-42-1700000000123456789.jsonl";

class LogSinkAppendTest : public ::testing::Test {
 protected:
  std::unique_ptr<LogSink> OpenSink() {
    std::string error;
    LogSinkOptions options;
    options.dir = tmp_.path() / "log";
    auto sink = LogSink::Open(options, &error);
    EXPECT_NE(sink, nullptr) << error;
    return sink;
  }
  std::filesystem::path Active() const { return tmp_.path() / "log" / kActiveRel; }

  TempDir tmp_;
};

TEST_F(LogSinkAppendTest, ExactContentAfterFlushAndNothingBefore) {
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), std::nullopt);
  EXPECT_TRUE(sink->Append(s, 0, "{\"type\":\"process_start\",\"seq\":0}\n"));
  EXPECT_TRUE(sink->Append(s, 1, "{\"type\":\"device\",\"seq\":1}\n"));
  EXPECT_TRUE(sink->Append(s, 5, "{\"type\":\"kernel\",\"seq\":5}"));  // '\n' added
  // Buffered: the file exists but holds nothing yet.
  EXPECT_TRUE(std::filesystem::exists(Active()));
  EXPECT_EQ(ReadFile(Active()), "");
  EXPECT_EQ(sink->written_seq(s), std::nullopt);
  sink->Flush();
  const std::string expected =
      "{\"type\":\"process_start\",\"seq\":0}\n"
      "{\"type\":\"device\",\"seq\":1}\n"
      "{\"type\":\"kernel\",\"seq\":5}\n";
  EXPECT_EQ(ReadFile(Active()), expected);
  EXPECT_EQ(sink->highest_seq(s), 5u);
  EXPECT_EQ(sink->written_seq(s), 5u);
  const LogSinkStats stats = sink->stats();
  EXPECT_EQ(stats.lines_written, 3u);
  EXPECT_EQ(stats.bytes_written, expected.size());
  EXPECT_EQ(stats.duplicates_skipped, 0u);
  EXPECT_EQ(stats.write_errors, 0u);
  EXPECT_EQ(stats.pending_bytes, 0u);
  sink->Release(s);
}

TEST_F(LogSinkAppendTest, DuplicatesAreSkippedAndCounted) {
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_TRUE(sink->Append(s, 3, MakeLine(3)));
  EXPECT_FALSE(sink->Append(s, 3, MakeLine(3)));
  EXPECT_FALSE(sink->Append(s, 0, MakeLine(0)));
  EXPECT_TRUE(sink->Append(s, 4, MakeLine(4)));
  // Collector-made lines go in whatever their seq, and leave highest_seq alone.
  sink->AppendCollectorEvent(s, "{\"type\":\"process_lost\",\"seq\":4}\n");
  EXPECT_EQ(sink->highest_seq(s), 4u);
  EXPECT_FALSE(sink->Append(s, 4, MakeLine(4)));
  EXPECT_FALSE(sink->Append(s, 7, ""));  // empty: refused, not stored
  sink->Flush();
  EXPECT_EQ(ReadFile(Active()),
            MakeLine(3) + MakeLine(4) + "{\"type\":\"process_lost\",\"seq\":4}\n");
  EXPECT_EQ(sink->stats().duplicates_skipped, 3u);
  EXPECT_EQ(sink->stats().lines_written, 3u);
  sink->Release(s);
}

TEST_F(LogSinkAppendTest, SameKeyGivesTheSameStream) {
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  std::string error;
  LogSink::Stream* a = sink->Acquire(kKey, &error);
  LogSink::Stream* b = sink->Acquire(kKey, &error);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, b);
  ProcessKey other = kKey;
  other.pid = 43;
  LogSink::Stream* c = sink->Acquire(other, &error);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(a, c);
  EXPECT_TRUE(sink->Append(a, 1, MakeLine(1)));
  EXPECT_FALSE(sink->Append(b, 1, MakeLine(1)));  // same stream: a duplicate
  EXPECT_TRUE(sink->Append(c, 1, MakeLine(1)));   // another process: its own seq space
  sink->Release(a);
  sink->Release(b);
  sink->Release(c);
  EXPECT_EQ(ReadFile(Active()), MakeLine(1));  // Release wrote the buffered line
}

TEST_F(LogSinkAppendTest, HighestSeqIsRecoveredAfterRestartAndReacquire) {
  {
    auto sink = OpenSink();
    ASSERT_NE(sink, nullptr);
    std::string error;
    LogSink::Stream* s = sink->Acquire(kKey, &error);
    ASSERT_NE(s, nullptr) << error;
    for (uint64_t seq = 0; seq < 10; ++seq) ASSERT_TRUE(sink->Append(s, seq, MakeLine(seq, 100)));
    // A last line without a seq: recovery looks past it.
    sink->AppendCollectorEvent(s, "{\"type\":\"note\"}\n");
    sink->Flush();
    // Release and reacquire within one sink: the stream is read back from the file.
    sink->Release(s);
    s = sink->Acquire(kKey, &error);
    ASSERT_NE(s, nullptr) << error;
    EXPECT_EQ(sink->highest_seq(s), 9u);
    sink->Release(s);
  }
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), 9u);
  EXPECT_EQ(sink->written_seq(s), 9u);
  EXPECT_FALSE(sink->Append(s, 9, MakeLine(9, 100)));
  EXPECT_TRUE(sink->Append(s, 10, MakeLine(10, 100)));
  sink->Flush();
  std::string expected;
  for (uint64_t seq = 0; seq < 10; ++seq) expected += MakeLine(seq, 100);
  expected += "{\"type\":\"note\"}\n" + MakeLine(10, 100);
  EXPECT_EQ(ReadFile(Active()), expected);
  sink->Release(s);
}

TEST_F(LogSinkAppendTest, ReopenAfterLogrotateWritesToNewFiles) {
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  ASSERT_TRUE(sink->Append(s, 0, MakeLine(0)));
  sink->Flush();
  ASSERT_TRUE(sink->Append(s, 1, MakeLine(1)));  // buffered across the move
  // logrotate: move the file and the whole date directory away.
  const std::filesystem::path moved = tmp_.path() / "rotated";
  std::filesystem::rename(Active().parent_path(), moved);
  sink->Reopen();
  ASSERT_TRUE(sink->Append(s, 2, MakeLine(2)));
  sink->Flush();
  EXPECT_EQ(ReadFile(moved / Active().filename()), MakeLine(0) + MakeLine(1));
  EXPECT_EQ(ReadFile(Active()), MakeLine(2));
  EXPECT_EQ(sink->highest_seq(s), 2u);
  EXPECT_EQ(sink->stats().write_errors, 0u);
  sink->Release(s);
}

}  // namespace
}  // namespace cuflight::collector
