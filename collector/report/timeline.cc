#include "cuflight/report/timeline.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "cuflight/report/review.h"

namespace cuflight::report {
namespace {

// Lanes, in the order a lane key sorts: process, device, stream.
using LaneKey = std::tuple<size_t, int32_t, uint64_t>;

}  // namespace

void BuildTimeline(const Report& report, Timeline* timeline) {
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
  Timeline out;
  bool any = false;
  for (auto& [key, lane] : lanes) {
    lane.process = std::get<0>(key);
    lane.device = std::get<1>(key);
    lane.stream = std::get<2>(key);
    std::stable_sort(lane.slices.begin(), lane.slices.end(),
                     [](const TimelineSlice& a, const TimelineSlice& b) {
                       return a.start_ns < b.start_ns;
                     });
    for (const TimelineSlice& s : lane.slices) {
      if (!any || s.start_ns < out.begin_ns) out.begin_ns = s.start_ns;
      if (!any || s.end_ns > out.end_ns) out.end_ns = s.end_ns;
      any = true;
    }
    out.launches += lane.launches;
    out.timed += lane.timed;
    out.lanes.push_back(std::move(lane));
  }
  *timeline = std::move(out);
}

namespace {

// Merges the slices of `lane` whose gap to the previous merged slice is below `gap_ns`.
std::vector<TimelineSlice> Merge(const std::vector<TimelineSlice>& slices, int64_t gap_ns) {
  std::vector<TimelineSlice> out;
  for (const TimelineSlice& s : slices) {
    if (!out.empty() && s.start_ns - out.back().end_ns < gap_ns) {
      TimelineSlice& m = out.back();
      m.end_ns = std::max(m.end_ns, s.end_ns);
      m.launches += s.launches;
      m.timed += s.timed;
      if (m.signature != s.signature) m.signature = kMixedSignatures;
      continue;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

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
  if (slices > max_slices) {
    const int64_t range = std::max<int64_t>(timeline->end_ns - timeline->begin_ns, 1);
    int64_t gap = std::max<int64_t>(range / std::max(width_px, 1), 1);
    std::vector<std::vector<TimelineSlice>> merged(lanes.size());
    while (true) {
      slices = 0;
      for (size_t i = 0; i < lanes.size(); ++i) {
        merged[i] = Merge(lanes[i].slices, gap);
        slices += merged[i].size();
      }
      // Past the whole range every lane is one slice, which fits since lanes <= max_slices.
      if (slices <= max_slices || gap > range) break;
      gap *= 2;
    }
    for (size_t i = 0; i < lanes.size(); ++i) lanes[i].slices = std::move(merged[i]);
    r.merged = true;
    r.merge_gap_ns = gap;
  }
  r.slices = slices;
  return r;
}

}  // namespace cuflight::report
