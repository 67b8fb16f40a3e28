// Retention of the collector's log by total size and by age.
//
// The files considered are those of the log layout (segment_names.h) in <dir>/<YYYY-MM-DD>/:
// active files, plain and compressed segments (temporary files count towards the total but are
// never removed here). A file for which `keep` returns true (the active file of a live stream, a
// segment being compressed) is never removed. The others are removed:
//   1. by age: every one whose mtime is older than now - max_days days (max_days > 0);
//   2. by size: while the total of all files exceeds max_bytes (max_bytes > 0), the oldest
//      first (mtime, then path, so one process's segments go in order).
// When the kept files alone exceed max_bytes, everything else is removed and the total stays
// above the limit: RetentionResult::over_limit says so; live data is never deleted to make room.
// Date directories left empty are removed.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_RETENTION_H_
#define CUFLIGHT_COLLECTOR_DAEMON_RETENTION_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>

#include "segment_error_log.h"

namespace cuflight::collector {

struct RetentionPolicy {
  uint64_t max_bytes = 0;  // 0 = no size limit
  int max_days = 0;        // 0 = no age limit
};

struct RetentionResult {
  uint64_t files_removed = 0;
  uint64_t bytes_removed = 0;
  uint64_t bytes_total = 0;  // size of the log's files after the removals
  bool over_limit = false;   // bytes_total > max_bytes although nothing more may be removed
};

// Applies `policy` to the log under `dir` as described above. Failures to stat or remove single
// files are logged through `log` and skipped. Runs on the caller's thread (stat calls per file).
RetentionResult ApplyRetention(const std::filesystem::path& dir, const RetentionPolicy& policy,
                               std::chrono::system_clock::time_point now,
                               const std::function<bool(const std::filesystem::path&)>& keep,
                               RateLimitedLog* log);

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_RETENTION_H_
