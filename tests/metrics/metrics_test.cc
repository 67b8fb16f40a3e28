// Metrics: exact values after scripted calls, read back through an independent parser of the
// exposition format. Expected values are worked out by hand from the calls in each test.
#include "cuflight/metrics/metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <string>

#include "exposition_parser.h"

namespace cuflight::collector {
namespace {

using testing::Exposition;
using testing::Labels;
using testing::ParseExposition;

Exposition Parse(const Metrics& m) {
  Exposition e;
  std::string error;
  const std::string text = m.Render();
  EXPECT_TRUE(ParseExposition(text, &e, &error)) << error << "\n" << text;
  return e;
}

// Two GPUs as their device events name them: a whole H100 and a MIG instance of another GPU
// (the UUID formats of nvidia-smi -L; the PCI bus id as NVML writes it, of the parent GPU for
// the MIG instance: schema/v1/device.schema.json).
constexpr const char* kUuidA = "GPU-9f2d1c3e-5b7a-4e21-8c0d-1a2b3c4d5e6f";
constexpr const char* kBusA = "00000000:19:00.0";
constexpr const char* kUuidB = "MIG-0c8e7a51-2d34-5f67-9a8b-c1d2e3f4a5b6";
constexpr const char* kBusB = "00000000:3B:00.0";
constexpr const char* kModel = "NVIDIA H100 80GB HBM3";

// The GPU labels of a series, with more labels.
Labels Gpu(const char* uuid, const char* bus, Labels more = {}) {
  more["UUID"] = uuid;
  more["pci_bus_id"] = bus;
  more["modelName"] = kModel;
  return more;
}
Labels GpuA(Labels more = {}) { return Gpu(kUuidA, kBusA, std::move(more)); }
Labels GpuB(Labels more = {}) { return Gpu(kUuidB, kBusB, std::move(more)); }
// The series of launches on an ordinal no device event named.
Labels UnknownGpu(Labels more = {}) {
  more["UUID"] = "unknown";
  return more;
}

// The value of a series that must exist.
double V(const Exposition& e, std::string_view name, const Labels& labels = {}) {
  const std::optional<double> v = e.Value(name, labels);
  EXPECT_TRUE(v.has_value()) << name << " with the given labels is missing";
  return v.value_or(std::numeric_limits<double>::quiet_NaN());
}

TEST(MetricsTest, ScriptedSequenceGivesExactValues) {
  Metrics m(3);
  m.ProducerConnected();
  m.ProducerConnected();
  m.ProducerConnected();
  m.ProducerDisconnected();
  for (int i = 0; i < 5; ++i) m.EventReceived("kernel");
  m.EventReceived("kernel_time");
  m.EventReceived("kernel_time");
  m.EventReceived("process_start");
  m.EventReceived("no_such_type");
  for (int i = 0; i < 4; ++i) m.EventStored("kernel");
  m.Rejected("malformed_json");
  m.Rejected("malformed_json");
  m.Rejected("line_too_long");
  m.Lost(7);
  m.Lost(3);
  m.ProducerDropped("ring_full", 5);
  m.ProducerDropped("disconnected", 2);
  m.ProducerDropped("ring_full", 1);
  m.ProducerTimingDropped(4);
  m.ProducerTimingDropped(9);
  m.OccupancyDisagreements(2);
  m.OccupancyDisagreements(5);
  m.BytesWritten(100);
  m.BytesWritten(23);
  m.Unstored(4);
  m.Unstored(5);
  m.Recovered(3);
  m.Recovered(1);
  m.BlackboxError("not_sealed");
  m.BlackboxError("bad_state");
  m.BlackboxError("not_sealed");
  m.SetLogTotals({.write_errors = 1,
                  .pending_bytes = 70000,
                  .fsync_rounds_skipped = 0,
                  .recovery_failures = 0});
  m.SetLogTotals({.write_errors = 4,
                  .pending_bytes = 5000,
                  .fsync_rounds_skipped = 2,
                  .recovery_failures = 1});  // the latest totals are exported
  // Process 1 sees both GPUs (ordinals 0 and 1); process 2, under CUDA_VISIBLE_DEVICES, sees
  // only the MIG instance, as its ordinal 0.
  m.Device(1, 0, kUuidA, kBusA, kModel);
  m.Device(1, 1, kUuidB, kBusB, kModel);
  m.Device(2, 0, kUuidB, kBusB, kModel);
  m.Kernel(1, 10, "gemm", 0, "registers", 0.5);
  m.Kernel(1, 11, "gemm", 0, "registers", 0.25);
  m.Kernel(1, 12, "softmax", 1, "shared_mem", 1.0);
  m.Kernel(2, 10, "gemm", 0, "warps", 0.75);  // same correlation id, another process
  m.KernelTime(1, 10, 0, 1'500'000'000);
  m.KernelTime(2, 10, 0, 250'000'000);
  m.KernelTime(1, 12, 1, 2'000'000);
  m.KernelTime(1, 99, 1, 1'000'000);  // no launch with this id

  const Exposition e = Parse(m);
  EXPECT_EQ(V(e, "cuflight_producers_connected"), 2);
  EXPECT_EQ(V(e, "cuflight_producer_connections_total"), 3);
  EXPECT_EQ(V(e, "cuflight_events_received_total", {{"type", "kernel"}}), 5);
  EXPECT_EQ(V(e, "cuflight_events_received_total", {{"type", "kernel_time"}}), 2);
  EXPECT_EQ(V(e, "cuflight_events_received_total", {{"type", "process_start"}}), 1);
  EXPECT_EQ(V(e, "cuflight_events_received_total", {{"type", "other"}}), 1);
  // Known types are exported from zero.
  EXPECT_EQ(V(e, "cuflight_events_received_total", {{"type", "api_error"}}), 0);
  EXPECT_EQ(V(e, "cuflight_events_stored_total", {{"type", "kernel"}}), 4);
  EXPECT_EQ(V(e, "cuflight_events_stored_total", {{"type", "stats"}}), 0);
  EXPECT_FALSE(e.Value("cuflight_events_stored_total", {{"type", "other"}}).has_value());
  EXPECT_EQ(V(e, "cuflight_events_rejected_total", {{"reason", "malformed_json"}}), 2);
  EXPECT_EQ(V(e, "cuflight_events_rejected_total", {{"reason", "line_too_long"}}), 1);
  EXPECT_EQ(e.SamplesNamed("cuflight_events_rejected_total").size(), 2u);
  EXPECT_EQ(V(e, "cuflight_events_lost_total"), 10);
  EXPECT_EQ(V(e, "cuflight_events_dropped_total", {{"reason", "ring_full"}}), 6);
  EXPECT_EQ(V(e, "cuflight_events_dropped_total", {{"reason", "disconnected"}}), 2);
  EXPECT_EQ(V(e, "cuflight_kernel_timing_dropped_total"), 13);
  EXPECT_EQ(V(e, "cuflight_occupancy_disagreements_total"), 7);
  // Timing records are not events: no reason of the events' drops.
  EXPECT_EQ(e.SamplesNamed("cuflight_events_dropped_total").size(), 2u);
  EXPECT_EQ(V(e, "cuflight_log_written_bytes_total"), 123);
  EXPECT_EQ(V(e, "cuflight_events_unstored_total"), 9);
  EXPECT_EQ(V(e, "cuflight_events_recovered_total"), 4);
  EXPECT_EQ(V(e, "cuflight_blackbox_errors_total", {{"reason", "not_sealed"}}), 2);
  EXPECT_EQ(V(e, "cuflight_blackbox_errors_total", {{"reason", "bad_state"}}), 1);
  EXPECT_EQ(e.SamplesNamed("cuflight_blackbox_errors_total").size(), 2u);
  EXPECT_EQ(V(e, "cuflight_log_write_errors_total"), 4);
  EXPECT_EQ(V(e, "cuflight_log_pending_bytes"), 5000);
  EXPECT_EQ(V(e, "cuflight_log_fsync_skipped_total"), 2);
  EXPECT_EQ(V(e, "cuflight_log_recovery_failures_total"), 1);

  // GPU A: process 1's ordinal 0. GPU B: process 1's ordinal 1 and process 2's ordinal 0.
  EXPECT_EQ(V(e, "cuflight_kernel_launches_total", GpuA({{"limiting_resource", "registers"}})), 2);
  EXPECT_EQ(V(e, "cuflight_kernel_launches_total", GpuA({{"limiting_resource", "warps"}})), 0);
  EXPECT_EQ(V(e, "cuflight_kernel_launches_total", GpuB({{"limiting_resource", "warps"}})), 1);
  EXPECT_EQ(V(e, "cuflight_kernel_launches_total", GpuB({{"limiting_resource", "shared_mem"}})),
            1);
  EXPECT_EQ(V(e, "cuflight_kernel_launches_total", GpuB({{"limiting_resource", "cluster"}})), 0);
  // Seven resource names ("other" among them) for each of the two GPUs seen; no "unknown"
  // resource was named, and no launch was on an unnamed ordinal.
  EXPECT_EQ(e.SamplesNamed("cuflight_kernel_launches_total").size(), 14u);

  // GPU A observed 0.5, 0.25; GPU B observed 1.0, 0.75.
  const char* bounds[] = {"0.125", "0.25", "0.375", "0.5", "0.625", "0.75", "0.875", "1", "+Inf"};
  const double gpu_a[] = {0, 1, 1, 2, 2, 2, 2, 2, 2};
  const double gpu_b[] = {0, 0, 0, 0, 0, 1, 1, 2, 2};
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_bucket", GpuA({{"le", bounds[i]}})), gpu_a[i])
        << bounds[i];
    EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_bucket", GpuB({{"le", bounds[i]}})), gpu_b[i])
        << bounds[i];
  }
  EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_sum", GpuA()), 0.75);
  EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_count", GpuA()), 2);
  EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_sum", GpuB()), 1.75);
  EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_count", GpuB()), 2);

  // A: 1.5 s (process 1, id 10). B: 0.25 s (process 2, id 10) + 2 ms (id 12) + 1 ms (id 99,
  // unmatched but on process 1's ordinal 1).
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_gpu_seconds_total", GpuA()), 1.5);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_gpu_seconds_total", GpuB()), 0.253);
  EXPECT_EQ(V(e, "cuflight_kernel_timed_launches_total", GpuA()), 1);
  EXPECT_EQ(V(e, "cuflight_kernel_timed_launches_total", GpuB()), 3);
  EXPECT_EQ(V(e, "cuflight_kernel_name_timed_launches_total", {{"kernel", "gemm"}}), 2);
  EXPECT_EQ(V(e, "cuflight_kernel_name_timed_launches_total", {{"kernel", "softmax"}}), 1);
  EXPECT_EQ(V(e, "cuflight_kernel_name_timed_launches_total", {{"kernel", "unknown"}}), 1);

