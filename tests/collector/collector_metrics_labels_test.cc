// The collector labels its series with what producers' events say (docs/metrics.md): the GPU from
// the device events (GPU-/MIG- UUIDs, PCI bus id, name), the workload from process_start's
// attribution, the timing policy from its config; and it counts bad lines and refused
// connections in two families. Expected values are worked out from the lines each test sends.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "collector.h"
#include "collector_test_util.h"
#include "cuflight/metrics/metrics.h"

namespace cuflight::collector {
namespace {

using testing::ProducerIdentity;
using testing::RawClient;
using testing::RunningCollector;
using testing::TempDir;
using testing::TestOptions;
using testing::WaitUntil;

constexpr const char* kGpu = "GPU-7f3e0c1a-2b4d-4e6f-8a9b-0c1d2e3f4a5b";
constexpr const char* kMig = "MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c5d";
// The GPU labels as the exposition writes them (SetH100's name: tests/support/h100_device.h).
const std::string kOnGpu = std::string("UUID=\"") + kGpu +
                           "\",pci_bus_id=\"00000000:19:00.0\",modelName=\"NVIDIA H100 80GB HBM3\"";
const std::string kOnMig = std::string("UUID=\"") + kMig +
                           "\",pci_bus_id=\"00000000:3B:00.0\",modelName=\"NVIDIA H100 80GB HBM3\"";
const std::string kTrainer =
    "hpc_job=\"4242\",namespace=\"ml\",pod=\"trainer-0\",container=\"pytorch\"";

// Rank 3 of Slurm job 4242 in pod ml/trainer-0, timing sampled: attribution and config as the
// injected library writes them (schema/v1/process_start.schema.json).
ProducerIdentity Rank3(const std::string& exe, int64_t start_ns) {
  ProducerIdentity id;
  id.pid = static_cast<int32_t>(getpid());
  id.exe = "/opt/bin/" + exe;
  id.start_ns = start_ns;
  id.attribution = {{"CONTAINER_NAME", "pytorch"}, {"RANK", "3"},          {"SLURM_JOB_ID", "4242"},
                    {"job", "4242"},               {"pod_name", "trainer-0"}, {"pod_namespace", "ml"},
                    {"rank", "3"}};
  id.config = {{"timing", "sampled"}};
  return id;
}

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(CollectorMetricsLabelsTest, SeriesCarryTheGpuAndTheWorkloadOfTheEvents) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Rank3("train", 31);
  RawClient client = RawClient::Unix(options.socket);
  // Ordinal 0 is a whole GPU, ordinal 1 a MIG instance; the kernel lines are on ordinal 0.
  ASSERT_TRUE(client.Send(testing::ProcessStartLine(id, 0) +
                          testing::DeviceLine(id, 1, 0, kGpu, "00000000:19:00.0") +
                          testing::DeviceLine(id, 2, 1, kMig, "00000000:3B:00.0") +
                          testing::KernelLine(id, 3, 7) + testing::KernelLine(id, 4, 8) +
                          testing::KernelTimeLine(id, 5, 7) +
                          testing::ApiErrorLine(id, 6, "CUDA_ERROR_ILLEGAL_ADDRESS", 700) +
                          testing::ProcessCrashLine(id, 7)));
  ASSERT_EQ(client.WaitAck(7), 7u);
  const std::string text = metrics.Render();
  // KernelLine: limited by registers (tests/collector/collector_test_util.cc).
  EXPECT_TRUE(Has(text, "cuflight_kernel_launches_total{" + kOnGpu +
                            ",limiting_resource=\"registers\"} 2"))
      << text;
  EXPECT_TRUE(Has(text, "cuflight_kernel_timed_launches_total{" + kOnGpu + "} 1")) << text;
  // The MIG instance was named and ran nothing: no series.
  EXPECT_EQ(text.find(kMig), std::string::npos) << text;
  EXPECT_TRUE(Has(text, "cuflight_workload_processes_started_total{" + kTrainer + "} 1")) << text;
  EXPECT_TRUE(Has(text, "cuflight_workload_process_crashes_total{" + kTrainer + "} 1")) << text;
  EXPECT_TRUE(Has(text, "cuflight_workload_api_errors_total{" + kTrainer +
                            ",error=\"CUDA_ERROR_ILLEGAL_ADDRESS\"} 1"))
      << text;
  EXPECT_TRUE(Has(text, "cuflight_workload_kernel_launches_total{" + kTrainer +
                            ",limiting_resource=\"registers\"} 2"))
      << text;
  EXPECT_TRUE(Has(text, "cuflight_kernel_launches_by_timing_total{timing=\"sampled\"} 2")) << text;
  running.Stop();
}

// After a collector restart the producer sends its process_start and device events again; they
// are duplicates (stored already) and still label the new kernels' series.
TEST(CollectorMetricsLabelsTest, ResentIdentityLabelsTheSeriesAfterARestart) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  const ProducerIdentity id = Rank3("resumed", 32);
  const std::string preamble = testing::ProcessStartLine(id, 0) +
                               testing::DeviceLine(id, 1, 0, kMig, "00000000:3B:00.0");
  {
    RunningCollector first(options);
    ASSERT_NE(first.collector(), nullptr);
    RawClient client = RawClient::Unix(options.socket);
    ASSERT_TRUE(client.Send(preamble + testing::KernelLine(id, 2, 1)));
    ASSERT_EQ(client.WaitAck(2), 2u);
    EXPECT_EQ(first.Stop(), 0);
  }
  Metrics metrics;
  RunningCollector second(options, &metrics);
  ASSERT_NE(second.collector(), nullptr);
  RawClient client = RawClient::Unix(options.socket);
  ASSERT_TRUE(client.Send(preamble + testing::KernelLine(id, 3, 2)));
  ASSERT_EQ(client.WaitAck(3), 3u);
  const std::string text = metrics.Render();
  EXPECT_TRUE(Has(text, "cuflight_kernel_launches_total{" + kOnMig +
                            ",limiting_resource=\"registers\"} 1"))
      << text;
  EXPECT_TRUE(Has(text, "cuflight_workload_kernel_launches_total{" + kTrainer +
                            ",limiting_resource=\"registers\"} 1"))
      << text;
  // The resent process_start and device lines were duplicates (stats are published each tick).
  EXPECT_TRUE(WaitUntil([&] { return second.stats().duplicates == 2u; }));
  second.Stop();
}

