// The log reader on hand-made files: events in order with their origin, zstd recognised by
// content, torn and rejected lines counted and said, files that are not logs refused in one line,
// and directory expansion.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/logread/progress_line.h"
#include "report_test_events.h"
#include "temp_dir.h"
#include "zstd_file.h"

namespace cuflight::logread {
namespace {

namespace fs = std::filesystem;
using report::testing::End;
using report::testing::Line;
using report::testing::Start;
using report::testing::WriteFile;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using test_support::TempDir;

struct Read {
  bool ok = false;
  std::string error;
  ReadSummary summary;
  std::vector<schema::EventType> types;
  std::vector<uint64_t> lines;
};

Read ReadOne(const fs::path& file) {
  Read r;
  r.ok = ReadLogFile(
      file,
      [&](const schema::OwnedEvent& e, const Origin& origin) {
        EXPECT_EQ(*origin.file, file);
        r.types.push_back(schema::TypeOf(e));
        r.lines.push_back(origin.line);
      },
      &r.summary, &r.error);
  return r;
}

std::string ThreeEvents() {
  return Line(Start(7, 0, 100)) + Line(report::testing::Device(7, 1, 0, "GPU")) + Line(End(7, 2, 0));
}

TEST(LogReadTest, PlainFileGivesEveryEventInOrderWithItsLine) {
  TempDir dir;
  const fs::path file = dir.path() / "a.jsonl";
  WriteFile(file, ThreeEvents());
  const Read r = ReadOne(file);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.types, (std::vector<schema::EventType>{schema::EventType::kProcessStart,
                                                      schema::EventType::kDevice,
                                                      schema::EventType::kProcessEnd}));
  EXPECT_EQ(r.lines, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(r.summary.files, 1u);
  EXPECT_EQ(r.summary.lines, 3u);
  EXPECT_EQ(r.summary.events, 3u);
  EXPECT_EQ(r.summary.torn_lines, 0u);
  EXPECT_EQ(r.summary.rejected_lines, 0u);
  EXPECT_TRUE(r.summary.notes.empty());
}

TEST(LogReadTest, ZstdIsRecognisedByContentNotByName) {
  TempDir dir;
  const fs::path plain = dir.path() / "src.jsonl";
  WriteFile(plain, ThreeEvents());
  // Compressed content under a plain name, and plain content under a .zst name.
  const fs::path compressed = dir.path() / "looks-plain.jsonl";
  std::string error;
  ASSERT_TRUE(logstore::CompressFileAtomically(plain, compressed, 3, &error)) << error;
  const fs::path misnamed = dir.path() / "plain.jsonl.zst";
  WriteFile(misnamed, ThreeEvents());

  const Read z = ReadOne(compressed);
  ASSERT_TRUE(z.ok) << z.error;
  EXPECT_EQ(z.summary.events, 3u);
  EXPECT_EQ(z.summary.compressed_files, 1u);
  const Read p = ReadOne(misnamed);
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.summary.events, 3u);
  EXPECT_EQ(p.summary.compressed_files, 0u);
}

TEST(LogReadTest, TornLastLineIsSkippedCountedAndSaid) {
  TempDir dir;
  const fs::path file = dir.path() / "torn.jsonl";
  std::string end = Line(End(7, 2, 0));
  end.resize(end.size() / 2);  // cut in the middle, no '\n'
  WriteFile(file, Line(Start(7, 0, 100)) + Line(report::testing::Device(7, 1, 0, "GPU")) + end);
  const Read r = ReadOne(file);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.summary.events, 2u);
  EXPECT_EQ(r.summary.lines, 3u);
  EXPECT_EQ(r.summary.torn_lines, 1u);
  ASSERT_EQ(r.summary.notes.size(), 1u);
  EXPECT_EQ(r.summary.notes[0], "torn last line 3 skipped in " + file.string() + " (" +
                                    std::to_string(end.size()) + " bytes without a line end)");
}

