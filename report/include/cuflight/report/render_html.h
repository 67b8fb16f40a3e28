// The HTML form of the report (`cuflight report --html FILE`): one self-contained page that works
// offline. No network fetch, no external script, font or image: the charts are inline SVG drawn
// here, the style is inline, and a Content-Security-Policy forbids loading anything else. A small
// inline script sorts the tables; without it the page shows the same content, unsorted.
//
// The page: title, date range and hosts; the read summary (files, torn and rejected lines);
// the review section (processes that crashed, were lost or ended in an api_error, with each
// stream's last kernels and whether they finished); four charts (occupancy distribution, GPU time
// by limiting resource, top kernels with their occupancy, the per-process timeline); the kernel
// table with the terminal report's columns; and the process list. Every string from the logs is
// escaped. Charts use the Okabe-Ito colour-blind-safe palette and carry <title> tooltips.
#ifndef CUFLIGHT_REPORT_RENDER_HTML_H_
#define CUFLIGHT_REPORT_RENDER_HTML_H_

#include <cstddef>
#include <ostream>
#include <string>

#include "cuflight/report/report_model.h"
#include "cuflight/report/report_options.h"
#include "cuflight/report/timeline.h"

namespace cuflight::report {

struct HtmlOptions {
  std::string title = "cuflight report";
  // Timeline limits: lanes (process x device x stream) drawn, and shapes drawn in all. Beyond
  // them lanes are left out and nearby launches merged (ReduceTimeline); the page says so.
  size_t max_timeline_lanes = 48;
  size_t max_timeline_slices = 4000;
  // Kernels in the top-kernels chart.
  size_t top_kernels_chart = 15;
};

// Element ids of the four charts (each an <svg> element).
inline constexpr const char* kHtmlOccupancyChartId = "chart-occupancy";
inline constexpr const char* kHtmlLimiterChartId = "chart-limiters";
inline constexpr const char* kHtmlTopKernelsChartId = "chart-top-kernels";
inline constexpr const char* kHtmlTimelineChartId = "chart-timeline";

// The page for `report` (BuildReport under `options`, with keep_launches) and `timeline`
// (BuildTimeline of the same report, not yet reduced; it is reduced here as `html` says). The kernel table shows
// ShownSignatures() of it, where top -1 means every signature. Never throws except
// std::bad_alloc.
std::string RenderHtmlPage(const Report& report, const ReportOptions& options,
                           const HtmlOptions& html, Timeline timeline);

// Builds the timeline from report.kept_launches (so `report` is built with
// ReportOptions::keep_launches) and writes the page to `out`. False with *error (one line) when
// `out` fails.
bool RenderHtml(const Report& report, const ReportOptions& options, const HtmlOptions& html,
                std::ostream& out, std::string* error);

// The whole `cuflight report --html FILE`: checks `options`, expands options.paths, builds the
// report and writes the page to `html_path` (through a temporary file in the same directory,
// renamed into place, so a reader never sees half a page; "-" writes it to `out`). Then one line
// on `err`: "<error_prefix>: wrote FILE (N processes, M launches, K signatures)". Returns
// kReportOk, or kReportUsage after one line "<options.error_prefix>: <reason>" on `err` (as
// RunReport, plus a file that cannot be written). options.format is ignored.
int RunHtmlReport(const ReportOptions& options, const std::string& html_path, std::ostream& out,
                  std::ostream& err);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_RENDER_HTML_H_
