// `cuflight report` through RunCli on hand-written logs: the header and notes, the review section
// (api_error), bad input, filters, sorting, JSON and CSV, several device models, --retarget
// against the occupancy engine called here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <cctype>
#include <set>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"
#include "report_cli_run.h"
#include "report_test_events.h"
#include "temp_dir.h"
#include "usage_error.h"

namespace cuflight::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using schema::Resource;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing::ApiError;
using testing::Device;
using testing::End;
using testing::Fields;
using testing::Kernel;
using testing::KernelSpec;
using testing::KernelTime;
using testing::Line;
using testing::CliRun;
using testing::Report;
using testing::Start;
using testing::WriteFile;


using test_support::TempDir;

constexpr int32_t kPid = 100;
constexpr int64_t kStart = 1763708400000000000;  // 2025-11-21T07:00:00Z

KernelSpec Gemm() {
  KernelSpec k;
  k.name = "_Z4gemmILi2EEvPfi";
  k.demangled = "void gemm<2>(float*, int)";
  k.block = {256, 1, 1};
  k.regs = 64;
  k.occupancy = Fields(6, 8, 64, Resource::kRegisters);
  k.occupancy.regs_for_next_block = 32;
  return k;
}

KernelSpec Reduce() {
  KernelSpec k;
  k.name = "_Z6reducePf";
  k.demangled = "reduce(float*)";
  k.block = {128, 1, 1};
  k.regs = 16;
  k.dyn_smem = 48 * 1024;
  k.occupancy = Fields(3, 4, 64, Resource::kSharedMem);
  k.occupancy.smem_for_next_block = 40 * 1024;
  return k;
}

// One process: 4 gemm launches timed 100..400 us, 2 reduce launches (one timed 50 us), ending
// normally.
std::string NormalProcess(int32_t pid, int64_t start) {
  std::string s = Line(Start(pid, 0, start)) + Line(Device(pid, 1, 0, "NVIDIA A100"));
  uint64_t seq = 2;
  for (uint64_t i = 1; i <= 4; ++i) {
    s += Line(Kernel(pid, seq++, start + static_cast<int64_t>(i) * 1000000000, i, Gemm()));
    s += Line(KernelTime(pid, seq++, i, i * 100000));
  }
  s += Line(Kernel(pid, seq++, start + 5000000000, 5, Reduce()));
  s += Line(KernelTime(pid, seq++, 5, 50000));
  s += Line(Kernel(pid, seq++, start + 6000000000, 6, Reduce()));
  s += Line(End(pid, seq++, 0));
  return s;
}

