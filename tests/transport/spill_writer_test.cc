#include "cuflight/spill/spill_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "spill_files.h"
#include "temp_dir.h"
#include "test_lines.h"

namespace cuflight::spill {
namespace {

using test_support::TempDir;
using transport::testing::FileNames;
using transport::testing::MakeLine;
using transport::testing::ReadLines;
using transport::testing::StreamFiles;

// The process every test spills for, and its file names worked out by hand from the layout in
// docs/collector.md: host and exe basename sanitised to [A-Za-z0-9._+-], the UTC day of start_ns
// (1700000000 s is 2023-11-14 22:13:20 UTC).
constexpr char kHost[] = "node 1";
constexpr char kExe[] = "/opt/my app/train+v2";
constexpr int32_t kPid = 4242;
constexpr int64_t kStartNs = 1700000000123456789;
constexpr char kDate[] = "2023-11-14";
constexpr char kBase[] = "node_1-train+v2-4242-1700000000123456789";

class SpillWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = scratch_.path().string();
    dir_ = tmp_ + "/spill/nested";
  }

  SpillWriterOptions Options(uint64_t rotate_bytes, uint64_t max_bytes) {
    SpillWriterOptions o;
    o.dir = dir_;
    o.host = kHost;
    o.exe = kExe;
    o.pid = kPid;
    o.start_ns = kStartNs;
    o.rotate_bytes = rotate_bytes;
    o.max_bytes = max_bytes;
    o.warn = [this](std::string_view line) { warnings_.emplace_back(line); };
    return o;
  }
  std::string DateDir() const { return dir_ + "/" + kDate; }
  std::string ActivePath() const { return DateDir() + "/" + kBase + ".jsonl"; }

  TempDir scratch_;
  std::string tmp_;
  std::string dir_;
  std::vector<std::string> warnings_;
};

// The descriptor this process holds open on `path`, found through /proc/self/fd; -1 if none.
int OpenFdFor(const std::string& path) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target == path) return std::stoi(entry.path().filename().string());
  }
  return -1;
}

TEST_F(SpillWriterTest, OpensNothingBeforeTheFirstLine) {
  SpillWriter w(Options(1 << 20, 1 << 30));
  EXPECT_FALSE(std::filesystem::exists(tmp_ + "/spill"));
  EXPECT_EQ(w.active_path(), ActivePath());
  EXPECT_EQ(w.base_name(), kBase);
  EXPECT_EQ(w.date_dir(), DateDir());
  EXPECT_FALSE(w.disabled());
}

