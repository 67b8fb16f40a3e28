// Metrics by workload (hpc_job, namespace, pod, container), the kernel timing counters, the
// build info, the connection metrics apart from line rejections, and the size of /metrics for
// 10,000 processes. Expected values are worked out by hand from the calls in each test.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>
#include <string>

#include "cuflight/metrics/metrics.h"
#include "cuflight/schema/sticky_errors.h"
#include "exposition_parser.h"

namespace cuflight::collector {
namespace {

using Steady = std::chrono::steady_clock;
using testing::Exposition;
using testing::Labels;
using testing::ParseExposition;

Exposition Parse(const std::string& text) {
  Exposition e;
  std::string error;
  EXPECT_TRUE(ParseExposition(text, &e, &error)) << error << "\n" << text;
  return e;
}

double V(const Exposition& e, std::string_view name, const Labels& labels = {}) {
  const std::optional<double> v = e.Value(name, labels);
  EXPECT_TRUE(v.has_value()) << name << " with the given labels is missing";
  return v.value_or(std::numeric_limits<double>::quiet_NaN());
}

// The labels of job 4242's pod "trainer-0" in namespace "ml", container "pytorch".
Labels Trainer(Labels more = {}) {
  more["hpc_job"] = "4242";
  more["namespace"] = "ml";
  more["pod"] = "trainer-0";
  more["container"] = "pytorch";
  return more;
}

const Metrics::Workload kTrainer{"4242", "ml", "trainer-0", "pytorch"};

TEST(MetricsWorkloadTest, ProcessesOfOneWorkloadShareItsSeries) {
  Metrics m;
  // Two ranks of job 4242 in one pod; a process on a workstation, with no attribution.
  m.Process(1, kTrainer, Metrics::TimingPolicy::kAll);
  m.Process(2, kTrainer, Metrics::TimingPolicy::kAll);
  m.Process(3, {}, Metrics::TimingPolicy::kAll);
  m.Process(1, {"other-job", "", "", ""}, Metrics::TimingPolicy::kOff);  // changes nothing
  m.Kernel(1, 1, "gemm", 0, "registers", 0.25);
  m.Kernel(2, 1, "gemm", 0, "registers", 0.5);
  m.Kernel(2, 2, "softmax", 0, "warps", 1.0);
  m.Kernel(3, 1, "gemm", 0, "shared_mem", 0.5);
  m.KernelTime(1, 1, 0, 3'000'000);
  m.KernelTime(2, 2, 0, 1'000'000);
  m.ApiError("CUDA_ERROR_ILLEGAL_ADDRESS", 1);
  m.ApiError("CUDA_ERROR_INVALID_VALUE", 2);
  m.ApiError("CUDA_ERROR_OUT_OF_MEMORY", 2);
  m.ProcessCrashed(1);
  m.ProcessLost(2);

  const Exposition e = Parse(m.Render());
  EXPECT_EQ(V(e, "cuflight_workload_processes_started_total", Trainer()), 2);
  EXPECT_EQ(V(e, "cuflight_workload_processes_started_total"), 1);  // process 3: no labels
  EXPECT_EQ(V(e, "cuflight_workload_process_crashes_total", Trainer()), 1);
  EXPECT_EQ(V(e, "cuflight_workload_processes_lost_total", Trainer()), 1);
  EXPECT_EQ(V(e, "cuflight_workload_process_crashes_total"), 0);  // exported from 0
  // The sticky error by name (cuda.h: the context is unusable), the two others as "other".
  EXPECT_EQ(V(e, "cuflight_workload_api_errors_total",
              Trainer({{"error", "CUDA_ERROR_ILLEGAL_ADDRESS"}})),
            1);
  EXPECT_EQ(V(e, "cuflight_workload_api_errors_total", Trainer({{"error", "other"}})), 2);
  EXPECT_EQ(e.SamplesNamed("cuflight_workload_api_errors_total").size(), 2u);
  EXPECT_EQ(V(e, "cuflight_workload_kernel_launches_total",
              Trainer({{"limiting_resource", "registers"}})),
            2);
  EXPECT_EQ(
      V(e, "cuflight_workload_kernel_launches_total", Trainer({{"limiting_resource", "warps"}})),
      1);
  EXPECT_EQ(V(e, "cuflight_workload_kernel_launches_total", {{"limiting_resource", "shared_mem"}}),
            1);
  EXPECT_EQ(e.SamplesNamed("cuflight_workload_kernel_launches_total").size(), 3u);
  // The trainer's occupancies 0.25, 0.5, 1.0.
  EXPECT_EQ(V(e, "cuflight_workload_kernel_occupancy_ratio_bucket", Trainer({{"le", "0.25"}})),
            1);
  EXPECT_EQ(V(e, "cuflight_workload_kernel_occupancy_ratio_bucket", Trainer({{"le", "0.5"}})), 2);
  EXPECT_EQ(V(e, "cuflight_workload_kernel_occupancy_ratio_count", Trainer()), 3);
  EXPECT_EQ(V(e, "cuflight_workload_kernel_occupancy_ratio_sum", Trainer()), 1.75);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_workload_kernel_gpu_seconds_total", Trainer()), 0.004);
  EXPECT_EQ(V(e, "cuflight_workload_kernel_timed_launches_total", Trainer()), 2);
  EXPECT_EQ(V(e, "cuflight_workload_kernel_timed_launches_total"), 0);
}

// The stall gauge names the stalled process's workload and GPU: "which pod's kernels stall on
// GPU-7f3e...".
TEST(MetricsWorkloadTest, TheStallGaugeCarriesTheWorkloadAndTheGpu) {
  Metrics m;
  const Steady::time_point t0 = Steady::now();
  m.Process(1, kTrainer, Metrics::TimingPolicy::kSampled);
  m.Device(1, 0, "GPU-7f3e0c1a-2b4d-4e6f-8a9b-0c1d2e3f4a5b", "00000000:19:00.0",
           "NVIDIA H200");
  const Metrics::StallAge ages[] = {{0, 12}};
  m.Stall(1, "node1", 77, "/opt/train", ages, t0);
  const Exposition e = Parse(m.Render(t0));
  EXPECT_EQ(V(e, "cuflight_kernel_oldest_unfinished_seconds",
              Trainer({{"hostname", "node1"},
                       {"pid", "77"},
                       {"exe", "train"},
                       {"UUID", "GPU-7f3e0c1a-2b4d-4e6f-8a9b-0c1d2e3f4a5b"},
                       {"pci_bus_id", "00000000:19:00.0"},
                       {"modelName", "NVIDIA H200"}})),
            12);
}

// At most `workloads` blocks have labels; the rest are one block labelled "other". A block whose
// processes have all gone leaves the exposition after the TTL, and its slot takes a new workload
// whose counters start from 0.
TEST(MetricsWorkloadTest, WorkloadsAreBoundedAndExpireAfterTheirLastProcess) {
  Metrics m(50, Metrics::kDefaultJoinCapacity, 2, std::chrono::seconds(60));
  const Steady::time_point t0 = Steady::now();
  m.Process(1, {"1", "", "", ""}, Metrics::TimingPolicy::kAll);
  m.Process(2, {"2", "", "", ""}, Metrics::TimingPolicy::kAll);
  m.Process(3, {"3", "", "", ""}, Metrics::TimingPolicy::kAll);
  m.Process(4, {"other", "other", "other", "other"}, Metrics::TimingPolicy::kAll);
  for (uint64_t p = 1; p <= 4; ++p) m.Kernel(p, 1, "k", 0, "warps", 0.5);
  Exposition e = Parse(m.Render(t0));
  EXPECT_EQ(V(e, "cuflight_workload_processes_started_total", {{"hpc_job", "1"}}), 1);
  EXPECT_EQ(V(e, "cuflight_workload_processes_started_total", {{"hpc_job", "2"}}), 1);
  const Labels other = {
      {"hpc_job", "other"}, {"namespace", "other"}, {"pod", "other"}, {"container", "other"}};
  // Job 3 found no block; a workload whose labels are the overflow's is counted there too.
  EXPECT_EQ(V(e, "cuflight_workload_processes_started_total", other), 2);
  EXPECT_EQ(e.SamplesNamed("cuflight_workload_processes_started_total").size(), 3u);

  m.ProcessGone(1, t0 + std::chrono::seconds(10));
  // 59 s after its last process went, job 1 is still shown; at 60 s it is not.
  e = Parse(m.Render(t0 + std::chrono::seconds(69)));
  EXPECT_EQ(V(e, "cuflight_workload_kernel_launches_total",
              {{"hpc_job", "1"}, {"limiting_resource", "warps"}}),
            1);
  e = Parse(m.Render(t0 + std::chrono::seconds(70)));
  EXPECT_FALSE(
      e.Value("cuflight_workload_processes_started_total", {{"hpc_job", "1"}}).has_value());
  EXPECT_EQ(e.SamplesNamed("cuflight_workload_processes_started_total").size(), 2u);

  // Job 5 takes job 1's expired block, from 0. (Process() reads the steady clock: t0 + 70 s is
  // in the future, so the block expired 10 s after t0 is long past its TTL.)
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Metrics n(50, Metrics::kDefaultJoinCapacity, 1, std::chrono::seconds(0));
  n.Process(1, {"1", "", "", ""}, Metrics::TimingPolicy::kAll);
  n.Kernel(1, 1, "k", 0, "warps", 0.5);
  n.ProcessGone(1, Steady::now() - std::chrono::seconds(1));
  n.Process(5, {"5", "", "", ""}, Metrics::TimingPolicy::kAll);
  e = Parse(n.Render());
  EXPECT_EQ(V(e, "cuflight_workload_processes_started_total", {{"hpc_job", "5"}}), 1);
  EXPECT_FALSE(e.Value("cuflight_workload_kernel_launches_total",
                       {{"hpc_job", "5"}, {"limiting_resource", "warps"}})
                   .has_value());
  EXPECT_FALSE(
      e.Value("cuflight_workload_processes_started_total", {{"hpc_job", "1"}}).has_value());
}

// Measured GPU time and the launches it was measured on, so that PromQL can estimate the whole
// and say it is an estimate (docs/metrics.md, Kernel timing policies).
TEST(MetricsWorkloadTest, TimedLaunchesMakeTheEstimateComputable) {
  Metrics m;
  m.Process(1, kTrainer, Metrics::TimingPolicy::kSampled);
  m.Process(2, {}, Metrics::TimingPolicy::kOff);
  m.Process(3, {}, Metrics::TimingPolicy::kAll);
  // Process 1 launches gemm 10 times; a timing window was open for 2 of them (2 ms, 4 ms).
  for (uint64_t i = 1; i <= 10; ++i) m.Kernel(1, i, "gemm", 0, "registers", 0.5);
  m.KernelTime(1, 3, 0, 2'000'000);
  m.KernelTime(1, 7, 0, 4'000'000);
  // Process 2 (timing off) launches softmax 5 times: nothing is timed.
  for (uint64_t i = 1; i <= 5; ++i) m.Kernel(2, i, "softmax", 0, "warps", 1.0);
  m.Kernel(3, 1, "gemm", 0, "registers", 0.5);
  m.KernelTime(3, 1, 0, 3'000'000);
  const Exposition e = Parse(m.Render());
  EXPECT_EQ(V(e, "cuflight_kernel_launches_by_timing_total", {{"timing", "sampled"}}), 10);
  EXPECT_EQ(V(e, "cuflight_kernel_launches_by_timing_total", {{"timing", "off"}}), 5);
  EXPECT_EQ(V(e, "cuflight_kernel_launches_by_timing_total", {{"timing", "all"}}), 1);
  // gemm: 9 ms measured over 3 timed launches of 11: estimate 9 ms x 11 / 3 = 33 ms, sampled
  // fraction 3 / 11. softmax: 5 launches, none timed: GPU time unknown (0 / 0 in PromQL).
  const double measured =
      V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "gemm"}});
  const double timed = V(e, "cuflight_kernel_name_timed_launches_total", {{"kernel", "gemm"}});
  const double launches = V(e, "cuflight_kernel_name_launches_total",
                            {{"kernel", "gemm"}, {"limiting_resource", "registers"}});
  EXPECT_DOUBLE_EQ(measured, 0.009);
  EXPECT_EQ(timed, 3);
  EXPECT_EQ(launches, 11);
  EXPECT_DOUBLE_EQ(measured * launches / timed, 0.033);
  // softmax: 0 timed launches and 0 s measured; the estimate 0 x 5 / 0 is NaN in PromQL, never 0.
  EXPECT_EQ(V(e, "cuflight_kernel_name_timed_launches_total", {{"kernel", "softmax"}}), 0);
  EXPECT_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "softmax"}}), 0);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_workload_kernel_gpu_seconds_total", Trainer()), 0.006);
  EXPECT_EQ(V(e, "cuflight_workload_kernel_timed_launches_total", Trainer()), 2);
}

