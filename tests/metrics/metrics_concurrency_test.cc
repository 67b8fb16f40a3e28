// Metrics under concurrent updates and renders (run under TSan too): every render parses, no
// counter ever goes down between two renders, histograms stay consistent within a render, and
// the final values are exact.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/metrics/metrics.h"
#include "cuflight/metrics/metrics_server.h"
#include "exposition_parser.h"
#include "http_get.h"

namespace cuflight::collector {
namespace {

using testing::Exposition;

constexpr const char* kResources[] = {"registers", "shared_mem", "warps",
                                      "blocks",    "barriers",   "cluster"};

std::string Key(const testing::Sample& s) {
  std::string key = s.name;
  for (const auto& [k, v] : s.labels) key += "|" + k + "=" + v;
  return key;
}

// Checks one render against the previous one seen by the same reader; returns "" if fine.
std::string CheckRender(const std::string& text, std::map<std::string, double>* last) {
  Exposition e;
  std::string error;
  if (!testing::ParseExposition(text, &e, &error)) return "parse: " + error;
  for (const testing::Family& f : e.families) {
    const bool monotonic = f.type == "counter" || f.type == "histogram" || f.type == "summary";
    for (const testing::Sample& s : f.samples) {
      if (!monotonic) continue;
      const std::string key = Key(s);
      auto it = last->find(key);
      if (it != last->end() && s.value < it->second) {
        return key + " went down from " + std::to_string(it->second) + " to " +
               std::to_string(s.value);
      }
      (*last)[key] = s.value;
    }
    if (f.type == "histogram") {
      std::map<std::string, double> inf, count;
      std::map<std::string, double> previous_bucket;
      for (const testing::Sample& s : f.samples) {
        const std::string device = s.labels.count("device") ? s.labels.at("device") : "";
        if (s.name.ends_with("_bucket")) {
          if (previous_bucket.count(device) && s.value < previous_bucket[device]) {
            return "buckets not cumulative for device " + device;
          }
          previous_bucket[device] = s.value;
          if (s.labels.at("le") == "+Inf") inf[device] = s.value;
        } else if (s.name.ends_with("_count")) {
          count[device] = s.value;
        }
      }
      if (inf != count) return "+Inf bucket differs from _count";
    }
  }
  return "";
}

TEST(MetricsConcurrencyTest, UpdatesWhileRenderingStayConsistentAndExact) {
  constexpr int kCounterThreads = 3;
  constexpr int kReaders = 3;
  constexpr int kRendersPerReader = 30;  // writers keep going until every reader has this many
  constexpr int kMinIterations = 2000;   // and each writer has done at least this much
  constexpr int kNames = 12;             // more than the 8 tracked
  Metrics m(8, 1 << 12);
  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error);
  ASSERT_NE(server, nullptr) << error;

