#include "segment_worker.h"

#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "segment_file.h"
#include "zstd_file.h"

namespace cuflight::collector {

SegmentWorker::SegmentWorker(int zstd_level, Counters counters, RateLimitedLog* log)
    : zstd_level_(zstd_level), counters_(counters), log_(log), thread_([this] { Run(); }) {}

SegmentWorker::~SegmentWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void SegmentWorker::Compress(std::filesystem::path plain, std::filesystem::path compressed) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    compressions_.push_back(CompressJob{std::move(plain), std::move(compressed)});
  }
  work_cv_.notify_one();
}

void SegmentWorker::SyncAndClose(int fd, bool sync) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    syncs_.push_back(SyncJob{fd, sync, {}});
  }
  work_cv_.notify_one();
}

void SegmentWorker::SyncDirectory(std::filesystem::path dir) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    syncs_.push_back(SyncJob{-1, true, std::move(dir)});
  }
  work_cv_.notify_one();
}

void SegmentWorker::RetryFailed() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.empty()) return;
    for (CompressJob& job : failed_) compressions_.push_back(std::move(job));
    failed_.clear();
  }
  work_cv_.notify_one();
}

bool SegmentWorker::IsPending(const std::filesystem::path& plain) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ && *running_ == plain) return true;
  for (const CompressJob& job : compressions_) {
    if (job.plain == plain) return true;
  }
  return false;
}

void SegmentWorker::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return !busy_ && syncs_.empty() && compressions_.empty(); });
}

void SegmentWorker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || !syncs_.empty() || !compressions_.empty(); });
    if (!syncs_.empty()) {
      const SyncJob job = std::move(syncs_.front());
      syncs_.pop_front();
      busy_ = true;
      lock.unlock();
      RunSync(job);
      lock.lock();
    } else if (stop_) {
      break;
    } else {
      const CompressJob job = std::move(compressions_.front());
      compressions_.pop_front();
      busy_ = true;
      running_ = job.plain;
      lock.unlock();
      RunCompress(job);
      lock.lock();
      running_.reset();
    }
    busy_ = false;
    if (syncs_.empty() && compressions_.empty()) idle_cv_.notify_all();
  }
  // Queued compressions stay undone (see the header); wake anyone waiting for idleness.
  compressions_.clear();
  busy_ = false;
  idle_cv_.notify_all();
}

void SegmentWorker::RunCompress(const CompressJob& job) {
  std::error_code ec;
  if (!std::filesystem::exists(job.plain, ec)) return;
  std::string error;
  if (!CompressFileAtomically(job.plain, job.compressed, zstd_level_, &error)) {
    counters_.write_errors->fetch_add(1, std::memory_order_relaxed);
    log_->Warn("compress", error + " (the plain segment is kept)");
    std::lock_guard<std::mutex> lock(mu_);
    failed_.push_back(job);
    return;
  }
  if (::unlink(job.plain.c_str()) != 0 && errno != ENOENT) {
    log_->Warn("unlink", RateLimitedLog::Describe("cannot remove", job.plain.native(), errno));
  }
  FsyncDirectory(job.plain.parent_path());
  counters_.segments_compressed->fetch_add(1, std::memory_order_relaxed);
}

void SegmentWorker::RunSync(const SyncJob& job) {
  if (job.fd < 0) {
    if (!FsyncDirectory(job.dir)) {
      log_->Warn("fsync",
                 RateLimitedLog::Describe("cannot fsync directory", job.dir.native(), errno));
    }
    return;
  }
  if (job.sync && ::fdatasync(job.fd) != 0) {
    counters_.write_errors->fetch_add(1, std::memory_order_relaxed);
    log_->Warn("fsync", RateLimitedLog::Describe("fdatasync failed on", "a log file", errno));
  }
  ::close(job.fd);
}

}  // namespace cuflight::collector