  EXPECT_EQ(V(e, "cuflight_kernel_name_launches_total",
              {{"kernel", "gemm"}, {"limiting_resource", "registers"}}),
            2);
  EXPECT_EQ(V(e, "cuflight_kernel_name_launches_total",
              {{"kernel", "gemm"}, {"limiting_resource", "warps"}}),
            1);
  EXPECT_EQ(V(e, "cuflight_kernel_name_launches_total",
              {{"kernel", "softmax"}, {"limiting_resource", "shared_mem"}}),
            1);
  EXPECT_EQ(e.SamplesNamed("cuflight_kernel_name_launches_total").size(), 3u);
  EXPECT_EQ(V(e, "cuflight_kernel_name_occupancy_ratio_sum", {{"kernel", "gemm"}}), 1.5);
  EXPECT_EQ(V(e, "cuflight_kernel_name_occupancy_ratio_count", {{"kernel", "gemm"}}), 3);
  EXPECT_EQ(V(e, "cuflight_kernel_name_occupancy_ratio_sum", {{"kernel", "softmax"}}), 1.0);
  EXPECT_EQ(V(e, "cuflight_kernel_name_occupancy_ratio_count", {{"kernel", "softmax"}}), 1);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "gemm"}}), 1.75);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "softmax"}}), 0.002);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "unknown"}}), 0.001);
  EXPECT_FALSE(
      e.Value("cuflight_kernel_name_gpu_seconds_total", {{"kernel", "other"}}).has_value());

  EXPECT_EQ(V(e, "cuflight_kernel_names_tracked"), 2);
  EXPECT_EQ(V(e, "cuflight_kernel_names_limit"), 3);
  EXPECT_EQ(V(e, "cuflight_kernel_time_unmatched_total"), 1);
  EXPECT_EQ(V(e, "cuflight_kernel_join_evicted_total"), 0);
  EXPECT_EQ(V(e, "cuflight_kernel_join_pending"), 1);  // (1, 11) has no time yet
}