TEST(ReportCli, TableHeaderAdviceAndNoReview) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess(kPid, kStart));
  const CliRun r = Report({dir.path().string(), "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // 12 events: start, device, 4 x (kernel, time), 2 reduce, 1 time, end.
  EXPECT_THAT(r.out, StartsWith("cuflight report: 1 file, 14 events, 1 process, 6 launches (5 "
                                "timed) in 2 kernel signatures\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("did not end normally")));
  // The advice (advice_test.cc has its rules), wrapped at 120 columns under its "  > ".
  EXPECT_THAT(r.out, HasSubstr("\n  > 75% occupancy (probably enough); registers limit 6 "
                               "blocks/SM; if latency-bound, <= 32 regs/thread would fit 7 (88%):"
                               "\n    __launch_bounds__(256, 7) or -maxrregcount=32 (fewer registers "
                               "can spill to local memory; check ptxas -v)\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  > 19% occupancy (low, likely latency-bound); 48 KiB "
                               "smem/block limits 3 blocks/SM; <= 40 KiB/block would fit 4 (25%):"
                               "\n    less dynamic shared memory (smaller tiles)\n"));
  // gemm first (1 ms in all = 100+200+300+400 us), then reduce (50 us).
  EXPECT_LT(r.out.find("gemm<2>"), r.out.find("reduce"));
  EXPECT_THAT(r.out, HasSubstr("1.00ms"));
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos);
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 120u) << line;
}

TEST(ReportCli, AProcessInASpillFileAndACollectorLogIsCountedOnce) {
  // The same process's stream in two places, overlapping: the collector log holds seqs 0..9,
  // the spill file (written while the collector was away, preamble first) seqs 0..13.
  TempDir dir;
  const std::string stream = NormalProcess(kPid, kStart);
  std::vector<std::string> lines;
  std::istringstream in(stream);
  for (std::string line; std::getline(in, line);) lines.push_back(line + "\n");
  ASSERT_EQ(lines.size(), 14u);
  std::string first_ten;
  for (size_t i = 0; i < 10; ++i) first_ten += lines[i];
  const std::string name = "host-app-" + std::to_string(kPid) + "-" + std::to_string(kStart) +
                           ".jsonl";
  WriteFile(dir.path() / "collector" / "2025-11-21" / name, first_ten);
  WriteFile(dir.path() / "spill" / "2025-11-21" / name, stream);
  const CliRun r = Report({dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["read"]["duplicate_events"], 10);
  ASSERT_EQ(j["processes"].size(), 1u);
  EXPECT_EQ(j["processes"][0]["kernels"], 6);  // 4 gemm + 2 reduce, not 4 more from the copy
  EXPECT_EQ(j["totals"]["launches"], 6);
  EXPECT_EQ(j["totals"]["timed_launches"], 5);
  const CliRun table = Report({dir.path().string(), "--color", "never"});
  EXPECT_THAT(table.out, HasSubstr("note: 10 events read twice"));
}

// timing_dropped per process: process_end's when there is one, else the latest stats' (by seq,
// whatever the order read), 0 for a log written before the field.
TEST(ReportCli, JsonHasTheTimingRecordsEachProcessLost) {
  TempDir dir;
  auto stats = [](int32_t pid, uint64_t seq, uint64_t timing_dropped) {
    schema::OwnedStatsEvent e;
    e.header = {3, pid, seq};
    e.ring_capacity = 64;
    e.interval_ns = 1000;
    e.timing_dropped = timing_dropped;
    return e;
  };
  schema::OwnedProcessEndEvent end = End(101, 4, 0);
  end.timing_dropped = 5;
  WriteFile(dir.path() / "a.jsonl", Line(Start(101, 0, kStart)) + Line(stats(101, 1, 2)) +
                                        Line(stats(101, 2, 3)) + Line(end));
  WriteFile(dir.path() / "b.jsonl", Line(Start(102, 0, kStart)) + Line(stats(102, 3, 4)) +
                                        Line(stats(102, 2, 7)));  // still running
  std::string old = Line(End(103, 1, 0));
  const std::string field = R"(,"timing_dropped":0)";
  ASSERT_NE(old.find(field), std::string::npos) << old;
  old.erase(old.find(field), field.size());
  WriteFile(dir.path() / "c.jsonl", Line(Start(103, 0, kStart)) + old);
  const CliRun r = Report({dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  std::map<int, uint64_t> timing_dropped;  // pid -> the process's value
  for (const json& p : j["processes"]) {
    timing_dropped[p["pid"].get<int>()] = p["timing_dropped"].get<uint64_t>();
    EXPECT_EQ(p["dropped"], 0);
  }
  EXPECT_EQ(timing_dropped, (std::map<int, uint64_t>{{101, 5}, {102, 4}, {103, 0}}));
}

// Kernel timing that stopped in a process is said in the table (one note per process naming the
// cause and the count) and in the JSON; a process whose timing did not stop gets no note.
TEST(ReportCli, TimingThatStoppedIsSaidPerProcess) {
  TempDir dir;
  schema::OwnedStatsEvent stats;
  stats.header = {3, 201, 1};
  stats.ring_capacity = 64;
  stats.interval_ns = 1000;
  stats.timing_stopped = 4096;
  stats.timing_stopped_reason = schema::TimingStoppedReason::kRecordsStopped;
  WriteFile(dir.path() / "a.jsonl", Line(Start(201, 0, kStart)) + Line(stats));  // running
  schema::OwnedProcessEndEvent end = End(202, 1, 0);
  end.timing_stopped = 1;
  end.timing_stopped_reason = schema::TimingStoppedReason::kUnavailable;
  WriteFile(dir.path() / "b.jsonl", Line(Start(202, 0, kStart)) + Line(end));
  WriteFile(dir.path() / "c.jsonl", Line(Start(203, 0, kStart)) + Line(End(203, 1, 0)));
  const CliRun table = Report({dir.path().string(), "--color", "never"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("kernel timing records stopped arriving while launches went on"));
  EXPECT_THAT(table.out, HasSubstr("4096 launches have no GPU time"));
  EXPECT_THAT(table.out, HasSubstr("kernel timing was unavailable"));
  EXPECT_THAT(table.out, HasSubstr("1 launch has no GPU time"));
  EXPECT_EQ(table.out.find("pid 203"), std::string::npos) << table.out;
  const CliRun r = Report({dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int, std::pair<uint64_t, std::string>> stopped;  // pid -> count, reason
  const json j = json::parse(r.out);
  for (const json& p : j["processes"]) {
    stopped[p["pid"].get<int>()] = {p["timing_stopped"].get<uint64_t>(),
                                    p["timing_stopped_reason"].get<std::string>()};
  }
  EXPECT_EQ(stopped, (std::map<int, std::pair<uint64_t, std::string>>{
                         {201, {4096, "records_stopped"}},
                         {202, {1, "unavailable"}},
                         {203, {0, ""}}}));
}

TEST(ReportCli, JsonHasEveryNumberFromHandCalculation) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess(kPid, kStart));
  const CliRun r = Report({dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["read"]["events"], 14);
  ASSERT_EQ(j["processes"].size(), 1u);
  EXPECT_EQ(j["processes"][0]["pid"], kPid);
  EXPECT_EQ(j["processes"][0]["ending"], "ended");
  EXPECT_EQ(j["processes"][0]["kernels"], 6);
  EXPECT_EQ(j["processes"][0]["timed_kernels"], 5);
  EXPECT_TRUE(j["review"].empty());
  ASSERT_EQ(j["signatures"].size(), 2u);
  const json& gemm = j["signatures"][0];
  EXPECT_EQ(gemm["demangled"], "void gemm<2>(float*, int)");
  EXPECT_EQ(gemm["launches"], 4);
  // 100, 200, 300, 400 us: total 1000 us, mean 250 us, p50 rank 2 = 200 us, p99 rank 4 = 400 us.
  EXPECT_EQ(gemm["gpu_time"]["total_ns"], 1000000);
  EXPECT_EQ(gemm["gpu_time"]["mean_ns"], 250000.0);
  EXPECT_EQ(gemm["gpu_time"]["p50_ns"], 200000);
  EXPECT_EQ(gemm["gpu_time"]["p99_ns"], 400000);
  EXPECT_EQ(gemm["gpu_time"]["percentiles_exact"], true);  // 4 durations: kept exactly
  EXPECT_EQ(gemm["occupancy"], 0.75);
  EXPECT_EQ(gemm["limiting_resource"], "registers");
  EXPECT_EQ(gemm["resources"]["registers"]["blocks_per_sm"], 6);
  EXPECT_EQ(gemm["what_if"]["regs_for_next_block"], 32);
  EXPECT_EQ(gemm["spills"], false);
  const json& reduce = j["signatures"][1];
  EXPECT_EQ(reduce["launches"], 2);
  EXPECT_EQ(reduce["timed_launches"], 1);
  EXPECT_EQ(reduce["gpu_time"]["p99_ns"], 50000);
  EXPECT_EQ(j["totals"]["launches"], 6);
  EXPECT_EQ(j["totals"]["timed_launches"], 5);
}

TEST(ReportCli, UntimedSignatureIsSaid) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "GPU"));
  s += Line(Kernel(kPid, 2, kStart, 1, Gemm()));
  WriteFile(dir.path() / "a.jsonl", s);
  CliRun r = Report({dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("note: no launch was timed"));
  EXPECT_THAT(r.out, HasSubstr("-: no launch of the signature was timed"));
  r = Report({dir.path().string(), "--json"});
  EXPECT_TRUE(json::parse(r.out)["signatures"][0]["gpu_time"].is_null());
}

TEST(ReportCli, TornAndRejectedLinesAreSaidAndSkipped) {
  TempDir dir;
  const fs::path file = dir.path() / "a.jsonl";
  std::string s = NormalProcess(kPid, kStart);
  // A rejected line after the process_start, and a torn last line.
  const size_t first_nl = s.find('\n');
  s.insert(first_nl + 1, "{\"type\":\"kernel\",\"version\":1,\"ts_ns\":1,\"pid\":100,\"seq\":99}\n");
  s += "{\"type\":\"stats\",\"vers";
  WriteFile(file, s);
  const CliRun r = Report({file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("note: rejected line 2 in " + file.string() + ": missing_field: "));
  EXPECT_THAT(r.out, HasSubstr("note: torn last line 16 skipped in " + file.string()));
  const json j = json::parse(Report({file.string(), "--json"}).out);
  EXPECT_EQ(j["read"]["torn_lines"], 1);
  EXPECT_EQ(j["read"]["rejected_lines"], 1);
  EXPECT_EQ(j["totals"]["launches"], 6);
}

TEST(ReportCli, ApiErrorProcessIsReviewedFirstWithItsLastLaunches) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "GPU"));
  KernelSpec on_stream = Gemm();
  on_stream.stream = 7;
  s += Line(Kernel(kPid, 2, kStart + 1, 11, on_stream));
  s += Line(KernelTime(kPid, 3, 11, 1000, 7));
  s += Line(Kernel(kPid, 4, kStart + 2, 12, on_stream));
  s += Line(ApiError(kPid, 5, "cuStreamSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", 700, {11, 12}));
  s += Line(End(kPid, 6, 1));
  WriteFile(dir.path() / "a.jsonl", s);
  WriteFile(dir.path() / "b.jsonl", NormalProcess(kPid + 1, kStart));
  const CliRun r = Report({dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t review = r.out.find("Processes that did not end normally or stalled (1)");
  ASSERT_NE(review, std::string::npos) << r.out;
  EXPECT_LT(review, r.out.find("Kernels by total GPU time"));
  EXPECT_THAT(r.out, HasSubstr("pid 100 trainer on node1: api_error: cuStreamSynchronize returned "
                               "CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
  EXPECT_THAT(r.out, HasSubstr("device 0, stream 7: 2 launches:"));
  // Both launches are named by the sticky error, but 11 finished: it did not fail. 12 has no
  // kernel_time after the process's exit flush (process_end, no timing record lost): it did not
  // finish, stopped by the error.
  EXPECT_THAT(r.out, HasSubstr("  yes 1.00us  "));
  EXPECT_THAT(r.out, Not(HasSubstr("yes 1.00us (")));
  EXPECT_THAT(r.out, HasSubstr("  NO (failed)  "));

  const json j = json::parse(Report({dir.path().string(), "--json"}).out);
  ASSERT_EQ(j["review"].size(), 1u);
  const json& p = j["review"][0];
  EXPECT_EQ(p["pid"], kPid);
  EXPECT_EQ(p["ending"], "api_error");
  ASSERT_EQ(p["streams"].size(), 1u);
  const json& launches = p["streams"][0]["last_launches"];
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0]["finished"], true);
  EXPECT_EQ(launches[0]["duration_ns"], 1000);
  EXPECT_EQ(launches[0]["in_failed_call"], false);
  EXPECT_EQ(launches[1]["finished"], false);
  EXPECT_EQ(launches[1]["in_failed_call"], true);
}

// A stall event as the injector sends it: `streams` of (device, stream, [(corr, name, age ms)]).
struct StallStreamSpec {
  int32_t device;
  uint64_t stream;
  std::vector<std::tuple<uint64_t, std::string, int64_t>> launches;
};
schema::OwnedStallEvent StallEvent(int32_t pid, uint64_t seq, schema::StallState state,
                                   int64_t stalled_ms,
                                   const std::vector<StallStreamSpec>& streams) {
  schema::OwnedStallEvent e;
  e.header = {kStart + static_cast<int64_t>(seq), pid, seq};
  e.state = state;
  e.stall_ms = 10000;
  e.stalled_ms = stalled_ms;
  e.streams_stalled = static_cast<int32_t>(streams.size());
  for (const StallStreamSpec& spec : streams) {
    schema::OwnedStallStream& s = e.streams.emplace_back();
    s.device = spec.device;
    s.stream = spec.stream;
    s.context = 1;
    s.waiting_ms = stalled_ms;
    s.unfinished = static_cast<int64_t>(spec.launches.size());
    for (const auto& [corr, name, age] : spec.launches) {
      schema::OwnedStallLaunch& l = s.launches.emplace_back();
      l.correlation_id = corr;
      l.demangled = name;
      l.grid = {1, 1, 1};
      l.block = {32, 1, 1};
      l.occupancy = 0.5;
      l.age_ms = age;
    }
  }
  return e;
}

// Stalled processes come first in the review, with what each waits on; then the others that did
// not end normally, and a process whose stall resolved, in pid order.
TEST(ReportCli, StalledProcessesAreReviewedFirstWithWhatTheyWaitOn) {
  TempDir dir;
  // pid 100: an api_error (reviewed, not stalled) at kStart + 3 ns, after pid 101's stall began
  // (42 s before its last stall event at kStart + 6 ns): the first to fail comes first.
  std::string a = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "GPU"));
  a += Line(Kernel(kPid, 2, kStart + 1, 11, Gemm()));
  schema::OwnedApiErrorEvent failed =
      ApiError(kPid, 3, "cuStreamSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", 700, {11});
  failed.header.ts_ns = kStart + 3;
  a += Line(failed);
  WriteFile(dir.path() / "a.jsonl", a);
  // pid 101: stalled twice, the first resolved; still stalled when its log ends.
  const int32_t hung = kPid + 1;
  std::string b = Line(Start(hung, 0, kStart)) + Line(Device(hung, 1, 0, "GPU"));
  b += Line(Kernel(hung, 2, kStart + 1, 21, Gemm()));
  b += Line(StallEvent(hung, 3, schema::StallState::kStalled, 10500,
                       {{0, 0x10, {{21, "gemm(float*)", 10500}}}}));
  b += Line(StallEvent(hung, 4, schema::StallState::kResolved, 12000, {}));
  b += Line(StallEvent(hung, 5, schema::StallState::kStalled, 10000,
                       {{0, 0x10, {{31, "spin(int volatile*)", 10000}, {32, "step(float*)", 9990}}},
                        {1, 0x20, {{33, "reduce(float*)", 10000}}}}));
  b +=
      Line(StallEvent(hung, 6, schema::StallState::kStalled, 42000,
                      {{0, 0x10, {{31, "spin(int volatile*)", 42000}, {32, "step(float*)", 41990}}},
                       {1, 0x20, {{33, "reduce(float*)", 42000}}}}));
  WriteFile(dir.path() / "b.jsonl", b);
  // pid 102: stalled once, resolved, ended normally.
  const int32_t slow = kPid + 2;
  std::string c = Line(Start(slow, 0, kStart)) + Line(Device(slow, 1, 0, "GPU"));
  c += Line(StallEvent(slow, 2, schema::StallState::kStalled, 11000,
                       {{0, 0, {{41, "long_kernel()", 11000}}}}));
  c += Line(StallEvent(slow, 3, schema::StallState::kResolved, 15000, {}));
  c += Line(End(slow, 4, 0));
  WriteFile(dir.path() / "c.jsonl", c);
  WriteFile(dir.path() / "d.jsonl", NormalProcess(kPid + 3, kStart));

  const CliRun r = Report({dir.path().string(), "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 processes (1 stalled, 1 did not end normally)"));
  const size_t review = r.out.find("Processes that did not end normally or stalled (3)");
  ASSERT_NE(review, std::string::npos) << r.out;
  const size_t first = r.out.find(
      "pid 101 trainer on node1: stalled: kernels unfinished for 42.0 s: "
      "device 0 stream 16 waits on spin(int volatile*)",
      review);
  const size_t second = r.out.find("pid 100 trainer on node1: api_error:", review);
  const size_t third = r.out.find(
      "pid 102 trainer on node1: ended: exit code 0; stalled 1 time, "
      "the longest 15.0 s, resolved", review);
  ASSERT_NE(first, std::string::npos) << r.out;
  ASSERT_NE(second, std::string::npos) << r.out;
  ASSERT_NE(third, std::string::npos) << r.out;
  EXPECT_LT(review, first);
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  EXPECT_EQ(r.out.find("pid 103"), std::string::npos);  // ended normally, never stalled
  EXPECT_THAT(r.out, HasSubstr("stalled now, as last reported (42.0 s into the stall, 2 streams "
                               "stalled):"));
  EXPECT_THAT(r.out, HasSubstr("device 0, stream 16: waiting 42.0 s, 2 unfinished, the oldest:"));
  EXPECT_THAT(r.out, HasSubstr("device 1, stream 32: waiting 42.0 s, 1 unfinished, the oldest:"));
  EXPECT_THAT(r.out, HasSubstr("reduce(float*)"));
  EXPECT_THAT(r.out, HasSubstr("step(float*)"));  // queued behind the spinning kernel

  const json j = json::parse(Report({dir.path().string(), "--json"}).out);
  ASSERT_EQ(j["review"].size(), 3u);
  EXPECT_EQ(j["review"][0]["pid"], hung);
  EXPECT_EQ(j["review"][0]["ending"], "stalled");
  EXPECT_EQ(j["review"][0]["ending_detail"],
            "stalled: kernels unfinished for 42.0 s: device 0 stream 16 waits on spin(int "
            "volatile*) (corr 31); 2 streams stalled, nothing finished since the last report");
  const json& stall = j["review"][0]["stall"];
  EXPECT_EQ(stall["stalls"], 2);
  EXPECT_EQ(stall["ongoing"], true);
  EXPECT_EQ(stall["longest_ms"], 42000);
  EXPECT_EQ(stall["latest"]["seq"], 6);
  ASSERT_EQ(stall["latest"]["streams"].size(), 2u);
  EXPECT_EQ(stall["latest"]["streams"][0]["launches"][0]["demangled"], "spin(int volatile*)");
  EXPECT_EQ(j["review"][1]["pid"], kPid);
  EXPECT_FALSE(j["review"][1].contains("stall"));
  EXPECT_EQ(j["review"][2]["pid"], slow);
  EXPECT_EQ(j["review"][2]["ending"], "ended");
  EXPECT_EQ(j["review"][2]["stall"]["ongoing"], false);
  EXPECT_EQ(j["review"][2]["stall"]["longest_ms"], 15000);
}

// A failed call that is not sticky (a bad argument) says nothing about the kernels in flight.
TEST(ReportCli, ANonStickyErrorMarksNoLaunchFailed) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "GPU"));
  s += Line(Kernel(kPid, 2, kStart + 1, 11, Gemm()));
  s += Line(ApiError(kPid, 3, "cuMemcpyHtoD_v2", "CUDA_ERROR_INVALID_VALUE", 1, {11}));
  WriteFile(dir.path() / "a.jsonl", s);
  const json j = json::parse(Report({dir.path().string(), "--json"}).out);
  ASSERT_EQ(j["review"].size(), 1u);
  const json& l = j["review"][0]["streams"][0]["last_launches"][0];
  EXPECT_TRUE(l["finished"].is_null()) << l.dump();
  EXPECT_EQ(l["in_failed_call"], false);
}

