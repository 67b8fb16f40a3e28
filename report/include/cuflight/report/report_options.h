// What `cuflight report` is asked for: the logs to read, the filters, and the output form. Plain
// data with typed values; the command line (report_command.cc) fills it from flags, and
// `cuflight run` fills it for its run's log directory.
#ifndef CUFLIGHT_REPORT_REPORT_OPTIONS_H_
#define CUFLIGHT_REPORT_REPORT_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cuflight/logread/log_reader.h"

namespace cuflight::report {

// Order of the kernel signatures.
enum class SortKey : uint8_t {
  kTime = 0,       // total GPU time, largest first (untimed signatures last, by launches)
  kLaunches = 1,   // launches, most first
  kOccupancy = 2,  // occupancy, lowest first (the candidates for tuning)
};

enum class OutputFormat : uint8_t { kTable = 0, kJson = 1, kCsv = 2 };

struct ReportOptions {
  // Log files and directories (logread::ExpandLogPaths). At least one.
  std::vector<std::string> paths;

  // Filters. Kernel launches outside them are not aggregated; the review section (processes that
  // did not end normally) honours `pids` only, since a failure's context is every launch.
  std::string kernel_regex;          // ECMAScript regex searched in demangled and mangled names
  std::vector<int32_t> pids;         // empty: every process
  // A schema::ResourceName ("registers", ...) or a short form (limiter_name.h); empty: any. Only
  // signatures below full occupancy match: at 100% no resource limits a kernel.
  std::string limiter;
  std::optional<int64_t> since_ns;   // kernel event ts_ns >= since_ns
  std::optional<int64_t> until_ns;   // kernel event ts_ns <= until_ns
  // Processes by who they are to a scheduler (process_start's attribution; docs/fleet.md): the
  // job ("job"), ranks ("rank"), and the pod (pod_name, "namespace/name", or pod_uid). Empty:
  // any. A process whose process_start has no such value does not match (unknown is not
  // guessed); its events read before its process_start are left out.
  std::string job;
  std::vector<int32_t> ranks;
  std::string pod;

  SortKey sort = SortKey::kTime;
  // Signatures shown: -1 = the default (20 in the table, every one in JSON and CSV); 0 = all.
  int top = -1;
  // Launches listed per stream in the review section (the last ones, oldest first).
  int review_launches = 5;
  // The terminal review lists every reviewed process with its launches; false: processes whose
  // reviews say the same are one block (review.h: GroupReview).
  bool per_process = false;
  // Kernel names in the terminal tables: -1 = shortened to the room the table width leaves
  // (ShortenKernelNames), 0 = whole names, N > 0 = shortened to N columns.
  int name_width = -1;
  // An occupancy-engine device preset key or alias (occupancy/device_presets.h): recompute each
  // signature's occupancy for that GPU. Empty: none.
  std::string retarget;
  // Keep the aggregated launches for the HTML timeline: each one in Report::kept_launches up to
  // max_kept_launches, and all of them counted per lane in time bins (Report::lanes).
  bool keep_launches = false;
  size_t max_kept_launches = 65536;

  // Joining kernel_time to kernel while reading, with bounded memory: a launch whose kernel_time
  // has not come within this many later launches is counted untimed, and a kernel_time whose
  // kernel has not come within this many later kernel_time events is dropped; each is counted in
  // Report::bounds and said in a note. A CUPTI buffer holds a few ten thousand records, so a
  // producer's kernel_time comes well within this.
  size_t max_pending_launches = size_t{1} << 18;
  size_t max_pending_times = size_t{1} << 18;

  // Reading: threads that decode files (logread::ReadOptions::threads; 0: by the usable cores), and
  // a progress callback (empty: none), called on the calling thread.
  unsigned read_threads = 0;
  std::function<void(const logread::ReadProgress&)> on_progress;

  OutputFormat format = OutputFormat::kTable;
  bool color = false;  // ANSI colour in the table (see ShouldColor in run_report.h)
  // Start of the one error line RunReport writes, "<error_prefix>: <reason>".
  std::string error_prefix = "cuflight report";
};

// Signatures the table shows by default.
inline constexpr int kDefaultTableTop = 20;

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_REPORT_OPTIONS_H_