TEST(MetricsTest, EveryFamilyFollowsPrometheusNaming) {
  Metrics m;
  m.Kernel(1, 1, "k", 0, "warps", 0.5);
  m.KernelTime(1, 1, 0, 10);
  m.Rejected("duplicate");
  m.ProducerDropped("ring_full", 1);
  const std::string text = m.Render();
  const Exposition e = Parse(m);
  const std::set<std::string> expected = {"cuflight_producers_connected",
                                          "cuflight_producer_connections_total",
                                          "cuflight_events_received_total",
                                          "cuflight_events_stored_total",
                                          "cuflight_events_rejected_total",
                                          "cuflight_events_lost_total",
                                          "cuflight_events_dropped_total",
                                          "cuflight_kernel_timing_dropped_total",
                                          "cuflight_occupancy_disagreements_total",
                                          "cuflight_log_written_bytes_total",
                                          "cuflight_kernel_launches_total",
                                          "cuflight_events_unstored_total",
                                          "cuflight_events_recovered_total",
                                          "cuflight_blackbox_errors_total",
                                          "cuflight_counts_refused_total",
                                          "cuflight_log_write_errors_total",
                                          "cuflight_log_pending_bytes",
                                          "cuflight_log_fsync_skipped_total",
                                          "cuflight_log_recovery_failures_total",
                                          "cuflight_kernel_occupancy_ratio",
                                          "cuflight_kernel_gpu_seconds_total",
                                          "cuflight_kernel_name_launches_total",
                                          "cuflight_kernel_name_occupancy_ratio",
                                          "cuflight_kernel_name_gpu_seconds_total",
                                          "cuflight_kernel_names_tracked",
                                          "cuflight_kernel_names_limit",
                                          "cuflight_kernel_time_unmatched_total",
                                          "cuflight_kernel_join_evicted_total",
                                          "cuflight_kernel_join_pending",
                                          "cuflight_api_errors_total",
                                          "cuflight_processes_stalled",
                                          "cuflight_kernel_oldest_unfinished_seconds",
                                          "cuflight_build_info",
                                          "cuflight_connections_refused_total",
                                          "cuflight_connections_closed_total",
                                          "cuflight_kernel_timed_launches_total",
                                          "cuflight_kernel_name_timed_launches_total",
                                          "cuflight_kernel_launches_by_timing_total",
                                          "cuflight_workload_processes_started_total",
                                          "cuflight_workload_process_crashes_total",
                                          "cuflight_workload_processes_lost_total",
                                          "cuflight_workload_api_errors_total",
                                          "cuflight_workload_kernel_launches_total",
                                          "cuflight_workload_kernel_occupancy_ratio",
                                          "cuflight_workload_kernel_gpu_seconds_total",
                                          "cuflight_workload_kernel_timed_launches_total"};
  std::set<std::string> seen;
  for (const testing::Family& f : e.families) {
    seen.insert(f.name);
    EXPECT_TRUE(f.name.starts_with("cuflight_")) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    const bool total = f.name.ends_with("_total");
    EXPECT_EQ(total, f.type == "counter") << f.name << " is a " << f.type;
    if (f.name.find("seconds") != std::string::npos) {
      EXPECT_TRUE(f.name.ends_with(f.type == "counter" ? "_seconds_total" : "_seconds")) << f.name;
    }
    if (f.name.find("bytes") != std::string::npos) {
      EXPECT_TRUE(f.name.ends_with(f.type == "counter" ? "_bytes_total" : "_bytes")) << f.name;
    }
    EXPECT_FALSE(f.name.find("millis") != std::string::npos ||
                 f.name.find("_ns") != std::string::npos)
        << f.name << " is not in base units";
  }
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(e.FindFamily("cuflight_kernel_occupancy_ratio")->type, "histogram");
  EXPECT_EQ(e.FindFamily("cuflight_kernel_name_occupancy_ratio")->type, "summary");
  EXPECT_EQ(e.FindFamily("cuflight_producers_connected")->type, "gauge");
  EXPECT_NE(text.find("# TYPE cuflight_kernel_launches_total counter\n"), std::string::npos);
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  Metrics m;
  const std::string name = "k<\"quoted\">\\path\nline2";
  m.Kernel(1, 1, name, 0, "warps", 0.5);
  const std::string text = m.Render();
  EXPECT_NE(text.find("kernel=\"k<\\\"quoted\\\">\\\\path\\nline2\""), std::string::npos) << text;
  const Exposition e = Parse(m);
  EXPECT_EQ(V(e, "cuflight_kernel_name_launches_total",
              {{"kernel", name}, {"limiting_resource", "warps"}}),
            1);
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndInfEqualsCount) {
  Metrics m;
  // One launch at each bucket's upper bound, one just above each, and the extremes.
  int launches = 0;
  double sum = 0;
  for (int k = 1; k <= 8; ++k) {
    m.Kernel(1, static_cast<uint64_t>(launches++), "k", 2, "blocks", k / 8.0);
    sum += k / 8.0;
  }
  for (int k = 0; k < 8; ++k) {
    m.Kernel(1, static_cast<uint64_t>(launches++), "k", 2, "blocks", k / 8.0 + 0.01);
    sum += k / 8.0 + 0.01;
  }
  m.Kernel(1, static_cast<uint64_t>(launches++), "k", 2, "blocks", 0.0);
  m.Kernel(1, static_cast<uint64_t>(launches++), "k", 2, "blocks", 1.5);   // clamped to 1
  m.Kernel(1, static_cast<uint64_t>(launches++), "k", 2, "blocks", -0.5);  // clamped to 0
  sum += 1.0;
  m.Kernel(1, static_cast<uint64_t>(launches++), "k", 2, "blocks", std::nan(""));  // not observed

  const Exposition e = Parse(m);
  // Per bucket le=k/8: its bound (1), the value just above the previous bound (1), and for
  // le=0.125 also 0.0 and the clamped -0.5; le=1 also the clamped 1.5.
  const double per_bucket[] = {4, 2, 2, 2, 2, 2, 2, 3};
  const char* bounds[] = {"0.125", "0.25", "0.375", "0.5", "0.625", "0.75", "0.875", "1"};
  double cumulative = 0;
  for (int i = 0; i < 8; ++i) {
    cumulative += per_bucket[i];
    EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_bucket", UnknownGpu({{"le", bounds[i]}})),
              cumulative)
        << bounds[i];
  }
  EXPECT_EQ(cumulative, 19);
  EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_bucket", UnknownGpu({{"le", "+Inf"}})), 19);
  EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_count", UnknownGpu()), 19);
  EXPECT_NEAR(V(e, "cuflight_kernel_occupancy_ratio_sum", UnknownGpu()), sum, 1e-12);
  // The NaN launch is still a launch.
  EXPECT_EQ(
      V(e, "cuflight_kernel_launches_total", UnknownGpu({{"limiting_resource", "blocks"}})), 20);
  EXPECT_EQ(V(e, "cuflight_kernel_name_occupancy_ratio_count", {{"kernel", "k"}}), 19);

  // Bucket order in the text: le ascending, +Inf last, then _sum and _count.
  const auto samples = e.FindFamily("cuflight_kernel_occupancy_ratio")->samples;
  ASSERT_EQ(samples.size(), 11u);
  double previous = -1;
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(samples[i].name, "cuflight_kernel_occupancy_ratio_bucket");
    EXPECT_EQ(samples[i].labels.at("le"), i < 8 ? bounds[i] : "+Inf");
    EXPECT_GE(samples[i].value, previous);
    previous = samples[i].value;
  }
  EXPECT_EQ(samples[9].name, "cuflight_kernel_occupancy_ratio_sum");
  EXPECT_EQ(samples[10].name, "cuflight_kernel_occupancy_ratio_count");
}

