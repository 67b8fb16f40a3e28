#include "run_summary.h"

#include <string.h>

#include <exception>
#include <string>
#include <string_view>
#include <system_error>

#include "cuflight/report/report_options.h"
#include "cuflight/report/run_report.h"

namespace cuflight::cli {
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

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

std::string Count(uint64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

void PrintRunSummary(const RunSummaryInput& run, std::ostream& err) noexcept {
  try {
    const collector::IngestStats& c = run.collector;
    err << "cuflight run: application ";
    if (run.term_signal != 0) {
      err << "killed by " << SignalName(run.term_signal) << " (status " << run.exit_code << ")";
    } else {
      err << "exited with status " << run.exit_code;
    }
    err << "; " << Count(c.processes_seen, "process", "processes") << " recorded, "
        << Count(c.lines_stored, "event", "events") << " in "
        << Count(run.files.size(), "file", "files") << " under " << run.log_dir.string() << '\n';
    for (const std::filesystem::path& file : run.files) {
      err << "  " << file.lexically_relative(run.log_dir).string() << '\n';
    }
    if (c.processes_lost > 0 || c.events_lost > 0 || c.lines_rejected > 0) {
      err << "  " << c.processes_ended << " process(es) ended normally, " << c.processes_lost
          << " without process_end; " << c.events_lost << " event(s) lost in transit, "
          << c.lines_rejected << " line(s) rejected\n";
    }
    if (run.files.empty()) {
      if (run.term_signal != 0) {
        err << "  nothing reached the collector: the application was killed by "
            << SignalName(run.term_signal)
            << " before the injected library's first flush (it sends what it recorded every "
            << run.flush_ms
            << " ms, --flush-ms, and a killed process cannot send the rest); whether it launched "
               "kernels is unknown\n";
      } else {
        err << "  no events: the application made no CUDA launch the injected library saw (no "
               "CUDA device, no CUDA use, or another CUPTI tool holding the subscriber: see the "
               "lines above)\n";
      }
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

}  // namespace cuflight::cli