TEST(MetricsWorkloadTest, ConfigTimingValuesMapToPolicies) {
  // The contract (CUFLIGHT_TIMING): all|sampled|off; older producers wrote true/false.
  EXPECT_EQ(Metrics::TimingPolicyFromConfig("all"), Metrics::TimingPolicy::kAll);
  EXPECT_EQ(Metrics::TimingPolicyFromConfig("true"), Metrics::TimingPolicy::kAll);
  EXPECT_EQ(Metrics::TimingPolicyFromConfig(""), Metrics::TimingPolicy::kAll);
  EXPECT_EQ(Metrics::TimingPolicyFromConfig("sampled"), Metrics::TimingPolicy::kSampled);
  EXPECT_EQ(Metrics::TimingPolicyFromConfig("off"), Metrics::TimingPolicy::kOff);
  EXPECT_EQ(Metrics::TimingPolicyFromConfig("false"), Metrics::TimingPolicy::kOff);
  EXPECT_EQ(Metrics::TimingPolicyFromConfig("0"), Metrics::TimingPolicy::kOff);
}

// Lines, refused connections and closed connections are three families: a sum over one counts
// one kind of thing.
TEST(MetricsWorkloadTest, RejectionsRefusalsAndClosuresAreSeparate) {
  Metrics m;
  m.Rejected("malformed_json");
  m.Rejected("duplicate");
  m.ConnectionRefused("connection_limit");
  m.ConnectionRefused("connection_limit");
  m.ConnectionRefused("peer_not_allowed");
  m.ConnectionClosed("idle_timeout");
  const Exposition e = Parse(m.Render());
  EXPECT_EQ(e.SamplesNamed("cuflight_events_rejected_total").size(), 2u);
  EXPECT_EQ(V(e, "cuflight_connections_refused_total", {{"reason", "connection_limit"}}), 2);
  EXPECT_EQ(V(e, "cuflight_connections_refused_total", {{"reason", "peer_not_allowed"}}), 1);
  EXPECT_EQ(e.SamplesNamed("cuflight_connections_refused_total").size(), 2u);
  EXPECT_EQ(V(e, "cuflight_connections_closed_total", {{"reason", "idle_timeout"}}), 1);
  EXPECT_EQ(e.SamplesNamed("cuflight_connections_closed_total").size(), 1u);
}

