#include "cuflight/report/time_bins.h"

#include <algorithm>

namespace cuflight::report {
namespace {

// floor(a / b) for b > 0.
int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

}  // namespace

void MergeBin(const DensityBin& from, DensityBin* into) {
  if (from.launches > 0) {
    if (into->launches == 0) {
      into->first_ns = from.first_ns;
      into->last_ns = from.last_ns;
    } else {
      into->first_ns = std::min(into->first_ns, from.first_ns);
      into->last_ns = std::max(into->last_ns, from.last_ns);
    }
    if (into->signature == kNoSignature) {
      into->signature = from.signature;
    } else if (into->signature != from.signature) {
      into->signature = kMixedSignatures;
    }
  }
  into->launches += from.launches;
  into->timed += from.timed;
  into->busy_ns += from.busy_ns;
}

void TimeBins::Cover(int64_t lo, int64_t hi) {
  const auto span = static_cast<int64_t>(kMaxBins);
  int64_t origin = FloorDiv(std::min(lo, origin_), width_) * width_;
  int64_t width = width_;
  while (hi - origin >= span * width) {
    width *= 2;
    origin = FloorDiv(origin, width) * width;
  }
  if (origin == origin_ && width == width_) return;
  std::vector<DensityBin> moved(kMaxBins);
  for (size_t i = 0; i < kMaxBins; ++i) {
    if (bins_[i].launches == 0 && bins_[i].busy_ns == 0) continue;
    const int64_t start = origin_ + static_cast<int64_t>(i) * width_;
    MergeBin(bins_[i], &moved[static_cast<size_t>((start - origin) / width)]);
  }
  bins_ = std::move(moved);
  origin_ = origin;
  width_ = width;
}

void TimeBins::Add(int64_t start_ns, int64_t end_ns, uint32_t signature, bool timed) {
  end_ns = std::max(end_ns, start_ns);
  if (bins_.empty()) {
    bins_.assign(kMaxBins, DensityBin{});
    origin_ = FloorDiv(start_ns, width_) * width_;
    max_end_ = end_ns;
  }
  max_end_ = std::max(max_end_, end_ns);
  Cover(start_ns, max_end_);
  ++launches_;
  timed_ += timed ? 1 : 0;
  DensityBin one;
  one.launches = 1;
  one.timed = timed ? 1 : 0;
  one.signature = signature;
  one.first_ns = start_ns;
  one.last_ns = end_ns;
  const auto first = static_cast<size_t>((start_ns - origin_) / width_);
  MergeBin(one, &bins_[first]);
  if (!timed) return;
  // The GPU time, spread over the bins the launch covers.
  size_t i = first;
  int64_t at = start_ns;
  while (at < end_ns && i < kMaxBins) {
    const int64_t bin_end = origin_ + static_cast<int64_t>(i + 1) * width_;
    const int64_t until = std::min(end_ns, bin_end);
    bins_[i].busy_ns += static_cast<uint64_t>(until - at);
    at = until;
    ++i;
  }
}

}  // namespace cuflight::report