// After a sticky error the library flushes CUPTI's completed records; a kernel_time written after
// the error shows that flush ran, so a launch before the error without one did not finish. With
// no kernel_time after the error (the flush may not have returned on the dead context) the log
// cannot tell.
TEST(ReportCli, AfterAStickyErrorFlushAnUntimedLaunchDidNotFinish) {
  for (const bool flushed : {true, false}) {
    TempDir dir;
    std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "GPU"));
    s += Line(Kernel(kPid, 2, kStart + 1, 11, Gemm()));
    s += Line(Kernel(kPid, 3, kStart + 2, 12, Gemm()));
    s += Line(ApiError(kPid, 4, "cuCtxSynchronize", "CUDA_ERROR_LAUNCH_FAILED", 719, {11, 12}));
    if (flushed) s += Line(KernelTime(kPid, 5, 11, 2000));
    WriteFile(dir.path() / "a.jsonl", s);
    const json j = json::parse(Report({dir.path().string(), "--json"}).out);
    ASSERT_EQ(j["review"].size(), 1u) << flushed;
    const json& launches = j["review"][0]["streams"][0]["last_launches"];
    ASSERT_EQ(launches.size(), 2u);
    if (flushed) {
      EXPECT_EQ(launches[0]["finished"], true);
      EXPECT_EQ(launches[0]["in_failed_call"], false);
      EXPECT_EQ(launches[1]["finished"], false);
      EXPECT_EQ(launches[1]["in_failed_call"], true);
    } else {
      EXPECT_TRUE(launches[0]["finished"].is_null());
      EXPECT_TRUE(launches[1]["finished"].is_null());
      EXPECT_EQ(launches[1]["in_failed_call"], false);
    }
  }
}

