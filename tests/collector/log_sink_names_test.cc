// File names of the log sink: the date directory, the base name, and the sanitising rule that
// keeps hostile names from a peer inside the log directory.
#include <gtest/gtest.h>

#include <string>

#include "log_sink.h"
#include "log_sink_test_util.h"
#include "segment_names.h"

namespace cuflight::collector {
namespace {

using testing::ListFiles;
using testing::TempDir;

TEST(LogSinkNamesTest, SanitizeReplacesEverythingButSafeBytes) {
  EXPECT_EQ(logstore::SanitizeNameComponent("node-01.example.com"), "node-01.example.com");
  EXPECT_EQ(logstore::SanitizeNameComponent("py+thon_3"), "py+thon_3");
  EXPECT_EQ(logstore::SanitizeNameComponent("../../etc"), "_._.._etc");
  EXPECT_EQ(logstore::SanitizeNameComponent("a/b"), "a_b");
  EXPECT_EQ(logstore::SanitizeNameComponent("a\nb\001c\177"), "a_b_c_");
  EXPECT_EQ(logstore::SanitizeNameComponent("a b\\c"), "a_b_c");
  EXPECT_EQ(logstore::SanitizeNameComponent("h\xc3\xa9"), "h__");  // "hé": two UTF-8 bytes
  EXPECT_EQ(logstore::SanitizeNameComponent(".hidden"), "_hidden");
  EXPECT_EQ(logstore::SanitizeNameComponent(".."), "_.");
  EXPECT_EQ(logstore::SanitizeNameComponent("-rf"), "_rf");
  EXPECT_EQ(logstore::SanitizeNameComponent(""), "unknown");
  EXPECT_EQ(logstore::SanitizeNameComponent(std::string(300, 'x')), std::string(64, 'x'));
}

TEST(LogSinkNamesTest, ExeBaseName) {
  EXPECT_EQ(logstore::ExeBaseName("/usr/bin/python3"), "python3");
  EXPECT_EQ(logstore::ExeBaseName("a/b"), "b");
  EXPECT_EQ(logstore::ExeBaseName("../../etc"), "etc");
  EXPECT_EQ(logstore::ExeBaseName("train"), "train");
  EXPECT_EQ(logstore::ExeBaseName("dir/"), "dir");
  EXPECT_EQ(logstore::ExeBaseName("/"), "");
}

TEST(LogSinkNamesTest, StartDateIsTheUtcDay) {
  EXPECT_EQ(logstore::StartDate(0), "1970-01-01");
  EXPECT_EQ(logstore::StartDate(86'399'999'999'999), "1970-01-01");
  EXPECT_EQ(logstore::StartDate(86'400'000'000'000), "1970-01-02");
  // date -u -d @1700000000: Tue Nov 14 22:13:20 UTC 2023.
  EXPECT_EQ(logstore::StartDate(1'700'000'000'123'456'789), "2023-11-14");
  // date -u -d @951782400: Tue Feb 29 00:00:00 UTC 2000; @951868799 is 23:59:59 that day.
  EXPECT_EQ(logstore::StartDate(951'782'400'000'000'000), "2000-02-29");
  EXPECT_EQ(logstore::StartDate(951'868'799'999'999'999), "2000-02-29");
  EXPECT_EQ(logstore::StartDate(-5), "1970-01-01");
}

TEST(LogSinkNamesTest, BaseAndSegmentNames) {
  EXPECT_EQ(logstore::StreamBaseName("node1", "/usr/bin/python3", 42, 1'700'000'000'123'456'789),
            "node1-python3-42-1700000000123456789");
  EXPECT_EQ(logstore::ActiveFileName("h-e-1-2"), "h-e-1-2.jsonl");
  EXPECT_EQ(logstore::SegmentFileName("h-e-1-2", 1, false), "h-e-1-2.000001.jsonl");
  EXPECT_EQ(logstore::SegmentFileName("h-e-1-2", 42, true), "h-e-1-2.000042.jsonl.zst");
  EXPECT_EQ(logstore::SegmentFileName("h-e-1-2", 1234567, true), "h-e-1-2.1234567.jsonl.zst");
}

TEST(LogSinkNamesTest, ParseClassifiesTheLayout) {
  logstore::ParsedLogFileName p = logstore::ParseLogFileName("a.b-py3.11-7-99.jsonl");
  EXPECT_EQ(p.kind, logstore::LogFileKind::kActive);
  EXPECT_EQ(p.base, "a.b-py3.11-7-99");
  p = logstore::ParseLogFileName("a.b-py3.11-7-99.000003.jsonl");
  EXPECT_EQ(p.kind, logstore::LogFileKind::kPlainSegment);
  EXPECT_EQ(p.base, "a.b-py3.11-7-99");
  EXPECT_EQ(p.index, 3u);
  p = logstore::ParseLogFileName("a.b-py3.11-7-99.000003.jsonl.zst");
  EXPECT_EQ(p.kind, logstore::LogFileKind::kCompressedSegment);
  EXPECT_EQ(p.index, 3u);
  p = logstore::ParseLogFileName("a.b-py3.11-7-99.000003.jsonl.zst.tmp");
  EXPECT_EQ(p.kind, logstore::LogFileKind::kTemp);
  EXPECT_EQ(logstore::ParseLogFileName("notes.txt").kind, logstore::LogFileKind::kOther);
  EXPECT_EQ(logstore::ParseLogFileName(".jsonl").kind, logstore::LogFileKind::kOther);
  EXPECT_EQ(logstore::ParseLogFileName("x.jsonl.1").kind,
            logstore::LogFileKind::kOther);  // logrotate's name
  EXPECT_TRUE(logstore::IsDateDirName("2023-11-14"));
  EXPECT_FALSE(logstore::IsDateDirName("2023-11-4"));
  EXPECT_FALSE(logstore::IsDateDirName(".."));
}

// Every file a hostile key produces lies directly in <dir>/<date>/, with a bounded name free of
// '/' and control characters.
TEST(LogSinkNamesTest, HostileKeysStayInsideTheDateDirectory) {
  TempDir tmp;
  std::string error;
  LogSinkOptions options;
  options.dir = tmp.path() / "log";
  auto sink = LogSink::Open(options, &error);
  ASSERT_NE(sink, nullptr) << error;
  const ProcessKey keys[] = {
      {"../../etc", "../../passwd", 1, 0},
      {"a/b", "a/b", 2, 0},
      {std::string("ctl\n\r\t\x01\x1b[0m"), std::string("x\0y", 3), 3, 0},
      {std::string(1000, 'h'), std::string(1000, 'e'), 2147483647, 9'223'372'036'854'775'807},
      {"", "", -1, -7},
  };
  for (const ProcessKey& key : keys) {
    LogSink::Stream* s = sink->Acquire(key, &error);
    ASSERT_NE(s, nullptr) << error;
    ASSERT_TRUE(sink->Append(s, 0, testing::MakeLine(0)));
    sink->Flush();
    sink->Release(s);
  }
  const std::vector<std::string> files = ListFiles(options.dir);
  const std::vector<std::string> expected = {
      "1970-01-01/_._.._etc-passwd-1-0.jsonl",
      "1970-01-01/a_b-b-2-0.jsonl",
      "1970-01-01/ctl______0m-x_y-3-0.jsonl",
      "1970-01-01/unknown-unknown--1--7.jsonl",
      "2262-04-11/" + std::string(64, 'h') + "-" + std::string(64, 'e') +
          "-2147483647-9223372036854775807.jsonl",
  };
  EXPECT_EQ(files, expected);
  for (const std::string& f : files) {
    const std::string name = std::filesystem::path(f).filename().string();
    EXPECT_LE(name.size(), 255u);
    for (char c : name) EXPECT_GT(static_cast<unsigned char>(c), 0x20) << name;
  }
}

}  // namespace
}  // namespace cuflight::collector
