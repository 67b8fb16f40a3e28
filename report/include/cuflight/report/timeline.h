// The per-process timeline of the HTML report: every kernel launch the report's kernel table
// counts, placed on a lane per (process, device, stream) over time, and its reduction to a number
// of shapes a page can draw, as density: per lane, equal time bins with their launch count and
// the share of the bin the GPU was busy.
//
// 1. A launch joined to its kernel_time (same process, correlation_id, graph node and device:
//    cuflight/schema/join_key.h; each node of a graph launch is its own slice) spans the kernel's
//    GPU start..end (CUPTI timestamps, ns); a launch without one is a point at its kernel event's
//    host ts_ns. Both are read as ns since the Unix epoch, as the Perfetto export does.
// 2. A launch is on the timeline when the report counts it: BuildReport, run with
//    ReportOptions::keep_launches, keeps the launches it aggregates into report.signatures, so
//    the report's filters and its de-duplication apply as they do to the kernel table, and the
//    logs are read once. It keeps each launch (Report::kept_launches) up to
//    ReportOptions::max_kept_launches, and counts every launch into time bins per lane
//    (Report::lanes, time_bins.h); the timeline is built from the launches when they are all
//    kept, else from the bins (Timeline::binned).
// 3. Reduction (more slices than a page should draw, or a binned timeline): every kept lane is
//    cut into the same number of equal bins over the timeline's range, at most one per pixel;
//    each bin with launches or GPU time becomes one slice with its launch count and busy time.
#ifndef CUFLIGHT_REPORT_TIMELINE_H_
#define CUFLIGHT_REPORT_TIMELINE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuflight/report/report_model.h"

namespace cuflight::report {

// One launch, or (binned, after ReduceTimeline) the launches of one time bin of one lane.
struct TimelineSlice {
  int64_t start_ns = 0;
  int64_t end_ns = 0;       // == start_ns for an untimed launch; a bin's end for a bin
  uint32_t signature = 0;   // index into Report::signatures, or kMixedSignatures
  uint32_t launches = 1;    // launches starting in the slice
  uint32_t timed = 0;       // of those, joined to a kernel_time
  uint64_t correlation_id = 0;  // of the first launch (single launches only)
  uint64_t seq = 0;             // of the first launch (single launches only)
  bool bin = false;             // a time bin (its launch count and busy time), not one launch
  uint64_t busy_ns = 0;         // a bin: GPU time of timed launches inside it
};

// The launches of one stream of one process, by start time.
struct TimelineLane {
  size_t process = 0;  // index into Report::processes
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t launches = 0;  // on the lane in all (before any reduction)
  uint64_t timed = 0;
  std::vector<TimelineSlice> slices;
};

struct Timeline {
  // Lanes by process (Report::processes order), then device, then stream.
  std::vector<TimelineLane> lanes;
  // Built from Report::lanes (time bins) because not every launch was kept: every slice is a
  // bin, of at most bin_ns.
  bool binned = false;
  int64_t bin_ns = 0;
  int64_t begin_ns = 0;  // earliest slice start; 0 when there is no lane
  int64_t end_ns = 0;    // latest slice end
  uint64_t launches = 0;
  uint64_t timed = 0;
};

// Places every launch of report.kept_launches on its lane when they are all there
// (report.kept_launches_complete), else every lane of report.lanes as its bins (binned). Empty
// unless the report was built with ReportOptions::keep_launches.
void BuildTimeline(const Report& report, Timeline* timeline);

// What ReduceTimeline kept and merged.
struct TimelineReduction {
  size_t lanes_left_out = 0;         // lanes beyond max_lanes, not drawn
  uint64_t launches_left_out = 0;    // their launches
  bool merged = false;               // launches were counted into bins (3. above)
  int64_t merge_gap_ns = 0;          // the width of those bins (0 when !merged)
  uint64_t slices = 0;               // slices left in the kept lanes
};

// Reduces `timeline` in place so that at most `max_lanes` lanes (>= 1) and at most `max_slices`
// slices (>= lanes kept) remain. Lanes kept: those of processes needing review first, then the
// busiest, shown in their original order. When the kept lanes hold more than max_slices slices,
// or the timeline is binned, each kept lane is cut into min(width_px, max_slices / lanes) equal
// bins over [begin_ns, end_ns], none narrower than the timeline's own bins (3. above): a bin's slice counts the launches starting in it and
// the GPU time inside it, and names their signature when they share it, else kMixedSignatures.
TimelineReduction ReduceTimeline(const Report& report, size_t max_lanes, size_t max_slices,
                                 int width_px, Timeline* timeline);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_TIMELINE_H_
