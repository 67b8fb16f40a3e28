#include "cuflight/report/run_report.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/logread/progress_line.h"
#include "cuflight/report/build_report.h"
#include "cuflight/report/render.h"

namespace cuflight::report {

int RunReport(const ReportOptions& options, std::ostream& out, std::ostream& err) {
  auto fail = [&](const std::string& line) {
    err << options.error_prefix << ": " << line << '\n';
    return kReportUsage;
  };
  std::string error;
  if (!CheckReportOptions(options, &error)) return fail(error);
  std::vector<std::filesystem::path> files;
  if (!logread::ExpandLogPaths(options.paths, &files, &error)) return fail(error);
  Report report;
  {
    // A long read says how far it has come, on a terminal.
    logread::ProgressLine progress(options.error_prefix, err);
    ReportOptions with_progress = options;
    if (!with_progress.on_progress) with_progress.on_progress = progress.Callback();
    if (!BuildReport(with_progress, files, &report, &error)) return fail(error);
  }
  switch (options.format) {
    case OutputFormat::kTable:
      out << RenderText(report, options);
      break;
    case OutputFormat::kJson:
      out << RenderJson(report, options).dump(2) << '\n';
      break;
    case OutputFormat::kCsv:
      for (const std::string& note : report.read.notes) err << "note: " << note << '\n';
      if (report.read.notes_left_out > 0) {
        err << "note: ... and " << report.read.notes_left_out << " more torn or rejected lines\n";
      }
      out << RenderCsv(report, options);
      break;
  }
  out.flush();
  return kReportOk;
}

bool ShouldColor(const std::ostream& out) {
  if (&out != &std::cout) return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

}  // namespace cuflight::report
