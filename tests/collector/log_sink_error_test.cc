// Write errors: the file-size limit (RLIMIT_FSIZE, EFBIG) stands in for a full disk. Runs in a
// forked child so that the limit cannot touch the test runner's own files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "log_sink.h"
#include "log_sink_test_util.h"

namespace cuflight::collector {
namespace {

using testing::MakeLine;
using testing::ReadFile;
using testing::TempDir;

#define CHILD_CHECK(cond)                                                               \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      (void)std::fprintf(stderr, "child check failed, line %d: %s\n", __LINE__, #cond); \
      (void)std::fflush(stderr);                                                        \
      _exit(1);                                                                         \
    }                                                                                   \
  } while (false)

const ProcessKey kKey{"node1", "train", 7, 0};  // 1970-01-01

uint64_t FileSize(const std::filesystem::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : ~0ull;
}

[[noreturn]] void ErrorScenario(const std::filesystem::path& dir) {
  (void)::signal(SIGXFSZ, SIG_IGN);  // past the limit, write(2) then fails with EFBIG
  LogSinkOptions options;
  options.dir = dir;
  options.max_pending_bytes = 8192;
  std::string error;
  auto sink = LogSink::Open(options, &error);
  CHILD_CHECK(sink != nullptr);
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  CHILD_CHECK(s != nullptr);
  const std::filesystem::path active = dir / "1970-01-01" / "node1-train-7-0.jsonl";

  std::string expected;
  for (uint64_t seq = 0; seq < 10; ++seq) {
    CHILD_CHECK(sink->Append(s, seq, MakeLine(seq)));
    expected += MakeLine(seq);
  }
  sink->Flush();
  const uint64_t good_size = FileSize(active);
  CHILD_CHECK(good_size == expected.size());

  struct rlimit old_limit {};
  CHILD_CHECK(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  struct rlimit small = old_limit;
  small.rlim_cur = good_size + 100;  // room for a part of the next batch only
  CHILD_CHECK(::setrlimit(RLIMIT_FSIZE, &small) == 0);

  for (uint64_t seq = 10; seq < 30; ++seq) {
    CHILD_CHECK(sink->Append(s, seq, MakeLine(seq)));
    expected += MakeLine(seq);
  }
  sink->Flush();
  CHILD_CHECK(sink->stats().write_errors >= 1);
  CHILD_CHECK(FileSize(active) == good_size);  // the partial batch was cut off again
  CHILD_CHECK(sink->written_seq(s) == 9u);     // nothing more to acknowledge
  CHILD_CHECK(sink->highest_seq(s) == 29u);
  CHILD_CHECK(sink->stats().pending_bytes == expected.size() - good_size);
  const uint64_t errors_before = sink->stats().write_errors;
  sink->Flush();  // retried, fails again
  CHILD_CHECK(sink->stats().write_errors > errors_before);
  CHILD_CHECK(FileSize(active) == good_size);

  // Fill the buffers up to max_pending_bytes: the stream starts refusing, and keeps refusing
  // smaller lines too (no hole in the stored seqs).
  uint64_t seq = 30;
  while (sink->Append(s, seq, MakeLine(seq, 1000))) {
    expected += MakeLine(seq, 1000);
    ++seq;
    CHILD_CHECK(seq < 100);
  }
  const uint64_t refused = seq;
  CHILD_CHECK(sink->refusing(s));
  CHILD_CHECK(sink->stats().lines_refused == 1u);
  CHILD_CHECK(!sink->Append(s, refused + 1, MakeLine(refused + 1, 1)));
  CHILD_CHECK(sink->stats().lines_refused == 2u);
  CHILD_CHECK(!sink->Append(s, 5, MakeLine(5)));  // a duplicate is still a duplicate
  CHILD_CHECK(sink->stats().duplicates_skipped == 1u);
  CHILD_CHECK(sink->highest_seq(s) == refused - 1);

  // Space again: everything buffered is written, in order.
  CHILD_CHECK(::setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  sink->Flush();
  CHILD_CHECK(sink->written_seq(s) == refused - 1);
  CHILD_CHECK(sink->stats().pending_bytes == 0u);
  CHILD_CHECK(ReadFile(active) == expected);

  // A new connection (Acquire) retransmits from the acknowledged seq on.
  LogSink::Stream* again = sink->Acquire(kKey, &error);
  CHILD_CHECK(again == s);
  CHILD_CHECK(!sink->refusing(s));
  CHILD_CHECK(sink->Append(s, refused, MakeLine(refused)));
  sink->Flush();
  CHILD_CHECK(ReadFile(active) == expected + MakeLine(refused));
  sink->Release(again);
  sink->Release(s);
  sink.reset();
  _exit(0);
}

TEST(LogSinkErrorTest, WriteErrorsKeepDataBufferedAndBounded) {
  TempDir tmp;
  const std::filesystem::path dir = tmp.path() / "log";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ErrorScenario(dir);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's message on stderr";
}

// An unwritable log directory makes Acquire fail with a message, not crash.
TEST(LogSinkErrorTest, AcquireReportsAnUnusableDirectory) {
  TempDir tmp;
  std::string error;
  LogSinkOptions options;
  options.dir = tmp.path() / "log";
  auto sink = LogSink::Open(options, &error);
  ASSERT_NE(sink, nullptr) << error;
  // A regular file where the date directory should be: mkdir fails even for root.
  testing::WriteFile(options.dir / "1970-01-01", "not a directory");
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(error.find("1970-01-01"), std::string::npos) << error;
  EXPECT_EQ(sink->stats().write_errors, 1u);
}

TEST(LogSinkErrorTest, OneSinkPerDirectory) {
  TempDir tmp;
  std::string error;
  LogSinkOptions options;
  options.dir = tmp.path() / "log";
  auto first = LogSink::Open(options, &error);
  ASSERT_NE(first, nullptr) << error;
  EXPECT_EQ(LogSink::Open(options, &error), nullptr);
  EXPECT_NE(error.find("another process"), std::string::npos) << error;
  first.reset();
  error.clear();
  EXPECT_NE(LogSink::Open(options, &error), nullptr) << error;
}

TEST(LogSinkErrorTest, OpenReportsAnUnusableDirectory) {
  TempDir tmp;
  testing::WriteFile(tmp.path() / "file", "x");
  std::string error;
  LogSinkOptions options;
  options.dir = tmp.path() / "file" / "log";
  EXPECT_EQ(LogSink::Open(options, &error), nullptr);
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace cuflight::collector