// The line that says what happened is wrapped at 120 columns, never cut: the driver's whole
// message is there.
TEST(ReportCli, TheEndingLineWrapsAndKeepsTheWholeMessage) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "GPU"));
  s += Line(Kernel(kPid, 2, kStart + 1, 11, Gemm()));
  schema::OwnedApiErrorEvent e =
      ApiError(kPid, 3, "cuStreamSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", 700, {11});
  e.message =
      "an illegal memory access was encountered while the kernel read beyond the end of "
      "its last CUDA buffer of 4096 bytes allocated by the caching allocator end-marker";
  s += Line(e);
  WriteFile(dir.path() / "a.jsonl", s);
  const CliRun r = Report({dir.path().string(), "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string joined;  // the review's first lines, rejoined
  std::istringstream lines(r.out);
  bool in_review = false;  // the findings above it say the failed call too
  bool in_ending = false;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 120u) << line;
    if (line.starts_with("Processes that did not end normally")) in_review = true;
    if (in_review && line.starts_with("  pid 100 ")) in_ending = true;
    if (in_ending && line.starts_with("    device")) break;
    if (in_ending) joined += line.substr(line.find_first_not_of(' ')) + " ";
  }
  EXPECT_THAT(joined, HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS (700): " + e.message + " "));
  EXPECT_THAT(r.out, Not(HasSubstr("...")));
}

// A routine failure after the last kernel (NCCL probing a host pointer; a log written before the
// injected library counted such failures instead of sending them) does not make a healthy
// process look failed.
TEST(ReportCli, ARoutineFailureLastIsNotAFailedProcess) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "GPU"));
  s += Line(Kernel(kPid, 2, kStart + 1, 11, Gemm()));
  s += Line(ApiError(kPid, 3, "cuPointerGetAttribute", "CUDA_ERROR_INVALID_VALUE", 1, {11}));
  s += Line(End(kPid, 4, 0));
  WriteFile(dir.path() / "a.jsonl", s);
  const CliRun r = Report({dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("did not end normally"), std::string::npos) << r.out;
  const json j = json::parse(Report({dir.path().string(), "--json"}).out);
  EXPECT_EQ(j["review"].size(), 0u);
}