TEST(MetricsTest, TopNamesAreBoundedAndTheRestSumAsOther) {
  constexpr int kTop = 5;
  constexpr int kNames = 10 * kTop;
  Metrics m(kTop);
  // Name i is launched i + 1 times, interleaved so names 0..4 are the first five seen.
  uint64_t corr = 0;
  for (int round = 0; round < kNames; ++round) {
    for (int i = round; i < kNames; ++i) {
      m.Kernel(1, corr++, "kernel_" + std::to_string(i), 0, "registers", 0.5);
    }
  }
  const Exposition e = Parse(m);
  for (int i = 0; i < kTop; ++i) {
    EXPECT_EQ(V(e, "cuflight_kernel_name_launches_total",
                {{"kernel", "kernel_" + std::to_string(i)}, {"limiting_resource", "registers"}}),
              i + 1);
  }
  // Names 5..49: 6 + 7 + ... + 50.
  EXPECT_EQ(V(e, "cuflight_kernel_name_launches_total",
              {{"kernel", "other"}, {"limiting_resource", "registers"}}),
            1260);
  EXPECT_EQ(e.SamplesNamed("cuflight_kernel_name_launches_total").size(),
            static_cast<size_t>(kTop + 1));
  EXPECT_EQ(e.SamplesNamed("cuflight_kernel_name_gpu_seconds_total").size(),
            static_cast<size_t>(kTop));
  EXPECT_EQ(e.SamplesNamed("cuflight_kernel_name_occupancy_ratio_count").size(),
            static_cast<size_t>(kTop + 1));
  EXPECT_EQ(V(e, "cuflight_kernel_names_tracked"), kTop);
  EXPECT_EQ(V(e, "cuflight_kernel_launches_total", UnknownGpu({{"limiting_resource", "registers"}})),
            kNames * (kNames + 1) / 2);

  // A name keeps its series after the table filled; a new name still goes to "other".
  m.Kernel(1, corr++, "kernel_0", 0, "registers", 0.5);
  m.Kernel(1, corr++, "kernel_new", 0, "registers", 0.5);
  const Exposition after = Parse(m);
  EXPECT_EQ(V(after, "cuflight_kernel_name_launches_total",
              {{"kernel", "kernel_0"}, {"limiting_resource", "registers"}}),
            2);
  EXPECT_EQ(V(after, "cuflight_kernel_name_launches_total",
              {{"kernel", "other"}, {"limiting_resource", "registers"}}),
            1261);
}

TEST(MetricsTest, ZeroTopNamesCountsEverythingAsOther) {
  Metrics m(0);
  m.Kernel(1, 1, "a", 0, "warps", 0.5);
  m.Kernel(1, 2, "b", 0, "warps", 0.5);
  m.KernelTime(1, 1, 0, 1'000'000'000);
  const Exposition e = Parse(m);
  EXPECT_EQ(V(e, "cuflight_kernel_name_launches_total",
              {{"kernel", "other"}, {"limiting_resource", "warps"}}),
            2);
  EXPECT_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "other"}}), 1.0);
  EXPECT_EQ(V(e, "cuflight_kernel_names_tracked"), 0);
}

TEST(MetricsTest, LongOddAndReservedNamesGetSafeBoundedLabels) {
  Metrics m(20);
  const std::string long_ascii(300, 'a');
  const std::string exact(Metrics::kMaxKernelNameBytes, 'a');  // not cut
  // 255 ASCII bytes, then a 2-byte character across the cut at 256 bytes.
  const std::string utf8_cut = std::string(255, 'b') + "\xC3\xA9" + "tail";
  m.Kernel(1, 1, long_ascii, 0, "warps", 0.5);
  m.Kernel(1, 2, long_ascii + "different_tail", 0, "warps", 0.5);  // same first 256 bytes
  m.Kernel(1, 3, exact, 0, "warps", 0.5);
  m.Kernel(1, 4, utf8_cut, 0, "warps", 0.5);
  m.Kernel(1, 5, "bad\xFF", 0, "warps", 0.5);
  m.Kernel(1, 6, "bad\xFE", 0, "warps", 0.5);         // same label after replacement: same series
  m.Kernel(1, 7, "other", 0, "warps", 0.5);           // reserved value: counted as other
  m.Kernel(1, 8, "unknown", 0, "warps", 0.5);         // reserved value: counted as other
  m.Kernel(1, 9, "", 0, "warps", 0.5);                // no name: unknown
  m.Kernel(1, 10, "\xED\xA0\x80x", 0, "warps", 0.5);  // a UTF-16 surrogate is not UTF-8

  const Exposition e = Parse(m);
  auto launches = [&](const std::string& kernel) {
    return V(e, "cuflight_kernel_name_launches_total",
             {{"kernel", kernel}, {"limiting_resource", "warps"}});
  };
  EXPECT_EQ(launches(std::string(256, 'a') + "..."), 2);
  EXPECT_EQ(launches(exact), 1);
  EXPECT_EQ(launches(std::string(255, 'b') + "..."), 1);
  EXPECT_EQ(launches("bad?"), 2);
  EXPECT_EQ(launches("other"), 2);
  EXPECT_EQ(launches("unknown"), 1);
  EXPECT_EQ(launches("???x"), 1);
  EXPECT_EQ(e.SamplesNamed("cuflight_kernel_name_launches_total").size(), 7u);
  EXPECT_EQ(V(e, "cuflight_kernel_names_tracked"), 5);
  for (const testing::Sample* s : e.SamplesNamed("cuflight_kernel_name_launches_total")) {
    EXPECT_LE(s->labels.at("kernel").size(), Metrics::kMaxKernelNameBytes + 3);
  }
}