TEST(LogReadTest, TornLastLineOfACompressedSegmentIsToleratedToo) {
  TempDir dir;
  const fs::path plain = dir.path() / "src.jsonl";
  WriteFile(plain, Line(Start(7, 0, 100)) + "{\"type\":\"kern");
  const fs::path compressed = dir.path() / "seg.000001.jsonl.zst";
  std::string error;
  ASSERT_TRUE(logstore::CompressFileAtomically(plain, compressed, 1, &error)) << error;
  const Read r = ReadOne(compressed);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.summary.events, 1u);
  EXPECT_EQ(r.summary.torn_lines, 1u);
}

TEST(LogReadTest, RejectedLineInTheMiddleIsSkippedAndTheRestRead) {
  TempDir dir;
  const fs::path file = dir.path() / "rejected.jsonl";
  WriteFile(file, Line(Start(7, 0, 100)) +
                      "{\"type\":\"kernel\",\"version\":1,\"ts_ns\":1,\"pid\":7,\"seq\":1}\n" +
                      "not json at all\n" + Line(End(7, 2, 0)));
  const Read r = ReadOne(file);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.summary.events, 2u);
  EXPECT_EQ(r.summary.rejected_lines, 2u);
  EXPECT_EQ(r.lines, (std::vector<uint64_t>{1, 4}));
  ASSERT_EQ(r.summary.notes.size(), 2u);
  EXPECT_THAT(r.summary.notes[0],
              StartsWith("rejected line 2 in " + file.string() + ": missing_field: "));
  EXPECT_THAT(r.summary.notes[1],
              StartsWith("rejected line 3 in " + file.string() + ": malformed_json"));
}

TEST(LogReadTest, UnknownEventTypeIsSkippedNotRejected) {
  TempDir dir;
  const fs::path file = dir.path() / "future.jsonl";
  WriteFile(file, Line(Start(7, 0, 100)) +
                      "{\"type\":\"gpu_weather\",\"version\":1,\"ts_ns\":1,\"pid\":7,\"seq\":1}\n" +
                      Line(End(7, 2, 0)));
  const Read r = ReadOne(file);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.summary.events, 2u);
  EXPECT_EQ(r.summary.unknown_type_lines, 1u);
  EXPECT_EQ(r.summary.rejected_lines, 0u);
}

TEST(LogReadTest, NotALogIsOneClearLine) {
  TempDir dir;
  struct Case {
    std::string name;
    std::string bytes;
    std::string says;
  };
  std::string binary("\x7f" "ELF\x02\x01\x01\0\0\0\n\x01\x02", 14);
  const std::vector<Case> cases = {
      {"empty.jsonl", "", "not a cuflight log: empty file"},
      {"binary.jsonl", binary, "not a cuflight log: binary data"},
      {"v2.jsonl",
       "{\"type\":\"process_start\",\"version\":2,\"ts_ns\":1,\"pid\":7,\"seq\":0}\n" +
           Line(End(7, 1, 0)),
       "unsupported schema version"},
      {"csv.jsonl", "a,b,c\n1,2,3\n", "not a cuflight log: line 1 is not a cuflight event"},
      {"json.jsonl", "{\"hello\":\"world\"}\n", "not a cuflight log: line 1 is not a cuflight event"},
      {"fragment.jsonl", "hello", "not a cuflight log: no complete line"},
  };
  for (const Case& c : cases) {
    const fs::path file = dir.path() / c.name;
    WriteFile(file, c.bytes);
    const Read r = ReadOne(file);
    EXPECT_FALSE(r.ok) << c.name;
    EXPECT_THAT(r.error, StartsWith(file.string() + ": ")) << c.name;
    EXPECT_THAT(r.error, HasSubstr(c.says)) << c.name;
    EXPECT_EQ(r.error.find('\n'), std::string::npos) << c.name;
    EXPECT_TRUE(r.types.empty()) << c.name;
  }
}

TEST(LogReadTest, MissingFileIsAnError) {
  TempDir dir;
  const Read r = ReadOne(dir.path() / "absent.jsonl");
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.error, HasSubstr("absent.jsonl: cannot open: "));
}

TEST(LogReadTest, CorruptZstdIsAnError) {
  TempDir dir;
  const fs::path file = dir.path() / "bad.jsonl.zst";
  WriteFile(file, std::string("\x28\xb5\x2f\xfd\x00\x00garbage-garbage", 21));
  const Read r = ReadOne(file);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.error, HasSubstr(file.string()));
}

