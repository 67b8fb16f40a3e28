// Retention by total size and by age: oldest closed files first, never the live active file,
// and what happens when the live files alone exceed the limit.
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
    std::string line = MakeLine(0);
    line.insert(line.size() - 3, 1000 - line.size(), 'y');
    EXPECT_EQ(line.size(), 1000u);
    EXPECT_TRUE(sink->Append(s, 0, line));
    sink->Flush();
    SetMtime(Day() / "live-b-2-0.jsonl", now_ - 10 * kDay);
    return s;
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
  sink->Tick(now_);
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
  sink->Tick(now_);
  EXPECT_EQ(ListFiles(Dir()), expected);
  sink->Release(s);
}

TEST_F(LogSinkRetentionTest, ByAgeRemovesOlderFilesButNotTheLiveOne) {
  auto sink = OpenSink(0, 3);
  ASSERT_NE(sink, nullptr);
  LogSink::Stream* s = AcquireLive(sink.get());
  ASSERT_NE(s, nullptr);
  sink->Tick(now_);
  std::vector<std::string> expected = {
      "1970-01-01/live-b-2-0.000001.jsonl.zst",
      "1970-01-01/live-b-2-0.jsonl",
      "1970-01-01/notes.txt",
      "1970-01-01/old-a-1-0.jsonl",
  };
  EXPECT_EQ(ListFiles(Dir()), expected);
  EXPECT_EQ(sink->stats().files_removed_by_retention, 2u);
  // A day later the finished process's active file (2.5 days old then 3.5) goes too.
  sink->Tick(now_ + kDay);
  expected = {
      "1970-01-01/live-b-2-0.000001.jsonl.zst",
      "1970-01-01/live-b-2-0.jsonl",
      "1970-01-01/notes.txt",
  };
  EXPECT_EQ(ListFiles(Dir()), expected);
  EXPECT_EQ(sink->stats().files_removed_by_retention, 3u);
  // Once released, the live stream's file is an ordinary closed file.
  sink->Release(s);
  sink->Tick(now_ + 3 * kDay);
  expected = {"1970-01-01/notes.txt"};
  EXPECT_EQ(ListFiles(Dir()), expected);
}

TEST_F(LogSinkRetentionTest, LimitBelowTheLiveFilesRemovesEverythingElse) {
  WriteFile(Dir() / "1970-01-02" / "gone-c-3-86400000000000.000001.jsonl.zst", "z");
  auto sink = OpenSink(1, 0);
  ASSERT_NE(sink, nullptr);
  LogSink::Stream* s = AcquireLive(sink.get());
  ASSERT_NE(s, nullptr);
  sink->Tick(now_);
  const std::vector<std::string> expected = {
      "1970-01-01/live-b-2-0.jsonl",
      "1970-01-01/notes.txt",
  };
  EXPECT_EQ(ListFiles(Dir()), expected);
  EXPECT_FALSE(std::filesystem::exists(Dir() / "1970-01-02"));  // emptied: removed
  EXPECT_EQ(sink->stats().files_removed_by_retention, 5u);
  EXPECT_EQ(sink->stats().retention_over_limit, 1u);
  // The live stream keeps working.
  EXPECT_TRUE(sink->Append(s, 1, MakeLine(1)));
  sink->Flush();
  EXPECT_EQ(sink->written_seq(s), 1u);
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
  sink->Tick(now_);  // the first Tick runs
  EXPECT_EQ(sink->stats().files_removed_by_retention, 2u);
  sink->Tick(now_ + kDay);  // would remove old-a-1-0.jsonl, but within the interval: skipped
  EXPECT_EQ(sink->stats().files_removed_by_retention, 2u);
  sink->Tick(now_ + 2 * kDay);  // runs
  EXPECT_EQ(sink->stats().files_removed_by_retention, 3u);
}

}  // namespace
}  // namespace cuflight::collector