// Bad lines are counted in cuflight_events_rejected_total, connections over the limit in
// cuflight_connections_refused_total: a sum over either counts one kind of thing.
TEST(CollectorMetricsLabelsTest, BadLinesAndRefusedConnectionsAreCountedApart) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.max_connections = 2;
  // Above --max-connections: the whole collector is full before this uid's share is.
  options.max_connections_per_uid = 3;
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Rank3("noisy", 33);
  RawClient noisy = RawClient::Unix(options.socket);
  ASSERT_TRUE(noisy.Send(testing::ProcessStartLine(id, 0) + "this is not JSON\n[1,2,3]\n" +
                         testing::KernelLine(id, 1, 1)));
  ASSERT_EQ(noisy.WaitAck(1), 1u);
  RawClient second = RawClient::Unix(options.socket);
  ASSERT_TRUE(WaitUntil([&] { return running.stats().connections_accepted == 2; }));
  for (int i = 0; i < 3; ++i) {
    RawClient extra = RawClient::Unix(options.socket);
    EXPECT_TRUE(extra.WaitClosedByPeer());
  }
  ASSERT_TRUE(WaitUntil([&] { return running.stats().connections_refused == 3; }));
  const std::string text = metrics.Render();
  EXPECT_TRUE(Has(text, "cuflight_events_rejected_total{reason=\"malformed_json\"} 1")) << text;
  EXPECT_TRUE(Has(text, "cuflight_events_rejected_total{reason=\"not_an_object\"} 1")) << text;
  EXPECT_TRUE(Has(text, "cuflight_connections_refused_total{reason=\"connection_limit\"} 3"))
      << text;
  EXPECT_EQ(text.find("cuflight_events_rejected_total{reason=\"connection_limit\""),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("cuflight_connections_refused_total{reason=\"malformed_json\""),
            std::string::npos)
      << text;
  running.Stop();
}

}  // namespace
}  // namespace cuflight::collector
