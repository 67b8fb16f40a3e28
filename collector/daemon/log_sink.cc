#include "log_sink.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <tuple>

#include "cuflight/base/scoped_fd.h"
#include "retention.h"
#include "segment_file.h"
#include "segment_names.h"
#include "segment_worker.h"
#include "zstd_file.h"

namespace cuflight::collector {
namespace {

// A new stream's buffer: enough for a flush's worth of lines of one producer without growing.
constexpr size_t kInitialBufferBytes = size_t{64} * 1024;
// A buffer that grew past this during a burst is given back once written.
constexpr size_t kMaxRetainedBufferBytes = 4 << 20;
// Collector-made lines may exceed max_pending_bytes by this much (one line per disconnect).
constexpr uint64_t kCollectorEventSlackBytes = 1 << 20;
// Closed files whose descriptor waits in the worker's queue for its last fdatasync; past this
// many (a slow disk), closed files are handed over by name (SegmentWorker::SyncFile).
constexpr size_t kMaxQueuedCloses = 64;

constexpr auto kRelaxed = std::memory_order_relaxed;

constexpr const char* kLockFileName = kLogDirLockFileName;

std::string StreamKey(std::string_view date, std::string_view base) {
  std::string key(date);
  key += '/';
  key += base;
  return key;
}

}  // namespace

class LogSink::Stream {
 public:
  std::string key;  // "<date>/<base>"
  std::string date;
  std::string base;
  std::string active_name;  // "<base>.jsonl" in the date directory
  std::string shown;        // the active file's full path, for messages
  int fd = -1;
  uint64_t file_bytes = 0;  // size of the active file
  std::string buffer;       // complete lines not yet written, in order
  uint64_t buffer_lines = 0;
  bool has_highest = false;
  uint64_t highest = 0;
  bool has_written = false;
  uint64_t written = 0;
  bool dirty = false;       // listed in dirty_
  bool needs_sync = false;  // written to since the last fdatasync was queued
  bool refusing = false;
  bool fragment_in_file = false;  // a failed write left a partial line that could not be cut
  int refs = 0;
  uint64_t file_serial = 0;  // LogSink::file_serial
};

namespace {

// True when `name` exists in the directory `dir_fd` (a symbolic link counts: it is not followed,
// and whoever opens it then fails with ELOOP).
bool ExistsAt(int dir_fd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

}  // namespace

LogSink::LogSink(const LogSinkOptions& options) : options_(options) {}

std::unique_ptr<LogSink> LogSink::Open(const LogSinkOptions& options, std::string* error,
                                       bool* in_use) {
  if (in_use != nullptr) *in_use = false;
  std::unique_ptr<logstore::LogDir> dir =
      logstore::LogDir::Open(options.dir, error, options.socket_group);
  if (!dir) return nullptr;
  // One writer per directory: a second collector on the same log would interleave and undo
  // the first one's work. The lock goes with the process (also on kill -9).
  const logstore::FileAt lock_file{dir->fd(), kLockFileName, dir->Shown(kLockFileName)};
  const int lock_fd = logstore::OpenAt(lock_file, O_RDWR | O_CREAT, 0600);
  if (lock_fd < 0) {
    *error = logstore::RateLimitedLog::Describe("cannot open", lock_file.shown, errno);
    return nullptr;
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock_fd);
    if (in_use != nullptr) *in_use = err == EWOULDBLOCK;
    *error = err == EWOULDBLOCK
                 ? "another process (a collector) is using the log directory " +
                       options.dir.native() + " (it holds " + lock_file.shown + ")"
                 : logstore::RateLimitedLog::Describe("cannot lock", lock_file.shown, err);
    return nullptr;
  }
  std::unique_ptr<LogSink> sink(new LogSink(options));
  sink->lock_fd_ = lock_fd;
  sink->dir_ = std::move(dir);
  sink->worker_ = std::make_unique<SegmentWorker>(
      sink->dir_.get(), options.zstd_level,
      SegmentWorker::Counters{&sink->counters_.write_errors, &sink->counters_.segments_compressed},
      &sink->log_);
  if (!sink->Recover(error)) return nullptr;
  LogSink* raw = sink.get();
  sink->retention_ = std::make_unique<RetentionThread>(
      [raw](std::chrono::system_clock::time_point now) { raw->RetentionPass(now); });
  return sink;
}

LogSink::~LogSink() {
  retention_.reset();  // ends a running pass early: it uses the worker and the directory
  Flush();
  uint64_t lines = 0;
  uint64_t bytes = 0;
  for (auto& [key, stream] : streams_) {
    lines += stream->buffer_lines;
    bytes += stream->buffer.size();
  }
  if (lines > 0) {
    counters_.lines_abandoned.fetch_add(lines, kRelaxed);
    spdlog::error(
        "log sink: {} lines ({} bytes) could not be written to {} and are not stored (see the "
        "write errors above); they were never acknowledged, so their producers send them again "
        "to the next collector if they still run",
        lines, bytes, options_.dir.native());
  }
  for (auto& [key, stream] : streams_) CloseFile(stream.get());
  worker_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

bool LogSink::Recover(std::string* error) {
  std::vector<logstore::DirEntry> days;
  int err = 0;
  if (!logstore::ListDirectory(dir_->fd(), &days, &err)) {
    *error =
        logstore::RateLimitedLog::Describe("cannot read log directory", options_.dir.native(), err);
    return false;
  }
  struct Entry {
    std::string name;
    logstore::ParsedLogFileName parsed;
    std::string key;
  };
  std::vector<logstore::DirEntry> names;
  std::vector<Entry> to_compress;
  for (const logstore::DirEntry& day : days) {
    if (!logstore::IsDateDirName(day.name)) continue;
    if (day.kind == logstore::DirEntry::Kind::kSymlink) {
      log_.Warn("recover", "not following the symbolic link " + dir_->Shown(day.name));
      continue;
    }
    if (day.kind != logstore::DirEntry::Kind::kDirectory) continue;
    base::ScopedFd day_fd(dir_->OpenSubdir(day.name, false));
    if (day_fd.Get() < 0) {
      log_.Warn("recover",
                logstore::RateLimitedLog::Describe("cannot open", dir_->Shown(day.name), errno));
      continue;
    }
    names.clear();
    if (!logstore::ListDirectory(day_fd.Get(), &names, &err)) {
      log_.Warn("recover",
                logstore::RateLimitedLog::Describe("cannot list", dir_->Shown(day.name), err));
    }
    to_compress.clear();
    for (logstore::DirEntry& e : names) {
      logstore::ParsedLogFileName parsed = logstore::ParseLogFileName(e.name);
      if (parsed.kind == logstore::LogFileKind::kOther) continue;
      const logstore::FileAt file{day_fd.Get(), e.name, dir_->Shown(day.name, e.name)};
      if (e.kind == logstore::DirEntry::Kind::kSymlink) {
        log_.Warn("recover", "not following the symbolic link " + file.shown);
        continue;
      }
      if (e.kind != logstore::DirEntry::Kind::kRegular) continue;
      std::string key = StreamKey(day.name, parsed.base);
      std::string trim_error;
      uint64_t trimmed = 0;
      switch (parsed.kind) {
        case logstore::LogFileKind::kTemp:
          if (::unlinkat(file.dir, file.name.c_str(), 0) != 0 && errno != ENOENT) {
            log_.Warn("recover",
                      logstore::RateLimitedLog::Describe("cannot remove", file.shown, errno));
          }
          break;
        case logstore::LogFileKind::kActive:
        case logstore::LogFileKind::kPlainSegment:
          if (!logstore::TrimTornTail(file, &trimmed, &trim_error)) {
            counters_.write_errors.fetch_add(1, kRelaxed);
            log_.Warn("recover", trim_error);
          } else if (trimmed > 0) {
            counters_.torn_lines_trimmed.fetch_add(1, kRelaxed);
            spdlog::info("log sink: cut a torn last line ({} bytes) off {}", trimmed, file.shown);
          }
          if (parsed.kind == logstore::LogFileKind::kPlainSegment) {
            uint64_t& last = last_segment_[key];
            last = std::max(last, parsed.index);
            to_compress.push_back(Entry{std::move(e.name), std::move(parsed), std::move(key)});
          }
          break;
        case logstore::LogFileKind::kCompressedSegment: {
          uint64_t& last = last_segment_[key];
          last = std::max(last, parsed.index);
          break;
        }
        case logstore::LogFileKind::kOther:
          break;
      }
    }
    std::sort(to_compress.begin(), to_compress.end(), [](const Entry& a, const Entry& b) {
      return std::tie(a.key, a.parsed.index) < std::tie(b.key, b.parsed.index);
    });
    for (Entry& e : to_compress) {
      std::string compressed = logstore::SegmentFileName(e.parsed.base, e.parsed.index, true);
      if (ExistsAt(day_fd.Get(), compressed)) {
        // The rename of the finished .zst happened; only the removal of the plain copy did not.
        if (::unlinkat(day_fd.Get(), e.name.c_str(), 0) != 0 && errno != ENOENT) {
          log_.Warn("recover", logstore::RateLimitedLog::Describe(
                                   "cannot remove", dir_->Shown(day.name, e.name), errno));
        }
      } else {
        worker_->Compress(day.name, std::move(e.name), std::move(compressed));
      }
    }
  }
  return true;
}

bool LogSink::OpenActiveFile(Stream* s, std::string* error) {
  // With files_mu_: a retention pass does not remove the date directory (emptied) between its
  // creation here and the file's.
  std::lock_guard<std::mutex> lock(files_mu_);
  base::ScopedFd day(dir_->OpenSubdir(s->date, true));
  if (day.Get() < 0) {
    *error = logstore::RateLimitedLog::Describe("cannot open", dir_->Shown(s->date), errno);
    return false;
  }
  const logstore::FileAt file{day.Get(), s->active_name, s->shown};
  // Our own files always end on a line boundary, except after a crash or a failed write whose
  // partial line could not be cut: cut it now, before appending after it.
  struct stat st {};
  const bool existed = ::fstatat(file.dir, file.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (existed && !S_ISREG(st.st_mode)) {
    *error = file.shown + " is not a regular file (a symbolic link is never followed)";
    return false;
  }
  if (existed && st.st_size > 0) {
    uint64_t trimmed = 0;
    std::string err;
    if (!logstore::TrimTornTail(file, &trimmed, &err)) {
      *error = err;
      return false;
    }
    if (trimmed > 0) counters_.torn_lines_trimmed.fetch_add(1, kRelaxed);
  }
  const int fd = logstore::OpenAt(file, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0) {
    *error = logstore::RateLimitedLog::Describe("cannot open", file.shown, errno);
    return false;
  }
  if (::fstat(fd, &st) != 0) {
    *error = logstore::RateLimitedLog::Describe("cannot stat", file.shown, errno);
    ::close(fd);
    return false;
  }
  s->fd = fd;
  s->file_bytes = static_cast<uint64_t>(st.st_size);
  s->fragment_in_file = false;
  if (!existed) dirs_to_sync_.push_back(s->date);
  return true;
}

bool LogSink::RecoverHighestSeq(Stream* s, std::string* error) {
  base::ScopedFd day(dir_->OpenSubdir(s->date, false));
  if (day.Get() < 0) {
    *error = logstore::RateLimitedLog::Describe("cannot open", dir_->Shown(s->date), errno);
    return false;
  }
  std::string err;
  std::optional<uint64_t> seq =
      logstore::LastSeqInPlainFile(logstore::FileAt{day.Get(), s->active_name, s->shown}, &err);
  if (!seq && err.empty()) {
    // Nothing in the active file (a rotation just happened): the newest segment has it.
    const auto it = last_segment_.find(s->key);
    for (uint64_t index = it == last_segment_.end() ? 0 : it->second; index > 0 && !seq; --index) {
      std::string plain = logstore::SegmentFileName(s->base, index, false);
      std::string zst = logstore::SegmentFileName(s->base, index, true);
      if (ExistsAt(day.Get(), plain)) {
        seq = logstore::LastSeqInPlainFile(
            logstore::FileAt{day.Get(), plain, dir_->Shown(s->date, plain)}, &err);
        // The worker may have finished compressing it (and removed it) meanwhile.
        if (!err.empty() && ExistsAt(day.Get(), zst)) {
          err.clear();
          seq = logstore::LastSeqInZstdFile(
              logstore::FileAt{day.Get(), zst, dir_->Shown(s->date, zst)}, &err);
        }
      } else if (ExistsAt(day.Get(), zst)) {
        seq = logstore::LastSeqInZstdFile(
            logstore::FileAt{day.Get(), zst, dir_->Shown(s->date, zst)}, &err);
      } else {
        // Retention removes a stream's recovery file only with the last of its files
        // (retention.h): with this one gone, every older one is gone too.
        break;
      }
      if (!err.empty()) break;
    }
  }
  if (!err.empty()) {
    *error = std::move(err);
    return false;
  }
  if (seq) {
    s->has_highest = true;
    s->highest = *seq;
    s->has_written = true;
    s->written = *seq;
  }
  return true;
}

LogSink::Stream* LogSink::Acquire(const ProcessKey& key, std::string* error) {
  const std::string date = logstore::StartDate(key.start_ns);
  std::string base = key.owner.empty()
                         ? logstore::StreamBaseName(key.hostname, key.exe, key.pid, key.start_ns)
                         : logstore::StreamBaseName(key.hostname, key.exe, key.pid, key.start_ns,
                                                    key.instance_id, key.owner);
  std::string stream_key = StreamKey(date, base);
  const auto it = streams_.find(stream_key);
  if (it != streams_.end()) {
    Stream* s = it->second.get();
    ++s->refs;
    s->refusing = false;
    if (s->fd < 0) {
      std::string err;
      if (!OpenActiveFile(s, &err)) log_.Warn("open", err);  // Flush retries
    }
    return s;
  }
  auto stream = std::make_unique<Stream>();
  Stream* s = stream.get();
  s->file_serial = next_file_serial_++;
  s->key = std::move(stream_key);
  s->date = date;
  s->active_name = logstore::ActiveFileName(base);
  s->shown = dir_->Shown(date, s->active_name);
  s->base = std::move(base);
  {
    // Before any file of the stream is opened: retention keeps its active and recovery files.
    std::lock_guard<std::mutex> lock(files_mu_);
    pinned_.insert(s->key);
  }
  auto unpin = [this, s] {
    std::lock_guard<std::mutex> lock(files_mu_);
    pinned_.erase(s->key);
  };
  if (!OpenActiveFile(s, error)) {
    counters_.write_errors.fetch_add(1, kRelaxed);
    log_.Warn("open", *error);
    unpin();
    return nullptr;
  }
  std::string recovery_error;
  if (!RecoverHighestSeq(s, &recovery_error)) {
    counters_.recovery_failures.fetch_add(1, kRelaxed);
    *error = "cannot recover the highest stored seq of " + s->shown + ": " + recovery_error +
             " (the process's lines are refused until it can be read; move a corrupt segment "
             "out of the log directory)";
    log_.Warn("recover", *error);
    ::close(s->fd);
    unpin();
    return nullptr;
  }
  s->buffer.reserve(kInitialBufferBytes);
  s->refs = 1;
  streams_.emplace(s->key, std::move(stream));
  return s;
}

std::optional<uint64_t> LogSink::highest_seq(const Stream* s) const {
  if (!s->has_highest) return std::nullopt;
  return s->highest;
}

uint64_t LogSink::file_serial(const Stream* s) const { return s->file_serial; }

std::optional<uint64_t> LogSink::written_seq(const Stream* s) const {
  if (!s->has_written) return std::nullopt;
  return s->written;
}

bool LogSink::refusing(const Stream* s) const { return s->refusing; }

bool LogSink::Append(Stream* s, uint64_t seq, std::string_view line) {
  if (s->has_highest && seq <= s->highest) {
    counters_.duplicates_skipped.fetch_add(1, kRelaxed);
    return false;
  }
  if (line.empty()) return false;
  const bool terminated = line.back() == '\n';
  const size_t bytes = line.size() + (terminated ? 0 : 1);
  if (s->refusing ||
      (options_.max_pending_bytes > 0 && pending_total_ + bytes > options_.max_pending_bytes)) {
    if (!s->refusing) {
      s->refusing = true;
      log_.Warn("refuse", "buffers full (" + std::to_string(pending_total_) +
                              " bytes not written): refusing lines of " + s->key);
    }
    counters_.lines_refused.fetch_add(1, kRelaxed);
    return false;
  }
  s->buffer.append(line);
  if (!terminated) s->buffer.push_back('\n');
  ++s->buffer_lines;
  pending_total_ += bytes;
  s->has_highest = true;
  s->highest = seq;
  if (!s->dirty) {
    s->dirty = true;
    dirty_.push_back(s);
  }
  return true;
}

void LogSink::AppendCollectorEvent(Stream* s, std::string_view line) {
  if (line.empty()) return;
  const bool terminated = line.back() == '\n';
  const size_t bytes = line.size() + (terminated ? 0 : 1);
  if (options_.max_pending_bytes > 0 &&
      pending_total_ + bytes > options_.max_pending_bytes + kCollectorEventSlackBytes) {
    counters_.lines_refused.fetch_add(1, kRelaxed);
    log_.Warn("refuse", "buffers full: collector event for " + s->key + " dropped");
    return;
  }
  s->buffer.append(line);
  if (!terminated) s->buffer.push_back('\n');
  ++s->buffer_lines;
  pending_total_ += bytes;
  if (!s->dirty) {
    s->dirty = true;
    dirty_.push_back(s);
  }
}

bool LogSink::WritePending(Stream* s) {
  if (s->buffer.empty()) return true;
  if (s->fd < 0) {
    std::string err;
    if (!OpenActiveFile(s, &err)) {
      counters_.write_errors.fetch_add(1, kRelaxed);
      log_.Warn("open", err);
      return false;
    }
  }
  int err = 0;
  if (s->fragment_in_file) {
    // End the partial line so that the lines after it stay readable.
    if (logstore::WriteFully(s->fd, "\n", 1, &err) != 1) {
      counters_.write_errors.fetch_add(1, kRelaxed);
      log_.Warn("write", logstore::RateLimitedLog::Describe("cannot write", s->shown, err));
      return false;
    }
    s->fragment_in_file = false;
    ++s->file_bytes;
  }
  const size_t want = s->buffer.size();
  const size_t n = logstore::WriteFully(s->fd, s->buffer.data(), want, &err);
  if (n != want) {
    counters_.write_errors.fetch_add(1, kRelaxed);
    log_.Warn("write", logstore::RateLimitedLog::Describe("cannot write", s->shown, err));
    if (n > 0) {
      // Cut the partial batch off again so the file ends on a line boundary; the whole buffer
      // stays pending and is written again by the next Flush.
      const off_t end = ::lseek(s->fd, 0, SEEK_END);
      if (end < static_cast<off_t>(n) || ::ftruncate(s->fd, end - static_cast<off_t>(n)) != 0) {
        s->fragment_in_file = true;
        s->file_bytes += n;
      }
    }
    return false;
  }
  s->file_bytes += n;
  s->needs_sync = true;
  pending_total_ -= n;
  counters_.bytes_written.fetch_add(n, kRelaxed);
  counters_.lines_written.fetch_add(s->buffer_lines, kRelaxed);
  s->buffer_lines = 0;
  if (s->buffer.capacity() > kMaxRetainedBufferBytes) {
    std::string().swap(s->buffer);
    s->buffer.reserve(kInitialBufferBytes);
  } else {
    s->buffer.clear();
  }
  if (s->has_highest) {
    s->has_written = true;
    s->written = s->highest;
  }
  if (options_.rotate_bytes > 0 && s->file_bytes >= options_.rotate_bytes) Rotate(s);
  return true;
}

void LogSink::Flush() {
  dirty_scratch_.clear();
  for (Stream* s : dirty_) {
    if (!WritePending(s)) {
      dirty_scratch_.push_back(s);
      continue;
    }
    s->dirty = false;
    if (s->refs == 0) Forget(s);  // released while its data could not be written
  }
  dirty_.swap(dirty_scratch_);
  counters_.pending_bytes.store(pending_total_, kRelaxed);
}

void LogSink::Rotate(Stream* s) {
  base::ScopedFd day(dir_->OpenSubdir(s->date, false));
  // logrotate may have moved our file away (and maybe created another one at its path) before
  // the SIGHUP: then there is nothing of ours to rename; start a new file instead.
  struct stat by_fd {};
  struct stat by_name {};
  const bool ours =
      day.Get() >= 0 && ::fstat(s->fd, &by_fd) == 0 &&
      ::fstatat(day.Get(), s->active_name.c_str(), &by_name, AT_SYMLINK_NOFOLLOW) == 0 &&
      by_fd.st_dev == by_name.st_dev && by_fd.st_ino == by_name.st_ino;
  if (ours) {
    uint64_t& last = last_segment_[s->key];
    const uint64_t index = last + 1;
    std::string plain = logstore::SegmentFileName(s->base, index, false);
    std::string compressed = logstore::SegmentFileName(s->base, index, true);
    if (::renameat(day.Get(), s->active_name.c_str(), day.Get(), plain.c_str()) != 0) {
      counters_.write_errors.fetch_add(1, kRelaxed);
      log_.Warn("rotate", logstore::RateLimitedLog::Describe("cannot rename", s->shown, errno));
      return;  // keep appending to the current file; the next Flush tries again
    }
    last = index;
    counters_.segments_rotated.fetch_add(1, kRelaxed);
    // No fdatasync of the closed segment: the worker fsyncs its compressed copy, and the plain
    // one is removed after that.
    s->needs_sync = false;
    CloseFile(s);
    worker_->Compress(s->date, std::move(plain), std::move(compressed));
  } else {
    CloseFile(s);
  }
  s->file_bytes = 0;
  std::string err;
  if (!OpenActiveFile(s, &err)) {
    counters_.write_errors.fetch_add(1, kRelaxed);
    log_.Warn("open", err);  // fd stays -1; the next Flush with data tries again
  }
}

void LogSink::CloseFile(Stream* s) {
  if (s->fd < 0) return;
  // Every buffered line was written (Rotate and Reopen close after a complete write): lines
  // appended from now on go to the next file.
  s->file_serial = next_file_serial_++;
  const size_t closes_held = worker_->descriptors_held() - worker_->periodic_descriptors_held();
  if (closes_held < kMaxQueuedCloses) {
    worker_->SyncAndClose(s->fd, s->needs_sync);
  } else {
    // The worker is behind (a slow disk): hand the file over by name, holding no descriptor.
    ::close(s->fd);
    if (s->needs_sync) worker_->SyncFile(s->date, s->active_name);
  }
  s->fd = -1;
  s->needs_sync = false;
}

void LogSink::Forget(Stream* s) {
  CloseFile(s);
  {
    std::lock_guard<std::mutex> lock(files_mu_);
    pinned_.erase(s->key);
  }
  const auto it = streams_.find(s->key);
  if (it != streams_.end()) streams_.erase(it);  // destroys *s
}

void LogSink::Release(Stream* s) {
  if (--s->refs > 0) return;
  s->refusing = false;
  if (s->dirty && WritePending(s)) {
    s->dirty = false;
    std::erase(dirty_, s);
    counters_.pending_bytes.store(pending_total_, kRelaxed);
  }
  if (!s->dirty) Forget(s);
}

void LogSink::Tick(std::chrono::system_clock::time_point now) {
  const bool fsync_due = options_.fsync_interval.count() <= 0 || now < last_fsync_ ||
                         now - last_fsync_ >= options_.fsync_interval;
  if (fsync_due) {
    last_fsync_ = now;
    if (worker_->periodic_descriptors_held() > 0) {
      // The previous round is still running (fdatasync slower than the interval): queueing
      // another would hold one more descriptor per stream each time. Its files are synced by
      // the next round instead.
      counters_.fsync_rounds_skipped.fetch_add(1, kRelaxed);
      log_.Warn("fsync", "fdatasync is slower than the fsync interval (" +
                             std::to_string(options_.fsync_interval.count()) +
                             " ms): a round was skipped");
    } else {
      for (auto& [key, stream] : streams_) {
        Stream* s = stream.get();
        if (s->fd < 0 || !s->needs_sync) continue;
        // A duplicate, so that the daemon thread may go on writing (or close the original)
        // while the worker syncs.
        const int dup_fd = ::fcntl(s->fd, F_DUPFD_CLOEXEC, 0);
        if (dup_fd < 0) {
          counters_.write_errors.fetch_add(1, kRelaxed);
          log_.Warn("fsync",
                    logstore::RateLimitedLog::Describe("cannot dup the fd of", s->shown, errno));
          continue;
        }
        worker_->SyncAndClose(dup_fd, true, /*periodic=*/true);
        s->needs_sync = false;
      }
    }
    std::sort(dirs_to_sync_.begin(), dirs_to_sync_.end());
    dirs_to_sync_.erase(std::unique(dirs_to_sync_.begin(), dirs_to_sync_.end()),
                        dirs_to_sync_.end());
    for (std::string& date : dirs_to_sync_) worker_->SyncDirectory(std::move(date));
    dirs_to_sync_.clear();
  }

  const bool retention_due = !retention_ran_ || options_.retention_interval.count() <= 0 ||
                             now < last_retention_ ||
                             now - last_retention_ >= options_.retention_interval;
  if (!retention_due) return;
  retention_ran_ = true;
  last_retention_ = now;
  if (options_.retain_bytes > 0 || options_.retain_days > 0) {
    retention_->Request(now);  // false while a pass still runs: this one is skipped
  }
  worker_->RetryFailed();
}

void LogSink::RetentionPass(std::chrono::system_clock::time_point now) {
  RetentionHooks hooks;
  hooks.mu = &files_mu_;
  hooks.stop = retention_->stop_flag();
  hooks.keep = [this](const RetentionFile& f) {
    // files_mu_ is held (pinned_).
    if ((f.kind == logstore::LogFileKind::kActive || f.recovery_file) &&
        pinned_.contains(f.stream_key)) {
      return true;
    }
    return f.kind == logstore::LogFileKind::kPlainSegment && worker_->IsPending(f.date, f.name);
  };
  const RetentionResult result = ApplyRetention(
      *dir_, RetentionPolicy{options_.retain_bytes, options_.retain_days}, now, hooks, &log_);
  counters_.files_removed_by_retention.fetch_add(result.files_removed, kRelaxed);
  if (result.over_limit && !result.stopped) {
    counters_.retention_over_limit.fetch_add(1, kRelaxed);
    log_.Warn("retention", "the live files alone take " + std::to_string(result.bytes_total) +
                               " bytes, more than retain_bytes " +
                               std::to_string(options_.retain_bytes));
  }
}

void LogSink::Reopen() {
  Flush();
  for (auto& [key, stream] : streams_) {
    Stream* s = stream.get();
    CloseFile(s);
    s->file_bytes = 0;
    std::string err;
    if (!OpenActiveFile(s, &err)) {
      counters_.write_errors.fetch_add(1, kRelaxed);
      log_.Warn("open", err);
    }
  }
}

LogSinkStats LogSink::stats() const {
  LogSinkStats out;
  out.bytes_written = counters_.bytes_written.load(kRelaxed);
  out.lines_written = counters_.lines_written.load(kRelaxed);
  out.duplicates_skipped = counters_.duplicates_skipped.load(kRelaxed);
  out.segments_rotated = counters_.segments_rotated.load(kRelaxed);
  out.torn_lines_trimmed = counters_.torn_lines_trimmed.load(kRelaxed);
  out.files_removed_by_retention = counters_.files_removed_by_retention.load(kRelaxed);
  out.write_errors = counters_.write_errors.load(kRelaxed);
  out.lines_refused = counters_.lines_refused.load(kRelaxed);
  out.segments_compressed = counters_.segments_compressed.load(kRelaxed);
  out.pending_bytes = counters_.pending_bytes.load(kRelaxed);
  out.retention_over_limit = counters_.retention_over_limit.load(kRelaxed);
  out.fsync_rounds_skipped = counters_.fsync_rounds_skipped.load(kRelaxed);
  out.recovery_failures = counters_.recovery_failures.load(kRelaxed);
  out.lines_abandoned = counters_.lines_abandoned.load(kRelaxed);
  return out;
}

void LogSink::FinishBackgroundWork() {
  if (retention_) retention_->WaitIdle();
  worker_->WaitIdle();
}

}  // namespace cuflight::collector