TEST(MetricsTest, OrdinalsWithoutADeviceAndUnknownResourcesHaveBoundedLabels) {
  Metrics m;
  m.Device(1, 63, kUuidA, kBusA, kModel);
  m.Device(1, 64, kUuidB, kBusB, kModel);  // past the ordinals a process maps: not mapped
  m.Kernel(1, 1, "k", 63, "registers", 0.5);
  m.Kernel(1, 2, "k", 64, "registers", 0.5);
  m.Kernel(1, 3, "k", -1, "registers", 0.5);
  m.Kernel(1, 4, "k", 63, "flux_capacitor", 0.5);
  m.KernelTime(1, 2, 64, 2'000'000'000);
  const Exposition e = Parse(m);
  EXPECT_EQ(V(e, "cuflight_kernel_launches_total", GpuA({{"limiting_resource", "registers"}})), 1);
  EXPECT_EQ(
      V(e, "cuflight_kernel_launches_total", UnknownGpu({{"limiting_resource", "registers"}})), 2);
  EXPECT_EQ(V(e, "cuflight_kernel_launches_total", GpuA({{"limiting_resource", "unknown"}})), 1);
  EXPECT_FALSE(
      e.Value("cuflight_kernel_launches_total", UnknownGpu({{"limiting_resource", "unknown"}}))
          .has_value());
  // GPU B was named, but no launch ran on it: no series.
  EXPECT_FALSE(e.Value("cuflight_kernel_gpu_seconds_total", GpuB()).has_value());
  EXPECT_EQ(V(e, "cuflight_kernel_gpu_seconds_total", UnknownGpu()), 2.0);
  EXPECT_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "k"}}), 2.0);
}

// Series follow the GPU, not the ordinal: every process calls its only GPU 0 under
// CUDA_VISIBLE_DEVICES. Past kMaxGpus distinct UUIDs the rest are UUID="other"; an empty UUID
// (a driver that could not say) is "unknown"; a UUID's first device event gives its labels.
TEST(MetricsTest, GpusAreLabelledByIdentityAndBounded) {
  Metrics m;
  constexpr int kProcesses = static_cast<int>(Metrics::kMaxGpus) + 6;
  auto uuid = [](int i) {
    char text[64];
    std::snprintf(text, sizeof(text), "GPU-00000000-0000-4000-8000-%012d", i);
    return std::string(text);
  };
  auto bus = [](int i) {
    char text[32];
    std::snprintf(text, sizeof(text), "00000000:%02X:00.0", i);
    return std::string(text);
  };
  for (int i = 0; i < kProcesses; ++i) {
    const auto p = static_cast<uint64_t>(100 + i);
    m.Device(p, 0, uuid(i), bus(i), kModel);
    m.Kernel(p, 1, "k", 0, "warps", 0.5);
    m.KernelTime(p, 1, 0, 1'000'000);
  }
  // A second process on GPU 0 with another bus id: the first device event's labels stay.
  m.Device(500, 0, uuid(0), "00000000:FF:00.0", "another name");
  m.Kernel(500, 1, "k", 0, "warps", 0.5);
  m.Device(501, 0, "", "", kModel);
  m.Kernel(501, 1, "k", 0, "warps", 0.5);
  const Exposition e = Parse(m);
  const std::string launches = "cuflight_kernel_launches_total";
  EXPECT_EQ(V(e, launches, Gpu(uuid(0).c_str(), bus(0).c_str(), {{"limiting_resource", "warps"}})),
            2);
  for (int i = 1; i < static_cast<int>(Metrics::kMaxGpus); ++i) {
    EXPECT_EQ(
        V(e, launches, Gpu(uuid(i).c_str(), bus(i).c_str(), {{"limiting_resource", "warps"}})), 1)
        << i;
  }
  EXPECT_EQ(V(e, launches, {{"UUID", "other"}, {"limiting_resource", "warps"}}), 6);
  EXPECT_EQ(V(e, launches, UnknownGpu({{"limiting_resource", "warps"}})), 1);
  // 64 GPUs, "other" and "unknown", 7 resources each.
  EXPECT_EQ(e.SamplesNamed(launches).size(), (Metrics::kMaxGpus + 2) * 7);
  EXPECT_EQ(V(e, "cuflight_kernel_timed_launches_total", {{"UUID", "other"}}), 6);
}

TEST(MetricsTest, ReasonsAreBounded) {
  Metrics m;
  for (int i = 0; i < 40; ++i) m.Rejected("reason_" + std::to_string(i));
  for (int i = 0; i < 20; ++i) m.ProducerDropped("drop_" + std::to_string(i), 2);
  m.Rejected("");
  const Exposition e = Parse(m);
  EXPECT_EQ(V(e, "cuflight_events_rejected_total", {{"reason", "reason_31"}}), 1);
  EXPECT_FALSE(e.Value("cuflight_events_rejected_total", {{"reason", "reason_32"}}).has_value());
  EXPECT_EQ(V(e, "cuflight_events_rejected_total", {{"reason", "other"}}), 9);  // 8 + the empty one
  EXPECT_EQ(e.SamplesNamed("cuflight_events_rejected_total").size(), 33u);
  EXPECT_EQ(V(e, "cuflight_events_dropped_total", {{"reason", "drop_15"}}), 2);
  EXPECT_EQ(V(e, "cuflight_events_dropped_total", {{"reason", "other"}}), 8);
  EXPECT_EQ(e.SamplesNamed("cuflight_events_dropped_total").size(), 17u);
}