TEST(LogReadTest, ExpandFindsLogsRecursivelyInSegmentOrder) {
  TempDir dir;
  const fs::path day = dir.path() / "logs" / "2026-11-21";
  const std::string base = "node1-app-42-1000";
  for (const std::string& name :
       {base + ".jsonl", base + ".000002.jsonl.zst", base + ".000001.jsonl.zst",
        base + ".1000000.jsonl.zst", base + ".999999.jsonl", base + ".000003.jsonl.zst.tmp",
        std::string("notes.txt"), std::string("a-spill.jsonl")}) {
    WriteFile(day / name, "x");
  }
  std::vector<fs::path> files;
  std::string error;
  ASSERT_TRUE(ExpandLogPaths({(dir.path() / "logs").string()}, &files, &error)) << error;
  const std::vector<fs::path> expected = {
      day / "a-spill.jsonl",
      day / (base + ".000001.jsonl.zst"),
      day / (base + ".000002.jsonl.zst"),
      day / (base + ".999999.jsonl"),
      day / (base + ".1000000.jsonl.zst"),
      day / (base + ".jsonl"),
  };
  EXPECT_EQ(files, expected);

  // A file named on its own as well as through its directory is read once; any name is taken
  // when given explicitly.
  ASSERT_TRUE(ExpandLogPaths({(day / "notes.txt").string(), day.string(),
                              (day / (base + ".jsonl")).string()},
                             &files, &error))
      << error;
  EXPECT_EQ(files.size(), expected.size() + 1);
}

TEST(LogReadTest, ExpandRefusesMissingPathsAndDirectoriesWithoutLogs) {
  TempDir dir;
  std::vector<fs::path> files;
  std::string error;
  EXPECT_FALSE(ExpandLogPaths({(dir.path() / "nope").string()}, &files, &error));
  EXPECT_EQ(error, (dir.path() / "nope").string() + ": no such file or directory");
  fs::create_directories(dir.path() / "empty");
  WriteFile(dir.path() / "empty" / "readme.md", "x");
  EXPECT_FALSE(ExpandLogPaths({(dir.path() / "empty").string()}, &files, &error));
  EXPECT_EQ(error, (dir.path() / "empty").string() +
                       ": no cuflight log in this directory (*.jsonl, *.jsonl.zst)");
  // An empty log in a directory (an active file right after rotation) is skipped; one named
  // explicitly is taken (and ReadLogFile says it is empty).
  WriteFile(dir.path() / "rotated" / "a.jsonl", "");
  WriteFile(dir.path() / "rotated" / "a.000001.jsonl", "x");
  ASSERT_TRUE(ExpandLogPaths({(dir.path() / "rotated").string()}, &files, &error)) << error;
  EXPECT_EQ(files, std::vector<fs::path>{dir.path() / "rotated" / "a.000001.jsonl"});
  ASSERT_TRUE(ExpandLogPaths({(dir.path() / "rotated" / "a.jsonl").string()}, &files, &error));
  EXPECT_EQ(files.size(), 1u);
  fs::remove(dir.path() / "rotated" / "a.000001.jsonl");
  EXPECT_FALSE(ExpandLogPaths({(dir.path() / "rotated").string()}, &files, &error));
  EXPECT_EQ(error, (dir.path() / "rotated").string() + ": the cuflight logs in this directory are all empty");
  EXPECT_FALSE(ExpandLogPaths({}, &files, &error));
  EXPECT_EQ(error, "no log path given");
}

TEST(LogReadTest, NotesAreCapped) {
  TempDir dir;
  const fs::path file = dir.path() / "many.jsonl";
  std::string bytes = Line(Start(7, 0, 100));
  for (int i = 0; i < 25; ++i) bytes += "{}\n";
  WriteFile(file, bytes);
  const Read r = ReadOne(file);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.summary.rejected_lines, 25u);
  EXPECT_EQ(r.summary.notes.size(), ReadSummary::kMaxNotes);
  EXPECT_EQ(r.summary.notes_left_out, 25u - ReadSummary::kMaxNotes);
}

// ---- ReadLogFiles: many files, decoded on worker threads, delivered in order ----

