#include "segment_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <vector>

#include "segment_error_log.h"

namespace cuflight::logstore {
namespace {

// Backward reads go in chunks of this size: a few typical lines, and small enough for the stack
// of any thread.
constexpr size_t kTailChunkBytes = size_t{16} * 1024;

// pread(2) of exactly `size` bytes at `offset`; false on error or a file shorter than expected.
bool PreadFully(int fd, char* buf, size_t size, off_t offset, int* err) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, buf + done, size - done, offset + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    if (n == 0) {
      *err = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int OpenAt(const FileAt& file, int flags, mode_t mode) {
  return ::openat(file.dir, file.name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
}

bool TrimTornTail(const FileAt& file, uint64_t* bytes_trimmed, std::string* error) {
  *bytes_trimmed = 0;
  const std::string& path = file.shown;
  ScopedFd fd(OpenAt(file, O_RDWR));
  if (fd.Get() < 0) {
    *error = RateLimitedLog::Describe("cannot open", path, errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0) {
    *error = RateLimitedLog::Describe("cannot stat", path, errno);
    return false;
  }
  const off_t size = st.st_size;
  off_t keep = 0;
  off_t end = size;
  char buf[kTailChunkBytes];
  bool found = false;
  while (end > 0 && !found) {
    const size_t n = end < static_cast<off_t>(sizeof(buf)) ? static_cast<size_t>(end) : sizeof(buf);
    const off_t start = end - static_cast<off_t>(n);
    int err = 0;
    if (!PreadFully(fd.Get(), buf, n, start, &err)) {
      *error = RateLimitedLog::Describe("cannot read", path, err);
      return false;
    }
    for (size_t i = n; i-- > 0;) {
      if (buf[i] == '\n') {
        keep = start + static_cast<off_t>(i) + 1;
        found = true;
        break;
      }
    }
    end = start;
  }
  if (keep == size) return true;
  if (::ftruncate(fd.Get(), keep) != 0) {
    *error = RateLimitedLog::Describe("cannot truncate", path, errno);
    return false;
  }
  ::fdatasync(fd.Get());
  *bytes_trimmed = static_cast<uint64_t>(size - keep);
  return true;
}

std::optional<uint64_t> SeqOfLine(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.empty()) return std::nullopt;
  // A cheap filter before the full parse: a line without the member cannot have it.
  if (line.find("\"seq\"") == std::string_view::npos) return std::nullopt;
  const nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) return std::nullopt;
  const auto it = value.find("seq");
  if (it == value.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer()) {
    const int64_t v = it->get<int64_t>();
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

std::optional<uint64_t> LastSeqInPlainFile(const FileAt& file, std::string* error) {
  const std::string& path = file.shown;
  ScopedFd fd(OpenAt(file, O_RDONLY));
  if (fd.Get() < 0) {
    *error = RateLimitedLog::Describe("cannot open", path, errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0) {
    *error = RateLimitedLog::Describe("cannot stat", path, errno);
    return std::nullopt;
  }
  std::vector<char> buf(kTailChunkBytes);
  // `carry` holds the end of a line whose start lies before the chunk being scanned.
  std::string carry;
  std::string joined;
  off_t end = st.st_size;
  while (end > 0) {
    const size_t n = end < static_cast<off_t>(buf.size()) ? static_cast<size_t>(end) : buf.size();
    const off_t start = end - static_cast<off_t>(n);
    int err = 0;
    if (!PreadFully(fd.Get(), buf.data(), n, start, &err)) {
      *error = RateLimitedLog::Describe("cannot read", path, err);
      return std::nullopt;
    }
    const std::string_view chunk(buf.data(), n);
    size_t line_end = n;  // the line being assembled ends at chunk[line_end] (+ carry)
    for (size_t i = n; i-- > 0;) {
      if (chunk[i] != '\n') continue;
      const std::string_view piece = chunk.substr(i + 1, line_end - (i + 1));
      std::optional<uint64_t> seq;
      if (carry.empty()) {
        seq = SeqOfLine(piece);
      } else {
        joined.assign(piece);
        joined += carry;
        carry.clear();
        seq = SeqOfLine(joined);
      }
      if (seq) return seq;
      line_end = i;
    }
    carry.insert(0, chunk.substr(0, line_end));
    end = start;
  }
  return SeqOfLine(carry);
}

size_t WriteFully(int fd, const char* data, size_t size, int* err) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return done;
    }
    if (n == 0) {
      *err = EIO;
      return done;
    }
    done += static_cast<size_t>(n);
  }
  return done;
}

bool FsyncDirectory(int dir_fd) { return ::fsync(dir_fd) == 0; }

bool FsyncDirectory(const std::filesystem::path& dir) {
  ScopedFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.Get() < 0) return false;
  return ::fsync(fd.Get()) == 0;
}

}  // namespace cuflight::logstore
