// Exact statistics of a set of GPU durations.
#ifndef CUFLIGHT_REPORT_DURATION_STATS_H_
#define CUFLIGHT_REPORT_DURATION_STATS_H_

#include <cstdint>
#include <vector>

#include "cuflight/report/report_model.h"

namespace cuflight::report {

// Nearest-rank percentile of `sorted` (ascending, non-empty): the element at 1-based rank
// ceil(p / 100 x n), at least rank 1. p in (0, 100].
uint64_t NearestRank(const std::vector<uint64_t>& sorted, double p);

// Count, total (saturating), min, max, mean, p50 and p99 of `durations` (any order, non-empty;
// sorted in place).
DurationStats ComputeDurationStats(std::vector<uint64_t>* durations);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_DURATION_STATS_H_
