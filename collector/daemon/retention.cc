#include "retention.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "segment_file.h"

namespace cuflight::collector {
namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

struct DateDirInfo {
  std::string name;
  int fd = -1;
  bool touched = false;  // a file in it was removed
};

struct FileInfo {
  size_t date = 0;  // index into the date directories
  std::string name;
  size_t stream = 0;  // index into the streams
  logstore::ParsedLogFileName parsed;
  uint64_t bytes = 0;
  std::chrono::system_clock::time_point mtime;
  bool removed = false;
  bool kept = false;  // the hook kept it, or it could not be removed: not tried again
};

struct StreamInfo {
  std::string key;          // "<date>/<base>"
  size_t recovery = kNone;  // index of its recovery file
  size_t remaining = 0;     // its files not removed
  bool deferred = false;    // its recovery file was due, waiting for the others to go
};

std::chrono::system_clock::time_point MtimeOf(const struct stat& st) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

}  // namespace

RetentionResult ApplyRetention(const logstore::LogDir& dir, const RetentionPolicy& policy,
                               std::chrono::system_clock::time_point now,
                               const RetentionHooks& hooks, logstore::RateLimitedLog* log) {
  RetentionResult result;
  std::vector<DateDirInfo> dates;
  std::vector<FileInfo> files;
  std::vector<StreamInfo> streams;
  std::unordered_map<std::string, size_t> stream_index;
  auto stopped = [&] {
    return hooks.stop != nullptr && hooks.stop->load(std::memory_order_relaxed);
  };

  std::vector<logstore::DirEntry> top;
  int err = 0;
  if (!logstore::ListDirectory(dir.fd(), &top, &err)) {
    log->Warn("retention",
              logstore::RateLimitedLog::Describe("cannot list", dir.path().native(), err));
  }
  std::vector<logstore::DirEntry> entries;
  for (const logstore::DirEntry& day : top) {
    if (day.kind != logstore::DirEntry::Kind::kDirectory || !logstore::IsDateDirName(day.name))
      continue;
    if (stopped()) break;
    const int day_fd = dir.OpenSubdir(day.name, false);
    if (day_fd < 0) {
      log->Warn("retention",
                logstore::RateLimitedLog::Describe("cannot open", dir.Shown(day.name), errno));
      continue;
    }
    const size_t date_index = dates.size();
    dates.push_back(DateDirInfo{day.name, day_fd, false});
    entries.clear();
    if (!logstore::ListDirectory(day_fd, &entries, &err)) {
      log->Warn("retention",
                logstore::RateLimitedLog::Describe("cannot list", dir.Shown(day.name), err));
    }
    for (logstore::DirEntry& e : entries) {
      if (e.kind != logstore::DirEntry::Kind::kRegular)
        continue;  // links are neither followed nor removed
      logstore::ParsedLogFileName parsed = logstore::ParseLogFileName(e.name);
      if (parsed.kind == logstore::LogFileKind::kOther) continue;
      struct stat st {};
      if (::fstatat(day_fd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) {
          log->Warn("retention", logstore::RateLimitedLog::Describe(
                                     "cannot stat", dir.Shown(day.name, e.name), errno));
        }
        continue;
      }
      if (!S_ISREG(st.st_mode)) continue;
      std::string key = day.name + "/" + parsed.base;
      auto [it, inserted] = stream_index.try_emplace(std::move(key), streams.size());
      if (inserted) streams.push_back(StreamInfo{it->first, kNone, 0, false});
      FileInfo info;
      info.date = date_index;
      info.name = std::move(e.name);
      info.stream = it->second;
      info.parsed = std::move(parsed);
      info.bytes = static_cast<uint64_t>(st.st_size);
      info.mtime = MtimeOf(st);
      ++streams[info.stream].remaining;
      result.bytes_total += info.bytes;
      files.push_back(std::move(info));
    }
  }

  // Each stream's recovery file: its active file when not empty, else its newest segment.
  for (size_t i = 0; i < files.size(); ++i) {
    const FileInfo& f = files[i];
    StreamInfo& s = streams[f.stream];
    const FileInfo* current = s.recovery == kNone ? nullptr : &files[s.recovery];
    const bool current_is_active =
        current != nullptr && current->parsed.kind == logstore::LogFileKind::kActive;
    if (f.parsed.kind == logstore::LogFileKind::kActive) {
      if (f.bytes > 0) s.recovery = i;
    } else if ((f.parsed.kind == logstore::LogFileKind::kPlainSegment ||
                f.parsed.kind == logstore::LogFileKind::kCompressedSegment) &&
               !current_is_active &&
               (current == nullptr || f.parsed.index > current->parsed.index)) {
      s.recovery = i;
    }
  }

  std::vector<size_t> order(files.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const FileInfo& fa = files[a];
    const FileInfo& fb = files[b];
    if (fa.mtime != fb.mtime) return fa.mtime < fb.mtime;
    const int by_date = dates[fa.date].name.compare(dates[fb.date].name);
    if (by_date != 0) return by_date < 0;
    return fa.name < fb.name;
  });

  // Removes one file unless the hook keeps it; the hook and the unlink under the hook's mutex.
  auto remove = [&](FileInfo& f) {
    DateDirInfo& date = dates[f.date];
    StreamInfo& s = streams[f.stream];
    {
      std::unique_lock<std::mutex> lock;
      if (hooks.mu != nullptr) lock = std::unique_lock<std::mutex>(*hooks.mu);
      const RetentionFile view{s.key, date.name, f.name, f.parsed.kind,
                               s.recovery != kNone && &files[s.recovery] == &f};
      if (hooks.keep && hooks.keep(view)) {
        f.kept = true;
        return false;
      }
      if (::unlinkat(date.fd, f.name.c_str(), 0) != 0 && errno != ENOENT) {
        log->Warn("retention", logstore::RateLimitedLog::Describe(
                                   "cannot remove", dir.Shown(date.name, f.name), errno));
        f.kept = true;
        return false;
      }
    }
    f.removed = true;
    date.touched = true;
    --s.remaining;
    ++result.files_removed;
    result.bytes_removed += f.bytes;
    result.bytes_total -= f.bytes;
    return true;
  };
  // Removes files[i] if `wanted` says so, holding a recovery file back until it is the last of
  // its stream's files.
  auto attempt = [&](size_t i, const std::function<bool(const FileInfo&)>& wanted) {
    FileInfo& f = files[i];
    if (f.removed || f.kept || f.parsed.kind == logstore::LogFileKind::kTemp || !wanted(f)) return;
    StreamInfo& s = streams[f.stream];
    if (i == s.recovery && s.remaining > 1) {
      s.deferred = true;
      return;
    }
    if (!remove(f)) return;
    if (s.deferred && s.remaining == 1 && s.recovery != kNone) {
      FileInfo& r = files[s.recovery];
      if (!r.removed && !r.kept && wanted(r)) remove(r);
    }
  };

  if (policy.max_days > 0) {
    const auto cutoff = now - std::chrono::hours(24) * policy.max_days;
    for (const size_t i : order) {
      if (stopped()) break;
      attempt(i, [&](const FileInfo& f) { return f.mtime < cutoff; });
    }
  }
  if (policy.max_bytes > 0) {
    for (StreamInfo& s : streams) s.deferred = false;
    for (const size_t i : order) {
      if (result.bytes_total <= policy.max_bytes || stopped()) break;
      attempt(i, [&](const FileInfo&) { return result.bytes_total > policy.max_bytes; });
    }
    result.over_limit = result.bytes_total > policy.max_bytes;
  }
  result.stopped = stopped();

  for (DateDirInfo& d : dates) {
    if (d.touched) {
      std::unique_lock<std::mutex> lock;
      if (hooks.mu != nullptr) lock = std::unique_lock<std::mutex>(*hooks.mu);
      ::unlinkat(dir.fd(), d.name.c_str(), AT_REMOVEDIR);  // fails (ENOTEMPTY) unless emptied
    }
    ::close(d.fd);
  }
  return result;
}

RetentionThread::RetentionThread(Pass pass) : pass_(std::move(pass)), thread_([this] { Run(); }) {}

RetentionThread::~RetentionThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
  }
  cv_.notify_all();
  thread_.join();
}

bool RetentionThread::Request(std::chrono::system_clock::time_point now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (requested_ || running_) return false;
    requested_ = true;
    now_ = now;
  }
  cv_.notify_all();
  return true;
}

void RetentionThread::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !requested_ && !running_; });
}

void RetentionThread::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_.load(std::memory_order_relaxed) || requested_; });
    if (stop_.load(std::memory_order_relaxed)) break;
    requested_ = false;
    running_ = true;
    const auto now = now_;
    lock.unlock();
    try {
      pass_(now);
    } catch (const std::exception&) {
      // A failed pass (out of memory listing a huge directory) is tried again at the next
      // request; nothing was half-done that matters: each removal stands alone.
    }
    lock.lock();
    running_ = false;
    cv_.notify_all();
  }
  requested_ = false;
  cv_.notify_all();
}

}  // namespace cuflight::collector