// Every event delivered, in order: (file index, line, type, seq).
struct Delivered {
  size_t file;
  uint64_t line;
  schema::EventType type;
  uint64_t seq;
  bool operator==(const Delivered&) const = default;
};

struct ReadMany {
  bool ok = false;
  std::string error;
  ReadSummary summary;
  std::vector<Delivered> events;
  std::vector<std::pair<std::string, uint64_t>> unknown;  // (type, seq)
  std::vector<ReadProgress> progress;
};

// `on_each`, when given, is called at every event (on the calling thread).
ReadMany ReadAll(const std::vector<fs::path>& files, ReadOptions options,
                 const std::function<void()>& on_each = {}) {
  ReadMany r;
  options.on_unknown = [&](const UnknownEvent& u, const Origin&) {
    r.unknown.emplace_back(std::string(u.type), u.header.seq);
  };
  options.on_progress = [&](const ReadProgress& p) { r.progress.push_back(p); };
  options.progress_interval_s = 0;
  r.ok = ReadLogFiles(
      files,
      [&](const schema::OwnedEvent& e, const Origin& origin) {
        if (on_each) on_each();
        const size_t index = static_cast<size_t>(
            std::find(files.begin(), files.end(), *origin.file) - files.begin());
        r.events.push_back({index, origin.line, schema::TypeOf(e), schema::HeaderOf(e).seq});
      },
      options, &r.summary, &r.error);
  return r;
}

// What ReadLogFile gives, file after file: the reference.
ReadMany ReadEachFile(const std::vector<fs::path>& files) {
  ReadMany r;
  r.ok = true;
  for (size_t i = 0; i < files.size() && r.ok; ++i) {
    r.ok = ReadLogFile(
        files[i],
        [&](const schema::OwnedEvent& e, const Origin& origin) {
          r.events.push_back({i, origin.line, schema::TypeOf(e), schema::HeaderOf(e).seq});
        },
        &r.summary, &r.error);
  }
  return r;
}

// A process writing `launches` kernels and their times, with one torn last line when `torn`.
std::string Launches(int32_t pid, int launches, bool torn) {
  std::string s = Line(Start(pid, 0, 100)) + Line(report::testing::Device(pid, 1, 0, "GPU"));
  uint64_t seq = 2;
  for (int i = 0; i < launches; ++i) {
    s += Line(report::testing::Kernel(pid, seq++, 1000 + i, static_cast<uint64_t>(i) + 1, {}));
    s += Line(report::testing::KernelTime(pid, seq++, static_cast<uint64_t>(i) + 1, 500));
  }
  if (torn) s += "{\"type\":\"kernel\",\"vers";
  return s;
}

// Seven files (plain and zstd; sizes from a few lines to several batches of lines; rejected,
// torn and unknown-type lines): the same events, origins and summary as ReadLogFile file by file,
// whatever the number of threads.
TEST(ReadLogFilesTest, SameEventsAndSummaryAsReadingFileByFileWithAnyThreads) {
  TempDir dir;
  std::vector<fs::path> files;
  for (int i = 0; i < 7; ++i) {
    const int launches = i == 2 ? 5000 : i * 300;  // file 2: about ten batches
    std::string text = Launches(100 + i, launches, i == 4);
    if (i == 3) {
      text += "{\"type\":\"gpu_reset\",\"version\":1,\"ts_ns\":5,\"pid\":103,\"seq\":9999}\n";
      text += "not json\n";
      text += Line(End(103, 10000, 0));
    }
    const fs::path plain = dir.path() / ("p" + std::to_string(i) + ".jsonl");
    WriteFile(plain, text);
    if (i % 2 == 1) {
      const fs::path zst = dir.path() / ("z" + std::to_string(i) + ".jsonl.zst");
      std::string error;
      ASSERT_TRUE(logstore::CompressFileAtomically(plain, zst, 3, &error)) << error;
      files.push_back(zst);
    } else {
      files.push_back(plain);
    }
  }
  const ReadMany want = ReadEachFile(files);
  ASSERT_TRUE(want.ok) << want.error;
  ASSERT_GT(want.events.size(), 3 * ReadOptions::kChunkEvents);
  for (const unsigned threads : {0u, 1u, 2u, 5u}) {
    for (const bool sequential : {false, true}) {
      if (sequential && threads != 0) continue;
      ReadOptions options;
      options.threads = threads;
      options.sequential = sequential;
      const ReadMany got = ReadAll(files, options);
      ASSERT_TRUE(got.ok) << got.error;
      EXPECT_TRUE(got.events == want.events) << threads;
      EXPECT_EQ(got.summary.files, 7u);
      EXPECT_EQ(got.summary.events, want.summary.events);
      EXPECT_EQ(got.summary.lines, want.summary.lines);
      EXPECT_EQ(got.summary.torn_lines, 1u);
      EXPECT_EQ(got.summary.rejected_lines, 1u);
      EXPECT_EQ(got.summary.unknown_type_lines, 1u);
      EXPECT_EQ(got.summary.compressed_files, 3u);
      EXPECT_EQ(got.summary.notes, want.summary.notes);
      EXPECT_EQ(got.unknown, (std::vector<std::pair<std::string, uint64_t>>{{"gpu_reset", 9999}}));
      ASSERT_FALSE(got.progress.empty());
      const ReadProgress& last = got.progress.back();
      EXPECT_EQ(last.files_done, 7u);
      EXPECT_EQ(last.files, 7u);
      EXPECT_EQ(last.events, want.events.size());
      EXPECT_EQ(last.bytes_read, last.bytes);
      uint64_t bytes = 0;
      for (const fs::path& f : files) bytes += fs::file_size(f);
      EXPECT_EQ(last.bytes, bytes);
    }
  }
}

