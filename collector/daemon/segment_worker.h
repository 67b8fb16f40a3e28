// The log sink's background thread: compresses closed segments and runs the fsyncs, so the
// daemon thread never waits for a 64 MiB compression or a slow disk flush.
//
// 1. One thread, one job at a time. fsync jobs go before compression jobs (they are short and
//    make acknowledged data durable); compression jobs run in the order queued.
// 2. A compression job: "<seg>.jsonl" -> "<seg>.jsonl.zst" with CompressFileAtomically, then the
//    plain file is unlinked. A failed job leaves the plain file in place and is kept aside;
//    RetryFailed() queues those again (after retention freed space, say). Files are reached
//    through the log directory's descriptor, never through a symbolic link (log_dir.h).
// 3. Descriptors: a SyncAndClose job holds its descriptor until it has run, so a slow disk
//    (fdatasync taking longer than the jobs arrive) would hold more and more of them. The
//    worker counts them (descriptors_held) so its callers can bound them: LogSink queues a
//    periodic round only when the previous one is done, and past 64 queued closes hands closed
//    files over by name (SyncFile), which holds no descriptor while it waits.
// 4. Stopping (destructor) finishes the running job and the queued fsyncs, and leaves queued
//    compressions undone: their plain segments are complete on disk and LogSink::Open compresses
//    them on the next start.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_SEGMENT_WORKER_H_
#define CUFLIGHT_COLLECTOR_DAEMON_SEGMENT_WORKER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "log_dir.h"
#include "segment_error_log.h"

namespace cuflight::collector {

class SegmentWorker {
 public:
  struct Counters {
    std::atomic<uint64_t>* write_errors;         // failed compressions and fsyncs
    std::atomic<uint64_t>* segments_compressed;  // .zst files completed
  };

  // Starts the thread. `dir`, `counters` and `log` must outlive the worker.
  SegmentWorker(const logstore::LogDir* dir, int zstd_level, Counters counters,
                logstore::RateLimitedLog* log);
  ~SegmentWorker();
  SegmentWorker(const SegmentWorker&) = delete;
  SegmentWorker& operator=(const SegmentWorker&) = delete;

  // Queues the compression of <date>/<plain> into <date>/<compressed>. A job whose plain file
  // no longer exists when it runs (moved away, deleted by retention) is skipped.
  void Compress(std::string date, std::string plain, std::string compressed);
  // Takes ownership of `fd`: fdatasync(2)s it (when `sync`) and closes it. `periodic` marks the
  // duplicates of LogSink::Tick's fsync round (counted apart, see periodic_descriptors_held).
  void SyncAndClose(int fd, bool sync, bool periodic = false);
  // fdatasync(2)s <date>/<name>, opened again when the job runs (no descriptor held meanwhile).
  void SyncFile(std::string date, std::string name);
  // fsync(2)s the directory <date> ("" for the log directory itself): new names in it.
  void SyncDirectory(std::string date);
  // Queues again every compression that failed so far.
  void RetryFailed();
  // True while <date>/<plain> is queued or being compressed (retention leaves it alone).
  bool IsPending(std::string_view date, std::string_view plain) const;
  // Descriptors held by queued or running SyncAndClose jobs: all of them, and those of
  // periodic jobs only. Any thread.
  size_t descriptors_held() const { return held_.load(std::memory_order_relaxed); }
  size_t periodic_descriptors_held() const {
    return periodic_held_.load(std::memory_order_relaxed);
  }
  // Blocks until no job is queued or running.
  void WaitIdle();

 private:
  struct CompressJob {
    std::string date;
    std::string plain;
    std::string compressed;
  };
  struct SyncJob {
    int fd = -1;  // a file to fdatasync and close; -1: `name` in `date`, or the directory `date`
    bool sync = true;
    bool periodic = false;
    std::string date;
    std::string name;  // empty: fsync the directory `date`
  };

  void Run();
  void RunCompress(const CompressJob& job);
  void RunSync(const SyncJob& job);

  const logstore::LogDir* const dir_;
  const int zstd_level_;
  const Counters counters_;
  logstore::RateLimitedLog* const log_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a job was queued or stop_ was set
  std::condition_variable idle_cv_;  // the queues became empty with nothing running
  std::deque<SyncJob> syncs_;
  std::deque<CompressJob> compressions_;
  std::vector<CompressJob> failed_;
  std::optional<CompressJob> running_;    // the compression being run
  std::atomic<size_t> held_{0};           // descriptors of queued or running SyncAndClose jobs
  std::atomic<size_t> periodic_held_{0};  // of which periodic
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts after everything above is constructed
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_SEGMENT_WORKER_H_
