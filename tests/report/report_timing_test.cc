// `cuflight report` over logs of processes whose kernel timing policy (process_start's
// config.timing: all, sampled, off; schema/env/README.md, CUFLIGHT_TIMING) is sampled: every
// output says what was measured and, apart from it and labelled, the estimate with its sampled
// fraction; an `all` log reads as before, and an older log's "1" reads as all. The expected
// figures are worked out by hand in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cuflight/report/build_report.h"
#include "report_cli_run.h"
#include "report_test_events.h"
#include "temp_dir.h"

namespace cuflight::report {
namespace {

using nlohmann::json;
using schema::Resource;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::CliRun;
using testing::Device;
using testing::End;
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

KernelSpec Gemm() {
  KernelSpec k;
  k.name = "_Z4gemmPf";
  k.demangled = "gemm(float*)";
  k.block = {256, 1, 1};
  k.regs = 64;
  k.occupancy = Fields(6, 8, 64, Resource::kRegisters);
  return k;
}

KernelSpec Reduce() {
  KernelSpec k;
  k.name = "_Z6reducePf";
  k.demangled = "reduce(float*)";
  k.block = {128, 1, 1};
  k.regs = 16;
  k.occupancy = Fields(16, 4, 64, Resource::kBlocks);
  return k;
}

// process_start with config.timing = `timing` ("" for none: a log written before the member).
schema::OwnedProcessStartEvent StartWith(int32_t pid, std::string timing) {
  schema::OwnedProcessStartEvent s = Start(pid, 0, kStart);
  if (!timing.empty()) s.config = {{"timing", std::move(timing)}};
  return s;
}

// One process: gemm launched 8 times, the 1st and 5th timed (100 us and 300 us); reduce launched
// 4 times, none timed; process_end. Under `sampled` this is what a window at the start (a new
// configuration) and one periodic window leave: 2 of 12 launches timed, and the kernel events say
// so (timing_window true for the two, false for the others; written only under sampled).
//   gemm:   measured 100 + 300 = 400 us; timed 2 of 8 = 25 %; estimate 400 us x 8 / 2 = 1600 us.
//   reduce: measured nothing; timed 0 of 4; GPU time unknown (not 0).
//   report: 2 of 12 launches timed = 16.7 % ("17%"); measured 400 us; estimated 1.60 ms, a lower
//           bound (reduce unknown).
std::string SampledProcess(int32_t pid, std::string timing) {
  const bool sampled = timing == "sampled";
  std::string s = Line(StartWith(pid, std::move(timing))) + Line(Device(pid, 1, 0, "NVIDIA A100"));
  uint64_t seq = 2;
  for (uint64_t i = 1; i <= 12; ++i) {
    schema::OwnedKernelEvent k =
        Kernel(pid, seq++, kStart + static_cast<int64_t>(i) * 1000, i, i <= 8 ? Gemm() : Reduce());
    if (sampled) k.timing_window = i == 1 || i == 5;
    s += Line(k);
    if (i == 1) s += Line(KernelTime(pid, seq++, i, 100000));
    if (i == 5) s += Line(KernelTime(pid, seq++, i, 300000));
  }
  schema::OwnedProcessEndEvent end = End(pid, seq++, 0);
  if (sampled) {
    // Two windows, 2 ms open in all, the two timed launches in them.
    end.timing_policy = schema::TimingPolicy::kSampled;
    end.timing_windows = 2;
    end.timing_window_ns = 2000000;
    end.launches_in_window = 2;
  }
  s += Line(end);
  return s;
}

const json* SignatureNamed(const json& doc, const std::string& demangled) {
  for (const json& s : doc["signatures"]) {
    if (s["demangled"] == demangled) return &s;
  }
  return nullptr;
}

TEST(ReportTiming, SampledTableSaysMeasuredTimedAndTheEstimateApart) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", SampledProcess(100, "sampled"));
  const CliRun r = Report({dir.path().string(), "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("12 launches (2 timed)"));
  // Wrapped at 120 columns.
  EXPECT_THAT(r.out, HasSubstr("note: kernel timing sampled (CUFLIGHT_TIMING=sampled) in 1 of 1 "
                               "process: 2 of 12 launches under it timed (17%); GPU time\n  "
                               "measured 400us, estimated ~1.60ms at least: 1 signature with no "
                               "timed launch unknown (an estimate, not a measurement)\n"));
  EXPECT_THAT(r.out, HasSubstr("MEASURED"));
  EXPECT_THAT(r.out, Not(HasSubstr("TOTAL")));
  std::string gemm_row, reduce_row;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 120u) << line;
    if (line.find("gemm(float*)") != std::string::npos) gemm_row = line;
    if (line.find("reduce(float*)") != std::string::npos) reduce_row = line;
  }
  // LAUNCHES, MEASURED, TIMED (timed / launches), EST.
  EXPECT_THAT(gemm_row, HasSubstr(" 8     400us    25%  ~1.60ms ")) << r.out;
  EXPECT_THAT(reduce_row, HasSubstr(" 4         -     0%  unknown ")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("EST (~): an estimate, not a measurement"));
  EXPECT_THAT(r.out, HasSubstr("unknown: sampled, and none of its launches was timed"));
  EXPECT_THAT(r.out, HasSubstr("-: no launch of the signature was timed (GPU time unknown)"));
}

TEST(ReportTiming, SampledJsonKeepsTheEstimateOutOfGpuTime) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", SampledProcess(100, "sampled"));
  const CliRun r = Report({dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["processes"][0]["timing_policy"], "sampled");
  EXPECT_EQ(doc["processes"][0]["timing_windows"], 2);
  EXPECT_EQ(doc["processes"][0]["timing_window_ns"], 2000000);
  EXPECT_EQ(doc["processes"][0]["launches_in_window"], 2);
  const json* gemm = SignatureNamed(doc, "gemm(float*)");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ((*gemm)["launches"], 8);
  EXPECT_EQ((*gemm)["timed_launches"], 2);
  EXPECT_EQ((*gemm)["gpu_time"]["total_ns"], 400000);  // measured only
  const json& est = (*gemm)["gpu_time_estimate"];
  EXPECT_EQ(est["estimate_ns"], 1600000);
  EXPECT_EQ(est["is_measurement"], false);
  EXPECT_EQ(est["measured_ns"], 400000);
  EXPECT_EQ(est["sampled_launches"], 8);
  EXPECT_EQ(est["sampled_timed_launches"], 2);
  EXPECT_DOUBLE_EQ(est["sampled_fraction"].get<double>(), 0.25);
  const json* reduce = SignatureNamed(doc, "reduce(float*)");
  ASSERT_NE(reduce, nullptr);
  EXPECT_TRUE((*reduce)["gpu_time"].is_null());  // unknown, never 0
  EXPECT_TRUE((*reduce)["gpu_time_estimate"]["estimate_ns"].is_null());
  EXPECT_EQ((*reduce)["gpu_time_estimate"]["sampled_timed_launches"], 0);
  const json& totals = doc["totals"];
  EXPECT_EQ(totals["sampled_launches"], 12);
  EXPECT_EQ(totals["sampled_timed_launches"], 2);
  EXPECT_EQ(totals["gpu_time_measured_ns"], 400000);
  EXPECT_EQ(totals["gpu_time_estimate_ns"], 1600000);
  EXPECT_EQ(totals["gpu_time_estimate_unknown_signatures"], 1);
}

TEST(ReportTiming, SampledCsvHasTheSampledColumns) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", SampledProcess(100, "sampled"));
  const CliRun r = Report({dir.path().string(), "--csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> rows;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(rows[0], HasSubstr(",launches,timed_launches,gpu_total_ns,"));
  EXPECT_THAT(rows[0], HasSubstr(",advice,sampled_launches,sampled_timed_launches,"
                                 "sampled_fraction,gpu_estimate_ns\r"));
  // gemm first (the only one with GPU time): 8 launches, 2 timed, 400000 ns measured; 8
  // sampled, 2 timed, 0.25, 1600000 estimated. reduce: the estimate empty (unknown).
  EXPECT_THAT(rows[1], HasSubstr("_Z4gemmPf,gemm(float*),"));
  EXPECT_THAT(rows[1], HasSubstr(",8,2,400000,"));
  EXPECT_THAT(rows[1], ::testing::EndsWith(",8,2,0.25,1600000\r"));
  EXPECT_THAT(rows[2], ::testing::EndsWith(",4,0,0,\r"));
}

TEST(ReportTiming, SampledHtmlLabelsTheEstimate) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", SampledProcess(100, "sampled"));
  const CliRun r = Report({dir.path().string(), "--html", "-"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("<p class=\"note\" id=\"timing-sampled\">Kernel timing was sampled "
                               "(CUFLIGHT_TIMING=sampled) in 1 of 1 process: 2 of 12 launches "
                               "under it were timed."));
  EXPECT_THAT(r.out, HasSubstr("<th class=\"n\">MEASURED</th><th class=\"n\">TIMED</th>"
                               "<th class=\"n\">EST</th>"));
  EXPECT_THAT(r.out, HasSubstr("title=\"an estimate, not a measurement: 2 of 8 sampled launches "
                               "timed\">~1.60ms</td>"));
  EXPECT_THAT(r.out, HasSubstr(">unknown</td>"));
  EXPECT_THAT(r.out, HasSubstr("<b>400us</b>measured GPU time (timed launches)"));
  EXPECT_THAT(r.out, HasSubstr("<b class=\"est\">~1.60ms</b>estimated GPU time, an estimate: 17% "
                               "of launches under sampled timing timed; a lower bound"));
  EXPECT_THAT(r.out, HasSubstr("<th title=\"CUFLIGHT_TIMING\">TIMING</th>"));
  EXPECT_THAT(r.out, HasSubstr("<td>sampled</td>"));
  EXPECT_THAT(r.out, Not(HasSubstr("</b>total GPU time</div>")));
}

// A process timing every launch and a sampled one launch the same kernel:
//   all:     2 launches, both timed, 100 us + 100 us = 200 us (measured, whole);
//   sampled: 4 launches, 1 timed, 50 us -> 50 us x 4 / 1 = 200 us estimated.
// Measured 250 us; estimate 200 + 200 = 400 us; timed 3 of 6 (50 %).
TEST(ReportTiming, OnlyTheSampledLaunchesAreScaled) {
  TempDir dir;
  std::string all = Line(StartWith(100, "all")) + Line(Device(100, 1, 0, "NVIDIA A100"));
  all += Line(Kernel(100, 2, kStart + 1, 1, Gemm())) + Line(KernelTime(100, 3, 1, 100000));
  all += Line(Kernel(100, 4, kStart + 2, 2, Gemm())) + Line(KernelTime(100, 5, 2, 100000));
  all += Line(End(100, 6, 0));
  std::string sampled = Line(StartWith(200, "sampled")) + Line(Device(200, 1, 0, "NVIDIA A100"));
  for (uint64_t i = 1; i <= 4; ++i) {
    schema::OwnedKernelEvent k = Kernel(200, 2 * i, kStart + 2, i, Gemm());
    k.timing_window = i == 1;
    sampled += Line(k);
    if (i == 1) sampled += Line(KernelTime(200, 3, 1, 50000));
  }
  sampled += Line(End(200, 9, 0));
  WriteFile(dir.path() / "all.jsonl", all);
  WriteFile(dir.path() / "sampled.jsonl", sampled);
  const CliRun r = Report({dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  const json* gemm = SignatureNamed(doc, "gemm(float*)");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ((*gemm)["launches"], 6);
  EXPECT_EQ((*gemm)["timed_launches"], 3);
  EXPECT_EQ((*gemm)["gpu_time"]["total_ns"], 250000);
  EXPECT_EQ((*gemm)["gpu_time_estimate"]["estimate_ns"], 400000);
  EXPECT_EQ((*gemm)["gpu_time_estimate"]["sampled_launches"], 4);
  EXPECT_EQ((*gemm)["gpu_time_estimate"]["sampled_timed_launches"], 1);
  const CliRun text = Report({dir.path().string(), "--color", "never"});
  EXPECT_THAT(text.out, HasSubstr(" 6     250us    50%  ~400us ")) << text.out;
  EXPECT_THAT(text.out, HasSubstr("in 1 of 2 processes: 1 of 4 launches under it timed (25%)"));
}

// Under sampled timing a launch outside a window never gets a kernel_time: the review says
// "unknown" for an untimed launch of an ended process, where under all it says "NO".
TEST(ReportTiming, AnUntimedSampledLaunchIsNotSaidUnfinished) {
  for (const auto& [timing, finished] :
       std::vector<std::pair<std::string, std::string>>{{"sampled", "unknown"}, {"all", "NO"}}) {
    TempDir dir;
    std::string s = Line(StartWith(100, timing)) + Line(Device(100, 1, 0, "NVIDIA A100"));
    s += Line(Kernel(100, 2, kStart + 1, 1, Gemm()));
    s += Line(testing::ApiError(100, 3, "cuCtxSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", 700,
                                {1}));
    s += Line(End(100, 4, 1));
    WriteFile(dir.path() / "a.jsonl", s);
    const json doc = json::parse(Report({dir.path().string(), "--json"}).out);
    ASSERT_EQ(doc["review"].size(), 1u) << timing;
    const json& launch = doc["review"][0]["streams"][0]["last_launches"][0];
    if (finished == "unknown") {
      EXPECT_TRUE(launch["finished"].is_null()) << timing;
    } else {
      EXPECT_EQ(launch["finished"], false) << timing;
    }
  }
}

// Under sampled most launches are made outside a window: their kernel events say no kernel_time
// will come (timing_window false), so the builder does not hold them waiting for one. With room
// for 8 waiting launches, 40 gemm launches of which the 1st, 11th, 21st and 31st are in a window
// (taking 10, 20, 30 and 40 us), their times after all 40 launches (one activity flush at the
// end): each of the 4 still finds its launch (kept waiting alongside the 36 others, it would have
// been pushed out by the 8 launches after it and given up untimed).
TEST(ReportTiming, LaunchesOutsideAWindowDoNotWaitForATime) {
  TempDir dir;
  std::string s = Line(StartWith(100, "sampled")) + Line(Device(100, 1, 0, "NVIDIA A100"));
  uint64_t seq = 2;
  for (uint64_t i = 1; i <= 40; ++i) {
    schema::OwnedKernelEvent k = Kernel(100, seq++, kStart + static_cast<int64_t>(i) * 1000, i,
                                        Gemm());
    k.timing_window = i % 10 == 1;
    s += Line(k);
  }
  for (uint64_t i = 1; i <= 40; i += 10) s += Line(KernelTime(100, seq++, i, (i / 10 + 1) * 10000));
  s += Line(End(100, seq++, 0));
  WriteFile(dir.path() / "a.jsonl", s);

  ReportOptions o;
  o.max_pending_launches = 8;
  ::cuflight::report::Report r;
  std::string error;
  ASSERT_TRUE(BuildReport(o, {dir.path() / "a.jsonl"}, &r, &error)) << error;
  EXPECT_EQ(r.launches, 40u);
  EXPECT_EQ(r.timed_launches, 4u);
  EXPECT_EQ(r.bounds.launches_given_up, 0u);
  EXPECT_EQ(r.bounds.times_given_up, 0u);
  EXPECT_EQ(r.bounds.peak_pending_launches, 4u);  // the four in windows, no other
  ASSERT_EQ(r.signatures.size(), 1u);
  ASSERT_TRUE(r.signatures[0].gpu_time.has_value());
  EXPECT_EQ(r.signatures[0].gpu_time->count, 4u);
  EXPECT_EQ(r.signatures[0].gpu_time->total_ns, 10000u + 20000u + 30000u + 40000u);
  EXPECT_EQ(r.signatures[0].sampled.launches, 40u);
  EXPECT_EQ(r.signatures[0].sampled.timed, 4u);
}

// An `all` log reads as before, and so do an older log whose config says "1" (how producers wrote
// CUFLIGHT_TIMING before the policies) and one without config.timing: the same table, no
// sampled columns or notes, and the policy "all" in the JSON.
TEST(ReportTiming, AllAndOlderLogsReadAsAll) {
  std::map<std::string, std::string> tables;
  for (const std::string timing : {"all", "1", "true", ""}) {
    TempDir dir;
    WriteFile(dir.path() / "a.jsonl", SampledProcess(100, timing));
    const CliRun r = Report({dir.path().string(), "--color", "never"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    tables[timing] = r.out;
    EXPECT_THAT(r.out, HasSubstr("LAUNCHES  TOTAL  "));
    EXPECT_THAT(r.out, Not(HasSubstr("MEASURED")));
    EXPECT_THAT(r.out, Not(HasSubstr("EST")));
    EXPECT_THAT(r.out, Not(HasSubstr("sampled")));
    EXPECT_THAT(r.out, HasSubstr("-: no launch of the signature was timed\n"));
    const json doc = json::parse(Report({dir.path().string(), "--json"}).out);
    EXPECT_EQ(doc["processes"][0]["timing_policy"], "all") << timing;
    for (const json& s : doc["signatures"]) EXPECT_FALSE(s.contains("gpu_time_estimate"));
    EXPECT_FALSE(doc["totals"].contains("gpu_time_estimate_ns"));
    EXPECT_EQ(doc["totals"]["sampled_launches"], 0);
    const CliRun csv = Report({dir.path().string(), "--csv"});
    EXPECT_THAT(csv.out, Not(HasSubstr("sampled")));
    const CliRun html = Report({dir.path().string(), "--html", "-"});
    EXPECT_THAT(html.out, HasSubstr("</b>total GPU time</div>"));
    EXPECT_THAT(html.out, Not(HasSubstr(">TIMING</th>")));
  }
  EXPECT_EQ(tables["1"], tables["all"]);
  EXPECT_EQ(tables["true"], tables["all"]);
  EXPECT_EQ(tables[""], tables["all"]);
}

// The policy in force wins over the one asked for: process_start says sampled, but the library
// fell back to all (an older CUPTI; its kernel events carry no timing_window) and process_end
// says all. Nothing is estimated, and an untimed launch of the ended process did not finish.
TEST(ReportTiming, ThePolicyInForceWinsOverTheConfig) {
  TempDir dir;
  std::string s = Line(StartWith(100, "sampled")) + Line(Device(100, 1, 0, "NVIDIA A100"));
  s += Line(Kernel(100, 2, kStart + 1, 1, Gemm())) + Line(KernelTime(100, 3, 1, 100000));
  s += Line(Kernel(100, 4, kStart + 2, 2, Gemm()));
  s += Line(testing::ApiError(100, 5, "cuCtxSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", 700, {2}));
  schema::OwnedProcessEndEvent end = End(100, 6, 1);
  end.timing_policy = schema::TimingPolicy::kAll;
  s += Line(end);
  WriteFile(dir.path() / "a.jsonl", s);
  const json doc = json::parse(Report({dir.path().string(), "--json"}).out);
  EXPECT_EQ(doc["processes"][0]["timing_policy"], "all");
  EXPECT_EQ(doc["totals"]["sampled_launches"], 0);
  EXPECT_EQ(doc["review"][0]["streams"][0]["last_launches"][1]["finished"], false);
}

// Under sampled timing a launch made in a timing window expects its kernel_time: after a flush
// (process_end) one without it did not finish, as under all; one outside a window is unknown.
TEST(ReportTiming, ALaunchInAWindowExpectsItsTime) {
  TempDir dir;
  std::string s = Line(StartWith(100, "sampled")) + Line(Device(100, 1, 0, "NVIDIA A100"));
  schema::OwnedKernelEvent outside = Kernel(100, 2, kStart + 1, 1, Gemm());
  outside.timing_window = false;
  schema::OwnedKernelEvent inside = Kernel(100, 3, kStart + 2, 2, Gemm());
  inside.timing_window = true;
  s += Line(outside) + Line(inside);
  s += Line(testing::ApiError(100, 4, "cuCtxSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", 700, {2}));
  s += Line(End(100, 5, 1));
  WriteFile(dir.path() / "a.jsonl", s);
  const json doc = json::parse(Report({dir.path().string(), "--json"}).out);
  const json& launches = doc["review"][0]["streams"][0]["last_launches"];
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_TRUE(launches[0]["finished"].is_null());  // outside a window: no time was to come
  EXPECT_EQ(launches[1]["finished"], false);       // in one: its time did not come
}

// Timing off: no estimate either (nothing was sampled), and the policy is said.
TEST(ReportTiming, OffIsNotSampled) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", SampledProcess(100, "0"));
  const json doc = json::parse(Report({dir.path().string(), "--json"}).out);
  EXPECT_EQ(doc["processes"][0]["timing_policy"], "off");
  EXPECT_EQ(doc["totals"]["sampled_launches"], 0);
}

}  // namespace
}  // namespace cuflight::report
