// kill -9 of a process in the middle of appending, flushing, rotating and compressing: after
// each kill, Open in the test process must leave every file readable (each line parses as
// JSON), with no torn line, the seqs contiguous across segments and active file, and everything
// the killed process had flushed still there. (On kernels whose page cache copies a write in
// large folios, write(2) is rarely cut short by SIGKILL, so most rounds find no torn line; the
// trimming itself is covered by log_sink_recovery_test.cc.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "log_sink.h"
#include "log_sink_test_util.h"
#include "segment_names.h"

namespace cuflight::collector {
namespace {

using testing::ListFiles;
using testing::MakeLine;
using testing::ReadFile;
using testing::SplitLines;
using testing::TempDir;
using testing::ZstdDecompress;

const ProcessKey kKey{"node1", "train", 7, 0};  // 1970-01-01
constexpr uint64_t kRotateBytes = 1 << 20;

LogSinkOptions Options(const std::filesystem::path& dir) {
  LogSinkOptions options;
  options.dir = dir;
  options.rotate_bytes = kRotateBytes;
  options.fsync_interval = std::chrono::milliseconds(0);
  return options;
}

// The child: appends a batch of random lines, reports {appended, written} on `report_fd`, waits
// for a byte on `go_fd`, flushes (write(2), maybe a rotation), ticks, and so on until it is
// killed. The handshake lets the test process kill it at a known step: right after the go byte
// (inside Flush, most likely inside write(2)), or a random moment later.
[[noreturn]] void Producer(const std::filesystem::path& dir, int report_fd, int go_fd,
                           uint32_t seed) {
  std::string error;
  auto sink = LogSink::Open(Options(dir), &error);
  if (!sink) _exit(2);
  LogSink::Stream* s = sink->Acquire(kKey, &error);
  if (s == nullptr) _exit(3);
  const std::optional<uint64_t> highest = sink->highest_seq(s);
  uint64_t seq = highest ? *highest + 1 : 0;
  std::mt19937 rng(seed);
  // Large batches, so that write(2) takes long enough to be hit; the lines are built in place
  // (MakeLine's format) to keep appends cheap.
  const std::string pad(512, 'p');
  char line[640];
  for (;;) {
    const uint32_t lines = 1 + rng() % 2000;
    for (uint32_t i = 0; i < lines; ++i, ++seq) {
      const int n = std::snprintf(
          line, sizeof(line), "{\"type\":\"kernel\",\"version\":1,\"seq\":%llu,\"pad\":\"%.*s\"}\n",
          static_cast<unsigned long long>(seq), static_cast<int>(rng() % 400), pad.data());
      if (!sink->Append(s, seq, std::string_view(line, static_cast<size_t>(n)))) _exit(4);
    }
    const std::optional<uint64_t> written = sink->written_seq(s);
    const uint64_t report[2] = {seq, written ? *written + 1 : 0};  // counts, not seqs
    if (::write(report_fd, report, sizeof(report)) != sizeof(report)) _exit(5);
    char go = 0;
    if (::read(go_fd, &go, 1) != 1) _exit(6);
    sink->Flush();
    sink->Tick(std::chrono::system_clock::now());
    if (sink->written_seq(s) != seq - 1) _exit(7);
  }
}

// Checks every line of `text` (from `what`) and appends their seqs to *seqs.
void CheckLines(const std::string& text, const std::string& what, std::vector<uint64_t>* seqs) {
  ASSERT_TRUE(text.empty() || text.back() == '\n') << what << " ends in a torn line";
  for (const std::string& line : SplitLines(text)) {
    const nlohmann::json value = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(value.is_object()) << what << ": " << line;
    ASSERT_TRUE(value.contains("seq") && value["seq"].is_number_unsigned()) << what << ": " << line;
    seqs->push_back(value["seq"].get<uint64_t>());
  }
}

// Seqs 0..n-1 in order: *next is the first expected one, and is advanced past them.
void CheckContiguous(const std::vector<uint64_t>& seqs, const std::string& what, uint64_t* next) {
  for (uint64_t seq : seqs) {
    ASSERT_EQ(seq, *next) << what << ": seqs not contiguous";
    ++*next;
  }
}

TEST(LogSinkCrashTest, KillNineAtRandomMomentsLeavesEveryFileReadable) {
  TempDir tmp;
  const std::filesystem::path dir = tmp.path() / "log";
  const std::filesystem::path day = dir / "1970-01-01";
  const std::string base = "node1-train-7-0";
  std::random_device device;
  const uint32_t seed = device();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  uint64_t flushed_count = 0;  // lines the killed producers had written
  uint64_t torn_total = 0;
  uint64_t recompressed_total = 0;
  // Compressed segments already checked (they never change): index -> {size, line count}.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> checked;

  constexpr int kRounds = 8;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int report_pipe[2];
    int go_pipe[2];
    ASSERT_EQ(::pipe2(report_pipe, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(go_pipe, O_CLOEXEC), 0);
    const uint32_t child_seed = static_cast<uint32_t>(rng());
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(report_pipe[0]);
      ::close(go_pipe[1]);
      Producer(dir, report_pipe[1], go_pipe[0], child_seed);
    }
    ::close(report_pipe[1]);
    ::close(go_pipe[0]);
    const int batches = 1 + static_cast<int>(rng() % 8);
    const bool kill_in_flush = rng() % 2 == 0;
    const std::filesystem::path active = day / (base + ".jsonl");
    bool child_alive = true;
    uint64_t size_before_flush = 0;
    for (int i = 0; i < batches && child_alive; ++i) {
      uint64_t report[2];
      child_alive = ::read(report_pipe[0], report, sizeof(report)) == sizeof(report);
      std::error_code ec;
      size_before_flush = std::filesystem::file_size(active, ec);
      if (ec) size_before_flush = 0;
      child_alive = child_alive && ::write(go_pipe[1], "g", 1) == 1;
      flushed_count = std::max(flushed_count, report[1]);
    }
    if (kill_in_flush) {
      // Kill as soon as the last batch's Flush is visible (the file grew, or was rotated): inside
      // write(2) when it is slow enough, else in the rotation or just after it.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      for (;;) {
        std::error_code ec;
        const uint64_t size = std::filesystem::file_size(active, ec);
        if ((!ec && size != size_before_flush) || std::chrono::steady_clock::now() > deadline) {
          break;
        }
      }
    } else {
      const auto spin_until =
          std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 2000);
      while (std::chrono::steady_clock::now() < spin_until) {
      }
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ::close(report_pipe[0]);
    ::close(go_pipe[1]);
    ASSERT_TRUE(child_alive) << "the producer exited early, status " << status;
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;

