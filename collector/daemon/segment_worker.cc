#include "segment_worker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "cuflight/base/scoped_fd.h"
#include "segment_file.h"
#include "zstd_file.h"

namespace cuflight::collector {

SegmentWorker::SegmentWorker(const logstore::LogDir* dir, int zstd_level, Counters counters,
                             logstore::RateLimitedLog* log)
    : dir_(dir), zstd_level_(zstd_level), counters_(counters), log_(log), thread_([this] {
        Run();
      }) {}

SegmentWorker::~SegmentWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void SegmentWorker::Compress(std::string date, std::string plain, std::string compressed) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    compressions_.push_back(CompressJob{std::move(date), std::move(plain), std::move(compressed)});
  }
  work_cv_.notify_one();
}

void SegmentWorker::SyncAndClose(int fd, bool sync, bool periodic) {
  held_.fetch_add(1, std::memory_order_relaxed);
  if (periodic) periodic_held_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    syncs_.push_back(SyncJob{fd, sync, periodic, {}, {}});
  }
  work_cv_.notify_one();
}

void SegmentWorker::SyncFile(std::string date, std::string name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    syncs_.push_back(SyncJob{-1, true, false, std::move(date), std::move(name)});
  }
  work_cv_.notify_one();
}

void SegmentWorker::SyncDirectory(std::string date) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    syncs_.push_back(SyncJob{-1, true, false, std::move(date), {}});
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

bool SegmentWorker::IsPending(std::string_view date, std::string_view plain) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ && running_->date == date && running_->plain == plain) return true;
  for (const CompressJob& job : compressions_) {
    if (job.date == date && job.plain == plain) return true;
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
      running_ = std::move(compressions_.front());
      compressions_.pop_front();
      busy_ = true;
      const CompressJob job = *running_;
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
  base::ScopedFd date_dir(dir_->OpenSubdir(job.date, false));
  if (date_dir.Get() < 0) return;  // gone (retention) or not ours to follow: nothing to do
  const logstore::FileAt plain{date_dir.Get(), job.plain, dir_->Shown(job.date, job.plain)};
  struct stat st {};
  if (::fstatat(plain.dir, plain.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISREG(st.st_mode)) {
    return;
  }
  const logstore::FileAt compressed{date_dir.Get(), job.compressed,
                                    dir_->Shown(job.date, job.compressed)};
  std::string error;
  if (!logstore::CompressFileAtomically(plain, compressed, zstd_level_, &error)) {
    counters_.write_errors->fetch_add(1, std::memory_order_relaxed);
    log_->Warn("compress", error + " (the plain segment is kept)");
    std::lock_guard<std::mutex> lock(mu_);
    failed_.push_back(job);
    return;
  }
  if (::unlinkat(plain.dir, plain.name.c_str(), 0) != 0 && errno != ENOENT) {
    log_->Warn("unlink", logstore::RateLimitedLog::Describe("cannot remove", plain.shown, errno));
  }
  logstore::FsyncDirectory(date_dir.Get());
  counters_.segments_compressed->fetch_add(1, std::memory_order_relaxed);
}

void SegmentWorker::RunSync(const SyncJob& job) {
  if (job.fd >= 0) {
    if (job.sync && ::fdatasync(job.fd) != 0) {
      counters_.write_errors->fetch_add(1, std::memory_order_relaxed);
      log_->Warn("fsync",
                 logstore::RateLimitedLog::Describe("fdatasync failed on", "a log file", errno));
    }
    ::close(job.fd);
    held_.fetch_sub(1, std::memory_order_relaxed);
    if (job.periodic) periodic_held_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  base::ScopedFd date_dir(job.date.empty() ? ::fcntl(dir_->fd(), F_DUPFD_CLOEXEC, 0)
                                           : dir_->OpenSubdir(job.date, false));
  if (date_dir.Get() < 0) {
    if (errno != ENOENT) {
      log_->Warn("fsync",
                 logstore::RateLimitedLog::Describe("cannot open", dir_->Shown(job.date), errno));
    }
    return;
  }
  if (job.name.empty()) {
    if (!logstore::FsyncDirectory(date_dir.Get())) {
      log_->Warn("fsync", logstore::RateLimitedLog::Describe("cannot fsync directory",
                                                             dir_->Shown(job.date), errno));
    }
    return;
  }
  const logstore::FileAt file{date_dir.Get(), job.name, dir_->Shown(job.date, job.name)};
  base::ScopedFd fd(logstore::OpenAt(file, O_RDONLY));
  if (fd.Get() < 0) {
    // Renamed into a segment meanwhile (its compressed copy is fsynced) or removed: nothing left.
    if (errno != ENOENT) {
      log_->Warn("fsync", logstore::RateLimitedLog::Describe("cannot open", file.shown, errno));
    }
    return;
  }
  if (::fdatasync(fd.Get()) != 0) {
    counters_.write_errors->fetch_add(1, std::memory_order_relaxed);
    log_->Warn("fsync",
               logstore::RateLimitedLog::Describe("fdatasync failed on", file.shown, errno));
  }
}

}  // namespace cuflight::collector
