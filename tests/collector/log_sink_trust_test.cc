// Trust in the log directory: its owner and mode are checked when the sink opens it, and no
// symbolic link inside it is ever followed (recovery, appends, retention), whoever planted it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "log_sink.h"
#include "log_sink_test_util.h"

namespace cuflight::collector {
namespace {

using std::chrono::hours;
using testing::ListFiles;
using testing::MakeLine;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

namespace fs = std::filesystem;

const ProcessKey kKey{"node1", "train", 7, 0};  // 1970-01-01/node1-train-7-0.jsonl

std::unique_ptr<LogSink> OpenSink(const fs::path& dir, std::string* error, int retain_days = 0) {
  LogSinkOptions options;
  options.dir = dir;
  options.retain_days = retain_days;
  options.retention_interval = std::chrono::milliseconds(0);
  return LogSink::Open(options, error);
}

TEST(LogSinkTrustTest, RefusesADirectoryWritableByGroupOrOthers) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "log";
  ASSERT_TRUE(fs::create_directory(dir));
  for (const mode_t mode : {0770, 0757, 0777}) {
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    std::string error;
    EXPECT_EQ(OpenSink(dir, &error), nullptr) << std::oct << mode;
    char shown[8];
    std::snprintf(shown, sizeof(shown), "%04o", static_cast<unsigned>(mode));
    EXPECT_EQ(error, "log directory " + dir.native() + " is writable by group or others (mode " +
                         shown +
                         "); remove those write bits (chmod go-w) or use another directory");
  }
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);  // readable, without a socket group, is fine
  std::string error;
  EXPECT_NE(OpenSink(dir, &error), nullptr) << error;
}

// With a socket group (other users' processes recorded), the logs hold every recorded user's
// command lines: a directory others may read or search is refused, and one the socket group may
// read or search when that is its group. Without one, only the collector's user is recorded.
TEST(LogSinkTrustTest, WithASocketGroupRefusesADirectoryOthersOrThatGroupCanRead) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "log";
  ASSERT_TRUE(fs::create_directory(dir));
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  LogSinkOptions options;
  options.dir = dir;
  options.retention_interval = std::chrono::milliseconds(0);
  options.socket_group = st.st_gid + 1;
  for (const mode_t mode : {0704, 0701, 0755}) {
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    std::string error;
    EXPECT_EQ(LogSink::Open(options, &error), nullptr) << std::oct << mode;
    char shown[8];
    std::snprintf(shown, sizeof(shown), "%04o", static_cast<unsigned>(mode));
    EXPECT_EQ(error, "log directory " + dir.native() + " can be read by others (mode " + shown +
                         "): the logs hold every recorded user's command lines; make it 0700 "
                         "(chmod go-rwx) or use another directory");
    EXPECT_NE(OpenSink(dir, &error), nullptr) << error;  // no socket group
  }
  options.socket_group = st.st_gid;  // the directory's group is the socket group
  for (const mode_t mode : {0740, 0710, 0750}) {
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    std::string error;
    EXPECT_EQ(LogSink::Open(options, &error), nullptr) << std::oct << mode;
    char shown[8];
    std::snprintf(shown, sizeof(shown), "%04o", static_cast<unsigned>(mode));
    EXPECT_EQ(error, "log directory " + dir.native() + " can be read by group " +
                         std::to_string(st.st_gid) + ", the socket group (mode " + shown +
                         "): every recorded user could read the others' logs; make it 0700 "
                         "(chmod g-rx) or give it another group");
  }
  std::string error;
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  EXPECT_NE(LogSink::Open(options, &error), nullptr) << error;
  ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);
  options.socket_group = st.st_gid + 1;  // another group may read it
  EXPECT_NE(LogSink::Open(options, &error), nullptr) << error;
}

// Whatever the umask, what the sink creates is its owner's alone: date directories 0700, log
// files and the lock 0600.
TEST(LogSinkTrustTest, CreatesDirectoriesAndFilesForItsOwnerOnlyWhateverTheUmask) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "log";
  const mode_t old_umask = ::umask(0);
  std::string error;
  {
    auto sink = OpenSink(dir, &error);
    ASSERT_NE(sink, nullptr) << error;
    LogSink::Stream* s = sink->Acquire(kKey, &error);
    ASSERT_NE(s, nullptr) << error;
    EXPECT_TRUE(sink->Append(s, 0, MakeLine(0)));
    sink->Flush();
    sink->Release(s);
  }
  ::umask(old_umask);
  const auto mode = [](const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  EXPECT_EQ(mode(dir), 0700u);
  EXPECT_EQ(mode(dir / "1970-01-01"), 0700u);
  EXPECT_EQ(mode(dir / "1970-01-01" / "node1-train-7-0.jsonl"), 0600u);
  EXPECT_EQ(mode(dir / kLogDirLockFileName), 0600u);
}

