#include "log_follower.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <system_error>
#include <vector>

namespace cuflight::cli {
namespace {

// Bytes read per read(2).
constexpr size_t kReadChunk = 64 * 1024;
// A line longer than this without a '\n' is not a collector line (it bounds lines at 64 KiB by
// default): the bytes are dropped rather than held.
constexpr size_t kMaxPartialBytes = 16 << 20;

bool IsPlainLog(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return name.size() > 6 && name.ends_with(".jsonl");
}

}  // namespace

LogFollower::LogFollower(std::filesystem::path dir, bool from_start)
    : dir_(std::move(dir)), from_start_(from_start) {}

LogFollower::~LogFollower() {
  for (auto& [key, file] : files_) close(file.fd);
}

void LogFollower::Scan() {
  const bool skip_existing = first_scan_ && !from_start_;
  first_scan_ = false;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir_, ec);
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec) || !IsPlainLog(it->path())) continue;
    struct stat st {};
    if (stat(it->path().c_str(), &st) != 0) continue;
    const auto key = std::make_pair(st.st_dev, st.st_ino);
    if (files_.count(key) != 0) continue;
    const int fd = open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat opened {};
    if (fstat(fd, &opened) != 0 || opened.st_ino != st.st_ino || opened.st_dev != st.st_dev) {
      close(fd);  // replaced between stat and open: the next scan finds the new one
      continue;
    }
    File file;
    file.path = it->path();
    file.fd = fd;
    file.offset = skip_existing ? static_cast<uint64_t>(opened.st_size) : 0;
    file.skipped = file.offset;
    files_.emplace(key, std::move(file));
  }
}

uint64_t LogFollower::Drain(
    File* file, const std::function<void(std::string_view, const std::filesystem::path&)>& on_line) {
  struct stat st {};
  if (fstat(file->fd, &st) == 0 && static_cast<uint64_t>(st.st_size) < file->offset) {
    file->offset = static_cast<uint64_t>(st.st_size);
    file->partial.clear();
  }
  uint64_t lines = 0;
  std::vector<char> buf(kReadChunk);
  for (;;) {
    const ssize_t n = pread(file->fd, buf.data(), buf.size(), static_cast<off_t>(file->offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    file->offset += static_cast<uint64_t>(n);
    std::string_view chunk(buf.data(), static_cast<size_t>(n));
    for (size_t nl = chunk.find('\n'); nl != std::string_view::npos; nl = chunk.find('\n')) {
      if (file->partial.empty()) {
        on_line(chunk.substr(0, nl), file->path);
      } else {
        file->partial.append(chunk.substr(0, nl));
        on_line(file->partial, file->path);
        file->partial.clear();
      }
      ++lines;
      chunk.remove_prefix(nl + 1);
    }
    if (file->partial.size() + chunk.size() > kMaxPartialBytes) {
      file->partial.clear();
    } else {
      file->partial.append(chunk);
    }
  }
  return lines;
}

uint64_t LogFollower::ReadSkipped(const std::filesystem::path& path,
                                  const std::function<void(std::string_view)>& on_line) {
  for (auto& [key, file] : files_) {
    if (file.path != path || file.skipped == 0) continue;
    const uint64_t end = file.skipped;
    file.skipped = 0;
    uint64_t lines = 0;
    uint64_t offset = 0;
    std::string partial;
    std::vector<char> buf(kReadChunk);
    while (offset < end) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), end - offset));
      const ssize_t n = pread(file.fd, buf.data(), want, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      offset += static_cast<uint64_t>(n);
      std::string_view chunk(buf.data(), static_cast<size_t>(n));
      for (size_t nl = chunk.find('\n'); nl != std::string_view::npos; nl = chunk.find('\n')) {
        partial.append(chunk.substr(0, nl));
        on_line(partial);
        partial.clear();
        ++lines;
        chunk.remove_prefix(nl + 1);
      }
      if (partial.size() + chunk.size() > kMaxPartialBytes) {
        partial.clear();
      } else {
        partial.append(chunk);
      }
    }
    return lines;
  }
  return 0;
}

uint64_t LogFollower::Poll(
    const std::function<void(std::string_view, const std::filesystem::path&)>& on_line) {
  Scan();
  uint64_t lines = 0;
  for (auto it = files_.begin(); it != files_.end();) {
    lines += Drain(&it->second, on_line);
    struct stat st {};
    if (fstat(it->second.fd, &st) == 0 && st.st_nlink == 0) {
      close(it->second.fd);
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  return lines;
}

}  // namespace cuflight::cli
