// The log sink's background thread: compresses closed segments and runs the fsyncs, so the
// daemon thread never waits for a 64 MiB compression or a slow disk flush.
//
// 1. One thread, one job at a time. fsync jobs go before compression jobs (they are short and
//    make acknowledged data durable); compression jobs run in the order queued.
// 2. A compression job: "<seg>.jsonl" -> "<seg>.jsonl.zst" with CompressFileAtomically, then the
//    plain file is unlinked. A failed job leaves the plain file in place and is kept aside;
//    RetryFailed() queues those again (after retention freed space, say).
// 3. Stopping (destructor) finishes the running job and the queued fsyncs, and leaves queued
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
#include <thread>
#include <vector>

#include "segment_error_log.h"

namespace cuflight::collector {

class SegmentWorker {
 public:
  struct Counters {
    std::atomic<uint64_t>* write_errors;         // failed compressions and fsyncs
    std::atomic<uint64_t>* segments_compressed;  // .zst files completed
  };

  // Starts the thread. `counters` and `log` must outlive the worker.
  SegmentWorker(int zstd_level, Counters counters, RateLimitedLog* log);
  ~SegmentWorker();
  SegmentWorker(const SegmentWorker&) = delete;
  SegmentWorker& operator=(const SegmentWorker&) = delete;

  // Queues the compression of `plain` into `compressed`. A job whose plain file no longer
  // exists when it runs (moved away, deleted by retention) is skipped.
  void Compress(std::filesystem::path plain, std::filesystem::path compressed);
  // Takes ownership of `fd`: fdatasync(2)s it (when `sync`) and closes it.
  void SyncAndClose(int fd, bool sync);
  // fsync(2)s the directory `dir` (new names in it).
  void SyncDirectory(std::filesystem::path dir);
  // Queues again every compression that failed so far.
  void RetryFailed();
  // True while `plain` is queued or being compressed (retention leaves it alone).
  bool IsPending(const std::filesystem::path& plain) const;
  // Blocks until no job is queued or running.
  void WaitIdle();

 private:
  struct CompressJob {
    std::filesystem::path plain;
    std::filesystem::path compressed;
  };
  struct SyncJob {
    int fd = -1;  // a file to fdatasync and close, or -1 for a directory fsync
    bool sync = true;
    std::filesystem::path dir;
  };

  void Run();
  void RunCompress(const CompressJob& job);
  void RunSync(const SyncJob& job);

  const int zstd_level_;
  const Counters counters_;
  RateLimitedLog* const log_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a job was queued or stop_ was set
  std::condition_variable idle_cv_;  // the queues became empty with nothing running
  std::deque<SyncJob> syncs_;
  std::deque<CompressJob> compressions_;
  std::vector<CompressJob> failed_;
  std::optional<std::filesystem::path> running_;  // plain file being compressed
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts after everything above is constructed
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_SEGMENT_WORKER_H_
