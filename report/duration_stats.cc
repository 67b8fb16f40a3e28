#include "cuflight/report/duration_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace cuflight::report {
namespace {

// Bucket layout: values < 256 are their own bucket; a value v >= 256 with highest bit e (8..63)
// goes to 256 + (e - 8) * 256 + the 8 bits below its highest bit.
constexpr size_t kSubBits = 8;
constexpr size_t kSub = size_t{1} << kSubBits;
constexpr size_t kBuckets = kSub + (64 - kSubBits) * kSub;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

// The 0-based index of the nearest rank of percentile p among n > 0 sorted elements.
size_t NearestRankIndex(size_t n, double p) {
  // A small tolerance keeps p/100 x n from landing just above an integer (0.99 x 100 is
  // 99.00000000000001 in binary), which would skip a rank.
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(n) - 1e-9));
  return std::clamp<size_t>(rank, 1, n) - 1;
}

}  // namespace

uint64_t NearestRank(const std::vector<uint64_t>& sorted, double p) {
  return sorted[NearestRankIndex(sorted.size(), p)];
}

DurationStats ComputeDurationStats(std::vector<uint64_t>* durations) {
  DurationStats s;
  s.count = durations->size();
  if (s.count == 0) return s;
  long double sum = 0;
  for (const uint64_t d : *durations) {
    s.total_ns = SaturatingAdd(s.total_ns, d);
    sum += static_cast<long double>(d);
  }
  s.mean_ns = static_cast<double>(sum / static_cast<long double>(s.count));
  const auto [min, max] = std::minmax_element(durations->begin(), durations->end());
  s.min_ns = *min;
  s.max_ns = *max;
  // The two nearest ranks by selection, not a sort: the element at each rank is the one a sort
  // would put there. p99's rank is at or above p50's, so it is selected among the elements after.
  const size_t n = durations->size();
  const size_t r50 = NearestRankIndex(n, 50);
  const size_t r99 = NearestRankIndex(n, 99);
  std::nth_element(durations->begin(), durations->begin() + static_cast<ptrdiff_t>(r50),
                   durations->end());
  s.p50_ns = (*durations)[r50];
  std::nth_element(durations->begin() + static_cast<ptrdiff_t>(r50),
                   durations->begin() + static_cast<ptrdiff_t>(r99), durations->end());
  s.p99_ns = (*durations)[r99];
  return s;
}

size_t DurationAccumulator::Bucket(uint64_t ns) {
  if (ns < kSub) return static_cast<size_t>(ns);
  const int e = std::bit_width(ns) - 1;  // 8..63
  const uint64_t sub = (ns >> (e - static_cast<int>(kSubBits))) & (kSub - 1);
  return kSub + static_cast<size_t>(e - static_cast<int>(kSubBits)) * kSub +
         static_cast<size_t>(sub);
}

uint64_t DurationAccumulator::BucketLow(size_t bucket) {
  if (bucket < kSub) return bucket;
  const size_t e = (bucket - kSub) / kSub + kSubBits;
  const uint64_t sub = (bucket - kSub) % kSub;
  return (uint64_t{kSub} + sub) << (e - kSubBits);
}

uint64_t DurationAccumulator::BucketHigh(size_t bucket) {
  if (bucket < kSub) return bucket;
  const size_t e = (bucket - kSub) / kSub + kSubBits;
  return BucketLow(bucket) + ((uint64_t{1} << (e - kSubBits)) - 1);
}

void DurationAccumulator::Add(uint64_t d) {
  if (count_ == 0 || d < min_) min_ = d;
  max_ = std::max(max_, d);
  ++count_;
  total_ = SaturatingAdd(total_, d);
  sum_ += static_cast<long double>(d);
  if (buckets_.empty()) {
    exact_.push_back(d);
    if (exact_.size() > kExact) MoveToHistogram();
    return;
  }
  ++buckets_[Bucket(d)];
}

void DurationAccumulator::MoveToHistogram() {
  buckets_.assign(kBuckets, 0);
  for (const uint64_t d : exact_) ++buckets_[Bucket(d)];
  exact_.clear();
  exact_.shrink_to_fit();
}

uint64_t DurationAccumulator::Percentile(double p) const {
  const double n = static_cast<double>(count_);
  uint64_t rank = static_cast<uint64_t>(std::ceil(p / 100.0 * n - 1e-9));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen >= rank) {
      const uint64_t low = BucketLow(b);
      const uint64_t mid = low + (BucketHigh(b) - low) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

DurationStats DurationAccumulator::Finish() {
  if (buckets_.empty()) return ComputeDurationStats(&exact_);
  DurationStats s;
  s.count = count_;
  s.total_ns = total_;
  s.min_ns = min_;
  s.max_ns = max_;
  s.mean_ns = static_cast<double>(sum_ / static_cast<long double>(count_));
  s.p50_ns = Percentile(50);
  s.p99_ns = Percentile(99);
  s.percentiles_exact = false;
  return s;
}

}  // namespace cuflight::report