// A file that is not a log in the middle: the events of the files before it are delivered, none
// after, and the error names it, as reading file by file would stop there.
TEST(ReadLogFilesTest, StopsAtTheFirstFailingFileInOrder) {
  TempDir dir;
  std::vector<fs::path> files;
  for (int i = 0; i < 5; ++i) {
    files.push_back(dir.path() / ("f" + std::to_string(i) + ".jsonl"));
    WriteFile(files.back(), i == 2 ? std::string("\x01\x02binary\n") : Launches(100 + i, 2000, false));
  }
  const ReadMany want = ReadEachFile(files);
  ASSERT_FALSE(want.ok);
  for (const unsigned threads : {1u, 3u}) {
    ReadOptions options;
    options.threads = threads;
    const ReadMany got = ReadAll(files, options);
    EXPECT_FALSE(got.ok);
    EXPECT_EQ(got.error, want.error);
    EXPECT_THAT(got.error, StartsWith(files[2].string() + ": not a cuflight log"));
    EXPECT_TRUE(got.events == want.events);
    ASSERT_FALSE(got.events.empty());
    EXPECT_EQ(got.events.back().file, 1u);
  }
}

// `count` files f0.jsonl... in `dir`, each a process (pids 100...) writing `launches` launches.
std::vector<fs::path> LaunchFiles(const TempDir& dir, int count, int launches) {
  std::vector<fs::path> files;
  for (int i = 0; i < count; ++i) {
    files.push_back(dir.path() / ("f" + std::to_string(i) + ".jsonl"));
    WriteFile(files.back(), Launches(100 + i, launches, false));
  }
  return files;
}

// An exception from the caller's callback stops the workers (no hang, nothing delivered after).
TEST(ReadLogFilesTest, ACallbackExceptionStopsTheWorkersAndPropagates) {
  TempDir dir;
  const std::vector<fs::path> files = LaunchFiles(dir, 4, 3000);
  ReadOptions options;
  options.threads = 3;
  uint64_t delivered = 0;
  ReadSummary summary;
  std::string error;
  EXPECT_THROW(ReadLogFiles(
                   files,
                   [&](const schema::OwnedEvent&, const Origin&) {
                     if (++delivered == 2500) throw std::runtime_error("stop");
                   },
                   options, &summary, &error),
               std::runtime_error);
  EXPECT_EQ(delivered, 2500u);
}

// Threads in this process (/proc/self/task), 0 when that cannot be read.
size_t ThreadsNow() {
  std::error_code ec;
  size_t n = 0;
  for (fs::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec)) {
    ++n;
  }
  return ec ? 0 : n;
}

