// `cuflight report` through RunCli on hand-written logs: the header and notes, the review section
// (api_error), bad input, filters, sorting, JSON and CSV, several device models, --retarget
// against the occupancy engine called here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"
#include "report_cli_run.h"
#include "report_test_events.h"
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


class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "cuflight-report-XXXXXX").string();
    path_ = mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

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
  EXPECT_THAT(r.out, HasSubstr("  > registers limit 6 blocks/SM (75%); <= 32 regs/thread would "
                               "fit 7 (88%)\n"));
  EXPECT_THAT(r.out, HasSubstr("  > 48 KiB smem per block limits 3 blocks/SM (19%); <= 40 KiB "
                               "per block would fit 4 (25%)\n"));
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
  on_stream.stream = 0x7f00;
  s += Line(Kernel(kPid, 2, kStart + 1, 11, on_stream));
  s += Line(KernelTime(kPid, 3, 11, 1000, 0x7f00));
  s += Line(Kernel(kPid, 4, kStart + 2, 12, on_stream));
  s += Line(ApiError(kPid, 5, "cuStreamSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", 700, {11, 12}));
  s += Line(End(kPid, 6, 1));
  WriteFile(dir.path() / "a.jsonl", s);
  WriteFile(dir.path() / "b.jsonl", NormalProcess(kPid + 1, kStart));
  const CliRun r = Report({dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t review = r.out.find("Processes that did not end normally (1)");
  ASSERT_NE(review, std::string::npos) << r.out;
  EXPECT_LT(review, r.out.find("Kernels by total GPU time"));
  EXPECT_THAT(r.out, HasSubstr("pid 100 trainer on node1: api_error: cuStreamSynchronize returned "
                               "CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
  EXPECT_THAT(r.out, HasSubstr("device 0, stream 0x7f00: 2 launches:"));
  EXPECT_THAT(r.out, HasSubstr("yes 1.00us (failed call)"));
  EXPECT_THAT(r.out, HasSubstr("NO (failed call)"));

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
  EXPECT_EQ(launches[1]["finished"], false);
  EXPECT_EQ(launches[1]["in_failed_call"], true);
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
  EXPECT_THAT(r.out, HasSubstr("NO"));
  const json j = json::parse(Report({dir.path().string(), "--json"}).out);
  ASSERT_EQ(j["review"].size(), 1u);
  EXPECT_EQ(j["review"][0]["ending"], "crash");
  EXPECT_EQ(j["review"][0]["crash"]["signal_name"], "SIGSEGV");
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
  // The advice holds no comma or quote: not quoted.
  EXPECT_THAT(rows[1], HasSubstr(",registers limit 6 blocks/SM (75%); <= 32 regs/thread would "
                                 "fit 7 (88%)"));
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
}

}  // namespace
}  // namespace cuflight::report