TEST(LogSinkTrustTest, RefusesADirectoryOwnedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another uid";
  TempDir tmp;
  const fs::path dir = tmp.path() / "log";
  ASSERT_TRUE(fs::create_directory(dir));
  ASSERT_EQ(::chown(dir.c_str(), 4242, 4242), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  std::string error;
  EXPECT_EQ(OpenSink(dir, &error), nullptr);
  EXPECT_EQ(error, "log directory " + dir.native() +
                       " is owned by uid 4242, not by the collector's uid 0; give it to the "
                       "collector's user (chown) or use another directory");
}

TEST(LogSinkTrustTest, CreatesAMissingDirectoryReadableAndWritableByItsOwnerOnly) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "a" / "b" / "log";
  const mode_t old_umask = ::umask(0);  // nothing masked: the mode is the sink's own choice
  std::string error;
  auto sink = OpenSink(dir, &error);
  ::umask(old_umask);
  ASSERT_NE(sink, nullptr) << error;
  struct stat st {};
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

// The log directory named through a symbolic link is the operator's choice: followed once.
TEST(LogSinkTrustTest, TheDirectoryItselfMayBeASymbolicLink) {
  TempDir tmp;
  ASSERT_TRUE(fs::create_directory(tmp.path() / "real"));
  ASSERT_EQ(::chmod((tmp.path() / "real").c_str(), 0750), 0);
  fs::create_directory_symlink(tmp.path() / "real", tmp.path() / "log");
  std::string error;
  auto sink = OpenSink(tmp.path() / "log", &error);
  ASSERT_NE(sink, nullptr) << error;
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_TRUE(sink->Append(s, 0, MakeLine(0)));
  sink->Release(s);
  EXPECT_EQ(ReadFile(tmp.path() / "real" / "1970-01-01" / "node1-train-7-0.jsonl"), MakeLine(0));
}

TEST(LogSinkTrustTest, NeverWritesThroughASymbolicLinkNamedLikeAnActiveFile) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "log";
  const fs::path victim = tmp.path() / "victim";
  WriteFile(victim, "precious, with a torn tail");  // no '\n': recovery would cut it all
  WriteFile(dir / "1970-01-01" / "placeholder", "");
  fs::create_symlink(victim, dir / "1970-01-01" / "node1-train-7-0.jsonl");
  fs::create_symlink(victim, dir / "1970-01-01" / "node1-train-7-0.000001.jsonl");
  ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);

  std::string error;
  auto sink = OpenSink(dir, &error);
  ASSERT_NE(sink, nullptr) << error;
  EXPECT_EQ(sink->stats().torn_lines_trimmed, 0u);
  EXPECT_EQ(sink->Acquire(kKey, &error), nullptr);
  EXPECT_EQ(error, (dir / "1970-01-01" / "node1-train-7-0.jsonl").native() +
                       " is not a regular file (a symbolic link is never followed)");
  sink->FinishBackgroundWork();  // no compression of the linked "segment" was queued
  sink.reset();
  EXPECT_EQ(ReadFile(victim), "precious, with a torn tail");
  EXPECT_TRUE(fs::is_symlink(dir / "1970-01-01" / "node1-train-7-0.000001.jsonl"));
  EXPECT_FALSE(fs::exists(dir / "1970-01-01" / "node1-train-7-0.000001.jsonl.zst"));
}

TEST(LogSinkTrustTest, NeverFollowsASymbolicLinkNamedLikeADateDirectory) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "log";
  const fs::path elsewhere = tmp.path() / "elsewhere";
  WriteFile(elsewhere / "node1-train-7-0.jsonl", "torn");
  ASSERT_TRUE(fs::create_directory(dir));
  ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);
  fs::create_directory_symlink(elsewhere, dir / "1970-01-01");

  std::string error;
  auto sink = OpenSink(dir, &error);
  ASSERT_NE(sink, nullptr) << error;
  EXPECT_EQ(sink->stats().torn_lines_trimmed, 0u);
  EXPECT_EQ(sink->Acquire(kKey, &error), nullptr);
  EXPECT_NE(error.find("cannot open " + (dir / "1970-01-01").native()), std::string::npos) << error;
  sink.reset();
  EXPECT_EQ(ReadFile(elsewhere / "node1-train-7-0.jsonl"), "torn");
  EXPECT_EQ(ListFiles(elsewhere), std::vector<std::string>{"node1-train-7-0.jsonl"});
}

TEST(LogSinkTrustTest, RetentionNeitherFollowsNorRemovesSymbolicLinks) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "log";
  const fs::path elsewhere = tmp.path() / "elsewhere";
  WriteFile(elsewhere / "old-a-1-0.000001.jsonl.zst", "kept");
  WriteFile(tmp.path() / "target", "kept too");
  WriteFile(dir / "1970-01-02" / "gone-b-2-86400000000000.jsonl", MakeLine(0));
  fs::create_directory_symlink(elsewhere, dir / "1970-01-01");
  fs::create_symlink(tmp.path() / "target",
                     dir / "1970-01-02" / "gone-b-2-86400000000000.000001.jsonl.zst");
  ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);
  // Old enough for a 1-day retention, as seen through the links too.
  const auto old = std::chrono::system_clock::now() - hours(24 * 10);
  testing::SetMtime(elsewhere / "old-a-1-0.000001.jsonl.zst", old);
  testing::SetMtime(tmp.path() / "target", old);
  testing::SetMtime(dir / "1970-01-02" / "gone-b-2-86400000000000.jsonl", old);

  std::string error;
  auto sink = OpenSink(dir, &error, /*retain_days=*/1);
  ASSERT_NE(sink, nullptr) << error;
  sink->Tick(std::chrono::system_clock::now());
  sink->FinishBackgroundWork();
  EXPECT_EQ(sink->stats().files_removed_by_retention, 1u);  // the regular file only
  EXPECT_EQ(ReadFile(elsewhere / "old-a-1-0.000001.jsonl.zst"), "kept");
  EXPECT_EQ(ReadFile(tmp.path() / "target"), "kept too");
  EXPECT_TRUE(fs::is_symlink(dir / "1970-01-01"));
  EXPECT_TRUE(fs::is_symlink(dir / "1970-01-02" / "gone-b-2-86400000000000.000001.jsonl.zst"));
}

}  // namespace
}  // namespace cuflight::collector
