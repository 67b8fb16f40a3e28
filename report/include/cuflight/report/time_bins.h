// The launches of one timeline lane counted into at most kMaxBins equal time bins whose width
// grows as the lane's time range does: what the HTML timeline draws when there are more launches
// than shapes, with memory that does not grow with the launches.
//
// 1. The bin width is a power of two nanoseconds, and the origin a multiple of it. A launch
//    outside the covered range [origin, origin + kMaxBins x width) doubles the width (merging
//    bins pairwise) until the lane's whole range fits, moving the origin down when the launch is
//    earlier than it.
// 2. A launch counts in the bin its start falls in; its GPU time (end - start, timed launches)
//    is spread over the bins it covers (busy_ns); an untimed launch is a point.
// 3. A bin names the signature of its launches, or kMixedSignatures when they differ.
#ifndef CUFLIGHT_REPORT_TIME_BINS_H_
#define CUFLIGHT_REPORT_TIME_BINS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuflight/report/report_model.h"

namespace cuflight::report {

class TimeBins {
 public:
  static constexpr size_t kMaxBins = 1024;
  static constexpr int64_t kFirstBinNs = 1024;

  // A launch from start_ns to end_ns (end >= start; equal for an untimed launch).
  void Add(int64_t start_ns, int64_t end_ns, uint32_t signature, bool timed);

  bool empty() const { return launches_ == 0; }
  uint64_t launches() const { return launches_; }
  uint64_t timed() const { return timed_; }
  int64_t origin_ns() const { return origin_; }
  int64_t bin_ns() const { return width_; }
  // kMaxBins bins (empty before the first Add).
  const std::vector<DensityBin>& bins() const { return bins_; }

 private:
  // Widens and moves the range until [lo, hi] fits.
  void Cover(int64_t lo, int64_t hi);

  std::vector<DensityBin> bins_;
  int64_t origin_ = 0;
  int64_t width_ = kFirstBinNs;
  int64_t max_end_ = 0;
  uint64_t launches_ = 0;
  uint64_t timed_ = 0;
};

// Adds `from` into `into`: launches, timed, busy time, first/last and the signature (the same
// one, or kMixedSignatures).
void MergeBin(const DensityBin& from, DensityBin* into);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_TIME_BINS_H_
