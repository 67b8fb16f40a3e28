// Crash recovery of the active file: a torn (unterminated) last line is cut off and counted, and
// appends continue on a line boundary. Recovery of the highest stored seq that cannot read the
// file it needs (a corrupt or truncated segment, no descriptor left) fails the Acquire, counted,
// instead of going on as if the log were empty.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "log_sink.h"
#include "log_sink_test_util.h"

namespace cuflight::collector {
namespace {

using testing::MakeLine;
using testing::ReadFile;
using testing::SplitLines;
using testing::TempDir;
using testing::WriteFile;
using testing::ZstdCompressTo;

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
  std::filesystem::path Segment(int index) const {
    return Active().parent_path() /
           ("node1-train-7-0.00000" + std::to_string(index) + ".jsonl.zst");
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

// Just after a rotation the active file is empty and the newest segment holds the highest seq.
// A segment that cannot be decompressed must not make the stream look empty: seqs 0..4 would be
// stored a second time and every later one counted against a wrong start.
TEST_F(LogSinkRecoveryTest, CorruptNewestSegmentFailsTheAcquireAndIsCounted) {
  ZstdCompressTo(Segment(1), MakeLine(0) + MakeLine(1));
  WriteFile(Segment(2), "this is not zstd");
  WriteFile(Active(), "");
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  std::string error;
  EXPECT_EQ(sink->Acquire(kKey, &error), nullptr);
  EXPECT_NE(error.find("cannot recover the highest stored seq of " + Active().native()),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("zstd decompression of " + Segment(2).native() + " failed"),
            std::string::npos)
      << error;
  EXPECT_EQ(sink->stats().recovery_failures, 1u);
  EXPECT_EQ(sink->Acquire(kKey, &error), nullptr);  // still unreadable: still refused
  EXPECT_EQ(sink->stats().recovery_failures, 2u);

  // Repaired (here: the segment's real content back in place), the next Acquire goes on.
  ZstdCompressTo(Segment(2), MakeLine(2) + MakeLine(3) + MakeLine(4));
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), 4u);
  EXPECT_FALSE(sink->Append(s, 4, MakeLine(4)));  // a duplicate, as it should be
  sink->Release(s);
}

TEST_F(LogSinkRecoveryTest, TruncatedNewestSegmentFailsTheAcquire) {
  ZstdCompressTo(Segment(1), MakeLine(0) + MakeLine(1) + MakeLine(2));
  const std::string whole = ReadFile(Segment(1));
  WriteFile(Segment(1), whole.substr(0, whole.size() / 2));
  WriteFile(Active(), "");
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  std::string error;
  EXPECT_EQ(sink->Acquire(kKey, &error), nullptr);
  EXPECT_NE(error.find(Segment(1).native()), std::string::npos) << error;
  EXPECT_EQ(sink->stats().recovery_failures, 1u);
}

// EMFILE at any step: the Acquire either fails (counted, or as an open failure) or recovers the
// right seq; it never hands out a stream whose highest seq was silently lost. With the right
// number of descriptors left, the failure falls on the recovery read itself.
TEST_F(LogSinkRecoveryTest, OutOfDescriptorsNeverLosesTheHighestSeq) {
#if defined(__SANITIZE_ADDRESS__)
  // The asan preset runs UBSan too. Its vptr check tests memory with a pipe
  // (IsAccessibleMemoryRange): with no descriptor free, every check it cannot cache fails, and
  // it reports a valid object (spdlog's formatter) as one with an invalid vptr.
  GTEST_SKIP() << "the sanitizers' runtime needs descriptors of its own; the release build runs "
                  "this test";
#endif
  WriteFile(Active(), MakeLine(0) + MakeLine(1) + MakeLine(2));
  auto sink = OpenSink();
  ASSERT_NE(sink, nullptr);
  // A small limit, so that filling the table takes few opens whatever the runner's limit is.
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  struct rlimit small = saved;
  small.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 256);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &small), 0);
  bool recovery_hit = false;
  for (int spare = 0; spare <= 6; ++spare) {
    std::vector<int> filler;
    for (;;) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      filler.push_back(fd);
    }
    ASSERT_EQ(errno, EMFILE);
    ASSERT_GT(filler.size(), static_cast<size_t>(spare));
    for (int i = 0; i < spare; ++i) {
      ::close(filler.back());
      filler.pop_back();
    }
    const uint64_t failures_before = sink->stats().recovery_failures;
    std::string error;
    LogSink::Stream* s = sink->Acquire(kKey, &error);
    for (const int fd : filler) ::close(fd);
    if (s != nullptr) {
      EXPECT_EQ(sink->highest_seq(s), 2u) << "spare descriptors: " << spare;
      sink->Release(s);
      sink->FinishBackgroundWork();  // the worker closes the stream's descriptor
    } else {
      EXPECT_NE(error.find("Too many open files"), std::string::npos) << error;
      if (sink->stats().recovery_failures > failures_before) recovery_hit = true;
    }
  }
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_TRUE(recovery_hit) << "no spare count made the recovery read itself fail";
  std::string error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(sink->highest_seq(s), 2u);
  sink->Release(s);
}

}  // namespace
}  // namespace cuflight::collector
