#include "cuflight/report/duration_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cuflight::report {

uint64_t NearestRank(const std::vector<uint64_t>& sorted, double p) {
  const double n = static_cast<double>(sorted.size());
  // A small tolerance keeps p/100 x n from landing just above an integer (0.99 x 100 is
  // 99.00000000000001 in binary), which would skip a rank.
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * n - 1e-9));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

DurationStats ComputeDurationStats(std::vector<uint64_t>* durations) {
  std::sort(durations->begin(), durations->end());
  DurationStats s;
  s.count = durations->size();
  if (s.count == 0) return s;
  for (const uint64_t d : *durations) {
    s.total_ns = d > std::numeric_limits<uint64_t>::max() - s.total_ns
                     ? std::numeric_limits<uint64_t>::max()
                     : s.total_ns + d;
  }
  s.min_ns = durations->front();
  s.max_ns = durations->back();
  long double sum = 0;
  for (const uint64_t d : *durations) sum += static_cast<long double>(d);
  s.mean_ns = static_cast<double>(sum / static_cast<long double>(s.count));
  s.p50_ns = NearestRank(*durations, 50);
  s.p99_ns = NearestRank(*durations, 99);
  return s;
}

}  // namespace cuflight::report
