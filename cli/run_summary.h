// What `cuflight run` prints on stderr after the application ended: the log files the run wrote
// and what they hold. Kept behind PrintRunSummary so the run's report can replace the body alone.
#ifndef CUFLIGHT_CLI_RUN_SUMMARY_H_
#define CUFLIGHT_CLI_RUN_SUMMARY_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <ostream>
#include <vector>

#include "ingest_stats.h"

namespace cuflight::cli {

// Log files under a directory (recursively: *.jsonl and *.jsonl.zst) and their sizes in bytes.
using LogFileSizes = std::map<std::filesystem::path, uintmax_t>;

// The log files under `log_dir` now; empty when it does not exist.
LogFileSizes SnapshotLogFiles(const std::filesystem::path& log_dir);

// The files of `after` that are not in `before` or whose size changed: what a run wrote between
// the two snapshots. Sorted by path.
std::vector<std::filesystem::path> WrittenFiles(const LogFileSizes& before,
                                                const LogFileSizes& after);

struct RunSummaryInput {
  std::filesystem::path log_dir;
  std::vector<std::filesystem::path> files;  // what this run wrote (WrittenFiles)
  collector::IngestStats collector;          // the private collector's final counters
  int exit_code = 0;                         // the application's
  int term_signal = 0;                       // the signal that ended it; 0: it exited
  uint32_t flush_ms = 100;                   // the injected library's CUFLIGHT_FLUSH_MS
};

// Kernel signatures the run's summary lists (cuflight report shows them all with --top 0).
inline constexpr int kSummaryTop = 10;

// Prints the summary of the run to `err`: a header line (how the application ended: its exit
// status, or the signal that killed it), the files written, the collector's losses if any, then
// the report of this run's files (cuflight report's table: the processes that crashed, were lost
// or failed first, then the kernel signatures). When nothing was stored it says why as far as
// it is known: a killed application was killed before the injected library's first flush
// (whether it launched anything is unknown); one that exited made no launch the library saw.
// Never throws.
void PrintRunSummary(const RunSummaryInput& run, std::ostream& err) noexcept;

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_RUN_SUMMARY_H_
