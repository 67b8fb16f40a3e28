#include "cuflight/spill/spill_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "cuflight/schema/log_layout.h"

namespace cuflight::spill {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

// Creates `path` and every missing parent, mode 0700. Returns 0 or the errno of the failure.
int MakeDirs(const std::string& path) {
  std::string prefix;
  prefix.reserve(path.size());
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    prefix.assign(path, 0, i);
    if (prefix.empty()) continue;  // the root
    if (::mkdir(prefix.c_str(), 0700) == 0 || errno == EEXIST) continue;
    const int err = errno;
    struct stat st {};
    if (::stat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;  // e.g. EACCES on /
    return err;
  }
  return 0;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// "<dir>" without its trailing slashes ("/" stays "/").
std::string_view TrimSlashes(std::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  return dir;
}

}  // namespace

SpillWriter::SpillWriter(SpillWriterOptions options) noexcept : options_(std::move(options)) {
  if (options_.dir.empty()) {
    Disable("no spill directory", "", 0);
    return;
  }
  try {
    base_ =
        options_.instance_id == 0
            ? schema::StreamBaseName(options_.host, options_.exe, options_.pid, options_.start_ns)
            : schema::StreamBaseName(options_.host, options_.exe, options_.pid, options_.start_ns,
                                     options_.instance_id, options_.owner);
    const std::string_view dir = TrimSlashes(options_.dir);
    date_dir_.assign(dir);
    if (date_dir_ != "/") date_dir_ += '/';
    date_dir_ += schema::StartDate(options_.start_ns);
    active_path_ = date_dir_ + '/' + schema::ActiveFileName(base_);
  } catch (...) {
    base_.clear();
    date_dir_.clear();
    active_path_.clear();
    Disable("out of memory", "", 0);
  }
}

SpillWriter::~SpillWriter() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t SpillWriter::PrepareLine(size_t bytes) noexcept {
  if (disabled()) {
    refused_disabled_.fetch_add(1, kRelaxed);
    return 0;
  }
  if (fd_ < 0 && !Open()) {
    refused_disabled_.fetch_add(1, kRelaxed);
    return 0;
  }
  if (total_bytes_ + bytes > options_.max_bytes) {
    refused_full_.fetch_add(1, kRelaxed);
    if (!warned_full_) {
      warned_full_ = true;
      char line[sizeof(message_)];
      const int n = std::snprintf(line, sizeof(line),
                                  "spill %s is full: its files hold %llu bytes, the limit is "
                                  "%llu; events that cannot reach a collector are dropped",
                                  date_dir_.c_str(), static_cast<unsigned long long>(total_bytes_),
                                  static_cast<unsigned long long>(options_.max_bytes));
      Report(std::string_view(line, n < 0 ? 0 : std::min<size_t>(n, sizeof(line) - 1)));
    }
    return 0;
  }
  if (options_.rotate_bytes > 0 && file_bytes_ > 0 && file_bytes_ + bytes > options_.rotate_bytes &&
      !Rotate()) {
    refused_disabled_.fetch_add(1, kRelaxed);
    return 0;
  }
  return file_number_;
}

bool SpillWriter::AppendLine(std::string_view first, std::string_view second) noexcept {
  const size_t len = first.size() + second.size();
  const std::string_view tail = second.empty() ? first : second;
  if (len == 0 || tail.back() != '\n') return false;
  if (disabled() || fd_ < 0) {
    refused_disabled_.fetch_add(1, kRelaxed);
    return false;
  }
  if (total_bytes_ + len > options_.max_bytes) {
    refused_full_.fetch_add(1, kRelaxed);
    return false;
  }
  if (!WriteAll(first) || !WriteAll(second)) {
    const int err = errno;
    // Cut what went in of the line, so the file still ends on a line boundary.
    (void)::ftruncate(fd_, static_cast<off_t>(file_bytes_));
    Disable("cannot write", active_path_, err);
    refused_disabled_.fetch_add(1, kRelaxed);
    return false;
  }
  file_bytes_ += len;
  total_bytes_ += len;
  lines_.fetch_add(1, kRelaxed);
  bytes_.store(total_bytes_, kRelaxed);
  return true;
}

bool SpillWriter::WriteLine(std::string_view line) noexcept {
  return PrepareLine(line.size()) != 0 && AppendLine(line, {});
}

SpillWriterStats SpillWriter::stats() const noexcept {
  SpillWriterStats out;
  out.lines = lines_.load(kRelaxed);
  out.bytes = bytes_.load(kRelaxed);
  out.files = files_.load(kRelaxed);
  out.rotations = rotations_.load(kRelaxed);
  out.refused_full = refused_full_.load(kRelaxed);
  out.refused_disabled = refused_disabled_.load(kRelaxed);
  out.disabled = disabled();
  return out;
}

bool SpillWriter::Open() noexcept {
  try {
    if (const int err = MakeDirs(date_dir_); err != 0) {
      Disable("cannot create", date_dir_, err);
      return false;
    }
    const int fd =
        ::open(active_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      Disable("cannot open", active_path_, errno);
      return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      const int err = S_ISREG(st.st_mode) ? errno : EINVAL;
      ::close(fd);
      Disable("cannot use", active_path_, err);
      return false;
    }
    if (file_number_ == 0) {
      // Segments of the same name already there (this process's spill set up again): the next
      // one goes after them, so the numbers keep the order the lines were written in.
      const std::string prefix = date_dir_ + '/';
      while (Exists(prefix + schema::SegmentFileName(base_, next_segment_, false)) ||
             Exists(prefix + schema::SegmentFileName(base_, next_segment_, true))) {
        ++next_segment_;
      }
    }
    fd_ = fd;
    file_bytes_ = static_cast<uint64_t>(st.st_size);
    total_bytes_ += file_bytes_;
    bytes_.store(total_bytes_, kRelaxed);
    ++file_number_;
    files_.fetch_add(1, kRelaxed);
    return true;
  } catch (...) {
    Disable("out of memory", "", 0);
    return false;
  }
}

bool SpillWriter::Rotate() noexcept {
  try {
    const std::string prefix = date_dir_ + '/';
    std::string segment = prefix + schema::SegmentFileName(base_, next_segment_, false);
    while (Exists(segment) ||
           Exists(prefix + schema::SegmentFileName(base_, next_segment_, true))) {
      ++next_segment_;
      segment = prefix + schema::SegmentFileName(base_, next_segment_, false);
    }
    if (::rename(active_path_.c_str(), segment.c_str()) != 0) {
      Disable("cannot rename", active_path_, errno);
      return false;
    }
    ::close(fd_);
    fd_ = -1;
    file_bytes_ = 0;
    ++next_segment_;
    rotations_.fetch_add(1, kRelaxed);
    return Open();
  } catch (...) {
    Disable("out of memory", "", 0);
    return false;
  }
}

bool SpillWriter::WriteAll(std::string_view bytes) noexcept {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {  // not expected for a regular file; do not loop forever
      errno = EIO;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

void SpillWriter::Disable(std::string_view what, std::string_view path, int err) noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  disabled_.store(true, kRelaxed);
  char reason[128] = "";
  if (err != 0) {
    char buf[128];
    const char* text = strerror_r(err, buf, sizeof(buf));  // GNU: returns the text
    (void)std::snprintf(reason, sizeof(reason), ": %s", text);
  }
  char line[sizeof(message_)];
  const int n = std::snprintf(line, sizeof(line),
                              "spill disabled: %.*s%s%.*s%s; events that cannot reach a collector "
                              "are held and dropped as without a spill",
                              static_cast<int>(what.size()), what.data(), path.empty() ? "" : " ",
                              static_cast<int>(path.size()), path.data(), reason);
  Report(std::string_view(line, n < 0 ? 0 : std::min<size_t>(n, sizeof(line) - 1)));
}

void SpillWriter::Report(std::string_view line) noexcept {
  message_len_ = std::min(line.size(), sizeof(message_));
  std::memcpy(message_, line.data(), message_len_);
  if (!options_.warn) return;
  try {
    options_.warn(std::string_view(message_, message_len_));
  } catch (...) {
  }
}

}  // namespace cuflight::spill