TEST(MetricsWorkloadTest, BuildInfoNamesTheProjectVersion) {
  Metrics m;
  const Exposition e = Parse(m.Render());
  // CUFLIGHT_PROJECT_VERSION: project(VERSION) of the top CMakeLists.txt, given by the build.
  EXPECT_EQ(V(e, "cuflight_build_info", {{"version", CUFLIGHT_PROJECT_VERSION}, {"schema", "v1"}}),
            1);
  EXPECT_EQ(e.FindFamily("cuflight_build_info")->type, "gauge");
}

// The sticky errors' names are cuda.h's enumerators of the codes in kStickyErrors.
TEST(MetricsWorkloadTest, StickyErrorNamesAreThoseOfCudaH) {
  std::ifstream in(CUFLIGHT_CUDA_H);
  if (!in) GTEST_SKIP() << CUFLIGHT_CUDA_H << " is missing";
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  for (size_t i = 0; i < std::size(schema::kStickyErrors); ++i) {
    const std::string name(schema::kStickyErrorNames[i]);
    std::smatch match;
    ASSERT_TRUE(std::regex_search(header, match, std::regex(name + R"(\s*=\s*(\d+))"))) << name;
    EXPECT_EQ(std::stoi(match[1].str()), schema::kStickyErrors[i]) << name;
  }
}

