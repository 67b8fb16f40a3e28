// Statistics of a set of GPU durations: exact, or within a stated bound beyond a number of
// durations that memory should not grow with.
#ifndef CUFLIGHT_REPORT_DURATION_STATS_H_
#define CUFLIGHT_REPORT_DURATION_STATS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuflight/report/report_model.h"

namespace cuflight::report {

// Nearest-rank percentile of `sorted` (ascending, non-empty): the element at 1-based rank
// ceil(p / 100 x n), at least rank 1. p in (0, 100].
uint64_t NearestRank(const std::vector<uint64_t>& sorted, double p);

// Count, total (saturating), min, max, mean, p50 and p99 of `durations` (any order; reordered in
// place).
DurationStats ComputeDurationStats(std::vector<uint64_t>* durations);

// The durations of one signature, added one at a time. Up to kExact durations are kept as they
// are and Finish() is ComputeDurationStats of them. Beyond, they move into a log-linear
// histogram: values below 256 ns exactly, others in buckets 1/256 of a power of two wide
// (relative width 0.39 %); count, total, min, max and mean stay exact, and p50 and p99 are the
// middle of the bucket holding the nearest-rank duration (within 0.2 % of it), clamped to
// [min, max], with DurationStats::percentiles_exact false. Memory: at most kExact x 8 bytes,
// then about 115 KiB, whatever the count.
class DurationAccumulator {
 public:
  static constexpr size_t kExact = size_t{1} << 16;

  void Add(uint64_t duration_ns);
  uint64_t count() const { return count_; }
  // The statistics; count() must be > 0. Reorders the kept durations.
  DurationStats Finish();

  // Histogram bucket of a duration, and the smallest and largest duration of a bucket.
  static size_t Bucket(uint64_t ns);
  static uint64_t BucketLow(size_t bucket);
  static uint64_t BucketHigh(size_t bucket);

 private:
  void MoveToHistogram();
  uint64_t Percentile(double p) const;

  uint64_t count_ = 0;
  uint64_t total_ = 0;  // saturating
  uint64_t min_ = 0;
  uint64_t max_ = 0;
  long double sum_ = 0;
  std::vector<uint64_t> exact_;
  std::vector<uint64_t> buckets_;  // empty while the durations are exact
};

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_DURATION_STATS_H_