// A reviewed process's last launches of a CUDA graph: the nodes of one replay share its
// correlation id, and each shows its own duration and graph node.
TEST(ReportCli, ReviewedGraphNodesShowTheirOwnDurations) {
  TempDir dir;
  std::vector<std::pair<uint64_t, std::string>> lines =
      testing::SharedCorrelationLines(kPid, kStart);
  lines.pop_back();  // process_end: the process ends with a failed call instead
  std::string s;
  for (const auto& [seq, line] : lines) s += line;
  const uint64_t last = lines.back().first;
  s += Line(ApiError(kPid, last + 1, "cuStreamSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", 700, {}));
  WriteFile(dir.path() / "a.jsonl", s);
  const CliRun r = Report({dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["review"].size(), 1u);
  const json* graph = nullptr;
  for (const json& stream : j["review"][0]["streams"]) {
    if (stream["stream"] == 0x20) graph = &stream;
  }
  ASSERT_NE(graph, nullptr) << j["review"].dump();
  EXPECT_EQ((*graph)["launches"], 12);
  ASSERT_FALSE((*graph)["last_launches"].empty());
  for (const json& l : (*graph)["last_launches"]) {
    ASSERT_TRUE(l.contains("graph_node_id")) << l.dump();
    size_t node = 0;
    while (node < 3 && testing::kGraphNodes[node] != l["graph_node_id"].get<uint64_t>()) ++node;
    ASSERT_LT(node, 3u) << l.dump();
    EXPECT_EQ(l["finished"], true) << l.dump();
    EXPECT_EQ(l["duration_ns"], testing::kGraphNodeNs[node]) << l.dump();
  }
}

TEST(ReportCli, CrashedProcessIsReviewed) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "GPU"));
  s += Line(Kernel(kPid, 2, kStart + 1, 11, Gemm()));
  schema::OwnedProcessCrashEvent crash;
  crash.header = {kStart + 2, kPid, 3};
  crash.signal = 11;
  crash.signal_name = "SIGSEGV";
  crash.code = 1;
  crash.addr = 0x10;
  crash.tid = kPid;
  s += Line(crash);
  WriteFile(dir.path() / "a.jsonl", s);
  const CliRun r = Report({dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pid 100 trainer on node1: crash: SIGSEGV (signal 11, code 1) in "
                               "thread 100 at 0x10\n"));
  // CUPTI's records are not flushed from a crash: no kernel_time says nothing about completion.
  EXPECT_THAT(r.out, Not(HasSubstr("NO")));
  EXPECT_THAT(r.out, HasSubstr("  unknown  "));
  EXPECT_THAT(r.out, HasSubstr("unknown: no kernel_time, and the log cannot tell whether it "
                               "finished"));
  const json j = json::parse(Report({dir.path().string(), "--json"}).out);
  ASSERT_EQ(j["review"].size(), 1u);
  EXPECT_EQ(j["review"][0]["ending"], "crash");
  EXPECT_EQ(j["review"][0]["crash"]["signal_name"], "SIGSEGV");
  EXPECT_TRUE(j["review"][0]["streams"][0]["last_launches"][0]["finished"].is_null());
}

// Who a process is: its job and rank (process_start's attribution) follow its name wherever the
// report names it, and the JSON carries the whole attribution.
TEST(ReportCli, JobAndRankNameTheProcess) {
  TempDir dir;
  schema::OwnedProcessStartEvent start = Start(kPid, 0, kStart);
  start.attribution = {{"RANK", "3"}, {"SLURM_JOB_ID", "4242"}, {"job", "4242"}, {"rank", "3"}};
  std::string s = Line(start) + Line(Device(kPid, 1, 0, "GPU"));
  s += Line(Kernel(kPid, 2, kStart + 1, 11, Gemm()));
  schema::OwnedProcessCrashEvent crash;
  crash.header = {kStart + 2, kPid, 3};
  crash.signal = 11;
  crash.signal_name = "SIGSEGV";
  crash.tid = kPid;
  s += Line(crash);
  // Another process of the job without a rank, one without attribution.
  schema::OwnedProcessStartEvent other = Start(kPid + 1, 0, kStart);
  other.attribution = {{"job", "4242"}};
  s += Line(other) + Line(End(kPid + 1, 1, 0));
  WriteFile(dir.path() / "a.jsonl", s);
  const CliRun r = Report({dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pid 100 trainer (job 4242, rank 3) on node1: crash: SIGSEGV"));
  const json j = json::parse(Report({dir.path().string(), "--json"}).out);
  std::map<int, json> by_pid;
  for (const json& p : j["processes"]) by_pid[p["pid"].get<int>()] = p;
  ASSERT_EQ(by_pid.size(), 2u);
  EXPECT_EQ(by_pid[kPid]["attribution"],
            json::parse(R"({"RANK":"3","SLURM_JOB_ID":"4242","job":"4242","rank":"3"})"));
  EXPECT_EQ(by_pid[kPid + 1]["attribution"], json::parse(R"({"job":"4242"})"));
}

// A process killed after its last flush (stream-kill): the collector's process_lost gives the
// events stored and the gaps before the last seq exactly; what came after is unknown. After a
// process_crash (sent after every event before it) nothing is unknown.
TEST(ReportCli, ALostProcessSaysWhatIsKnownOfItsLosses) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "GPU"));
  s += Line(Kernel(kPid, 2, kStart + 1, 11, Gemm()));
  s += Line(Kernel(kPid, 4, kStart + 2, 12, Gemm()));  // seq 3 never arrived
  schema::OwnedProcessLostEvent lost;
  lost.header = {kStart + 3, kPid, 4};
  lost.last_seq = 4;
  lost.events_stored = 4;
  lost.events_lost = 1;
  WriteFile(dir.path() / "a.jsonl", s + Line(lost));
  // The ending line as JSON has it (the terminal wraps it).
  auto ending = [&] {
    const json j = json::parse(Report({dir.path().string(), "--json"}).out);
    return j["review"].size() == 1 ? j["review"][0]["ending_detail"].get<std::string>() : "";
  };
  EXPECT_EQ(ending(),
            "lost: the connection ended without process_end (killed, or no exit flush); 4 events "
            "stored up to seq 4, 1 missing before it; whether it sent more after seq 4 is unknown");

  schema::OwnedProcessCrashEvent crash;
  crash.header = {kStart + 3, kPid, 5};
  crash.signal = 6;
  crash.signal_name = "SIGABRT";
  crash.tid = kPid;
  lost.last_seq = 5;
  lost.events_stored = 5;
  WriteFile(dir.path() / "a.jsonl", s + Line(crash) + Line(lost));
  EXPECT_EQ(ending(),
            "crash: SIGABRT (signal 6, code 0) in thread 100; 5 events stored up to seq 5, 1 "
            "missing before it");
}

