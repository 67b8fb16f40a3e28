#include "cuflight/report/timeline.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "cuflight/report/review.h"
#include "cuflight/report/time_bins.h"

namespace cuflight::report {
namespace {

// Lanes, in the order a lane key sorts: process, device, stream.
using LaneKey = std::tuple<size_t, int32_t, uint64_t>;

void FromKeptLaunches(const Report& report, Timeline* out) {
  std::map<LaneKey, TimelineLane> lanes;
  for (const KeptLaunch& l : report.kept_launches) {
    TimelineLane& lane = lanes[{l.process, l.device, l.stream}];
    TimelineSlice slice;
    slice.signature = l.signature;
    slice.correlation_id = l.correlation_id;
    slice.seq = l.seq;
    if (l.timed) {
      slice.start_ns = l.gpu_start_ns;
      slice.end_ns = std::max(l.gpu_start_ns, l.gpu_end_ns);
      slice.timed = 1;
    } else {
      slice.start_ns = l.ts_ns;
      slice.end_ns = l.ts_ns;
    }
    ++lane.launches;
    lane.timed += slice.timed;
    lane.slices.push_back(slice);
  }
  for (auto& [key, lane] : lanes) {
    lane.process = std::get<0>(key);
    lane.device = std::get<1>(key);
    lane.stream = std::get<2>(key);
    std::stable_sort(lane.slices.begin(), lane.slices.end(),
                     [](const TimelineSlice& a, const TimelineSlice& b) {
                       return a.start_ns < b.start_ns;
                     });
    out->lanes.push_back(std::move(lane));
  }
}

void FromBins(const Report& report, Timeline* out) {
  out->binned = true;
  for (const LaneDensity& d : report.lanes) {
    TimelineLane lane;
    lane.process = d.process;
    lane.device = d.device;
    lane.stream = d.stream;
    lane.launches = d.launches;
    lane.timed = d.timed;
    for (size_t i = 0; i < d.bins.size(); ++i) {
      const DensityBin& b = d.bins[i];
      if (b.launches == 0 && b.busy_ns == 0) continue;
      // The whole bin: its launches and busy time are known only as the bin's.
      TimelineSlice slice;
      slice.bin = true;
      slice.start_ns = d.origin_ns + static_cast<int64_t>(i) * d.bin_ns;
      slice.end_ns = slice.start_ns + d.bin_ns;
      slice.signature = b.signature == kNoSignature ? kMixedSignatures : b.signature;
      slice.launches = b.launches;
      slice.timed = b.timed;
      slice.busy_ns = b.busy_ns;
      lane.slices.push_back(slice);
    }
    out->bin_ns = std::max(out->bin_ns, d.bin_ns);
    out->lanes.push_back(std::move(lane));
  }
}

// Adds `weight` (ns of GPU time) spread evenly over [start, end) to the bins of width `w` from
// `begin`, `n` of them, by overlap.
void Spread(int64_t start, int64_t end, uint64_t weight, int64_t begin, int64_t w, size_t n,
            std::vector<DensityBin>* bins) {
  if (weight == 0) return;
  if (end <= start) {
    const auto i = static_cast<size_t>(std::clamp<int64_t>((start - begin) / w, 0,
                                                           static_cast<int64_t>(n) - 1));
    (*bins)[i].busy_ns += weight;
    return;
  }
  const long double per_ns = static_cast<long double>(weight) / static_cast<long double>(end - start);
  int64_t at = start;
  uint64_t given = 0;
  while (at < end) {
    const int64_t index = std::clamp<int64_t>((at - begin) / w, 0, static_cast<int64_t>(n) - 1);
    const int64_t bin_end = index == static_cast<int64_t>(n) - 1 ? end : begin + (index + 1) * w;
    const int64_t until = std::min(end, std::max(bin_end, at + 1));
    uint64_t share = until == end ? weight - given
                                  : static_cast<uint64_t>(per_ns * static_cast<long double>(until - at));
    share = std::min(share, weight - given);
    (*bins)[static_cast<size_t>(index)].busy_ns += share;
    given += share;
    at = until;
  }
}

// The slices of one lane counted into `n` bins of width `w` from `begin`.
std::vector<TimelineSlice> Bin(const std::vector<TimelineSlice>& slices, int64_t begin, int64_t w,
                               size_t n) {
  std::vector<DensityBin> bins(n);
  for (const TimelineSlice& s : slices) {
    if (s.launches > 0) {
      DensityBin one;
      one.launches = s.launches;
      one.timed = s.timed;
      one.signature = s.signature;
      one.first_ns = s.start_ns;
      one.last_ns = s.end_ns;
      const auto i = static_cast<size_t>(std::clamp<int64_t>((s.start_ns - begin) / w, 0,
                                                             static_cast<int64_t>(n) - 1));
      MergeBin(one, &bins[i]);
    }
    const uint64_t busy =
        s.bin ? s.busy_ns : (s.timed > 0 ? static_cast<uint64_t>(s.end_ns - s.start_ns) : 0);
    Spread(s.start_ns, s.end_ns, busy, begin, w, n, &bins);
  }
  std::vector<TimelineSlice> out;
  for (size_t i = 0; i < n; ++i) {
    const DensityBin& b = bins[i];
    if (b.launches == 0 && b.busy_ns == 0) continue;
    TimelineSlice slice;
    slice.bin = true;
    slice.start_ns = begin + static_cast<int64_t>(i) * w;
    slice.end_ns = slice.start_ns + w;
    slice.signature = b.signature == kNoSignature ? kMixedSignatures : b.signature;
    slice.launches = b.launches;
    slice.timed = b.timed;
    slice.busy_ns = std::min<uint64_t>(b.busy_ns, static_cast<uint64_t>(w));
    out.push_back(slice);
  }
  return out;
}

}  // namespace

void BuildTimeline(const Report& report, Timeline* timeline) {
  Timeline out;
  if (report.kept_launches_complete) {
    FromKeptLaunches(report, &out);
  } else {
    FromBins(report, &out);
  }
  bool any = false;
  for (const TimelineLane& lane : out.lanes) {
    for (const TimelineSlice& s : lane.slices) {
      if (!any || s.start_ns < out.begin_ns) out.begin_ns = s.start_ns;
      if (!any || s.end_ns > out.end_ns) out.end_ns = s.end_ns;
      any = true;
    }
    out.launches += lane.launches;
    out.timed += lane.timed;
  }
  *timeline = std::move(out);
}

TimelineReduction ReduceTimeline(const Report& report, size_t max_lanes, size_t max_slices,
                                 int width_px, Timeline* timeline) {
  TimelineReduction r;
  std::vector<TimelineLane>& lanes = timeline->lanes;
  max_lanes = std::max<size_t>(max_lanes, 1);
  if (lanes.size() > max_lanes) {
    std::vector<size_t> rank(lanes.size());
    for (size_t i = 0; i < rank.size(); ++i) rank[i] = i;
    auto reviewed = [&](size_t i) {
      return NeedsReview(report.processes[lanes[i].process].ending);
    };
    std::stable_sort(rank.begin(), rank.end(), [&](size_t a, size_t b) {
      if (reviewed(a) != reviewed(b)) return reviewed(a);
      return lanes[a].launches > lanes[b].launches;
    });
    std::vector<bool> keep(lanes.size(), false);
    for (size_t i = 0; i < max_lanes; ++i) keep[rank[i]] = true;
    std::vector<TimelineLane> kept;
    for (size_t i = 0; i < lanes.size(); ++i) {
      if (keep[i]) {
        kept.push_back(std::move(lanes[i]));
      } else {
        ++r.lanes_left_out;
        r.launches_left_out += lanes[i].launches;
      }
    }
    lanes = std::move(kept);
  }
  uint64_t slices = 0;
  for (const TimelineLane& lane : lanes) slices += lane.slices.size();
  max_slices = std::max(max_slices, lanes.size());
  if ((slices > max_slices || timeline->binned) && !lanes.empty()) {
    const size_t per_lane = std::clamp<size_t>(max_slices / lanes.size(), 1,
                                               static_cast<size_t>(std::max(width_px, 1)));
    const int64_t range = std::max<int64_t>(timeline->end_ns - timeline->begin_ns, 1);
    const auto n = static_cast<int64_t>(per_lane);
    // Never narrower than the lanes' own bins (binned): then every bin drawn holds the start of
    // at least one of them, so none is drawn empty between two full ones.
    const int64_t w = std::max<int64_t>({(range + n - 1) / n, timeline->bin_ns, 1});
    const size_t bins = static_cast<size_t>((range + w - 1) / w) + 1;
    slices = 0;
    for (TimelineLane& lane : lanes) {
      lane.slices = Bin(lane.slices, timeline->begin_ns, w, std::min(bins, per_lane));
      slices += lane.slices.size();
    }
    r.merged = true;
    r.merge_gap_ns = w;
  }
  r.slices = slices;
  return r;
}

}  // namespace cuflight::report