TEST_F(SpillWriterTest, WritesTheCollectorLayoutWithPrivateModes) {
  SpillWriter w(Options(1 << 20, 1 << 30));
  const std::string a = MakeLine(0, 80, "process_start");
  const std::string b = MakeLine(1, 120);
  EXPECT_EQ(w.PrepareLine(a.size()), 1u);
  ASSERT_TRUE(w.AppendLine(a, {}));
  // A line given in two pieces is written as one.
  EXPECT_EQ(w.PrepareLine(b.size()), 1u);
  ASSERT_TRUE(w.AppendLine(std::string_view(b).substr(0, 50), std::string_view(b).substr(50)));

  EXPECT_EQ(FileNames(DateDir()), std::vector<std::string>{std::string(kBase) + ".jsonl"});
  EXPECT_EQ(ReadLines(ActivePath()), (std::vector<std::string>{a, b}));

  struct stat st {};
  for (const std::string& d : {tmp_ + "/spill", dir_, DateDir()}) {
    ASSERT_EQ(stat(d.c_str(), &st), 0) << d;
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }
  ASSERT_EQ(stat(ActivePath().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  const int fd = OpenFdFor(ActivePath());
  ASSERT_GE(fd, 0);
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_NE(fcntl(fd, F_GETFL) & O_APPEND, 0);

  const SpillWriterStats st2 = w.stats();
  EXPECT_EQ(st2.lines, 2u);
  EXPECT_EQ(st2.bytes, 200u);
  EXPECT_EQ(st2.files, 1u);
  EXPECT_EQ(st2.rotations, 0u);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(SpillWriterTest, RotatesIntoNumberedSegmentsHoldingEveryLineOnce) {
  // 10 lines of 100 bytes fill a 1000-byte file; the 11th starts a new one.
  SpillWriter w(Options(1000, 1 << 30));
  std::vector<std::string> written;
  for (uint64_t seq = 0; seq < 35; ++seq) {
    written.push_back(MakeLine(seq, 100));
    EXPECT_EQ(w.PrepareLine(100), 1 + seq / 10) << seq;
    ASSERT_TRUE(w.AppendLine(written.back(), {}));
  }
  const std::string base = kBase;
  EXPECT_EQ(FileNames(DateDir()),
            (std::vector<std::string>{base + ".000001.jsonl", base + ".000002.jsonl",
                                      base + ".000003.jsonl", base + ".jsonl"}));
  std::vector<std::string> all;
  for (const std::string& path : StreamFiles(DateDir(), base)) {
    const auto lines = ReadLines(path);
    EXPECT_LE(std::filesystem::file_size(path), 1000u) << path;
    all.insert(all.end(), lines.begin(), lines.end());
  }
  EXPECT_EQ(all, written);
  EXPECT_EQ(std::filesystem::file_size(ActivePath()), 500u);
  EXPECT_EQ(w.stats().rotations, 3u);
  EXPECT_EQ(w.stats().files, 4u);
  EXPECT_EQ(w.stats().bytes, 3500u);
}

TEST_F(SpillWriterTest, ALineLargerThanTheRotationSizeStillGoesInAndRotationsSkipTakenNumbers) {
  // Segment 1 is already there (the same process's spill set up before): never overwritten.
  std::filesystem::create_directories(DateDir());
  const std::string taken = DateDir() + "/" + kBase + ".000001.jsonl";
  std::ofstream(taken) << "old\n";
  SpillWriter w(Options(150, 1 << 30));
  EXPECT_EQ(w.PrepareLine(400), 1u);  // an empty file takes any line
  ASSERT_TRUE(w.WriteLine(MakeLine(0, 400)));
  EXPECT_EQ(w.PrepareLine(100), 2u);
  ASSERT_TRUE(w.AppendLine(MakeLine(1, 100), {}));
  EXPECT_EQ(ReadLines(taken), std::vector<std::string>{"old\n"});
  EXPECT_EQ(ReadLines(DateDir() + "/" + kBase + ".000002.jsonl"),
            std::vector<std::string>{MakeLine(0, 400)});
  EXPECT_EQ(ReadLines(ActivePath()), std::vector<std::string>{MakeLine(1, 100)});
}

TEST_F(SpillWriterTest, MaxBytesRefusesAndCountsAndNeverDeletes) {
  SpillWriter w(Options(400, 1000));
  for (uint64_t seq = 0; seq < 10; ++seq) ASSERT_TRUE(w.WriteLine(MakeLine(seq, 100))) << seq;
  EXPECT_EQ(w.PrepareLine(100), 0u);
  EXPECT_FALSE(w.WriteLine(MakeLine(10, 100)));
  EXPECT_FALSE(w.AppendLine(MakeLine(11, 100), {}));  // also when PrepareLine is skipped
  const SpillWriterStats st = w.stats();
  EXPECT_EQ(st.refused_full, 3u);
  EXPECT_EQ(st.bytes, 1000u);
  EXPECT_EQ(st.lines, 10u);
  EXPECT_FALSE(st.disabled);
  ASSERT_EQ(warnings_.size(), 1u);  // one line, however many refusals
  EXPECT_NE(warnings_[0].find("full"), std::string::npos) << warnings_[0];
  EXPECT_EQ(w.message(), warnings_[0]);

  uint64_t total = 0;
  std::vector<std::string> all;
  for (const std::string& path : StreamFiles(DateDir(), kBase)) {
    total += std::filesystem::file_size(path);
    const auto lines = ReadLines(path);
    all.insert(all.end(), lines.begin(), lines.end());
  }
  EXPECT_EQ(total, 1000u);
  ASSERT_EQ(all.size(), 10u);
  for (uint64_t seq = 0; seq < 10; ++seq) EXPECT_EQ(all[seq], MakeLine(seq, 100));
}

TEST_F(SpillWriterTest, AnIncompleteLineIsRefusedWithoutDisabling) {
  SpillWriter w(Options(1 << 20, 1 << 30));
  ASSERT_NE(w.PrepareLine(10), 0u);
  EXPECT_FALSE(w.AppendLine("no newline", {}));
  EXPECT_FALSE(w.AppendLine({}, {}));
  EXPECT_TRUE(w.AppendLine("{\"a\":", "1}\n"));
  EXPECT_FALSE(w.disabled());
  EXPECT_EQ(ReadLines(ActivePath()), std::vector<std::string>{"{\"a\":1}\n"});
}

TEST_F(SpillWriterTest, AnUnusableDirectoryDisablesWithOneMessage) {
  // A regular file where a directory must be: mkdir fails (ENOTDIR), even for root.
  std::filesystem::create_directories(tmp_ + "/spill");
  std::ofstream(tmp_ + "/spill/nested") << "a file\n";
  SpillWriter w(Options(1 << 20, 1 << 30));
  EXPECT_EQ(w.PrepareLine(100), 0u);
  EXPECT_TRUE(w.disabled());
  for (uint64_t seq = 0; seq < 5; ++seq) EXPECT_FALSE(w.WriteLine(MakeLine(seq, 100)));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(tmp_ + "/spill/nested"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("disabled"), std::string::npos) << warnings_[0];
  EXPECT_EQ(w.stats().refused_disabled, 6u);
  EXPECT_EQ(w.stats().lines, 0u);
}

TEST_F(SpillWriterTest, AnActiveFileThatCannotBeOpenedDisablesWithOneMessage) {
  // A directory in the active file's place: open(2) fails with EISDIR.
  std::filesystem::create_directories(ActivePath());
  SpillWriter w(Options(1 << 20, 1 << 30));
  EXPECT_FALSE(w.WriteLine(MakeLine(0, 100)));
  EXPECT_FALSE(w.WriteLine(MakeLine(1, 100)));
  EXPECT_TRUE(w.disabled());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(ActivePath()), std::string::npos) << warnings_[0];
}

TEST_F(SpillWriterTest, WithoutAWarnCallbackTheMessageIsKept) {
  SpillWriterOptions o = Options(1 << 20, 1 << 30);
  o.warn = nullptr;
  o.dir.clear();
  SpillWriter w(std::move(o));
  EXPECT_TRUE(w.disabled());
  EXPECT_FALSE(w.message().empty());
  EXPECT_EQ(w.PrepareLine(10), 0u);
}

TEST_F(SpillWriterTest, AppendsToAnActiveFileAlreadyThereAndCountsIt) {
  std::filesystem::create_directories(DateDir());
  std::ofstream(ActivePath()) << MakeLine(0, 300);
  SpillWriter w(Options(1 << 20, 500));
  EXPECT_TRUE(w.WriteLine(MakeLine(1, 200)));
  EXPECT_FALSE(w.WriteLine(MakeLine(2, 100)));  // 300 + 200 already: the limit
  EXPECT_EQ(ReadLines(ActivePath()),
            (std::vector<std::string>{MakeLine(0, 300), MakeLine(1, 200)}));
}

}  // namespace
}  // namespace cuflight::spill
