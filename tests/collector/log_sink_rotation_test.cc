// Size-based rotation into zstd segments, recovery of the highest seq from a compressed segment,
// and the leftovers of a crash during compression.
#include <gtest/gtest.h>

#include <string>

#include "log_sink.h"
#include "log_sink_test_util.h"

namespace cuflight::collector {
namespace {

using testing::ListFiles;
using testing::MakeLine;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;
using testing::ZstdCompressTo;
using testing::ZstdDecompress;

const ProcessKey kKey{"node1", "train", 7, 0};  // 1970-01-01
constexpr char kBase[] = "node1-train-7-0";

class LogSinkRotationTest : public ::testing::Test {
 protected:
  std::unique_ptr<LogSink> OpenSink(uint64_t rotate_bytes) {
    std::string error;
    LogSinkOptions options;
    options.dir = Dir();
    options.rotate_bytes = rotate_bytes;
    auto sink = LogSink::Open(options, &error);
    EXPECT_NE(sink, nullptr) << error;
    return sink;
  }
  std::filesystem::path Dir() const { return tmp_.path() / "log"; }
  std::filesystem::path DayDir() const { return Dir() / "1970-01-01"; }
  std::filesystem::path Segment(int index, bool compressed) const {
    char digits[16];
    (void)std::snprintf(digits, sizeof(digits), ".%06d", index);
    return DayDir() / (std::string(kBase) + digits + (compressed ? ".jsonl.zst" : ".jsonl"));
  }
  std::filesystem::path Active() const { return DayDir() / (std::string(kBase) + ".jsonl"); }

  TempDir tmp_;
};

TEST_F(LogSinkRotationTest, SegmentsPlusActiveFileHoldEverythingInOrder) {
  auto sink = OpenSink(4096);
  ASSERT_NE(sink, nullptr);
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  std::string all;
  for (uint64_t seq = 0; seq < 3000; ++seq) {
    const std::string line = MakeLine(seq, seq % 97);
    all += line;
    ASSERT_TRUE(sink->Append(s, seq, line));
    if (seq % 10 == 9) sink->Flush();
  }
  sink->Flush();
  sink->FinishBackgroundWork();
  const LogSinkStats stats = sink->stats();
  ASSERT_GT(stats.segments_rotated, 10u);
  EXPECT_EQ(stats.segments_compressed, stats.segments_rotated);
  EXPECT_EQ(stats.write_errors, 0u);

  // Exactly the segments 1..N compressed, no plain or temporary leftovers, and the active file.
  std::vector<std::string> expected_files;
  for (uint64_t i = 1; i <= stats.segments_rotated; ++i) {
    expected_files.push_back(
        std::filesystem::relative(Segment(static_cast<int>(i), true), Dir()).string());
  }
  expected_files.push_back(std::filesystem::relative(Active(), Dir()).string());
  std::sort(expected_files.begin(), expected_files.end());
  EXPECT_EQ(ListFiles(Dir()), expected_files);

  std::string joined;
  for (uint64_t i = 1; i <= stats.segments_rotated; ++i) {
    const std::string segment = ZstdDecompress(Segment(static_cast<int>(i), true));
    // Each closed segment reached the rotation size, and ends on a line boundary.
    EXPECT_GE(segment.size(), 4096u) << i;
    EXPECT_EQ(segment.back(), '\n') << i;
    joined += segment;
  }
  joined += ReadFile(Active());
  EXPECT_EQ(joined, all);
  sink->Release(s);
}

TEST_F(LogSinkRotationTest, HighestSeqFromCompressedSegmentWhenActiveFileIsEmpty) {
  const std::string line0 = MakeLine(0);
  const uint64_t line_bytes = line0.size();
  for (uint64_t seq = 0; seq < 10; ++seq) ASSERT_EQ(MakeLine(seq).size(), line_bytes);
  {
    // Ten equal lines reach rotate_bytes exactly: the flush rotates and leaves an empty file.
    auto sink = OpenSink(10 * line_bytes);
    ASSERT_NE(sink, nullptr);
    std::string error;
    LogSink::Stream* s = sink->Acquire(kKey, &error);
    ASSERT_NE(s, nullptr) << error;
    for (uint64_t seq = 0; seq < 10; ++seq) ASSERT_TRUE(sink->Append(s, seq, MakeLine(seq)));
    sink->Flush();
    sink->FinishBackgroundWork();
    sink->Release(s);
  }
  EXPECT_EQ(ReadFile(Active()), "");
  ASSERT_TRUE(std::filesystem::exists(Segment(1, true)));
  EXPECT_FALSE(std::filesystem::exists(Segment(1, false)));

  auto sink = OpenSink(10 * line_bytes);
  ASSERT_NE(sink, nullptr);
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), 9u);
  EXPECT_FALSE(sink->Append(s, 9, MakeLine(9)));
  EXPECT_TRUE(sink->Append(s, 10, MakeLine(10)));
  sink->Flush();
  EXPECT_EQ(ReadFile(Active()), MakeLine(10));
  sink->Release(s);
}