// api_error events by error name: the first 32 distinct names each, the rest as "other", an
// empty name as "unknown". By hand: 3 illegal addresses, 1 invalid value; names 0..39 once each,
// of which the first 30 fit beside the 2 above (32 in all) and 10 are "other".
TEST(MetricsTest, ApiErrorsAreCountedByBoundedErrorName) {
  Metrics m;
  EXPECT_TRUE(Parse(m).SamplesNamed("cuflight_api_errors_total").empty());  // none yet
  for (int i = 0; i < 3; ++i) m.ApiError("CUDA_ERROR_ILLEGAL_ADDRESS");
  m.ApiError("CUDA_ERROR_INVALID_VALUE");
  for (int i = 0; i < 40; ++i) m.ApiError("CUDA_ERROR_" + std::to_string(i));
  m.ApiError("");
  const Exposition e = Parse(m);
  EXPECT_EQ(V(e, "cuflight_api_errors_total", {{"error", "CUDA_ERROR_ILLEGAL_ADDRESS"}}), 3);
  EXPECT_EQ(V(e, "cuflight_api_errors_total", {{"error", "CUDA_ERROR_INVALID_VALUE"}}), 1);
  EXPECT_EQ(V(e, "cuflight_api_errors_total", {{"error", "CUDA_ERROR_29"}}), 1);
  EXPECT_FALSE(e.Value("cuflight_api_errors_total", {{"error", "CUDA_ERROR_30"}}).has_value());
  EXPECT_EQ(V(e, "cuflight_api_errors_total", {{"error", "other"}}), 10);
  EXPECT_EQ(V(e, "cuflight_api_errors_total", {{"error", "unknown"}}), 1);
  EXPECT_EQ(e.SamplesNamed("cuflight_api_errors_total").size(), 34u);  // 32 + other + unknown
}

// A 3-node CUDA graph replayed 4 times: the 3 kernel nodes of a replay share its correlation id
// (CUPTI: a kernel record's correlationId is its launching API call's), each kernel event and
// kernel_time naming its node. Nodes take 1, 2 and 3 ms, so by hand: 4, 8 and 12 ms per name.
// A multi-device cooperative launch: one correlation id, one kernel per device (10 and 30 us).
TEST(MetricsTest, GpuTimeOfOneCorrelationIdIsJoinedPerGraphNodeAndDevice) {
  Metrics m;
  m.Device(1, 0, kUuidA, kBusA, kModel);
  m.Device(1, 1, kUuidB, kBusB, kModel);
  const char* names[] = {"node_a", "node_b", "node_c"};
  const uint64_t nodes[] = {0x7f0000000011, 0x7f0000000012, 0x7f0000000013};
  for (uint64_t replay = 0; replay < 4; ++replay) {
    const uint64_t corr = 100 + replay;
    for (int n = 0; n < 3; ++n) m.Kernel(1, corr, names[n], 0, "warps", 0.5, nodes[n]);
    // Times in the opposite order: the join does not depend on it.
    for (int n = 2; n >= 0; --n) {
      m.KernelTime(1, corr, 0, static_cast<uint64_t>(n + 1) * 1'000'000, nodes[n]);
    }
  }
  m.Kernel(1, 300, "coop", 0, "blocks", 1.0);
  m.Kernel(1, 300, "coop", 1, "blocks", 1.0);
  m.KernelTime(1, 300, 1, 30'000);
  m.KernelTime(1, 300, 0, 10'000);
  const Exposition e = Parse(m);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "node_a"}}), 0.004);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "node_b"}}), 0.008);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "node_c"}}), 0.012);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "coop"}}), 40e-6);
  EXPECT_EQ(V(e, "cuflight_kernel_time_unmatched_total"), 0);
  EXPECT_EQ(V(e, "cuflight_kernel_join_pending"), 0);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_gpu_seconds_total", GpuA()), 0.024 + 10e-6);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_gpu_seconds_total", GpuB()), 30e-6);
  // A kernel_time naming no node does not take a node's launch (nor the reverse).
  m.Kernel(1, 400, "node_a", 0, "warps", 0.5, nodes[0]);
  m.KernelTime(1, 400, 0, 5'000'000);
  EXPECT_EQ(V(Parse(m), "cuflight_kernel_time_unmatched_total"), 1);
  EXPECT_EQ(V(Parse(m), "cuflight_kernel_join_pending"), 1);
}

TEST(MetricsTest, ProcessGoneForgetsPendingLaunches) {
  Metrics m;
  m.Kernel(1, 1, "a", 0, "warps", 0.5);
  m.Kernel(1, 2, "a", 0, "warps", 0.5);
  m.Kernel(2, 1, "b", 0, "warps", 0.5);
  EXPECT_EQ(V(Parse(m), "cuflight_kernel_join_pending"), 3);
  m.ProcessGone(1);
  Exposition e = Parse(m);
  EXPECT_EQ(V(e, "cuflight_kernel_join_pending"), 1);
  EXPECT_EQ(V(e, "cuflight_kernel_join_evicted_total"), 0);
  m.KernelTime(1, 1, 0, 1'000'000'000);  // its launch was forgotten
  m.KernelTime(2, 1, 0, 2'000'000'000);
  e = Parse(m);
  EXPECT_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "unknown"}}), 1.0);
  EXPECT_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "b"}}), 2.0);
  EXPECT_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "a"}}), 0.0);
  EXPECT_EQ(V(e, "cuflight_kernel_time_unmatched_total"), 1);
  EXPECT_EQ(V(e, "cuflight_kernel_join_pending"), 0);
}

TEST(MetricsTest, JoinEvictionIsCountedAndEvictedTimeIsUnknown) {
  // 64 entries: more launches than that must evict.
  Metrics m(50, 64);
  constexpr int kLaunches = 200;
  for (int i = 0; i < kLaunches; ++i) m.Kernel(7, static_cast<uint64_t>(i), "k", 0, "warps", 0.5);
  Exposition e = Parse(m);
  const double evicted = V(e, "cuflight_kernel_join_evicted_total");
  const double pending = V(e, "cuflight_kernel_join_pending");
  EXPECT_GE(evicted, kLaunches - 64);
  EXPECT_LE(pending, 64);
  EXPECT_EQ(evicted + pending, kLaunches);
  for (int i = 0; i < kLaunches; ++i) m.KernelTime(7, static_cast<uint64_t>(i), 0, 1'000'000);
  e = Parse(m);
  // Every time is counted once: under "k" if its launch was still pending, else "unknown".
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "k"}}),
                   pending * 0.001);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_name_gpu_seconds_total", {{"kernel", "unknown"}}),
                   evicted * 0.001);
  EXPECT_EQ(V(e, "cuflight_kernel_time_unmatched_total"), evicted);
  EXPECT_DOUBLE_EQ(V(e, "cuflight_kernel_gpu_seconds_total", UnknownGpu()), kLaunches * 0.001);
  EXPECT_EQ(V(e, "cuflight_kernel_join_pending"), 0);
}

