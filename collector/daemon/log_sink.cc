#include "log_sink.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <tuple>
#include <unordered_set>

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

constexpr auto kRelaxed = std::memory_order_relaxed;

constexpr char kLockFileName[] = ".cuflight-collector.lock";

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
  std::filesystem::path date_dir;
  std::string base;
  std::filesystem::path active_path;
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
};

LogSink::LogSink(const LogSinkOptions& options) : options_(options) {}

std::unique_ptr<LogSink> LogSink::Open(const LogSinkOptions& options, std::string* error) {
  if (options.dir.empty()) {
    *error = "log sink: no log directory given";
    return nullptr;
  }
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) {
    *error = "cannot create log directory " + options.dir.native() + ": " + ec.message();
    return nullptr;
  }
  // One writer per directory: a second collector on the same log would interleave and undo
  // the first one's work. The lock goes with the process (also on kill -9).
  const std::filesystem::path lock_path = options.dir / kLockFileName;
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (lock_fd < 0) {
    *error = RateLimitedLog::Describe("cannot open", lock_path.native(), errno);
    return nullptr;
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock_fd);
    *error = err == EWOULDBLOCK
                 ? "another process (a collector) is using the log directory " +
                       options.dir.native() + " (it holds " + lock_path.native() + ")"
                 : RateLimitedLog::Describe("cannot lock", lock_path.native(), err);
    return nullptr;
  }
  std::unique_ptr<LogSink> sink(new LogSink(options));
  sink->lock_fd_ = lock_fd;
  sink->worker_ = std::make_unique<SegmentWorker>(
      options.zstd_level,
      SegmentWorker::Counters{&sink->counters_.write_errors, &sink->counters_.segments_compressed},
      &sink->log_);
  if (!sink->Recover(error)) return nullptr;
  return sink;
}

LogSink::~LogSink() {
  Flush();
  for (auto& [key, stream] : streams_) CloseFile(stream.get());
  worker_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

bool LogSink::Recover(std::string* error) {
  struct Entry {
    std::filesystem::path path;
    ParsedLogFileName parsed;
    std::string key;
  };
  std::vector<Entry> entries;
  std::error_code ec;
  for (std::filesystem::directory_iterator day(options_.dir, ec), end; !ec && day != end;
       day.increment(ec)) {
    const std::string day_name = day->path().filename().string();
    std::error_code inner;
    if (!IsDateDirName(day_name) || !day->is_directory(inner)) continue;
    for (std::filesystem::directory_iterator it(day->path(), inner), it_end; !inner && it != it_end;
         it.increment(inner)) {
      ParsedLogFileName parsed = ParseLogFileName(it->path().filename().native());
      if (parsed.kind == LogFileKind::kOther) continue;
      std::error_code type_ec;
      if (!it->is_regular_file(type_ec)) continue;
      std::string key = StreamKey(day_name, parsed.base);
      entries.push_back(Entry{it->path(), std::move(parsed), std::move(key)});
    }
    if (inner) log_.Warn("recover", "cannot list " + day->path().native() + ": " + inner.message());
  }
  if (ec) {
    *error = "cannot read log directory " + options_.dir.native() + ": " + ec.message();
    return false;
  }

  std::vector<const Entry*> to_compress;
  for (const Entry& e : entries) {
    std::string err;
    uint64_t trimmed = 0;
    switch (e.parsed.kind) {
      case LogFileKind::kTemp:
        if (::unlink(e.path.c_str()) != 0 && errno != ENOENT) {
          log_.Warn("recover", RateLimitedLog::Describe("cannot remove", e.path.native(), errno));
        }
        break;
      case LogFileKind::kActive:
      case LogFileKind::kPlainSegment:
        if (!TrimTornTail(e.path, &trimmed, &err)) {
          counters_.write_errors.fetch_add(1, kRelaxed);
          log_.Warn("recover", err);
        } else if (trimmed > 0) {
          counters_.torn_lines_trimmed.fetch_add(1, kRelaxed);
          spdlog::info("log sink: cut a torn last line ({} bytes) off {}", trimmed,
                       e.path.native());
        }
        if (e.parsed.kind == LogFileKind::kPlainSegment) {
          uint64_t& last = last_segment_[e.key];
          last = std::max(last, e.parsed.index);
          to_compress.push_back(&e);
        }
        break;
      case LogFileKind::kCompressedSegment: {
        uint64_t& last = last_segment_[e.key];
        last = std::max(last, e.parsed.index);
        break;
      }
      case LogFileKind::kOther:
        break;
    }
  }

  std::sort(to_compress.begin(), to_compress.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->key, a->parsed.index) < std::tie(b->key, b->parsed.index);
  });
  for (const Entry* e : to_compress) {
    std::filesystem::path compressed =
        e->path.parent_path() / SegmentFileName(e->parsed.base, e->parsed.index, true);
    std::error_code exists_ec;
    if (std::filesystem::exists(compressed, exists_ec)) {
      // The rename of the finished .zst happened; only the removal of the plain copy did not.
      if (::unlink(e->path.c_str()) != 0 && errno != ENOENT) {
        log_.Warn("recover", RateLimitedLog::Describe("cannot remove", e->path.native(), errno));
      }
    } else {
      worker_->Compress(e->path, std::move(compressed));
    }
  }
  return true;
}