    std::string error;
    auto sink = LogSink::Open(Options(dir), &error);
    ASSERT_NE(sink, nullptr) << error;
    sink->FinishBackgroundWork();
    EXPECT_LE(sink->stats().torn_lines_trimmed, 1u);  // only the active file can be torn
    torn_total += sink->stats().torn_lines_trimmed;
    recompressed_total += sink->stats().segments_compressed;

    // Only compressed segments 1..N and the active file; every line of them parses.
    std::map<uint64_t, std::filesystem::path> segments;
    bool active_seen = false;
    for (const std::string& rel : ListFiles(dir)) {
      const std::filesystem::path path = dir / rel;
      ASSERT_EQ(path.parent_path(), day) << rel;
      const logstore::ParsedLogFileName parsed =
          logstore::ParseLogFileName(path.filename().string());
      ASSERT_EQ(parsed.base, base) << rel;
      if (parsed.kind == logstore::LogFileKind::kCompressedSegment) {
        segments[parsed.index] = path;
      } else {
        ASSERT_EQ(parsed.kind, logstore::LogFileKind::kActive) << "leftover " << rel;
        active_seen = true;
      }
    }
    uint64_t next = 0;
    uint64_t expected_index = 1;
    for (const auto& [index, path] : segments) {
      ASSERT_EQ(index, expected_index++) << "segment numbers have a gap";
      const uint64_t size = std::filesystem::file_size(path);
      const auto known = checked.find(index);
      if (known != checked.end() && known->second.first == size) {
        next += known->second.second;
        continue;
      }
      std::vector<uint64_t> seqs;
      ASSERT_NO_FATAL_FAILURE(CheckLines(ZstdDecompress(path), path.filename().string(), &seqs));
      ASSERT_FALSE(seqs.empty()) << path;
      ASSERT_NO_FATAL_FAILURE(CheckContiguous(seqs, path.filename().string(), &next));
      checked[index] = {size, seqs.size()};
    }
    if (active_seen) {
      std::vector<uint64_t> seqs;
      ASSERT_NO_FATAL_FAILURE(CheckLines(ReadFile(day / (base + ".jsonl")), "active", &seqs));
      ASSERT_NO_FATAL_FAILURE(CheckContiguous(seqs, "active", &next));
    }
    ASSERT_GE(next, flushed_count) << "flushed lines were lost";

    // The highest seq is recovered, and appends continue on a line boundary.
    LogSink::Stream* s = sink->Acquire(kKey, &error);
    ASSERT_NE(s, nullptr) << error;
    if (next == 0) {
      EXPECT_EQ(sink->highest_seq(s), std::nullopt);
    } else {
      EXPECT_EQ(sink->highest_seq(s), next - 1);
    }
    sink->Release(s);
  }
  // How often the kills hit a write (torn line) or a rotation/compression (segment compressed
  // by Open): informational, the moments are random.
  RecordProperty("torn_lines_trimmed", static_cast<int>(torn_total));
  RecordProperty("segments_compressed_on_open", static_cast<int>(recompressed_total));
  std::printf("kills: %d, torn lines trimmed: %llu, segments compressed on open: %llu\n", kRounds,
              static_cast<unsigned long long>(torn_total),
              static_cast<unsigned long long>(recompressed_total));
}

}  // namespace
}  // namespace cuflight::collector
