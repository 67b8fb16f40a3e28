#include "run_summary.h"

#include <exception>
#include <string>
#include <string_view>
#include <system_error>

#include "cuflight/report/report_options.h"
#include "cuflight/report/run_report.h"

namespace cuflight::run {
namespace {

bool IsLogFile(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return std::string_view(name).ends_with(".jsonl") || std::string_view(name).ends_with(".jsonl.zst");
}

}  // namespace

LogFileSizes SnapshotLogFiles(const std::filesystem::path& log_dir) {
  LogFileSizes files;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(log_dir, ec);
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec) || !IsLogFile(it->path())) continue;
    const uintmax_t size = it->file_size(file_ec);
    if (!file_ec) files[it->path()] = size;
  }
  return files;
}

std::vector<std::filesystem::path> WrittenFiles(const LogFileSizes& before,
                                                const LogFileSizes& after) {
  std::vector<std::filesystem::path> written;
  for (const auto& [path, size] : after) {
    const auto it = before.find(path);
    if (it == before.end() || it->second != size) written.push_back(path);
  }
  return written;
}

void PrintRunSummary(const RunSummaryInput& run, std::ostream& err) noexcept {
  try {
    const collector::IngestStats& c = run.collector;
    err << "cuflight run: application exited with status " << run.exit_code << "; "
        << c.processes_seen << " process(es) recorded, " << c.lines_stored << " events in "
        << run.files.size() << " file(s) under " << run.log_dir.string() << '\n';
    for (const std::filesystem::path& file : run.files) {
      err << "  " << file.lexically_relative(run.log_dir).string() << '\n';
    }
    if (c.processes_lost > 0 || c.events_lost > 0 || c.lines_rejected > 0) {
      err << "  " << c.processes_ended << " process(es) ended normally, " << c.processes_lost
          << " without process_end; " << c.events_lost << " event(s) lost in transit, "
          << c.lines_rejected << " line(s) rejected\n";
    }
    if (run.files.empty()) {
      err << "  no events: the application made no CUDA launch the injected library saw (no "
             "CUDA device, no CUDA use, or another CUPTI tool holding the subscriber: see the "
             "lines above)\n";
      return;
    }
    // The run's report: this run's files only (the directory may hold earlier runs).
    report::ReportOptions options;
    for (const std::filesystem::path& file : run.files) options.paths.push_back(file.string());
    options.top = kSummaryTop;
    options.error_prefix = "cuflight run";
    err << '\n';
    report::RunReport(options, err, err);
    err << "\n(cuflight report " << run.log_dir.string()
        << " for every run in the directory; --json, --csv, --html FILE, --help)\n";
  } catch (const std::exception& e) {
    err << "cuflight run: cannot summarise the run: " << e.what() << '\n';
  } catch (...) {
    err << "cuflight run: cannot summarise the run\n";
  }
}

}  // namespace cuflight::run
