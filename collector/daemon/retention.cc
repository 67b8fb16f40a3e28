#include "retention.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <system_error>
#include <vector>

#include "segment_names.h"

namespace cuflight::collector {
namespace {

struct FileInfo {
  std::filesystem::path path;
  uint64_t bytes = 0;
  std::chrono::system_clock::time_point mtime;
  bool removable = false;
  bool removed = false;
};

std::chrono::system_clock::time_point MtimeOf(const struct stat& st) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

}  // namespace

RetentionResult ApplyRetention(const std::filesystem::path& dir, const RetentionPolicy& policy,
                               std::chrono::system_clock::time_point now,
                               const std::function<bool(const std::filesystem::path&)>& keep,
                               RateLimitedLog* log) {
  RetentionResult result;
  std::vector<FileInfo> files;
  std::vector<std::filesystem::path> date_dirs;
  std::error_code ec;
  for (std::filesystem::directory_iterator day(dir, ec), end; !ec && day != end;
       day.increment(ec)) {
    const std::string day_name = day->path().filename().string();
    if (!IsDateDirName(day_name) || !day->is_directory(ec)) continue;
    date_dirs.push_back(day->path());
    std::error_code inner;
    for (std::filesystem::directory_iterator it(day->path(), inner), it_end; !inner && it != it_end;
         it.increment(inner)) {
      const ParsedLogFileName parsed = ParseLogFileName(it->path().filename().native());
      if (parsed.kind == LogFileKind::kOther) continue;
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0) {
        if (errno != ENOENT) {
          log->Warn("retention",
                    RateLimitedLog::Describe("cannot stat", it->path().native(), errno));
        }
        continue;
      }
      if (!S_ISREG(st.st_mode)) continue;
      FileInfo info;
      info.path = it->path();
      info.bytes = static_cast<uint64_t>(st.st_size);
      info.mtime = MtimeOf(st);
      info.removable = parsed.kind != LogFileKind::kTemp && !keep(info.path);
      result.bytes_total += info.bytes;
      files.push_back(std::move(info));
    }
  }
  if (ec) {
    log->Warn("retention", "cannot list " + dir.native() + ": " + ec.message());
  }

  std::sort(files.begin(), files.end(), [](const FileInfo& a, const FileInfo& b) {
    if (a.mtime != b.mtime) return a.mtime < b.mtime;
    return a.path < b.path;
  });

  auto remove = [&](FileInfo& f) {
    if (::unlink(f.path.c_str()) != 0 && errno != ENOENT) {
      log->Warn("retention", RateLimitedLog::Describe("cannot remove", f.path.native(), errno));
      f.removable = false;
      return;
    }
    f.removed = true;
    ++result.files_removed;
    result.bytes_removed += f.bytes;
    result.bytes_total -= f.bytes;
  };

  if (policy.max_days > 0) {
    const auto cutoff = now - std::chrono::hours(24) * policy.max_days;
    for (FileInfo& f : files) {
      if (f.removable && f.mtime < cutoff) remove(f);
    }
  }
  if (policy.max_bytes > 0) {
    for (FileInfo& f : files) {
      if (result.bytes_total <= policy.max_bytes) break;
      if (f.removable && !f.removed) remove(f);
    }
    result.over_limit = result.bytes_total > policy.max_bytes;
  }

  if (result.files_removed > 0) {
    for (const std::filesystem::path& d : date_dirs) {
      ::rmdir(d.c_str());  // fails (ENOTEMPTY) unless the directory is now empty
    }
  }
  return result;
}

}  // namespace cuflight::collector