// Restricts the calling thread (and the threads it starts) to `cpus` of its allowed CPUs, and
// restores its mask when destroyed.
class AllowedCpus {
 public:
  explicit AllowedCpus(int cpus) {
    ok_ = ::sched_getaffinity(0, sizeof(saved_), &saved_) == 0 && CPU_COUNT(&saved_) >= cpus;
    if (!ok_) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    int taken = 0;
    for (int c = 0; c < CPU_SETSIZE && taken < cpus; ++c) {
      if (CPU_ISSET(c, &saved_)) {
        CPU_SET(c, &set);
        ++taken;
      }
    }
    ok_ = ::sched_setaffinity(0, sizeof(set), &set) == 0;
  }
  ~AllowedCpus() {
    if (ok_) ::sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  bool ok() const { return ok_; }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
};

// With the default thread count, a process allowed one CPU (taskset, a cpuset) reads on the
// calling thread: decoder threads there would only add copies and switches. Allowed two, it
// reads and decodes on two threads beside the caller's. Both give the events and summary of
// reading file by file.
TEST(ReadLogFilesTest, DefaultThreadsFollowTheCpusTheProcessMayUse) {
  TempDir dir;
  const std::vector<fs::path> files = LaunchFiles(dir, 3, 3000);
  const ReadMany want = ReadEachFile(files);
  ASSERT_TRUE(want.ok) << want.error;
  const size_t before = ThreadsNow();
  ASSERT_GT(before, 0u);
  for (const int cpus : {1, 2}) {
    SCOPED_TRACE(cpus);
    AllowedCpus allowed(cpus);
    if (!allowed.ok()) {
      ASSERT_EQ(cpus, 2) << "cannot restrict this thread to one CPU";
      GTEST_SKIP() << "fewer than two CPUs allowed here";
    }
    size_t most = 0;
    const ReadMany got =
        ReadAll(files, ReadOptions{}, [&] { most = std::max(most, ThreadsNow()); });
    ASSERT_TRUE(got.ok) << got.error;
    EXPECT_TRUE(got.events == want.events);
    EXPECT_EQ(got.summary.events, want.summary.events);
    if (cpus == 1) {
      EXPECT_EQ(most, before);  // no thread started
    } else {
      EXPECT_GE(most, before + 2);  // the reader and one decoder (one core is the caller's)
    }
  }
}

// Read on the calling thread, one large file still says its progress while it is being read,
// not only when it is done.
TEST(ReadLogFilesTest, ProgressIsSaidWithinOneFileReadOnTheCallingThread) {
  TempDir dir;
  const std::vector<fs::path> files = LaunchFiles(dir, 1, 3000);
  ReadOptions options;
  options.sequential = true;
  const ReadMany got = ReadAll(files, options);
  ASSERT_TRUE(got.ok) << got.error;
  ASSERT_GE(got.progress.size(), 3u);
  const ReadProgress& during = got.progress[got.progress.size() / 2];
  EXPECT_EQ(during.files_done, 0u);
  EXPECT_GT(during.events, 0u);
  EXPECT_LT(during.events, got.events.size());
  for (size_t i = 1; i < got.progress.size(); ++i) {
    EXPECT_GE(got.progress[i].events, got.progress[i - 1].events);
  }
  EXPECT_EQ(got.progress.back().files_done, 1u);
  EXPECT_EQ(got.progress.back().events, got.events.size());
}

TEST(ProgressLineTest, SaysTheFileEventsAndRate) {
  ReadProgress p;
  p.files = 17;
  p.files_done = 3;
  p.bytes = uint64_t{1100} << 20;
  p.bytes_read = uint64_t{440} << 20;
  p.events = 2'300'000;
  p.seconds = 2;
  EXPECT_EQ(ProgressLine::Text("cuflight report", p),
            "cuflight report: reading file 4 of 17 (1.1 GB in all), 2.3 M events (1.1 M/s), 2 s");
  // Not a terminal (a string stream): never drawn.
  std::ostringstream err;
  ProgressLine line("cuflight report", err, 0);
  EXPECT_FALSE(static_cast<bool>(line.Callback()));
  line.Update(p);
  line.Done();
  EXPECT_EQ(err.str(), "");
}

}  // namespace
}  // namespace cuflight::logread
