// `cuflight report` through RunCli on a job of 32 ranks that all crashed alike after two failed
// launches each: the findings open the report (in its first 25 lines), the ranks are one block
// in the review, each one's detail one flag away (--per-process, --pid), and the failed launches
// are said with their first instance.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "report_cli_run.h"
#include "report_test_events.h"
#include "temp_dir.h"

namespace cuflight::report {
namespace {

using nlohmann::json;
using schema::Resource;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ApiError;
using testing::CliRun;
using testing::Device;
using testing::Fields;
using testing::Kernel;
using testing::KernelSpec;
using testing::KernelTime;
using testing::Line;
using testing::Report;
using testing::Start;
using testing::WriteFile;
using test_support::TempDir;

constexpr int64_t kStart = 1763708400000000000;  // 2025-11-21T07:00:00Z
constexpr int64_t kMs = 1000000;
constexpr int64_t kSecond = 1000 * kMs;
constexpr int kRanks = 32;
constexpr int32_t kFirstPid = 5000;
constexpr int kFirstToFail = 17;  // crashes at 07:00:05, every other rank at 07:00:10 and after

KernelSpec Gemm() {
  KernelSpec k;
  k.name = "_Z4gemmILi2EEvPfi";
  k.demangled = "void gemm<2>(float*, int)";
  k.block = {256, 1, 1};
  k.regs = 64;
  k.stream = 7;
  k.occupancy = Fields(6, 8, 64, Resource::kRegisters);  // 6 blocks x 8 warps / 64 = 75%
  k.occupancy.regs_for_next_block = 32;
  return k;
}

KernelSpec Reduce() {
  KernelSpec k;
  k.name = "_Z6reducePf";
  k.demangled = "reduce(float*)";
  k.block = {128, 1, 1};
  k.regs = 16;
  k.stream = 7;
  k.occupancy = Fields(16, 4, 64, Resource::kWarps);  // 16 x 4 / 64 = 100%
  return k;
}

// Rank r: pid 5000 + r on node(r / 8), started r ms after kStart; three gemm launches of 1 ms
// (seqs 2, 4, 6, corr 1..3) and two reduce launches of 150 us (seqs 8, 10, corr 4, 5), each
// timed; cuLaunchKernel returned CUDA_ERROR_INVALID_VALUE (1) at start + 1 s (seq 12) and
// start + 2 s (seq 13), the last CUDA activity; then SIGSEGV (seq 14) in thread pid + 1.
std::string Rank(int r) {
  const int32_t pid = kFirstPid + r;
  const int64_t start = kStart + r * kMs;
  schema::OwnedProcessStartEvent s = Start(pid, 0, start, "/usr/bin/python3");
  s.hostname = "node" + std::to_string(r / 8);
  s.attribution = {{"job", "j7"}, {"rank", std::to_string(r)}, {"world_size", "32"}};
  std::string out = Line(s) + Line(Device(pid, 1, 0, "NVIDIA A100"));
  uint64_t seq = 2;
  for (uint64_t c = 1; c <= 5; ++c) {
    const bool gemm = c <= 3;
    out += Line(Kernel(pid, seq++, start + static_cast<int64_t>(c) * 100 * kMs, c,
                       gemm ? Gemm() : Reduce()));
    out += Line(KernelTime(pid, seq++, c, gemm ? 1000000 : 150000, 7));
  }
  for (int k = 1; k <= 2; ++k) {
    schema::OwnedApiErrorEvent e =
        ApiError(pid, seq++, "cuLaunchKernel", "CUDA_ERROR_INVALID_VALUE", 1, {5});
    e.header.ts_ns = start + k * kSecond;
    e.message = "invalid argument";
    e.stream = 7;
    out += Line(e);
  }
  schema::OwnedProcessCrashEvent crash;
  crash.header = {r == kFirstToFail ? kStart + 5 * kSecond : kStart + 10 * kSecond + r * kMs, pid,
                  seq++};
  crash.signal = 11;
  crash.signal_name = "SIGSEGV";
  crash.code = 1;
  crash.addr = 0x10;
  crash.tid = pid + 1;
  crash.emitted = seq;
  return out + Line(crash);
}

class ThirtyTwoCrashedRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int r = 0; r < kRanks; ++r) {
      WriteFile(dir_.path() / ("rank" + std::to_string(r) + ".jsonl"), Rank(r));
    }
  }
  CliRun Run(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {dir_.path().string(), "--color", "never"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Report(args);
  }
  TempDir dir_;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The lines [from, to) with each wrapped line joined to the one before it (a continuation line
// starts with more spaces than a finding), so a sentence reads whole.
std::string Joined(const std::vector<std::string>& lines, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to && i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const size_t text = line.find_first_not_of(' ');
    if (text == std::string::npos) {
      out += "\n";
      continue;
    }
    out += (text >= 6 && !out.empty() ? " " : "\n") + line.substr(text);
  }
  return out;
}

// The review section's lines: from its title to the kernel table's.
std::vector<std::string> ReviewLines(const std::vector<std::string>& lines) {
  std::vector<std::string> review;
  bool in = false;
  for (const std::string& line : lines) {
    if (line.starts_with("Processes that did not end normally")) in = true;
    if (line.starts_with("Kernels by")) break;
    if (in) review.push_back(line);
  }
  return review;
}

TEST_F(ThirtyTwoCrashedRanks, TheFindingsOpenTheReportInItsFirst25Lines) {
  const CliRun r = Run();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  for (const std::string& line : lines) EXPECT_LE(line.size(), 120u) << line;
  ASSERT_GE(lines.size(), 25u);
  // The header (two lines at 120 columns), a blank line, the findings.
  EXPECT_EQ(lines[3], "Findings") << r.out;
  const std::string top = Joined(lines, 0, 25);
  // What died: all 32 alike (the thread differs, so it is not said), the first to fail first:
  // rank 17 at 07:00:05.000, its last launch reduce (seq 10, 150 us, timed).
  EXPECT_THAT(top, HasSubstr("\n32 processes: crash: SIGSEGV (signal 11, code 1) at 0x10; its "
                             "last CUDA call failed: cuLaunchKernel returned "
                             "CUDA_ERROR_INVALID_VALUE (1): invalid argument\n"))
      << top;
  EXPECT_THAT(top, HasSubstr("\nthe first to fail: pid 5017 python3 (job j7, rank 17) on node2, "
                             "at 07:00:05.000 UTC; its last kernel launched: reduce(float*) "
                             "(device 0, stream 7, seq 10): finished in 150us\n"))
      << top;
  EXPECT_THAT(top, HasSubstr("\n\u00d7 31 more, the same: pids 5000-5016, 5018-5031 (ranks 0-16, "
                             "18-31)\n"))
      << top;
  // The failed launches: 2 in each of 32 processes; the first is rank 0's at start + 1 s.
  EXPECT_THAT(top, HasSubstr("\n64 failed launches in 32 processes: a launch that returns an "
                             "error runs nothing"))
      << top;
  EXPECT_THAT(top, HasSubstr("\ncuLaunchKernel returned CUDA_ERROR_INVALID_VALUE (1): 64 in 32 "
                             "processes; the first: pid 5000 python3 (job j7, rank 0) on node0 "
                             "at 07:00:01.000 UTC, seq 12, device 0, stream 7: invalid "
                             "argument\n"))
      << top;
  // Where the GPU time goes: gemm 32 x 3 x 1 ms = 96.0 ms of 32 x 3.3 ms = 105.6 ms (91%),
  // reduce 32 x 2 x 150 us = 9.60 ms (9.1%); gemm's advice (6 blocks/SM by registers) under it.
  EXPECT_THAT(top, HasSubstr("Top kernels by GPU time (106ms measured in all):")) << top;
  size_t gemm = 0;
  size_t reduce = 0;
  for (size_t i = 3; i < 25 && !lines[i].empty(); ++i) {  // the findings, to their blank line
    if (lines[i].find("gemm<2>") != std::string::npos) gemm = i;
    if (lines[i].find("reduce(float*)") != std::string::npos &&
        lines[i].find("last kernel") == std::string::npos && i > gemm && gemm > 0) {
      reduce = i;
    }
  }
  ASSERT_GT(gemm, 0u) << top;
  ASSERT_GT(reduce, gemm) << top;
  EXPECT_THAT(lines[gemm], ::testing::ContainsRegex("^ +91% +96\\.0ms +75% +regs +.*gemm<2>"));
  EXPECT_THAT(lines[reduce], ::testing::ContainsRegex("^ +9\\.1% +9\\.60ms +100% +none +"));
  EXPECT_THAT(Joined(lines, gemm + 1, reduce), HasSubstr("registers limit 6 blocks/SM"));
}

TEST_F(ThirtyTwoCrashedRanks, TheRanksAreOneBlockAndEachOneFlagAway) {
  const std::vector<std::string> review = ReviewLines(Lines(Run().out));
  ASSERT_FALSE(review.empty());
  EXPECT_EQ(review[0], "Processes that did not end normally or stalled (32)");
  std::vector<std::string> heads;
  for (const std::string& line : review) {
    if (line.starts_with("  pid ")) heads.push_back(line);
  }
  // Only the first to fail in full, the tid in its own line; the 31 others by pid.
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_THAT(heads[0], ::testing::StartsWith("  pid 5017 python3 (job j7, rank 17) on node2: "
                                              "crash: SIGSEGV (signal 11, code 1) in thread 5018"));
  EXPECT_THAT(review, ::testing::Contains("  \u00d7 31 more, the same: pids 5000-5016, 5018-5031"));
  // Its stream's 5 launches, by SEQ and CORR.
  EXPECT_THAT(review, ::testing::Contains(::testing::MatchesRegex(
                          " +SEQ +CORR +GRID +BLOCK +OCC +FINISHED +KERNEL")));

  // --per-process: every rank in full, the first to fail first, then by failure (rank order).
  const std::vector<std::string> all = ReviewLines(Lines(Run({"--per-process"}).out));
  std::vector<std::string> pids;
  for (const std::string& line : all) {
    if (line.starts_with("  pid ")) pids.push_back(line.substr(6, 4));
  }
  ASSERT_EQ(pids.size(), 32u);
  EXPECT_EQ(pids[0], "5017");
  EXPECT_EQ(pids[1], "5000");
  EXPECT_EQ(pids[31], "5031");
  EXPECT_THAT(Joined(all, 0, all.size()), Not(HasSubstr("more, the same")));

  // --pid: that one process, its findings and its review.
  const CliRun one = Run({"--pid", "5003"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::string text = Joined(Lines(one.out), 0, 25);
  EXPECT_THAT(text, HasSubstr("\npid 5003 python3 (job j7, rank 3) on node0: crash: SIGSEGV"));
  EXPECT_THAT(text, HasSubstr("\n2 failed launches in 1 process: "));
  EXPECT_THAT(one.out, HasSubstr("  pid 5003 python3 (job j7, rank 3) on node0: crash: SIGSEGV "
                                 "(signal 11, code 1) in thread 5004 at 0x10"));
}

TEST_F(ThirtyTwoCrashedRanks, TheJsonHasTheFindings) {
  const CliRun r = Run({"--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& f = j["findings"];
  ASSERT_EQ(f["review_groups"].size(), 1u);
  const json& group = f["review_groups"][0];
  ASSERT_EQ(group["pids"].size(), 32u);
  EXPECT_EQ(group["pids"][0], 5017);
  EXPECT_EQ(group["first_failed_ns"], kStart + 5 * kSecond);
  EXPECT_EQ(f["failed_launch_count"], 64);
  EXPECT_EQ(f["failed_launch_processes"], 32);
  ASSERT_EQ(f["failed_launches"].size(), 1u);
  EXPECT_EQ(f["failed_launches"][0]["first"]["pid"], 5000);
  EXPECT_EQ(f["failed_launches"][0]["first"]["seq"], 12);
  EXPECT_EQ(f["failed_launches"][0]["first"]["ts_ns"], kStart + kSecond);
  EXPECT_EQ(f["failed_calls"].size(), 0u);
  ASSERT_EQ(f["top_kernels"].size(), 2u);
  EXPECT_EQ(f["top_kernels"][0]["gpu_time_ns"], 96000000);
  EXPECT_EQ(f["top_kernels"][1]["gpu_time_ns"], 9600000);
  for (const json& p : j["processes"]) {
    ASSERT_EQ(p["failed_calls"].size(), 1u) << p["pid"];
    EXPECT_EQ(p["failed_calls"][0]["count"], 2);
    EXPECT_EQ(p["failed_calls"][0]["launch"], true);
    EXPECT_EQ(p["failed_calls"][0]["first"]["seq"], 12);
  }
}

// Processes that failed differently are blocks of their own, the first to fail first; a failed
// call that is not a launch is said apart from failed launches.
TEST(ReportFindings, DifferentFailuresAreBlocksOfTheirOwnInTheOrderTheyFailed) {
  TempDir dir;
  // pid 100: SIGABRT at kStart + 3 s; pid 101 and 102: SIGSEGV at kStart + 2 s and + 4 s; pid 103:
  // cuMemAlloc returned CUDA_ERROR_OUT_OF_MEMORY (2) as its last call at kStart + 1 s.
  auto crashed = [&](int32_t pid, int signal, const char* name, int64_t at) {
    std::string s = Line(Start(pid, 0, kStart)) + Line(Device(pid, 1, 0, "NVIDIA A100"));
    s += Line(Kernel(pid, 2, kStart + kMs, 1, Gemm()));
    schema::OwnedProcessCrashEvent crash;
    crash.header = {at, pid, 3};
    crash.signal = signal;
    crash.signal_name = name;
    crash.tid = pid;
    crash.emitted = 4;
    return s + Line(crash);
  };
  WriteFile(dir.path() / "a.jsonl", crashed(100, 6, "SIGABRT", kStart + 3 * kSecond));
  WriteFile(dir.path() / "b.jsonl", crashed(101, 11, "SIGSEGV", kStart + 2 * kSecond));
  WriteFile(dir.path() / "c.jsonl", crashed(102, 11, "SIGSEGV", kStart + 4 * kSecond));
  std::string d = Line(Start(103, 0, kStart)) + Line(Device(103, 1, 0, "NVIDIA A100"));
  d += Line(Kernel(103, 2, kStart + kMs, 1, Gemm()));
  schema::OwnedApiErrorEvent oom =
      ApiError(103, 3, "cuMemAlloc_v2", "CUDA_ERROR_OUT_OF_MEMORY", 2, {1});
  oom.header.ts_ns = kStart + kSecond;
  oom.message = "out of memory";
  d += Line(oom);
  WriteFile(dir.path() / "d.jsonl", d);

  const CliRun r = Report({dir.path().string(), "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  const std::string text = Joined(lines, 0, lines.size());
  const size_t oom_line = text.find("\npid 103 trainer on node1: api_error: cuMemAlloc_v2 returned "
                                    "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory\n");
  const size_t segv = text.find("\n2 processes: crash: SIGSEGV (signal 11, code 0)\n");
  const size_t abrt = text.find("\npid 100 trainer on node1: crash: SIGABRT (signal 6, code 0)\n");
  ASSERT_NE(oom_line, std::string::npos) << text;
  ASSERT_NE(segv, std::string::npos) << text;
  ASSERT_NE(abrt, std::string::npos) << text;
  EXPECT_LT(oom_line, segv);  // 07:00:01, then 07:00:02 (pid 101 first of the two), 07:00:03
  EXPECT_LT(segv, abrt);
  EXPECT_THAT(text, HasSubstr("\nthe first to fail: pid 101 trainer on node1, at 07:00:02.000 UTC"));
  EXPECT_THAT(text, HasSubstr("\n\u00d7 1 more, the same: pid 102\n"));
  // Not a launch: a failed call, not a failed launch.
  EXPECT_THAT(text, Not(HasSubstr("failed launch")));
  EXPECT_THAT(text, HasSubstr("\n1 failed call:\ncuMemAlloc_v2 returned CUDA_ERROR_OUT_OF_MEMORY "
                              "(2): 1 in 1 process; the first: pid 103 trainer on node1 at "
                              "07:00:01.000 UTC, seq 3, device 0, stream 0: out of memory\n"));
}

}  // namespace
}  // namespace cuflight::report
