// `cuflight report --job` (and --rank, --pod) and `cuflight export --job`, the built binary run as
// a user would, over the logs of a job on two nodes, one log directory per node as each node's
// collector writes it: 8 ranks of job 4242, ranks 0-3 on node-a and 4-7 on node-b, each on its
// own GPU. Rank 5 crashes (SIGSEGV) at +10 s, rank 6 is SIGKILLed (the collector's process_lost)
// at +11 s, rank 2 crashes (SIGABRT) at +12.5 s, rank 3 hangs (its stall event at +43 s says
// 30 s into the stall: stalled since +13 s), ranks 7, 0, 4, 1 finish at +20.0, +20.1, +20.2 and
// +20.3 s. By hand:
//   ended in this order: 5 (crashed), 6 (lost), 2 (crashed), 7, 0, 4, 1 (finished); 3 not ended;
//   first to fail: rank 5 (+10 s, before the lost 6 at +11 s and the stall from +13 s).
// A process of no job runs on node-a beside them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "report_test_events.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace cuflight::cli {
namespace {

namespace fs = std::filesystem;
using cuflight::testing::ProcessResult;
using cuflight::testing::RunProcess;
using nlohmann::json;
using report::testing::Device;
using report::testing::End;
using report::testing::Kernel;
using report::testing::KernelSpec;
using report::testing::KernelTime;
using report::testing::Line;
using report::testing::Start;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kStart = 1763708400000000000;  // 2025-11-21T07:00:00Z
constexpr int64_t kSecond = 1000000000;

KernelSpec Named(std::string demangled) {
  KernelSpec k;
  k.name = "_Z" + std::to_string(demangled.size()) + demangled;
  k.demangled = demangled + "()";
  return k;
}

std::string Host(int rank) { return rank < 4 ? "node-a" : "node-b"; }
int32_t Pid(int rank) { return 1000 * (rank < 4 ? 1 : 2) + rank % 4; }
std::string Uuid(int rank) { return "GPU-0000000" + std::to_string(rank) + "-aaaa-bbbb-cccc-dddddddddddd"; }

// The lines of one rank, as its node's collector stores them.
std::string RankLog(int rank) {
  const int32_t pid = Pid(rank);
  schema::OwnedProcessStartEvent start = Start(pid, 0, kStart, "/opt/job/trainer");
  start.hostname = Host(rank);
  start.attribution = {{"RANK", std::to_string(rank)},
                       {"SLURM_JOB_ID", "4242"},
                       {"job", "4242"},
                       {"local_rank", std::to_string(rank % 4)},
                       {"pod_name", "trainer-" + std::to_string(rank)},
                       {"pod_namespace", "ml"},
                       {"rank", std::to_string(rank)},
                       {"world_size", "8"}};
  schema::OwnedDeviceEvent device = Device(pid, 1, 0, "NVIDIA H100 80GB HBM3");
  device.uuid = Uuid(rank);
  std::string s = Line(start) + Line(device);
  // gemm at +1 s (timed), then allreduce at +9 s: the last kernel of every rank.
  s += Line(Kernel(pid, 2, kStart + 1 * kSecond, 1, Named("gemm")));
  s += Line(KernelTime(pid, 3, 1, 500000));
  s += Line(Kernel(pid, 4, kStart + 9 * kSecond, 2, Named("allreduce")));
  auto crash = [&](int64_t at, int signal, const char* name) {
    schema::OwnedProcessCrashEvent c;
    c.header = {kStart + at, pid, 5};
    c.signal = signal;
    c.signal_name = name;
    c.tid = pid;
    return Line(c);
  };
  switch (rank) {
    case 5:
      return s + crash(10 * kSecond, 11, "SIGSEGV");
    case 2:
      return s + crash(12 * kSecond + kSecond / 2, 6, "SIGABRT");
    case 6: {
      schema::OwnedProcessLostEvent lost;
      lost.header = {kStart + 11 * kSecond, pid, 4};
      lost.last_seq = 4;
      lost.events_stored = 5;
      return s + Line(lost);
    }
    case 3: {
      schema::OwnedStallEvent stall;
      stall.header = {kStart + 43 * kSecond, pid, 5};
      stall.stall_ms = 10000;
      stall.stalled_ms = 30000;
      stall.streams_stalled = 1;
      schema::OwnedStallStream stream;
      stream.waiting_ms = 30000;
      stream.unfinished = 1;
      schema::OwnedStallLaunch launch;
      launch.correlation_id = 2;
      launch.name = "_Z9allreduce";
      launch.demangled = "allreduce()";
      launch.age_ms = 34000;
      stream.launches.push_back(launch);
      stall.streams.push_back(stream);
      return s + Line(stall);
    }
    default: {
      const int64_t at = 20 * kSecond + (rank == 7 ? 0 : rank == 0 ? 1 : rank == 4 ? 2 : 3) *
                                            kSecond / 10;
      s += Line(KernelTime(pid, 5, 2, 700000));
      schema::OwnedProcessEndEvent end = End(pid, 6, 0);
      end.header.ts_ns = kStart + at;
      return s + Line(end);
    }
  }
}

class JobViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int rank = 0; rank < 8; ++rank) {
      const fs::path day = Dir(Host(rank)) / "2025-11-21";
      report::testing::WriteFile(
          day / fmt(Host(rank), Pid(rank)), RankLog(rank));
    }
    // A process of no job on node-a.
    schema::OwnedProcessStartEvent other = Start(1500, 0, kStart, "/usr/bin/python3");
    other.hostname = "node-a";
    report::testing::WriteFile(Dir("node-a") / "2025-11-21" / fmt("node-a", 1500),
                               Line(other) + Line(End(1500, 1, 0)));
  }

  static std::string fmt(const std::string& host, int32_t pid) {
    return host + "-trainer-" + std::to_string(pid) + "-" + std::to_string(kStart) + ".jsonl";
  }
  fs::path Dir(const std::string& host) const { return dir_.path() / host / "logs"; }

  ProcessResult Cuflight(std::vector<std::string> args) const {
    args.push_back(Dir("node-a").string());
    args.push_back(Dir("node-b").string());
    return RunProcess(CUFLIGHT_CLI_PATH, args);
  }

  test_support::TempDir dir_;
};