TEST(ReportCli, BadInputIsOneLineAndExitTwo) {
  TempDir dir;
  WriteFile(dir.path() / "empty.jsonl", "");
  WriteFile(dir.path() / "bin.jsonl", std::string("\0\1\2\3\n", 5));
  WriteFile(dir.path() / "v9.jsonl",
            "{\"type\":\"process_start\",\"version\":9,\"ts_ns\":1,\"pid\":7,\"seq\":0}\n");
  WriteFile(dir.path() / "ok" / "a.jsonl", NormalProcess(kPid, kStart));
  const std::string ok = (dir.path() / "ok").string();
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{(dir.path() / "empty.jsonl").string()}, "empty.jsonl: not a cuflight log: empty file"},
      {{(dir.path() / "bin.jsonl").string()}, "bin.jsonl: not a cuflight log: binary data"},
      {{(dir.path() / "v9.jsonl").string()}, "v9.jsonl: unsupported schema version"},
      {{(dir.path() / "missing").string()}, "missing: no such file or directory"},
      {{}, "paths is required"},
      {{ok, "--sort", "speed"}, "--sort 'speed' is not an order"},
      {{ok, "--since", "yesterday"}, "--since 'yesterday' is not a time"},
      {{ok, "--until", "2026-02-30T00:00:00Z"}, "--until '2026-02-30T00:00:00Z' is not a time"},
      {{ok, "--since", "2000", "--until", "1000"}, "--since is after --until"},
      {{ok, "--limiter", "tensor_cores"}, "--limiter 'tensor_cores' is not a resource"},
      {{ok, "--retarget", "gtx480"}, "--retarget 'gtx480' is not a known device"},
      {{ok, "--retarget", "h10"}, "did you mean h100?"},
      {{ok, "--limiter", "shared_mme"}, "did you mean shared_mem?"},
      {{ok, "--name-width", "-1"}, "--name-width"},
      {{ok, "--kernel", "gemm("}, "--kernel 'gemm(' is not a valid ECMAScript regular expression"},
      {{ok, "--top", "-3"}, "--top"},
      {{ok, "--pid", "abc"}, "--pid"},
      {{ok, "--json", "--csv"}, "--json excludes --csv"},
      {{ok, "--color", "sometimes"}, "--color 'sometimes' is not a choice"},
  };
  for (const Case& c : cases) {
    const CliRun r = Report(c.args);
    EXPECT_EQ(r.exit_code, cli::kExitUsage) << c.says << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.says;
    EXPECT_THAT(r.err, StartsWith("cuflight report: ")) << c.says;
    EXPECT_THAT(r.err, HasSubstr(c.says));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(ReportCli, Filters) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess(kPid, kStart));
  WriteFile(dir.path() / "b.jsonl", NormalProcess(kPid + 1, kStart + 1));
  const std::string d = dir.path().string();
  auto totals = [](const CliRun& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out)["totals"];
  };
  EXPECT_EQ(totals(Report({d, "--json"}))["launches"], 12);
  // The demangled name matches "gemm<"; the mangled one "ILi2E".
  EXPECT_EQ(totals(Report({d, "--json", "--kernel", "gemm<"}))["launches"], 8);
  EXPECT_EQ(totals(Report({d, "--json", "--kernel", "ILi2E"}))["launches"], 8);
  EXPECT_EQ(totals(Report({d, "--json", "--pid", "101"}))["launches"], 6);
  EXPECT_EQ(totals(Report({d, "--json", "--pid", "100", "--pid", "101"}))["launches"], 12);
  EXPECT_EQ(totals(Report({d, "--json", "--limiter", "shared_mem"}))["launches"], 4);
  EXPECT_EQ(totals(Report({d, "--json", "--limiter", "regs"}))["launches"], 8);
  // Launch i of a process is at start + i s: [start + 2 s, start + 4 s] holds gemm 2, 3, 4 of the
  // first process and gemm 2, 3 of the second (1 ns later).
  EXPECT_EQ(totals(Report({d, "--json", "--since", "1763708402", "--until",
                           "2025-11-21T07:00:04Z"}))["launches"],
            5);
  const json j = json::parse(Report({d, "--json", "--pid", "101"}).out);
  ASSERT_EQ(j["processes"].size(), 1u);
  EXPECT_EQ(j["processes"][0]["pid"], 101);
  EXPECT_THAT(Report({d, "--kernel", "nothing_matches"}).out,
              HasSubstr("No kernel launches match the filters."));
}

TEST(ReportCli, SortTopAndCsv) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess(kPid, kStart));
  const std::string d = dir.path().string();
  json j = json::parse(Report({d, "--json", "--sort", "occupancy"}).out);
  EXPECT_EQ(j["signatures"][0]["demangled"], "reduce(float*)");  // 19% before 75%
  j = json::parse(Report({d, "--json", "--sort", "launches", "--top", "1"}).out);
  ASSERT_EQ(j["signatures"].size(), 1u);
  EXPECT_EQ(j["signatures"][0]["launches"], 4);
  EXPECT_EQ(j["totals"]["signatures"], 2);

  const CliRun r = Report({d, "--csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> rows;
  for (size_t pos = 0; pos < r.out.size();) {
    const size_t end = r.out.find("\r\n", pos);
    ASSERT_NE(end, std::string::npos);
    rows.push_back(r.out.substr(pos, end - pos));
    pos = end + 2;
  }
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(rows[0], StartsWith("name,demangled,device_model,block_x,"));
  EXPECT_THAT(rows[1], StartsWith("_Z4gemmILi2EEvPfi,\"void gemm<2>(float*, int)\",NVIDIA A100,256,"
                                  "1,1,64,0,0,0,4,4,1000000,250000,200000,400000,0.75,6,registers,"));
  // The advice holds commas: quoted, on one line.
  EXPECT_THAT(rows[1], HasSubstr(",\"75% occupancy (probably enough); registers limit 6 blocks/SM; "
                                 "if latency-bound, <= 32 regs/thread would fit 7 (88%): "
                                 "__launch_bounds__(256, 7) or -maxrregcount=32 (fewer registers can "
                                 "spill to local memory; check ptxas -v)\""));
}

// Two instances of one template: the table tells them apart by the differing argument, and
// --name-width widens the column (0: whole names).
TEST(ReportCli, NameWidthWidensTheKernelColumn) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "NVIDIA A100"));
  const std::string add =
      "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
      "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, "
      "at::detail::Array<char*, 3>)";
  const std::string mul =
      "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, "
      "at::detail::Array<char*, 3> >(int, at::native::MulFunctor<float>, "
      "at::detail::Array<char*, 3>)";
  KernelSpec a = Gemm();
  a.name = "_Zadd";
  a.demangled = add;
  KernelSpec m = Gemm();
  m.name = "_Zmul";
  m.demangled = mul;
  s += Line(Kernel(kPid, 2, kStart + 1, 1, a)) + Line(Kernel(kPid, 3, kStart + 2, 2, m));
  WriteFile(dir.path() / "a.jsonl", s);
  // Default: the room the 120-column table leaves (here 40); only the differing functor stays
  // after the template's name, cut (kernel_names.h has the steps).
  CliRun r = Report({dir.path().string(), "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  vectorized_elementwise_ke...<AddFunctor>\n"));
  EXPECT_THAT(r.out, HasSubstr("  vectorized_elementwise_ke...<MulFunctor>\n"));
  // 60 columns: the namespaces go and the first and last arguments, common to both, are "...".
  r = Report({dir.path().string(), "--color", "never", "--name-width", "60"});
  EXPECT_THAT(r.out, HasSubstr("  vectorized_elementwise_kernel<..., AddFunctor, ...>\n"));
  r = Report({dir.path().string(), "--color", "never", "--name-width", "0"});
  EXPECT_THAT(r.out, HasSubstr("  " + add + "\n"));
  EXPECT_THAT(r.out, HasSubstr("  " + mul + "\n"));
  r = Report({dir.path().string(), "--name-width", "-3"});
  EXPECT_EQ(r.exit_code, 2);
}