TEST_F(LogSinkRotationTest, CompressionLeftoversAreResolvedOnOpen) {
  std::string seg1;
  std::string seg2;
  std::string seg3;
  for (uint64_t seq = 0; seq < 5; ++seq) seg1 += MakeLine(seq);
  for (uint64_t seq = 5; seq < 10; ++seq) seg2 += MakeLine(seq);
  for (uint64_t seq = 10; seq < 15; ++seq) seg3 += MakeLine(seq);
  // Segment 1: crash after the rename of the .zst, before the plain copy was removed.
  ZstdCompressTo(Segment(1, true), seg1);
  WriteFile(Segment(1, false), seg1);
  // Segment 2: crash in the middle of compressing: a partial temp file and the plain copy.
  WriteFile(Segment(2, false), seg2);
  WriteFile(DayDir() / (std::string(kBase) + ".000002.jsonl.zst.tmp"), "\x28\xb5\x2f\xfd garbage");
  // Segment 3: crash right after the rotation's rename, before any compression started; the
  // crash also came before a new active file was created.
  WriteFile(Segment(3, false), seg3);
  const std::string seg1_zst = ReadFile(Segment(1, true));

  auto sink = OpenSink(1 << 20);
  ASSERT_NE(sink, nullptr);
  sink->FinishBackgroundWork();
  const std::vector<std::string> expected = {
      "1970-01-01/node1-train-7-0.000001.jsonl.zst",
      "1970-01-01/node1-train-7-0.000002.jsonl.zst",
      "1970-01-01/node1-train-7-0.000003.jsonl.zst",
  };
  EXPECT_EQ(ListFiles(Dir()), expected);
  EXPECT_EQ(ReadFile(Segment(1, true)), seg1_zst);  // the complete one is kept as it was
  EXPECT_EQ(ZstdDecompress(Segment(2, true)), seg2);
  EXPECT_EQ(ZstdDecompress(Segment(3, true)), seg3);
  EXPECT_EQ(sink->stats().segments_compressed, 2u);

  // The stream carries on: highest seq from segment 3, new segments numbered after it.
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), 14u);
  std::string more;
  for (uint64_t seq = 15; seq < 20; ++seq) {
    ASSERT_TRUE(sink->Append(s, seq, MakeLine(seq)));
    more += MakeLine(seq);
  }
  sink->Release(s);
  sink.reset();
  sink = OpenSink(more.size());
  ASSERT_NE(sink, nullptr);
  s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  ASSERT_TRUE(sink->Append(s, 20, MakeLine(20)));
  sink->Flush();  // the active file passes rotate_bytes: segment 4
  sink->FinishBackgroundWork();
  EXPECT_EQ(ZstdDecompress(Segment(4, true)), more + MakeLine(20));
  EXPECT_EQ(ReadFile(Active()), "");
  sink->Release(s);
}

TEST_F(LogSinkRotationTest, PlainSegmentWithTornLineIsTrimmedBeforeCompression) {
  const std::string whole = MakeLine(0) + MakeLine(1);
  WriteFile(Segment(1, false), whole + "{\"type\":\"ker");
  auto sink = OpenSink(1 << 20);
  ASSERT_NE(sink, nullptr);
  sink->FinishBackgroundWork();
  EXPECT_EQ(sink->stats().torn_lines_trimmed, 1u);
  EXPECT_EQ(ZstdDecompress(Segment(1, true)), whole);
  EXPECT_FALSE(std::filesystem::exists(Segment(1, false)));
}

}  // namespace
}  // namespace cuflight::collector