// The /metrics size with 10,000 processes, recorded in docs/performance.md and docs/metrics.md:
// 8 GPUs, 50 kernel names, every process launching and timing a kernel, crashing or ending, one
// in a hundred stalled. Two shapes: every process its own job and pod (the worst case: the
// workload blocks fill, the rest are "other"), and 64 jobs of ~156 ranks. For comparison, the
// same worst case if every workload had its own series (a per-process label or
// cuflight_process_info join key would cost at least that).
struct SizeFigures {
  size_t bytes = 0;
  size_t series = 0;
};

SizeFigures Measure(size_t workload_limit, int jobs) {
  constexpr int kProcesses = 10000;
  Metrics m(50, Metrics::kDefaultJoinCapacity, workload_limit);
  const Steady::time_point t0 = Steady::now();
  std::vector<std::string> labels;
  for (int i = 0; i < kProcesses; ++i) {
    const auto p = static_cast<uint64_t>(i + 1);
    const int job = jobs > 0 ? i % jobs : i;
    const std::string job_id = std::to_string(100000 + job);
    const std::string pod = "train-" + job_id + "-" + std::to_string(i % 8);
    m.Process(p, {job_id, "ml", pod, "pytorch"}, Metrics::TimingPolicy::kSampled);
    char uuid[64];
    std::snprintf(uuid, sizeof(uuid), "GPU-00000000-0000-4000-8000-%012d", i % 8);
    char bus[32];
    std::snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0x19 + i % 8);
    m.Device(p, 0, uuid, bus, "NVIDIA H100 80GB HBM3");
    const std::string name = "kernel_" + std::to_string(i % 50);
    m.Kernel(p, 1, name, 0, i % 3 == 0 ? "registers" : "warps", 0.5);
    m.KernelTime(p, 1, 0, 1'000'000);
    m.ApiError(i % 7 == 0 ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "CUDA_ERROR_OUT_OF_MEMORY", p);
    if (i % 10 == 0) m.ProcessCrashed(p);
    if (i % 100 == 0) {
      const Metrics::StallAge age[] = {{0, 30}};
      m.Stall(p, "node", i, "/opt/train", age, t0);
    }
  }
  const std::string text = m.Render(t0);
  const Exposition e = Parse(text);
  SizeFigures f;
  f.bytes = text.size();
  for (const testing::Family& family : e.families) f.series += family.samples.size();
  return f;
}

