// The per-process timeline of the HTML report: every kernel launch the report's kernel table
// counts, placed on a lane per (process, device, stream) over time, and its reduction to a number
// of shapes a page can draw.
//
// 1. A launch joined to its kernel_time (same process, correlation_id, graph node and device:
//    cuflight/schema/join_key.h; each node of a graph launch is its own slice) spans the kernel's
//    GPU start..end (CUPTI timestamps, ns); a launch without one is a point at its kernel event's
//    host ts_ns. Both are read as ns since the Unix epoch, as the Perfetto export does.
// 2. A launch is on the timeline when the report counts it: BuildReport, run with
//    ReportOptions::keep_launches, keeps every launch it aggregates into report.signatures
//    (Report::kept_launches), so the report's filters and its de-duplication apply as they do
//    to the kernel table, and the logs are read once.
#ifndef CUFLIGHT_REPORT_TIMELINE_H_
#define CUFLIGHT_REPORT_TIMELINE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "cuflight/report/report_model.h"

namespace cuflight::report {

// Marks a drawn slice that merges launches of several signatures.
inline constexpr uint32_t kMixedSignatures = std::numeric_limits<uint32_t>::max();

// One launch, or (after ReduceTimeline) consecutive launches of one lane merged into one shape.
struct TimelineSlice {
  int64_t start_ns = 0;
  int64_t end_ns = 0;       // == start_ns for an untimed launch
  uint32_t signature = 0;   // index into Report::signatures, or kMixedSignatures
  uint32_t launches = 1;    // launches merged into the slice
  uint32_t timed = 0;       // of those, joined to a kernel_time
  uint64_t correlation_id = 0;  // of the first launch
  uint64_t seq = 0;             // of the first launch
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
  int64_t begin_ns = 0;  // earliest slice start; 0 when there is no lane
  int64_t end_ns = 0;    // latest slice end
  uint64_t launches = 0;
  uint64_t timed = 0;
};

// Places every launch of report.kept_launches (empty unless the report was built with
// ReportOptions::keep_launches) on its lane.
void BuildTimeline(const Report& report, Timeline* timeline);

// What ReduceTimeline kept and merged.
struct TimelineReduction {
  size_t lanes_left_out = 0;         // lanes beyond max_lanes, not drawn
  uint64_t launches_left_out = 0;    // their launches
  bool merged = false;               // launches closer than merge_gap_ns were merged
  int64_t merge_gap_ns = 0;          // the largest gap merged over (0 when !merged)
  uint64_t slices = 0;               // slices left in the kept lanes
};

// Reduces `timeline` in place so that at most `max_lanes` lanes (>= 1) and about `max_slices`
// slices (>= lanes kept) remain. Lanes kept: those of processes needing review first, then the
// busiest, shown in their original order. When the kept lanes hold more than max_slices launches,
// consecutive slices of a lane whose gap (next start - current end) is below a threshold are
// merged into one slice spanning both; the threshold starts at (end_ns - begin_ns) / width_px
// (one pixel at width_px) and doubles until the slices fit. A merged slice names its signature
// when all its launches share it, else kMixedSignatures.
TimelineReduction ReduceTimeline(const Report& report, size_t max_lanes, size_t max_slices,
                                 int width_px, Timeline* timeline);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_TIMELINE_H_