// A kernel at 100% occupancy is limited by nothing: LIMITER says none, and --limiter does not
// select it by the resource that would bind first.
TEST(ReportCli, AKernelAtFullOccupancyIsNotLimited) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "NVIDIA A100"));
  KernelSpec full = Gemm();
  full.name = "_Z4fullv";
  full.demangled = "full()";
  full.occupancy = Fields(8, 8, 64, Resource::kRegisters);  // 64 of 64 warps
  s += Line(Kernel(kPid, 2, kStart + 1, 1, full)) + Line(Kernel(kPid, 3, kStart + 2, 2, Gemm()));
  WriteFile(dir.path() / "a.jsonl", s);
  const CliRun r = Report({dir.path().string(), "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("100%  none "));
  EXPECT_THAT(r.out, HasSubstr(" 75%  regs "));
  const json j = json::parse(Report({dir.path().string(), "--json", "--limiter", "regs"}).out);
  ASSERT_EQ(j["signatures"].size(), 1u);
  EXPECT_EQ(j["signatures"][0]["demangled"], "void gemm<2>(float*, int)");
}

TEST(ReportCli, SeveralDeviceModelsSplitSignatures) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess(kPid, kStart));
  std::string other = NormalProcess(kPid + 1, kStart);
  const std::string a100 = "NVIDIA A100";
  other.replace(other.find(a100), a100.size(), "NVIDIA H100");
  WriteFile(dir.path() / "b.jsonl", other);
  const json j = json::parse(Report({dir.path().string(), "--json"}).out);
  EXPECT_EQ(j["totals"]["signatures"], 4);
  EXPECT_EQ(j["totals"]["several_device_models"], true);
  EXPECT_THAT(Report({dir.path().string()}).out, HasSubstr("DEVICE"));
}

TEST(ReportCli, ColorOnlyWhenAsked) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess(kPid, kStart));
  EXPECT_EQ(Report({dir.path().string()}).out.find("\x1b["), std::string::npos);
  EXPECT_NE(Report({dir.path().string(), "--color", "always"}).out.find("\x1b[1m"),
            std::string::npos);
}

