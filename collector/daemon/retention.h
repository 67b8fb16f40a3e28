// Retention of the collector's log by total size and by age, on a thread of its own.
//
// The files considered are those of the log layout (segment_names.h) in <dir>/<YYYY-MM-DD>/:
// active files, plain and compressed segments (temporary files count towards the total but are
// never removed here; symbolic links and other non-regular entries are neither counted nor
// removed, and never followed: log_dir.h). The others are removed:
//   1. by age: every one whose mtime is older than now - max_days days (max_days > 0);
//   2. by size: while the total of all files exceeds max_bytes (max_bytes > 0), the oldest
//      first (mtime, then path, so one process's segments go in order).
// Two rules hold whatever the policy says:
//   - A file for which the `keep` hook says so stays (the active file of a live stream, a
//     segment being compressed). The hook runs, and the file is removed, with the hook's mutex
//     held, so whoever takes that mutex (LogSink, before it opens a stream's files) sees each
//     file either there or gone, never one judged removable and then used.
//   - A stream's recovery file, the one its highest stored seq is read from after a restart (its
//     active file when not empty, else its newest segment), goes only together with the last of
//     the stream's other files. A stream therefore keeps its newest seq as long as it has any
//     file, and a collector never mistakes a half-removed log for an older end of the stream.
// When the kept files alone exceed max_bytes, everything else is removed and the total stays
// above the limit: RetentionResult::over_limit says so; live data is never deleted to make room.
// Date directories left empty are removed.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_RETENTION_H_
#define CUFLIGHT_COLLECTOR_DAEMON_RETENTION_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "log_dir.h"
#include "segment_error_log.h"
#include "segment_names.h"

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
  bool stopped = false;      // `stop` was set: the pass ended early
};

// One file as the keep hook sees it.
struct RetentionFile {
  const std::string& stream_key;  // "<date>/<base>"
  const std::string& date;
  const std::string& name;
  logstore::LogFileKind kind;
  bool recovery_file;  // the stream's recovery file (see above)
};

struct RetentionHooks {
  std::mutex* mu = nullptr;  // held around each keep() and the removal that follows
  // With *mu held: true keeps the file.
  std::function<bool(const RetentionFile&)> keep;
  // When set, checked between files: a pass stops early (for shutdown).
  const std::atomic<bool>* stop = nullptr;
};

// Applies `policy` to the log under `dir` as described above. Failures to stat or remove single
// files are logged through `log` and skipped. Runs on the caller's thread (a stat per file).
RetentionResult ApplyRetention(const logstore::LogDir& dir, const RetentionPolicy& policy,
                               std::chrono::system_clock::time_point now,
                               const RetentionHooks& hooks, logstore::RateLimitedLog* log);

// A thread that runs one retention pass at a time when asked, so that a directory of many files
// never stalls the thread asking (the collector's ingest thread).
class RetentionThread {
 public:
  using Pass = std::function<void(std::chrono::system_clock::time_point now)>;
  // Starts the thread. `pass` runs on it.
  explicit RetentionThread(Pass pass);
  // Sets the stop flag (see stop_flag), waits for a running pass and joins.
  ~RetentionThread();
  RetentionThread(const RetentionThread&) = delete;
  RetentionThread& operator=(const RetentionThread&) = delete;

  // Starts a pass with `now` unless one is running or waiting to run: then returns false and
  // nothing is queued. Any thread.
  bool Request(std::chrono::system_clock::time_point now);
  // Blocks until no pass is running or waiting. Any thread.
  void WaitIdle();
  // Set while the object is being destroyed; for RetentionHooks::stop.
  const std::atomic<bool>* stop_flag() const { return &stop_; }

 private:
  void Run();

  const Pass pass_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false;
  bool running_ = false;
  std::chrono::system_clock::time_point now_{};
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts after everything above is constructed
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_RETENTION_H_