TEST_F(JobViewTest, TheTableNamesEveryRankItsEndingTheOrderAndTheFirstToFail) {
  const ProcessResult r = Cuflight({"report", "--job", "4242", "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("note: 1 process left out by --job/--rank/--pod\n"));
  // Wrapped at 120 columns.
  EXPECT_THAT(r.out, HasSubstr("job 4242: 8 processes (world size 8) on 2 hosts; 4 finished, 2 "
                               "crashed, 1 lost, 1 stalled; first to fail: rank 5\n  (crashed at "
                               "07:00:10.000 UTC on node-b)\n"));
  EXPECT_THAT(r.out, HasSubstr("  ranks ended in this order (each host's clock): 5 (crashed), 6 "
                               "(lost), 2 (crashed), 7 (finished), 0 (finished), 4\n    "
                               "(finished), 1 (finished)\n"));
  EXPECT_THAT(r.out, HasSubstr("  not ended when the log ends: 3 (stalled)\n"));
  // One row per rank: host, GPU, pid, ending, order, time, last kernel.
  std::vector<std::string> rows;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" GPU-0000000") != std::string::npos) rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), 8u) << r.out;
  const std::vector<std::string> expected = {
      "     0  node-a  " + Uuid(0) + "  1000  finished           5  07:00:20.100  allreduce()",
      "     1  node-a  " + Uuid(1) + "  1001  finished           7  07:00:20.300  allreduce()",
      "     2  node-a  " + Uuid(2) + "  1002  crashed            3  07:00:12.500  allreduce()",
      "     3  node-a  " + Uuid(3) + "  1003  stalled            -  07:00:13.000 (since)  "
      "allreduce()",
      "     4  node-b  " + Uuid(4) + "  2000  finished           6  07:00:20.200  allreduce()",
      "     5  node-b  " + Uuid(5) + "  2001  crashed (first)    1  07:00:10.000  allreduce()",
      "     6  node-b  " + Uuid(6) + "  2002  lost               2  07:00:11.000  allreduce()",
      "     7  node-b  " + Uuid(7) + "  2003  finished           4  07:00:20.000  allreduce()"};
  for (size_t i = 0; i < rows.size(); ++i) {
    // Columns are padded to the widest cell: compare with the runs of spaces squeezed.
    auto squeeze = [](std::string s) {
      std::string out;
      for (const char c : s) {
        if (c == ' ' && !out.empty() && out.back() == ' ') continue;
        out += c;
      }
      return out;
    };
    EXPECT_EQ(squeeze(rows[i]), squeeze(expected[i]));
  }
}

