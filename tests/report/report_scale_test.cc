// The report at scale: what it keeps while reading is bounded (the join's waiting launches by the
// distance to their kernel_time, the timeline's launches by ReportOptions::max_kept_launches and
// its bins by TimeBins::kMaxBins, durations by DurationAccumulator::kExact), the same report
// whatever the reading threads, and the bounded statistics within their stated error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <stdlib.h>
#include <string>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/report/build_report.h"
#include "cuflight/report/duration_stats.h"
#include "cuflight/report/render.h"
#include "cuflight/report/time_bins.h"
#include "log_gen.h"
#include "temp_dir.h"

namespace cuflight::report {
namespace {

namespace fs = std::filesystem;

using test_support::TempDir;

// Nearest rank, computed here: the smallest value with at least p% of the values at or below.
uint64_t Rank(std::vector<uint64_t> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

TEST(DurationAccumulatorTest, ExactUpToItsLimitThenWithinTwoTenthsOfAPercent) {
  // Durations 1,000 + (i * 7919 mod 1,000,003) ns: spread, not sorted, no two alike nearby.
  std::vector<uint64_t> all;
  DurationAccumulator small;
  DurationAccumulator large;
  for (uint64_t i = 0; i < 3 * DurationAccumulator::kExact; ++i) {
    const uint64_t d = 1000 + (i * 7919) % 1000003;
    all.push_back(d);
    large.Add(d);
    if (i < DurationAccumulator::kExact) small.Add(d);
  }
  const std::vector<uint64_t> first(all.begin(), all.begin() + DurationAccumulator::kExact);
  const DurationStats s = small.Finish();
  EXPECT_TRUE(s.percentiles_exact);
  EXPECT_EQ(s.count, first.size());
  EXPECT_EQ(s.p50_ns, Rank(first, 50));
  EXPECT_EQ(s.p99_ns, Rank(first, 99));

  const DurationStats l = large.Finish();
  EXPECT_FALSE(l.percentiles_exact);
  EXPECT_EQ(l.count, all.size());
  EXPECT_EQ(l.total_ns, std::accumulate(all.begin(), all.end(), uint64_t{0}));
  EXPECT_EQ(l.min_ns, *std::min_element(all.begin(), all.end()));
  EXPECT_EQ(l.max_ns, *std::max_element(all.begin(), all.end()));
  EXPECT_DOUBLE_EQ(l.mean_ns, static_cast<double>(l.total_ns) / static_cast<double>(all.size()));
  for (const auto& [got, p] : {std::pair{l.p50_ns, 50.0}, std::pair{l.p99_ns, 99.0}}) {
    const double want = static_cast<double>(Rank(all, p));
    EXPECT_LE(std::fabs(static_cast<double>(got) - want) / want, 0.002) << p;
  }
  // A bucket is 1/256 of its power of two wide: 1,000,003 ns lies in [2^19 + 232 x 2^11, ...).
  const size_t b = DurationAccumulator::Bucket(1000003);
  EXPECT_LE(DurationAccumulator::BucketLow(b), 1000003u);
  EXPECT_GE(DurationAccumulator::BucketHigh(b), 1000003u);
  EXPECT_EQ(DurationAccumulator::BucketHigh(b) - DurationAccumulator::BucketLow(b) + 1,
            uint64_t{1} << (19 - 8));
}

TEST(TimeBinsTest, WidensToHoldTheLaneKeepingEveryLaunchAndItsBusyTime) {
  TimeBins bins;
  constexpr int64_t t0 = 1'700'000'000'000'000'000;
  uint64_t busy = 0;
  // 10,000 launches of 700 ns every 100 us over 1 s, then one 5 us before the first.
  for (int64_t i = 0; i < 10000; ++i) {
    bins.Add(t0 + i * 100000, t0 + i * 100000 + 700, 3, true);
    busy += 700;
  }
  bins.Add(t0 - 5000, t0 - 5000, 3, false);
  EXPECT_EQ(bins.launches(), 10001u);
  EXPECT_EQ(bins.timed(), 10000u);
  ASSERT_EQ(bins.bins().size(), TimeBins::kMaxBins);
  // 1 s in 1,024 bins: the power of two at or above 1 s / 1,024 = 976,563 ns is 2^20.
  EXPECT_EQ(bins.bin_ns(), int64_t{1} << 20);
  EXPECT_EQ(bins.origin_ns() % bins.bin_ns(), 0);
  EXPECT_LE(bins.origin_ns(), t0 - 5000);
  uint64_t launches = 0;
  uint64_t busy_seen = 0;
  for (const DensityBin& b : bins.bins()) {
    launches += b.launches;
    busy_seen += b.busy_ns;
    EXPECT_LE(b.busy_ns, static_cast<uint64_t>(bins.bin_ns()));
    if (b.launches > 0) {
      EXPECT_EQ(b.signature, 3u);
    }
  }
  EXPECT_EQ(launches, 10001u);
  EXPECT_EQ(busy_seen, busy);
}

struct Generated {
  TempDir dir;
  bench::LogTotals totals;
  std::vector<fs::path> files;
};

void Generate(uint64_t launches, Generated* g) {
  bench::LogSpec spec;
  spec.launches = launches;
  spec.flush_every = 4096;
  spec.min_kernel_ns = 1000;  // shorter than a stream's gap between launches (40-120 us)
  spec.max_kernel_ns = 5000;
  spec.rotate_bytes = 8u << 20;
  spec.untimed_every = 1000;
  std::string error;
  ASSERT_TRUE(bench::WriteLogs(g->dir.path(), spec, &g->totals, &error)) << error;
  ASSERT_TRUE(logread::ExpandLogPaths({g->dir.path().string()}, &g->files, &error)) << error;
}

// 100,000 launches on 4 streams, kernel_times flushed every 4,096 launches, every 1,000th launch
// untimed: the totals by construction; what the builder held at most is one flush of launches
// (plus at most the last launch of each stream, still running at the flush) and the untimed
// launches so far (100: they wait for a kernel_time that never comes, up to
// max_pending_launches), the timeline's kept launches its limit and its bins 1,024 per lane.
TEST(ReportScaleTest, RetainedStateIsBoundedAndTheTotalsExact) {
  Generated g;
  Generate(100'000, &g);
  ReportOptions o;
  o.keep_launches = true;
  o.max_kept_launches = 1000;
  std::vector<logread::ReadProgress> progress;
  o.on_progress = [&](const logread::ReadProgress& p) { progress.push_back(p); };
  Report r;
  std::string error;
  ASSERT_TRUE(BuildReport(o, g.files, &r, &error)) << error;
  EXPECT_EQ(r.launches, 100'000u);
  EXPECT_EQ(r.timed_launches, 100'000u - 100u);
  ASSERT_EQ(r.processes.size(), 1u);
  EXPECT_EQ(r.processes[0].kernels, 100'000u);
  EXPECT_EQ(r.processes[0].timed_kernels, 100'000u - 100u);
  EXPECT_LE(r.bounds.peak_pending_launches, 4096u + 4 + 100);
  EXPECT_GE(r.bounds.peak_pending_launches, 4096u);
  EXPECT_EQ(r.bounds.launches_given_up, 0u);
  EXPECT_EQ(r.bounds.times_without_kernel, 0u);
  EXPECT_EQ(r.kept_launches.size(), 1000u);
  EXPECT_FALSE(r.kept_launches_complete);
  ASSERT_EQ(r.lanes.size(), 4u);
  uint64_t lane_launches = 0;
  uint64_t lane_timed = 0;
  for (const LaneDensity& lane : r.lanes) {
    EXPECT_EQ(lane.bins.size(), TimeBins::kMaxBins);
    lane_launches += lane.launches;
    lane_timed += lane.timed;
  }
  EXPECT_EQ(lane_launches, 100'000u);
  EXPECT_EQ(lane_timed, 100'000u - 100u);
  uint64_t timed = 0;
  for (const Signature& s : r.signatures) timed += s.gpu_time ? s.gpu_time->count : 0;
  EXPECT_EQ(timed, 100'000u - 100u);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().files_done, g.files.size());
  EXPECT_EQ(progress.back().events, g.totals.events);
}

TEST(ReportScaleTest, TheSameReportWhateverTheReadingThreads) {
  Generated g;
  Generate(30'000, &g);
  ASSERT_GT(g.files.size(), 2u);
  std::string want;
  for (const unsigned threads : {0u, 1u, 3u}) {
    ReportOptions o;
    o.read_threads = threads;
    Report r;
    std::string error;
    ASSERT_TRUE(BuildReport(o, g.files, &r, &error)) << error;
    const std::string json = RenderJson(r, o).dump();
    if (want.empty()) {
      want = json;
    } else {
      EXPECT_EQ(json, want) << threads;
    }
  }
}

// With room for fewer waiting launches than one flush holds, the oldest are counted untimed and
// said in a note (so are the untimed launches, whose kernel_time never comes); nothing is lost
// from the totals.
TEST(ReportScaleTest, ALaunchWaitingTooLongIsCountedUntimedAndSaid) {
  Generated g;
  Generate(20'000, &g);
  ReportOptions o;
  o.max_pending_launches = 1000;
  o.max_pending_times = 1000;
  Report r;
  std::string error;
  ASSERT_TRUE(BuildReport(o, g.files, &r, &error)) << error;
  EXPECT_LE(r.bounds.peak_pending_launches, 1000u);
  EXPECT_GT(r.bounds.launches_given_up, 0u);
  EXPECT_EQ(r.launches, 20'000u);
  // Every launch is timed or given up, but for the last untimed one (launch 20,000: fewer than
  // 1,000 launches came after it), which is untimed at the end.
  EXPECT_EQ(r.timed_launches + r.bounds.launches_given_up, 20'000u - 1);
  bool noted = false;
  for (const std::string& note : r.read.notes) {
    if (note.find("launches counted untimed: their kernel_time had not come within 1000 later "
                  "launches") != std::string::npos) {
      noted = true;
    }
  }
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace cuflight::report