using Steady = std::chrono::steady_clock;

TEST(MetricsTest, StalledProcessesExportTheirOldestUnfinishedKernelPerDeviceWhileStalled) {
  Metrics m;
  const Steady::time_point t0 = Steady::now();
  m.Device(1, 0, kUuidA, kBusA, kModel);
  m.Device(1, 3, kUuidB, kBusB, kModel);
  const Metrics::StallAge train[] = {{0, 12.5}, {3, 10.25}};
  m.Stall(1, "node1", 4242, "/opt/app/bin/train", train, t0);
  const Metrics::StallAge other[] = {{1, 30}};
  m.Stall(2, "node2", 77, "serve", other, t0);
  Exposition e;
  std::string error;
  // 2 s after the events: each age has grown by 2 s (the stall goes on until an event says not).
  ASSERT_TRUE(ParseExposition(m.Render(t0 + std::chrono::seconds(2)), &e, &error)) << error;
  EXPECT_EQ(V(e, "cuflight_processes_stalled"), 2);
  const std::string name = "cuflight_kernel_oldest_unfinished_seconds";
  EXPECT_EQ(V(e, name, GpuA({{"hostname", "node1"}, {"pid", "4242"}, {"exe", "train"}})), 14.5);
  EXPECT_EQ(V(e, name, GpuB({{"hostname", "node1"}, {"pid", "4242"}, {"exe", "train"}})), 12.25);
  // Process 2 sent no device event: its GPU is unknown.
  EXPECT_EQ(V(e, name, UnknownGpu({{"hostname", "node2"}, {"pid", "77"}, {"exe", "serve"}})), 32);
  EXPECT_EQ(e.SamplesNamed(name).size(), 3u);
  // A later event replaces the process's ages; one with none (resolved) removes its series.
  const Metrics::StallAge later[] = {{0, 20}};
  m.Stall(1, "node1", 4242, "/opt/app/bin/train", later, t0 + std::chrono::seconds(5));
  m.Stall(2, "node2", 77, "serve", {}, t0 + std::chrono::seconds(5));
  e = Exposition{};
  ASSERT_TRUE(ParseExposition(m.Render(t0 + std::chrono::seconds(6)), &e, &error)) << error;
  EXPECT_EQ(V(e, "cuflight_processes_stalled"), 1);
  ASSERT_EQ(e.SamplesNamed(name).size(), 1u);
  EXPECT_EQ(e.SamplesNamed(name)[0]->value, 21);
  EXPECT_EQ(e.SamplesNamed(name)[0]->labels.at("UUID"), kUuidA);
  // A process that goes (process_end, process_lost) leaves nothing behind.
  m.ProcessGone(1);
  e = Exposition{};
  ASSERT_TRUE(ParseExposition(m.Render(t0 + std::chrono::seconds(7)), &e, &error)) << error;
  EXPECT_EQ(V(e, "cuflight_processes_stalled"), 0);
  EXPECT_TRUE(e.SamplesNamed(name).empty());
  EXPECT_NE(e.FindFamily(name), nullptr);  // the family is always declared
}

TEST(MetricsTest, StallSeriesAreBoundedAndTheRestIsOneOtherSeriesWithTheLargestAge) {
  Metrics m;
  const Steady::time_point t0 = Steady::now();
  // 100 stalled processes on one device each, process i's kernel i seconds old, and one process
  // on an ordinal past the device labels.
  for (int i = 1; i <= 100; ++i) {
    const Metrics::StallAge age[] = {{0, static_cast<double>(i)}};
    m.Stall(static_cast<uint64_t>(i), "node", i, "app", age, t0);
  }
  const Metrics::StallAge far[] = {{500, 0.5}};
  m.Stall(101, "node\n\"x\"", 101, std::string(1000, 'e'), far, t0);
  Exposition e;
  std::string error;
  ASSERT_TRUE(ParseExposition(m.Render(t0), &e, &error)) << error;
  EXPECT_EQ(V(e, "cuflight_processes_stalled"), 101);
  const auto samples = e.SamplesNamed("cuflight_kernel_oldest_unfinished_seconds");
  ASSERT_EQ(samples.size(), Metrics::kMaxStallSeries + 1);
  // The 64 oldest (ages 100 down to 37) keep their labels; the 37 others (36 s down to 0.5 s)
  // are one series holding the largest of their ages.
  std::set<std::string> pids;
  for (const testing::Sample* s : samples) {
    if (s->labels.at("pid") == "other") {
      EXPECT_EQ(s->labels.at("hostname"), "other");
      EXPECT_EQ(s->labels.at("UUID"), "other");
      EXPECT_EQ(s->value, 36);
      continue;
    }
    pids.insert(s->labels.at("pid"));
    EXPECT_EQ(s->value, std::stod(s->labels.at("pid")));
    EXPECT_GE(s->value, 37);
  }
  EXPECT_EQ(pids.size(), Metrics::kMaxStallSeries);
  // The odd process, once among the oldest: its labels are escaped and bounded.
  for (int i = 1; i <= 100; ++i) m.ProcessGone(static_cast<uint64_t>(i));
  e = Exposition{};
  ASSERT_TRUE(ParseExposition(m.Render(t0), &e, &error)) << error;
  const auto odd = e.SamplesNamed("cuflight_kernel_oldest_unfinished_seconds");
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_EQ(odd[0]->labels.at("hostname"), "node\n\"x\"");
  EXPECT_EQ(odd[0]->labels.at("UUID"), "unknown");
  EXPECT_LE(odd[0]->labels.at("exe").size(), Metrics::kMaxKernelNameBytes + 3);
}

// Counts producers give stop at 2^64-1: a wrap would read as a counter reset in Prometheus.
TEST(MetricsTest, CountsFromProducersSaturateInsteadOfWrapping) {
  Metrics m;
  constexpr uint64_t kHalf = uint64_t{1} << 63;
  m.Lost(kHalf);
  m.Lost(kHalf);
  m.Lost(5);
  m.ProducerDropped("ring_full", ~uint64_t{0});
  m.ProducerDropped("ring_full", 1);
  m.ProducerTimingDropped(~uint64_t{0});
  m.ProducerTimingDropped(7);
  m.CountRefused("events_lost");
  const std::string text = m.Render();
  EXPECT_NE(text.find("\ncuflight_events_lost_total 18446744073709551615\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\ncuflight_events_dropped_total{reason=\"ring_full\"} "
                      "18446744073709551615\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ncuflight_kernel_timing_dropped_total 18446744073709551615\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ncuflight_counts_refused_total{counter=\"events_lost\"} 1\n"),
            std::string::npos)
      << text;
}