TEST_F(JobViewTest, JsonHasTheRanksInOrder) {
  const ProcessResult r = Cuflight({"report", "--job", "4242", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["jobs"].size(), 1u);
  const json& job = doc["jobs"][0];
  EXPECT_EQ(job["job"], "4242");
  EXPECT_EQ(job["hosts"], 2);
  EXPECT_EQ(job["first_failed"], 5);
  EXPECT_EQ(job["end_order"], json::parse("[5, 6, 2, 7, 0, 4, 1]"));
  EXPECT_EQ(job["missing_ranks"], json::array());
  ASSERT_EQ(job["ranks"].size(), 8u);
  const json& three = job["ranks"][3];
  EXPECT_EQ(three["ending"], "stalled");
  EXPECT_TRUE(three["ended_ns"].is_null());
  EXPECT_EQ(three["failed_ns"], kStart + 13 * kSecond);  // 43 s - 30 s into the stall
  const json& five = job["ranks"][5];
  EXPECT_EQ(five["host"], "node-b");
  EXPECT_EQ(five["gpus"], json::array({Uuid(5)}));
  EXPECT_EQ(five["pod"], "ml/trainer-5");
  EXPECT_EQ(five["ending"], "crashed");
  EXPECT_EQ(five["last_kernel"]["name"], "allreduce()");
  EXPECT_EQ(doc["read"]["processes_not_selected"], 1);
  EXPECT_EQ(doc["processes"].size(), 8u);
}

TEST_F(JobViewTest, RankAndPodSelectProcesses) {
  const json two = json::parse(Cuflight({"report", "--job", "4242", "--rank", "2", "--rank", "6",
                                         "--json"})
                                   .out);
  std::set<int> ranks;
  for (const json& row : two["jobs"][0]["ranks"]) ranks.insert(row["rank"].get<int>());
  EXPECT_EQ(ranks, (std::set<int>{2, 6}));
  EXPECT_EQ(two["jobs"][0]["first_failed"], 6);  // lost at +11 s, before rank 2's crash
  const json pod = json::parse(Cuflight({"report", "--pod", "ml/trainer-3", "--json"}).out);
  ASSERT_EQ(pod["processes"].size(), 1u);
  EXPECT_EQ(pod["processes"][0]["pid"], Pid(3));
  const json by_name = json::parse(Cuflight({"report", "--pod", "trainer-3", "--json"}).out);
  EXPECT_EQ(by_name["processes"].size(), 1u);
  // Without --job every job is shown, and the process of no job is said.
  const ProcessResult all = Cuflight({"report", "--color", "never"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr("job 4242: 8 processes"));
  EXPECT_THAT(all.out, HasSubstr("1 process has no job in its attribution"));
  // A job no process names: an empty view, said.
  const ProcessResult none = Cuflight({"report", "--job", "999", "--color", "never"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_THAT(none.out, HasSubstr("note: 9 processes left out by --job/--rank/--pod"));
  EXPECT_THAT(none.out, Not(HasSubstr("job 999:")));
}

// The two fleet questions of docs/fleet.md ("The fleet's questions"), answered by the report as
// that section writes the commands. Beside job 4242 (its kernels' occupancy fields are the
// defaults: limited by warps), job 5151 runs one rank on node-b that launches, on 2025-11-21, a
// kernel limited by registers three times (4 blocks of 8 warps = 32 of 64 warps: 50%) and one
// limited by shared memory once, and on 2025-11-22 the register-limited kernel once more. By
// hand: asked for 2025-11-21, only job 5151 launched register-limited kernels, 3 launches of 1
// signature; job 4242 none. The crashed ranks of job 4242 are 2 and 5, the lost one 6, each with
// allreduce() (its launch at +9 s, after gemm at +1 s) as its last kernel.
TEST_F(JobViewTest, TheFleetQuestionsAnsweredByTheReport) {
  constexpr int32_t kPid = 3000;
  schema::OwnedProcessStartEvent start = Start(kPid, 0, kStart, "/opt/job/solver");
  start.hostname = "node-b";
  start.attribution = {{"SLURM_JOB_ID", "5151"}, {"job", "5151"}, {"rank", "0"}};
  KernelSpec regs = Named("regs_heavy");
  regs.occupancy = report::testing::Fields(4, 8, 64, schema::Resource::kRegisters);
  KernelSpec smem = Named("smem_heavy");
  smem.occupancy = report::testing::Fields(2, 8, 64, schema::Resource::kSharedMem);
  std::string log = Line(start) + Line(Device(kPid, 1, 0, "NVIDIA H100 80GB HBM3"));
  uint64_t seq = 2;
  for (int i = 0; i < 3; ++i) {
    log += Line(Kernel(kPid, seq, kStart + (2 + i) * kSecond, seq, regs));
    ++seq;
  }
  log += Line(Kernel(kPid, seq, kStart + 6 * kSecond, seq, smem));
  ++seq;
  log += Line(Kernel(kPid, seq, kStart + 86400 * kSecond, seq, regs));  // 2025-11-22
  report::testing::WriteFile(Dir("node-b") / "2025-11-21" / fmt("node-b", kPid), log);

  // Which jobs launched register-limited kernels on 2025-11-21? The jobs the logs name, then
  // per job the launches --limiter registers keeps in that day.
  const ProcessResult all = Cuflight({"report", "--json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const json everything = json::parse(all.out);
  std::set<std::string> jobs;
  for (const json& p : everything["processes"]) {
    if (p.contains("attribution") && p["attribution"].contains("job")) {
      jobs.insert(p["attribution"]["job"].get<std::string>());
    }
  }
  EXPECT_EQ(jobs, (std::set<std::string>{"4242", "5151"}));
  std::map<std::string, int64_t> register_limited;
  for (const std::string& job : jobs) {
    const ProcessResult r =
        Cuflight({"report", "--job", job, "--limiter", "registers", "--since",
                  "2025-11-21T00:00:00Z", "--until", "2025-11-22T00:00:00Z", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json doc = json::parse(r.out);
    register_limited[job] = doc["totals"]["launches"].get<int64_t>();
    for (const json& sig : doc["signatures"]) {
      EXPECT_EQ(sig["limiting_resource"], "registers") << job;
      EXPECT_EQ(sig["demangled"], "regs_heavy()") << job;
    }
  }
  EXPECT_EQ(register_limited, (std::map<std::string, int64_t>{{"4242", 0}, {"5151", 3}}));

  // The last kernel of every crashed (and the lost) rank of job 4242.
  const ProcessResult job = Cuflight({"report", "--job", "4242", "--json"});
  ASSERT_EQ(job.exit_code, 0) << job.err;
  std::map<int, std::string> crashed;
  std::map<int, std::string> lost;
  const json view = json::parse(job.out);
  for (const json& row : view["jobs"][0]["ranks"]) {
    if (row["ending"] == "crashed") crashed[row["rank"].get<int>()] = row["last_kernel"]["name"];
    if (row["ending"] == "lost") lost[row["rank"].get<int>()] = row["last_kernel"]["name"];
  }
  EXPECT_EQ(crashed, (std::map<int, std::string>{{2, "allreduce()"}, {5, "allreduce()"}}));
  EXPECT_EQ(lost, (std::map<int, std::string>{{6, "allreduce()"}}));
}

TEST_F(JobViewTest, BadValuesExitTwoWithOneLine) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"report", "--rank", "-1"},
                                             {"report", "--rank", "x"},
                                             {"report", "--job", ""},
                                             {"report", "--pod", ""},
                                             {"report", "--job", std::string(300, '4')},
                                             {"export", "--perfetto", "-", "--rank", "x"}}) {
    const ProcessResult r = Cuflight(args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << " " << args.back() << ": " << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_THAT(r.err, ::testing::StartsWith("cuflight ")) << r.err;
  }
}

TEST_F(JobViewTest, HtmlGroupsByJobAndRank) {
  const fs::path page = dir_.path() / "job.html";
  const ProcessResult r = Cuflight({"report", "--job", "4242", "--html", page.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(page);
  std::stringstream text;
  text << in.rdbuf();
  const std::string html = text.str();
  EXPECT_THAT(html, HasSubstr("<a href=\"#jobs\">Jobs</a>"));
  EXPECT_THAT(html, HasSubstr("<section id=\"jobs\">"));
  EXPECT_THAT(html, HasSubstr("first to fail: rank 5 (crashed at 07:00:10.000 UTC on node-b)"));
  EXPECT_THAT(html, HasSubstr("crashed (first to fail)</td>"));
  EXPECT_THAT(html, HasSubstr("s clock): 5 (crashed), "
                              "6 (lost), 2 (crashed), 7 (finished), 0 (finished), 4 (finished), "
                              "1 (finished)."));
}

TEST_F(JobViewTest, TheTraceHasATrackPerRankInRankOrder) {
  const fs::path trace = dir_.path() / "job.json";
  const ProcessResult r = Cuflight({"export", "--perfetto", trace.string(), "--job", "4242"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(trace);
  const json doc = json::parse(in);
  std::map<int64_t, std::string> names;  // host pid -> process_name
  std::map<int64_t, int64_t> order;      // host pid -> process_sort_index
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "M" || e["pid"].get<int64_t>() >= (int64_t{1} << 30)) continue;  // GPUs
    if (e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
    if (e["name"] == "process_sort_index") order[e["pid"]] = e["args"]["sort_index"];
  }
  ASSERT_EQ(names.size(), 8u);  // the process of no job left out
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(names[Pid(rank)], "job 4242 rank " + std::to_string(rank) + ": trainer (pid " +
                                    std::to_string(Pid(rank)) + ") on " + Host(rank));
  }
  // Sorted by rank: each rank's index below the next one's.
  for (int rank = 0; rank + 1 < 8; ++rank) EXPECT_LT(order[Pid(rank)], order[Pid(rank + 1)]);
}

}  // namespace
}  // namespace cuflight::cli
