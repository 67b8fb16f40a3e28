// Crash recovery of the active file: a torn (unterminated) last line is cut off and counted, and
// appends continue on a line boundary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "log_sink.h"
#include "log_sink_test_util.h"

namespace cuflight::collector {
namespace {

using testing::MakeLine;
using testing::ReadFile;
using testing::SplitLines;
using testing::TempDir;
using testing::WriteFile;

const ProcessKey kKey{"node1", "train", 7, 0};  // 1970-01-01

class LogSinkRecoveryTest : public ::testing::Test {
 protected:
  std::unique_ptr<LogSink> OpenSink() {
    std::string error;
    LogSinkOptions options;
    options.dir = tmp_.path() / "log";
    auto sink = LogSink::Open(options, &error);
    EXPECT_NE(sink, nullptr) << error;
    return sink;
  }
  std::filesystem::path Active() const {
    return tmp_.path() / "log" / "1970-01-01" / "node1-train-7-0.jsonl";
  }

  TempDir tmp_;
};

TEST_F(LogSinkRecoveryTest, TornLastLineIsTrimmedCountedAndAppendsContinue) {
  const std::string whole = MakeLine(0) + MakeLine(1);
  WriteFile(Active(), whole + R"({"type":"kernel","version":1,"seq":2,"pa)");
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  EXPECT_EQ(sink->stats().torn_lines_trimmed, 1u);
  EXPECT_EQ(ReadFile(Active()), whole);

  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), 1u);  // the torn seq 2 was not stored
  EXPECT_TRUE(sink->Append(s, 2, MakeLine(2)));
  sink->Flush();
  EXPECT_EQ(ReadFile(Active()), whole + MakeLine(2));
  for (const std::string& line : SplitLines(ReadFile(Active()))) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  }
  EXPECT_EQ(sink->stats().torn_lines_trimmed, 1u);  // Acquire found nothing more to cut
  sink->Release(s);
}

TEST_F(LogSinkRecoveryTest, FileWithOnlyATornLineBecomesEmpty) {
  WriteFile(Active(), R"({"type":"process_start","seq":0,"host)");
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  EXPECT_EQ(sink->stats().torn_lines_trimmed, 1u);
  EXPECT_EQ(ReadFile(Active()), "");
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), std::nullopt);
  EXPECT_TRUE(sink->Append(s, 0, MakeLine(0)));
  sink->Flush();
  EXPECT_EQ(ReadFile(Active()), MakeLine(0));
  sink->Release(s);
}

TEST_F(LogSinkRecoveryTest, CompleteFilesAreLeftAlone) {
  const std::string whole = MakeLine(0) + MakeLine(1);
  WriteFile(Active(), whole);
  WriteFile(Active().parent_path() / "other-host-1-0.jsonl", "");
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  EXPECT_EQ(sink->stats().torn_lines_trimmed, 0u);
  EXPECT_EQ(ReadFile(Active()), whole);
}

// A torn line longer than the chunk the trimming reads backwards with.
TEST_F(LogSinkRecoveryTest, LongTornLineIsTrimmed) {
  const std::string whole = MakeLine(0, 50000) + MakeLine(1, 70000);
  WriteFile(Active(), whole + MakeLine(2, 100000).substr(0, 90000));
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  EXPECT_EQ(sink->stats().torn_lines_trimmed, 1u);
  EXPECT_EQ(ReadFile(Active()), whole);
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), 1u);
  sink->Release(s);
}

}  // namespace
}  // namespace cuflight::collector
