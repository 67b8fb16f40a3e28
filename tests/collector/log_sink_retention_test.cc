// Retention by total size and by age: oldest closed files first, never the live active file,
// what happens when the live files alone exceed the limit, a stream's recovery file last, and
// passes off the calling thread.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "log_sink.h"
#include "log_sink_test_util.h"

namespace cuflight::collector {
namespace {

using std::chrono::hours;
using testing::ListFiles;
using testing::MakeLine;
using testing::SetMtime;
using testing::TempDir;
using testing::WriteFile;

const ProcessKey kLive{"live", "b", 2, 0};  // 1970-01-01/live-b-2-0.jsonl
constexpr auto kDay = hours(24);

class LogSinkRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    now_ = std::chrono::system_clock::now();
    // 1000-byte files of a finished process and a closed segment of the live one.
    const std::string kilobyte = std::string(999, 'x') + "\n";
    WriteFile(Day() / "old-a-1-0.000001.jsonl.zst", kilobyte);
    WriteFile(Day() / "old-a-1-0.000002.jsonl.zst", kilobyte);
    WriteFile(Day() / "old-a-1-0.jsonl", kilobyte);
    WriteFile(Day() / "live-b-2-0.000001.jsonl.zst", kilobyte);
    // The live process's active file from before (the highest seq is recovered from it).
    WriteFile(Day() / "live-b-2-0.jsonl", MakeLine(0));
    WriteFile(Day() / "notes.txt", kilobyte);  // not the sink's: never counted nor removed
    SetMtime(Day() / "old-a-1-0.000001.jsonl.zst", now_ - 5 * kDay);
    SetMtime(Day() / "old-a-1-0.000002.jsonl.zst", now_ - 4 * kDay);
    SetMtime(Day() / "old-a-1-0.jsonl", now_ - 5 * kDay / 2);
    SetMtime(Day() / "live-b-2-0.000001.jsonl.zst", now_ - kDay);
  }

  std::unique_ptr<LogSink> OpenSink(uint64_t retain_bytes, int retain_days) {
    std::string error;
    LogSinkOptions options;
    options.dir = tmp_.path() / "log";
    options.retain_bytes = retain_bytes;
    options.retain_days = retain_days;
    options.retention_interval = std::chrono::milliseconds(0);
    auto sink = LogSink::Open(options, &error);
    EXPECT_NE(sink, nullptr) << error;
    return sink;
  }

  // Acquires the live stream and gives its active file 1000 bytes and an old mtime: age alone
  // would remove it.
  LogSink::Stream* AcquireLive(LogSink* sink) {
    std::string error;
    LogSink::Stream* s = sink->Acquire(kLive, &error);
    EXPECT_NE(s, nullptr) << error;
    if (s == nullptr) return nullptr;
    EXPECT_EQ(sink->highest_seq(s), 0u);
    const size_t first = MakeLine(0).size();
    std::string line = MakeLine(1);
    line.insert(line.size() - 3, 1000 - first - line.size(), 'y');
    EXPECT_EQ(first + line.size(), 1000u);
    EXPECT_TRUE(sink->Append(s, 1, line));
    sink->Flush();
    SetMtime(Day() / "live-b-2-0.jsonl", now_ - 10 * kDay);
    return s;
  }

  // Starts a pass and waits for it (passes run on the sink's retention thread).
  static void Pass(LogSink* sink, std::chrono::system_clock::time_point now) {
    sink->Tick(now);
    sink->FinishBackgroundWork();
  }

  std::filesystem::path Dir() const { return tmp_.path() / "log"; }
  std::filesystem::path Day() const { return Dir() / "1970-01-01"; }

  TempDir tmp_;
  std::chrono::system_clock::time_point now_;
};

