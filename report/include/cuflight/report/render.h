// Renderers of the report model: the terminal table, one JSON document, CSV.
#ifndef CUFLIGHT_REPORT_RENDER_H_
#define CUFLIGHT_REPORT_RENDER_H_

#include <nlohmann/json.hpp>
#include <string>

#include "cuflight/report/report_model.h"
#include "cuflight/report/report_options.h"

namespace cuflight::report {

// Terminal width the table fits.
inline constexpr int kTableWidth = 120;

// The header line (files, events, processes, launches), the read notes, the review section, the
// kernel table with an advice line under each signature that has one, and with --retarget the
// retarget table. Lines at most kTableWidth columns; ANSI colour only when options.color.
std::string RenderText(const Report& report, const ReportOptions& options);

// One JSON document: "read" (files and ReadSummary), "processes", "review", "signatures" (every
// number of the model), "totals", and "retarget" when asked.
nlohmann::json RenderJson(const Report& report, const ReportOptions& options);

// A header row, then one row per signature; CRLF line ends, RFC 4180 quoting.
std::string RenderCsv(const Report& report, const ReportOptions& options);

// Signatures a renderer shows under `options` (top, with the per-format default).
size_t ShownSignatures(const Report& report, const ReportOptions& options);

// How the kernel table is ordered, for its title: "by total GPU time", "by launches", "by
// occupancy, lowest first".
std::string SortTitle(SortKey key);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_RENDER_H_