// Two stalled processes whose labels are all equal (no stream label) are one series, the larger
// age: a scrape never holds two samples of one series. A stream label tells them apart.
TEST(MetricsTest, StalledProcessesWithEqualLabelsAreOneSeries) {
  Metrics m;
  const Steady::time_point t0 = Steady::now();
  const Metrics::StallAge younger[] = {{0, 10}};
  const Metrics::StallAge older[] = {{0, 40}};
  m.Stall(1, "node", 1, "/app/serve", younger, t0);
  m.Stall(2, "node", 1, "/app/serve", older, t0);
  m.Stall(3, "node", 1, "/app/serve", younger, t0, "7-u1000");
  m.Stall(4, "node", 1, "/app/serve", older, t0, "8-u1000");
  Exposition e;
  std::string error;
  ASSERT_TRUE(ParseExposition(m.Render(t0), &e, &error)) << error;
  const std::string name = "cuflight_kernel_oldest_unfinished_seconds";
  EXPECT_EQ(V(e, "cuflight_processes_stalled"), 4);
  ASSERT_EQ(e.SamplesNamed(name).size(), 3u);
  EXPECT_EQ(V(e, name, UnknownGpu({{"hostname", "node"}, {"pid", "1"}, {"exe", "serve"}})), 40);
  EXPECT_EQ(V(e, name,
              UnknownGpu({{"hostname", "node"},
                          {"pid", "1"},
                          {"exe", "serve"},
                          {"stream", "7-u1000"}})),
            10);
  EXPECT_EQ(V(e, name,
              UnknownGpu({{"hostname", "node"},
                          {"pid", "1"},
                          {"exe", "serve"},
                          {"stream", "8-u1000"}})),
            40);
}

TEST(MetricsTest, FreshObjectRendersValidTextWithZeroes) {
  Metrics m;
  const Exposition e = Parse(m);
  EXPECT_EQ(V(e, "cuflight_producers_connected"), 0);
  EXPECT_EQ(V(e, "cuflight_events_lost_total"), 0);
  EXPECT_EQ(V(e, "cuflight_kernel_timing_dropped_total"), 0);  // exported from zero
  EXPECT_EQ(V(e, "cuflight_events_received_total", {{"type", "kernel"}}), 0);
  EXPECT_EQ(V(e, "cuflight_kernel_names_limit"), 50);
  EXPECT_TRUE(e.SamplesNamed("cuflight_kernel_launches_total").empty());
  EXPECT_TRUE(e.SamplesNamed("cuflight_kernel_name_gpu_seconds_total").empty());
}


// Launches and RememberLaunch are Kernel(labels) in two halves (design point 12): a run of
// launches counted at once leaves the same text as one call per launch, its occupancy sums
// included (0.1 and 0.7 have no exact binary form: the sums are those of one addition per
// launch in the order made, as by hand below).
TEST(MetricsTest, ARunOfLaunchesCountedAtOnceReadsAsOneKernelCallPerLaunch) {
  struct Run {
    const char* name;
    double occupancy;
    int launches;
  };
  constexpr Run kRuns[] = {{"x", 0.1, 3}, {"y", 0.7, 2}, {"x", 0.1, 1}, {"y", 0.7, 4}};
  Metrics one_by_one;
  Metrics by_runs;
  for (Metrics* m : {&one_by_one, &by_runs}) {
    m->Process(1, {"job", "", "", ""}, Metrics::TimingPolicy::kAll);
    m->Device(1, 0, kUuidA, kBusA, kModel);
  }
  uint64_t correlation_id = 10;
  double by_hand = 0;  // the GPU's sum: one addition per launch, in order
  for (const Run& run : kRuns) {
    const Metrics::KernelLabels a = one_by_one.LabelsOf(run.name, schema::Resource::kWarps);
    const Metrics::KernelLabels b = by_runs.LabelsOf(run.name, schema::Resource::kWarps);
    by_runs.Launches(1, b, 0, run.occupancy, static_cast<uint64_t>(run.launches));
    for (int i = 0; i < run.launches; ++i, ++correlation_id) {
      one_by_one.Kernel(1, correlation_id, a, 0, run.occupancy);
      by_runs.RememberLaunch(1, correlation_id, b.name_series, 0);
      by_hand += run.occupancy;
    }
  }
  EXPECT_EQ(by_runs.Render(), one_by_one.Render());
  const Exposition e = Parse(by_runs);
  EXPECT_EQ(V(e, "cuflight_kernel_occupancy_ratio_sum", GpuA()), by_hand);
  EXPECT_EQ(V(e, "cuflight_kernel_name_launches_total",
              {{"kernel", "x"}, {"limiting_resource", "warps"}}),
            4);
  EXPECT_EQ(V(e, "cuflight_kernel_name_launches_total",
              {{"kernel", "y"}, {"limiting_resource", "warps"}}),
            6);
  EXPECT_EQ(V(e, "cuflight_kernel_join_pending"), 10);  // timing all: every launch remembered
}

// A process with timing off has its launches counted, not remembered; one the metrics do not
// know (no Process yet, or gone) is remembered, as Kernel treats it (its timing is taken as all).
TEST(MetricsTest, LaunchesAreRememberedUnlessTheirProcessHasTimingOff) {
  Metrics m;
  EXPECT_TRUE(m.RemembersLaunches(1));
  m.Process(1, {}, Metrics::TimingPolicy::kOff);
  m.Process(2, {}, Metrics::TimingPolicy::kSampled);
  EXPECT_FALSE(m.RemembersLaunches(1));
  EXPECT_TRUE(m.RemembersLaunches(2));
  m.RememberLaunch(1, 5, 0, 0);
  m.RememberLaunch(2, 5, 0, 0);
  EXPECT_EQ(V(Parse(m), "cuflight_kernel_join_pending"), 1);
  m.ProcessGone(1);
  EXPECT_TRUE(m.RemembersLaunches(1));
}

}  // namespace
}  // namespace cuflight::collector