  std::atomic<bool> stop{false};
  std::atomic<int> writers_left{1 + kCounterThreads};
  int launches = 0;                                      // written by the ingest thread
  std::vector<int> counter_iterations(kCounterThreads);  // one element per counter thread
  std::vector<std::thread> threads;
  threads.emplace_back([&] {  // the ingest thread: launches and their times
    for (int i = 0; i < kMinIterations || !stop.load(); ++i) {
      const uint64_t pid = static_cast<uint64_t>(i % 4) + 1;
      const int32_t device = i % 3;
      m.Kernel(pid, static_cast<uint64_t>(i), "kernel_" + std::to_string(i % kNames), device,
               kResources[i % 6], (i % 9) / 8.0);
      m.KernelTime(pid, static_cast<uint64_t>(i), device, 1000);
      launches = i + 1;
    }
    writers_left.fetch_sub(1);
  });
  for (int t = 0; t < kCounterThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < kMinIterations || !stop.load(); ++j) {
        m.EventReceived("kernel");
        m.Rejected("reason_" + std::to_string(j % 40));  // new reasons race between threads
        m.ProducerDropped("ring_full", 1);
        m.ProducerTimingDropped(2);
        m.BytesWritten(10);
        m.ProducerConnected();
        m.ProducerDisconnected();
        counter_iterations[t] = j + 1;
      }
      writers_left.fetch_sub(1);
    });
  }
  std::vector<std::string> failures(kReaders);
  std::vector<std::atomic<int>> renders(kReaders);
  std::vector<int> renders_during_writes(kReaders);
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::map<std::string, double> last;
      while (writers_left.load() > 0) {
        std::string text;
        if (r == kReaders - 1) {  // one reader scrapes over HTTP
          const testing::HttpResponse resp = testing::HttpGet(server->port(), "/metrics");
          if (resp.status != 200) failures[r] = "HTTP: " + resp.error;
          text = resp.body;
        } else {
          text = m.Render();
        }
        if (failures[r].empty()) failures[r] = CheckRender(text, &last);
        if (writers_left.load() > 0) ++renders_during_writes[r];
        renders[r].fetch_add(1);
        if (!failures[r].empty()) break;
      }
      renders[r].store(kRendersPerReader);  // let the writers stop if this reader gave up
    });
  }
  // Waits for the readers (not a sleep: progress is what ends the wait).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (const auto& n : renders) all = all && n.load() >= kRendersPerReader;
    if (all) break;
    std::this_thread::yield();
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kReaders; ++r) {
    EXPECT_EQ(failures[r], "") << "reader " << r;
    EXPECT_GE(renders_during_writes[r], kRendersPerReader - 1) << "reader " << r;
  }

  // Expected totals from the iteration counts.
  int other_launches = 0;
  for (int i = 0; i < launches; ++i) other_launches += i % kNames >= 8;
  int iterations = 0, reason_0 = 0, reason_other = 0;
  for (int n : counter_iterations) {
    iterations += n;
    for (int j = 0; j < n; ++j) {
      reason_0 += j % 40 == 0;
      reason_other += j % 40 >= 32;
    }
  }

  Exposition e;
  ASSERT_TRUE(testing::ParseExposition(m.Render(), &e, &error)) << error;
  double launch_sum = 0;
  for (const testing::Sample* s : e.SamplesNamed("cuflight_kernel_launches_total")) {
    launch_sum += s->value;
  }
  EXPECT_EQ(launch_sum, launches);
  double name_launches = 0, other = 0;
  for (const testing::Sample* s : e.SamplesNamed("cuflight_kernel_name_launches_total")) {
    name_launches += s->value;
    if (s->labels.at("kernel") == "other") other += s->value;
  }
  EXPECT_EQ(name_launches, launches);
  // Names 0..7 are seen first and keep their series; names 8..11 are summed as "other".
  EXPECT_EQ(other, other_launches);
  EXPECT_EQ(e.Value("cuflight_kernel_names_tracked"), 8);
  double gpu_seconds = 0;
  for (const testing::Sample* s : e.SamplesNamed("cuflight_kernel_gpu_seconds_total")) {
    gpu_seconds += s->value;
  }
  EXPECT_NEAR(gpu_seconds, launches * 1e-6, 1e-9);
  double histogram_count = 0;
  for (const testing::Sample* s : e.SamplesNamed("cuflight_kernel_occupancy_ratio_count")) {
    histogram_count += s->value;
  }
  EXPECT_EQ(histogram_count, launches);
  EXPECT_EQ(e.Value("cuflight_kernel_time_unmatched_total"), 0);
  EXPECT_EQ(e.Value("cuflight_kernel_join_pending"), 0);

  EXPECT_EQ(e.Value("cuflight_events_received_total", {{"type", "kernel"}}), iterations);
  EXPECT_EQ(e.Value("cuflight_log_written_bytes_total"), 10.0 * iterations);
  EXPECT_EQ(e.Value("cuflight_events_dropped_total", {{"reason", "ring_full"}}), iterations);
  EXPECT_EQ(e.Value("cuflight_kernel_timing_dropped_total"), 2.0 * iterations);
  EXPECT_EQ(e.Value("cuflight_producers_connected"), 0);
  EXPECT_EQ(e.Value("cuflight_producer_connections_total"), iterations);
  // Every thread sees reasons 0..31 before 32..39, so 0..31 own the 32 series.
  EXPECT_EQ(e.Value("cuflight_events_rejected_total", {{"reason", "reason_0"}}), reason_0);
  EXPECT_TRUE(e.Value("cuflight_events_rejected_total", {{"reason", "reason_31"}}).has_value());
  EXPECT_FALSE(e.Value("cuflight_events_rejected_total", {{"reason", "reason_32"}}).has_value());
  EXPECT_EQ(e.Value("cuflight_events_rejected_total", {{"reason", "other"}}), reason_other);
}

}  // namespace
}  // namespace cuflight::collector