TEST_F(LogSinkRetentionTest, BySizeRemovesOldestClosedFilesFirst) {
  auto sink = OpenSink(3500, 0);  // 5000 bytes in the sink's files: 2 must go
  ASSERT_NE(sink, nullptr);
  LogSink::Stream* s = AcquireLive(sink.get());
  ASSERT_NE(s, nullptr);
  Pass(sink.get(), now_);
  const std::vector<std::string> expected = {
      "1970-01-01/live-b-2-0.000001.jsonl.zst",
      "1970-01-01/live-b-2-0.jsonl",
      "1970-01-01/notes.txt",
      "1970-01-01/old-a-1-0.jsonl",
  };
  EXPECT_EQ(ListFiles(Dir()), expected);
  EXPECT_EQ(sink->stats().files_removed_by_retention, 2u);
  EXPECT_EQ(sink->stats().retention_over_limit, 0u);
  // Under the limit now: another pass removes nothing.
  Pass(sink.get(), now_);
  EXPECT_EQ(ListFiles(Dir()), expected);
  sink->Release(s);
}

TEST_F(LogSinkRetentionTest, ByAgeRemovesOlderFilesButNotTheLiveOne) {
  auto sink = OpenSink(0, 3);
  ASSERT_NE(sink, nullptr);
  LogSink::Stream* s = AcquireLive(sink.get());
  ASSERT_NE(s, nullptr);
  Pass(sink.get(), now_);
  std::vector<std::string> expected = {
      "1970-01-01/live-b-2-0.000001.jsonl.zst",
      "1970-01-01/live-b-2-0.jsonl",
      "1970-01-01/notes.txt",
      "1970-01-01/old-a-1-0.jsonl",
  };
  EXPECT_EQ(ListFiles(Dir()), expected);
  EXPECT_EQ(sink->stats().files_removed_by_retention, 2u);
  // A day later the finished process's active file (2.5 days old then 3.5) goes too.
  Pass(sink.get(), now_ + kDay);
  expected = {
      "1970-01-01/live-b-2-0.000001.jsonl.zst",
      "1970-01-01/live-b-2-0.jsonl",
      "1970-01-01/notes.txt",
  };
  EXPECT_EQ(ListFiles(Dir()), expected);
  EXPECT_EQ(sink->stats().files_removed_by_retention, 3u);
  // Once released, the live stream's file is an ordinary closed file.
  sink->Release(s);
  Pass(sink.get(), now_ + 3 * kDay);
  expected = {"1970-01-01/notes.txt"};
  EXPECT_EQ(ListFiles(Dir()), expected);
}

TEST_F(LogSinkRetentionTest, LimitBelowTheLiveFilesRemovesEverythingElse) {
  WriteFile(Dir() / "1970-01-02" / "gone-c-3-86400000000000.000001.jsonl.zst", "z");
  auto sink = OpenSink(1, 0);
  ASSERT_NE(sink, nullptr);
  LogSink::Stream* s = AcquireLive(sink.get());
  ASSERT_NE(s, nullptr);
  Pass(sink.get(), now_);
  const std::vector<std::string> expected = {
      "1970-01-01/live-b-2-0.jsonl",
      "1970-01-01/notes.txt",
  };
  EXPECT_EQ(ListFiles(Dir()), expected);
  EXPECT_FALSE(std::filesystem::exists(Dir() / "1970-01-02"));  // emptied: removed
  EXPECT_EQ(sink->stats().files_removed_by_retention, 5u);
  EXPECT_EQ(sink->stats().retention_over_limit, 1u);
  // The live stream keeps working.
  EXPECT_TRUE(sink->Append(s, 2, MakeLine(2)));
  sink->Flush();
  EXPECT_EQ(sink->written_seq(s), 2u);
  sink->Release(s);
}