TEST(ReportCli, RetargetMatchesTheEngine) {
  // A kernel as an A100 runs it: 64 regs/thread, 256 threads, 20 KiB static + 16 KiB dynamic smem.
  const occupancy::DevicePreset* a100 = occupancy::FindDevicePreset("a100");
  const occupancy::DevicePreset* l4 = occupancy::FindDevicePreset("l4");
  ASSERT_NE(a100, nullptr);
  ASSERT_NE(l4, nullptr);
  occupancy::LaunchConfig launch;
  launch.regs_per_thread = 64;
  launch.static_smem = 20 * 1024;
  launch.dyn_smem = 16 * 1024;
  launch.block = {256, 1, 1};
  launch.grid = {432, 1, 1};
  launch.func_max_threads_per_block = 1024;
  occupancy::Result on_a100, on_l4;
  ASSERT_EQ(occupancy::Compute(*occupancy::DeviceContext::Make(a100->limits), launch, &on_a100),
            occupancy::Status::kOk);
  ASSERT_EQ(occupancy::Compute(*occupancy::DeviceContext::Make(l4->limits), launch, &on_l4),
            occupancy::Status::kOk);

  KernelSpec k;
  k.regs = 64;
  k.static_smem = 20 * 1024;
  k.dyn_smem = 16 * 1024;
  k.block = {256, 1, 1};
  k.grid = {432, 1, 1};
  k.occupancy = on_a100.fields;
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", Line(Start(kPid, 0, kStart)) +
                                        Line(Device(kPid, 1, 0, "NVIDIA A100")) +
                                        Line(Kernel(kPid, 2, kStart, 1, k)));
  const CliRun r = Report({dir.path().string(), "--json", "--retarget", "l4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["retarget"]["key"], "l4");
  const json& t = j["signatures"][0]["retarget"];
  ASSERT_EQ(t["ok"], true) << t.dump();
  EXPECT_EQ(t["result"]["max_active_blocks"], on_l4.fields.max_active_blocks);
  EXPECT_EQ(t["result"]["occupancy"], on_l4.fields.occupancy);
  EXPECT_EQ(t["result"]["limiting_resource"],
            schema::ResourceName(on_l4.fields.limiting_resource));

  const CliRun text = Report({dir.path().string(), "--retarget", "l4"});
  EXPECT_THAT(text.out, HasSubstr("Retargeted to NVIDIA L4 (l4)"));
  // The device as a name the tools print, or as a compute capability (the first preset of 8.9).
  for (const char* spec : {"NVIDIA L4", "sm_89"}) {
    const json by = json::parse(Report({dir.path().string(), "--json", "--retarget", spec}).out);
    EXPECT_EQ(by["retarget"]["key"], "l4") << spec;
  }
}

// CUTLASS instantiations that differ only deep in their template arguments (the tile's M,
// GemmShape<64, 128, 32> against <128, 128, 32>, and the epilogue functor), with PyTorch
// elementwise kernels, as in a training log: every table and the HTML top-kernels chart show
// them apart (never "Kernel<...>" for all), ids have their legend, and the advice for the
// CUTLASS kernels names CUTLASS's levers, not __launch_bounds__.
std::string CutlassName(int tile_m, const std::string& functor) {
  return "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::"
         "MmaPipelined<cutlass::gemm::GemmShape<" +
         std::to_string(tile_m) +
         ", 128, 32>, cutlass::half_t, cutlass::layout::RowMajor, cutlass::half_t, "
         "cutlass::layout::ColumnMajor, float, cutlass::layout::RowMajor, "
         "cutlass::arch::OpClassTensorOp>, cutlass::epilogue::threadblock::Epilogue<"
         "cutlass::epilogue::thread::" +
         functor +
         "<cutlass::half_t, 8, float, float>, 1>, true>>(cutlass::gemm::kernel::Gemm::Params)";
}

// The KERNEL cells of the table whose header line starts with `header`, and the legend lines
// ("K<n>  ...") printed under it.
std::pair<std::vector<std::string>, std::vector<std::string>> KernelColumn(
    const std::string& out, const std::string& header) {
  std::vector<std::string> cells;
  std::vector<std::string> legend;
  std::istringstream in(out);
  std::string line;
  size_t column = std::string::npos;
  while (std::getline(in, line)) {
    if (column == std::string::npos) {
      if (line.starts_with(header)) column = line.find("KERNEL");
      continue;
    }
    if (line.empty()) break;
    if (line.starts_with("K") && line.find("  ") != std::string::npos &&
        std::isdigit(static_cast<unsigned char>(line[1]))) {
      legend.push_back(line);
      continue;
    }
    static const std::regex kRow(R"(^ *\d+  .*)");
    if (!std::regex_match(line, kRow) || line.size() <= column) continue;  // advice
    cells.push_back(line.substr(column));
  }
  return {cells, legend};
}

TEST(ReportCli, DeepTemplateDifferencesStayApartInEveryTableAndChart) {
  TempDir dir;
  std::string s = Line(Start(kPid, 0, kStart)) + Line(Device(kPid, 1, 0, "NVIDIA A100"));
  const std::vector<std::string> functors = {"LinearCombination", "LinearCombinationRelu",
                                             "LinearCombinationGELU", "LinearCombinationClamp"};
  std::vector<std::string> names;
  for (const int tile : {64, 128}) {
    for (const std::string& f : functors) names.push_back(CutlassName(tile, f));
  }
  names.push_back("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
                  "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, "
                  "at::detail::Array<char*, 3>)");
  names.push_back("void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, "
                  "at::detail::Array<char*, 3> >(int, at::native::MulFunctor<float>, "
                  "at::detail::Array<char*, 3>)");
  uint64_t seq = 2;
  for (size_t i = 0; i < names.size(); ++i) {
    KernelSpec k;
    k.name = "_Zk" + std::to_string(i);
    k.demangled = names[i];
    k.block = {128, 1, 1};
    k.regs = 232;
    k.occupancy = Fields(1, 4, 64, Resource::kRegisters);  // 4 / 64 warps: 6%
    const int64_t ts = kStart + 1000 * static_cast<int64_t>(i + 1);
    s += Line(Kernel(kPid, seq, ts, i + 1, k));
    // GPU times 10 us apart, so the order is the names' order.
    s += Line(KernelTime(kPid, seq + 1, i + 1, 100000 - 10000 * i));
    seq += 2;
  }
  WriteFile(dir.path() / "a.jsonl", s);

  for (const std::string width : {"", "40", "24"}) {
    std::vector<std::string> args = {dir.path().string(), "--color", "never"};
    if (!width.empty()) args.insert(args.end(), {"--name-width", width});
    const CliRun r = Report(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto [cells, legend] = KernelColumn(r.out, "LAUNCHES");
    ASSERT_EQ(cells.size(), names.size()) << r.out;
    std::set<std::string> distinct(cells.begin(), cells.end());
    EXPECT_EQ(distinct.size(), names.size()) << r.out;
    EXPECT_FALSE(distinct.contains("Kernel<...>")) << r.out;
    // Every id shown has its legend line, and the legend names no other.
    std::set<std::string> shown_ids;
    for (const std::string& c : cells) {
      if (c.starts_with("K") && c.find(' ') != std::string::npos) {
        shown_ids.insert(c.substr(0, c.find(' ')));
      }
    }
    std::set<std::string> legend_ids;
    for (const std::string& l : legend) legend_ids.insert(l.substr(0, l.find(' ')));
    EXPECT_EQ(shown_ids, legend_ids) << r.out;
    // The tile and the functor are in each CUTLASS kernel's cell or legend line.
    for (size_t i = 0; i < 8; ++i) {
      std::string said = cells[i];
      for (const std::string& l : legend) {
        if (said.starts_with(l.substr(0, l.find(' ')) + " ")) said = l;
      }
      EXPECT_THAT(said, HasSubstr(i < 4 ? "GemmShape<64" : "GemmShape<128")) << said;
      EXPECT_THAT(said, HasSubstr(functors[i % 4])) << said;
    }
    // The advice for a CUTLASS kernel is CUTLASS's, not the register lever.
    EXPECT_THAT(r.out, HasSubstr("a CUTLASS kernel, not rebuilt with your flags"));
    EXPECT_THAT(r.out, Not(HasSubstr("__launch_bounds__")));
  }
  // At 40 columns: "Kernel<GemmShape<64, ...>, LinearCombination>" (44 bytes) does not fit, so
  // ids: K1 is the first kernel by GPU time.
  const CliRun narrow = Report({dir.path().string(), "--color", "never", "--name-width", "40"});
  EXPECT_THAT(narrow.out, HasSubstr("K1  Kernel<GemmShape<64, ...>, LinearCombination>\n"));
  EXPECT_THAT(narrow.out, HasSubstr("K6  Kernel<GemmShape<128, ...>, LinearCombinationRelu>\n"));
  // --retarget's table names the kernels as the table above does (one shortening: the same ids).
  const CliRun retarget = Report(
      {dir.path().string(), "--color", "never", "--name-width", "40", "--retarget", "h100"});
  ASSERT_EQ(retarget.exit_code, 0) << retarget.err;
  const auto [above, legend_above] = KernelColumn(retarget.out, "LAUNCHES");
  const auto [retargeted, legend_retargeted] = KernelColumn(retarget.out, "BLK/SM");
  EXPECT_EQ(retargeted, above) << retarget.out;
  // The eight CUTLASS kernels (44 bytes and more) have ids; PyTorch's two fit with the
  // template's name cut ("vectorized_elementwise_ke...<AddFunctor>").
  EXPECT_EQ(legend_above.size(), 8u);
  EXPECT_TRUE(legend_retargeted.empty()) << retarget.out;

  // The HTML top-kernels chart: its labels (64 bytes) are all different.
  const std::filesystem::path page = dir.path() / "report.html";
  const CliRun html = Report({dir.path().string(), "--html", page.string()});
  ASSERT_EQ(html.exit_code, 0) << html.err;
  std::ifstream in(page);
  std::ostringstream read;
  read << in.rdbuf();  // not istreambuf_iterator: g++ -O3 -Wnull-dereference false positive
  const std::string text = read.str();
  const size_t chart = text.find("id=\"chart-top-kernels\"");
  ASSERT_NE(chart, std::string::npos);
  const std::string svg = text.substr(chart, text.find("</svg>", chart) - chart);
  std::set<std::string> labels;
  size_t count = 0;
  for (size_t p = svg.find("class=\"label\""); p != std::string::npos;
       p = svg.find("class=\"label\"", p + 1)) {
    const size_t open = svg.find('>', p) + 1;
    labels.insert(svg.substr(open, svg.find("</text>", open) - open));
    ++count;
  }
  EXPECT_EQ(count, names.size());
  EXPECT_EQ(labels.size(), names.size());
  EXPECT_TRUE(labels.contains("Kernel&lt;GemmShape&lt;64, ...&gt;, LinearCombination&gt;"))
      << svg.substr(0, 4000);
}

}  // namespace
}  // namespace cuflight::report
