// The four inline-SVG charts of the HTML report. Each function returns one <svg> element (with
// the id render_html.h names, a role="img" and an aria-label) drawn from the report model; every
// mark carries a <title> tooltip, and every string from the logs is escaped.
#ifndef CUFLIGHT_REPORT_HTML_CHARTS_H_
#define CUFLIGHT_REPORT_HTML_CHARTS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "cuflight/report/report_model.h"
#include "cuflight/report/timeline.h"

namespace cuflight::report::html {

// Charts weigh a signature by its total GPU time when any launch of the report was timed
// (signatures without a timed launch then weigh 0), else by its launches.
bool WeighByTime(const Report& report);

// Signature indices ordered by weight, heaviest first (ties: launches, then the model's order).
// The first kKernelColorCount get the kernel colours in the top-kernels chart and the timeline.
std::vector<size_t> RankSignatures(const Report& report);

// Launches (or GPU time) by theoretical occupancy, in ten 10% buckets, stacked by limiter (or
// "none" at full occupancy, where no resource limits it).
std::string OccupancyChart(const Report& report);

// GPU time (or launches) by limiting resource, one bar per resource.
std::string LimiterChart(const Report& report);

// The first `top` signatures of `ranking`: GPU time (or launches) and occupancy with its limiter.
std::string TopKernelsChart(const Report& report, const std::vector<size_t>& ranking, size_t top);

// `timeline` (already reduced) as lanes per process and stream over time, kernels coloured as in
// the top-kernels chart (`ranking`), with a marker where a process crashed, was lost or failed.
std::string TimelineChart(const Report& report, const Timeline& timeline,
                          const std::vector<size_t>& ranking);

}  // namespace cuflight::report::html

#endif  // CUFLIGHT_REPORT_HTML_CHARTS_H_