TEST_F(LogSinkRetentionTest, RunsOnItsIntervalOnly) {
  std::string error;
  LogSinkOptions options;
  options.dir = Dir();
  options.retain_days = 3;
  options.retention_interval = std::chrono::milliseconds(2 * 24 * 3600 * 1000);
  auto sink = LogSink::Open(options, &error);
  ASSERT_NE(sink, nullptr) << error;
  Pass(sink.get(), now_);  // the first Tick runs
  EXPECT_EQ(sink->stats().files_removed_by_retention, 2u);
  Pass(sink.get(), now_ + kDay);  // would remove old-a-1-0.jsonl, but within the interval: skipped
  EXPECT_EQ(sink->stats().files_removed_by_retention, 2u);
  Pass(sink.get(), now_ + 2 * kDay);  // runs
  EXPECT_EQ(sink->stats().files_removed_by_retention, 3u);
}

// Stream c just rotated: its active file is empty and its newest segment (2) holds its highest
// seq. That segment is also its oldest file by mtime (copied back from a backup, say). Size alone
// would remove it first and leave segment 1 to be read as the end of the stream; it goes only
// with the last of c's other files.
class LogSinkRecoveryFileTest : public LogSinkRetentionTest {
 protected:
  void SetUp() override {
    LogSinkRetentionTest::SetUp();
    testing::ZstdCompressTo(C(1), MakeLine(0) + MakeLine(1));
    testing::ZstdCompressTo(C(2), MakeLine(2) + MakeLine(3));
    WriteFile(Day() / "c-c-3-0.jsonl", "");
    SetMtime(C(2), now_ - 9 * kDay);
    SetMtime(C(1), now_ - 8 * kDay);
    SetMtime(Day() / "c-c-3-0.jsonl", now_ - 7 * kDay);
  }
  std::filesystem::path C(int index) const {
    return Day() / ("c-c-3-0.00000" + std::to_string(index) + ".jsonl.zst");
  }
  uint64_t Total() const {
    uint64_t total = 0;
    for (const std::string& f : ListFiles(Dir())) {
      if (f != "1970-01-01/notes.txt") total += std::filesystem::file_size(Dir() / f);
    }
    return total;
  }
};

TEST_F(LogSinkRecoveryFileTest, BySizeTheNewestSegmentWaitsForTheOthers) {
  const uint64_t segment_2 = std::filesystem::file_size(C(2));
  auto sink = OpenSink(Total() - segment_2, 0);  // one file of segment 2's size must go
  ASSERT_NE(sink, nullptr);
  Pass(sink.get(), now_);
  EXPECT_TRUE(std::filesystem::exists(C(2)));
  EXPECT_FALSE(std::filesystem::exists(C(1)));  // the next oldest went instead
  std::string error;
  LogSink::Stream* s = sink->Acquire(ProcessKey{"c", "c", 3, 0}, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), 3u);
  sink->Release(s);
}

TEST_F(LogSinkRecoveryFileTest, ByAgeTheStreamGoesWhole) {
  auto sink = OpenSink(0, 6);  // all of c is older than 6 days
  ASSERT_NE(sink, nullptr);
  Pass(sink.get(), now_);
  for (const std::string& f : ListFiles(Dir())) EXPECT_FALSE(f.starts_with("1970-01-01/c-")) << f;
  // Only its empty active file younger than the limit: nothing of c goes.
  SetUp();
  SetMtime(Day() / "c-c-3-0.jsonl", now_);
  Pass(sink.get(), now_ + 2 * kDay);  // a new pass: the interval is 0
  EXPECT_TRUE(std::filesystem::exists(C(2)));
  EXPECT_FALSE(std::filesystem::exists(C(1)));
}

TEST_F(LogSinkRecoveryFileTest, ALiveStreamKeepsItsRecoveryFile) {
  auto sink = OpenSink(1, 0);  // everything that may go, goes
  ASSERT_NE(sink, nullptr);
  std::string error;
  LogSink::Stream* s = sink->Acquire(ProcessKey{"c", "c", 3, 0}, &error);
  ASSERT_NE(s, nullptr) << error;
  Pass(sink.get(), now_);
  EXPECT_TRUE(std::filesystem::exists(C(2)));
  EXPECT_TRUE(std::filesystem::exists(Day() / "c-c-3-0.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(C(1)));
  sink->Release(s);
}

}  // namespace
}  // namespace cuflight::collector
