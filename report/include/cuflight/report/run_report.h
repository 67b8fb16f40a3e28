// The whole `cuflight report`: options -> files -> model -> output. Also what `cuflight run`
// calls to print the summary of its run's log directory.
#ifndef CUFLIGHT_REPORT_RUN_REPORT_H_
#define CUFLIGHT_REPORT_RUN_REPORT_H_

#include <ostream>

#include "cuflight/report/report_options.h"

namespace cuflight::report {

// Exit statuses, as cli/usage_error.h defines them.
inline constexpr int kReportOk = 0;
inline constexpr int kReportUsage = 2;

// Checks `options`, expands options.paths, reads the logs and writes the report in
// options.format to `out`. Returns kReportOk; or kReportUsage after exactly one line
// "<options.error_prefix>: <reason>" on `err` when an option value is bad, a path is missing or
// holds no log, or a file is not a log (empty, binary, unknown schema version). With --csv the
// read notes (torn/rejected lines) go to `err` too, prefixed "note: ". Never throws except
// std::bad_alloc.
int RunReport(const ReportOptions& options, std::ostream& out, std::ostream& err);

// Whether to colour output written to `out`: only when it is std::cout, standard output is a
// terminal, and NO_COLOR is unset or empty (https://no-color.org).
bool ShouldColor(const std::ostream& out);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_RUN_REPORT_H_