bool LogSink::OpenActiveFile(Stream* s, std::string* error) {
  std::error_code ec;
  std::filesystem::create_directories(s->date_dir, ec);
  if (ec) {
    *error = "cannot create " + s->date_dir.native() + ": " + ec.message();
    return false;
  }
  // Our own files always end on a line boundary, except after a crash or a failed write whose
  // partial line could not be cut: cut it now, before appending after it.
  struct stat st {};
  const bool existed = ::stat(s->active_path.c_str(), &st) == 0;
  if (existed && st.st_size > 0) {
    uint64_t trimmed = 0;
    std::string err;
    if (!TrimTornTail(s->active_path, &trimmed, &err)) {
      *error = err;
      return false;
    }
    if (trimmed > 0) counters_.torn_lines_trimmed.fetch_add(1, kRelaxed);
  }
  const int fd = ::open(s->active_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    *error = RateLimitedLog::Describe("cannot open", s->active_path.native(), errno);
    return false;
  }
  if (::fstat(fd, &st) != 0) {
    *error = RateLimitedLog::Describe("cannot stat", s->active_path.native(), errno);
    ::close(fd);
    return false;
  }
  s->fd = fd;
  s->file_bytes = static_cast<uint64_t>(st.st_size);
  s->fragment_in_file = false;
  if (!existed) dirs_to_sync_.push_back(s->date_dir);
  return true;
}

void LogSink::RecoverHighestSeq(Stream* s) {
  std::string err;
  std::optional<uint64_t> seq = LastSeqInPlainFile(s->active_path, &err);
  if (!seq && err.empty()) {
    // Nothing in the active file (a rotation just happened): the newest segment has it.
    const auto it = last_segment_.find(s->key);
    for (uint64_t index = it == last_segment_.end() ? 0 : it->second; index > 0 && !seq; --index) {
      const std::filesystem::path plain = s->date_dir / SegmentFileName(s->base, index, false);
      const std::filesystem::path zst = s->date_dir / SegmentFileName(s->base, index, true);
      std::error_code ec;
      if (std::filesystem::exists(plain, ec)) {
        seq = LastSeqInPlainFile(plain, &err);
        // The worker may have finished compressing it (and removed it) meanwhile.
        if (!err.empty() && std::filesystem::exists(zst, ec)) {
          err.clear();
          seq = LastSeqInZstdFile(zst, &err);
        }
      } else if (std::filesystem::exists(zst, ec)) {
        seq = LastSeqInZstdFile(zst, &err);
      } else {
        break;  // older segments were removed by retention, or moved away
      }
      if (!err.empty()) break;
    }
  }
  if (!err.empty()) log_.Warn("recover", err + " (highest seq of " + s->key + " unknown)");
  if (seq) {
    s->has_highest = true;
    s->highest = *seq;
    s->has_written = true;
    s->written = *seq;
  }
}