TEST(MetricsSizeTest, TenThousandProcesses) {
  const SizeFigures worst = Measure(Metrics::kDefaultWorkloads, 0);
  const SizeFigures jobs = Measure(Metrics::kDefaultWorkloads, 64);
  const SizeFigures unbounded = Measure(10000, 0);
  std::printf(
      "10000 processes, 8 GPUs, 50 kernel names, %zu workload blocks:\n"
      "  every process its own job and pod: %zu bytes, %zu series\n"
      "  64 jobs:                           %zu bytes, %zu series\n"
      "  every process its own job, unbounded workloads: %zu bytes, %zu series\n",
      Metrics::kDefaultWorkloads, worst.bytes, worst.series, jobs.bytes, jobs.series,
      unbounded.bytes, unbounded.series);
  RecordProperty("worst_bytes", static_cast<int>(worst.bytes));
  RecordProperty("jobs64_bytes", static_cast<int>(jobs.bytes));
  RecordProperty("unbounded_bytes", static_cast<int>(unbounded.bytes));
  // The bound holds whatever the processes: docs/metrics.md's 1,572 + 11 (N + 2) + 35 (W + 1)
  // series, 11,139 with N = 50 kernel names and W = 256 workload blocks; and under 2 MiB.
  EXPECT_LE(worst.series, 11139u);
  EXPECT_LT(worst.bytes, size_t{2} << 20);
  EXPECT_LT(jobs.bytes, worst.bytes);
  EXPECT_GT(unbounded.bytes, 10 * worst.bytes / 4);
}

}  // namespace
}  // namespace cuflight::collector