LogSink::Stream* LogSink::Acquire(const ProcessKey& key, std::string* error) {
  const std::string date = StartDate(key.start_ns);
  std::string base = key.owner.empty()
                         ? StreamBaseName(key.hostname, key.exe, key.pid, key.start_ns)
                         : StreamBaseName(key.hostname, key.exe, key.pid, key.start_ns,
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
  s->key = std::move(stream_key);
  s->date_dir = options_.dir / date;
  s->active_path = s->date_dir / ActiveFileName(base);
  s->base = std::move(base);
  if (!OpenActiveFile(s, error)) {
    counters_.write_errors.fetch_add(1, kRelaxed);
    log_.Warn("open", *error);
    return nullptr;
  }
  RecoverHighestSeq(s);
  s->buffer.reserve(kInitialBufferBytes);
  s->refs = 1;
  streams_.emplace(s->key, std::move(stream));
  return s;
}

std::optional<uint64_t> LogSink::highest_seq(const Stream* s) const {
  if (!s->has_highest) return std::nullopt;
  return s->highest;
}

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
    if (WriteFully(s->fd, "\n", 1, &err) != 1) {
      counters_.write_errors.fetch_add(1, kRelaxed);
      log_.Warn("write", RateLimitedLog::Describe("cannot write", s->active_path.native(), err));
      return false;
    }
    s->fragment_in_file = false;
    ++s->file_bytes;
  }
  const size_t want = s->buffer.size();
  const size_t n = WriteFully(s->fd, s->buffer.data(), want, &err);
  if (n != want) {
    counters_.write_errors.fetch_add(1, kRelaxed);
    log_.Warn("write", RateLimitedLog::Describe("cannot write", s->active_path.native(), err));
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
  // logrotate may have moved our file away (and maybe created another one at its path) before
  // the SIGHUP: then there is nothing of ours to rename; start a new file instead.
  struct stat by_fd {};
  struct stat by_path {};
  const bool ours = ::fstat(s->fd, &by_fd) == 0 && ::stat(s->active_path.c_str(), &by_path) == 0 &&
                    by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
  if (ours) {
    uint64_t& last = last_segment_[s->key];
    const uint64_t index = last + 1;
    std::filesystem::path plain = s->date_dir / SegmentFileName(s->base, index, false);
    std::filesystem::path compressed = s->date_dir / SegmentFileName(s->base, index, true);
    if (::rename(s->active_path.c_str(), plain.c_str()) != 0) {
      counters_.write_errors.fetch_add(1, kRelaxed);
      log_.Warn("rotate",
                RateLimitedLog::Describe("cannot rename", s->active_path.native(), errno));
      return;  // keep appending to the current file; the next Flush tries again
    }
    last = index;
    counters_.segments_rotated.fetch_add(1, kRelaxed);
    // No fdatasync of the closed segment: the worker fsyncs its compressed copy, and the plain
    // one is removed after that.
    s->needs_sync = false;
    CloseFile(s);
    worker_->Compress(std::move(plain), std::move(compressed));
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
  worker_->SyncAndClose(s->fd, s->needs_sync);
  s->fd = -1;
  s->needs_sync = false;
}

void LogSink::Forget(Stream* s) {
  CloseFile(s);
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
    for (auto& [key, stream] : streams_) {
      Stream* s = stream.get();
      if (s->fd < 0 || !s->needs_sync) continue;
      // A duplicate, so that the daemon thread may go on writing (or close the original)
      // while the worker syncs.
      const int dup_fd = ::fcntl(s->fd, F_DUPFD_CLOEXEC, 0);
      if (dup_fd < 0) {
        counters_.write_errors.fetch_add(1, kRelaxed);
        log_.Warn("fsync",
                  RateLimitedLog::Describe("cannot dup the fd of", s->active_path.native(), errno));
        continue;
      }
      worker_->SyncAndClose(dup_fd, true);
      s->needs_sync = false;
    }
    std::sort(dirs_to_sync_.begin(), dirs_to_sync_.end());
    dirs_to_sync_.erase(std::unique(dirs_to_sync_.begin(), dirs_to_sync_.end()),
                        dirs_to_sync_.end());
    for (std::filesystem::path& dir : dirs_to_sync_) worker_->SyncDirectory(std::move(dir));
    dirs_to_sync_.clear();
  }

  const bool retention_due = !retention_ran_ || options_.retention_interval.count() <= 0 ||
                             now < last_retention_ ||
                             now - last_retention_ >= options_.retention_interval;
  if (!retention_due) return;
  retention_ran_ = true;
  last_retention_ = now;
  if (options_.retain_bytes > 0 || options_.retain_days > 0) {
    std::unordered_set<std::string> live;
    live.reserve(streams_.size());
    for (const auto& [key, stream] : streams_) live.insert(stream->active_path.native());
    const RetentionResult result = ApplyRetention(
        options_.dir, RetentionPolicy{options_.retain_bytes, options_.retain_days}, now,
        [&](const std::filesystem::path& path) {
          return live.contains(path.native()) || worker_->IsPending(path);
        },
        &log_);
    counters_.files_removed_by_retention.fetch_add(result.files_removed, kRelaxed);
    if (result.over_limit) {
      counters_.retention_over_limit.fetch_add(1, kRelaxed);
      log_.Warn("retention", "the live files alone take " + std::to_string(result.bytes_total) +
                                 " bytes, more than retain_bytes " +
                                 std::to_string(options_.retain_bytes));
    }
  }
  worker_->RetryFailed();
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
  return out;
}

void LogSink::FinishBackgroundWork() { worker_->WaitIdle(); }

}  // namespace cuflight::collector
