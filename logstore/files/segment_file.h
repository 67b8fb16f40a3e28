// Low-level file work for the log sink's plain (uncompressed) JSONL files: trimming a torn last
// line after a crash, finding the seq of the last stored line, and the small POSIX helpers the
// sink and its worker share. Files are named relative to an open directory (FileAt) and opened
// with O_NOFOLLOW (log_dir.h). No function here throws; errors come back as false/nullopt with a
// message.
#ifndef CUFLIGHT_LOGSTORE_FILES_SEGMENT_FILE_H_
#define CUFLIGHT_LOGSTORE_FILES_SEGMENT_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "cuflight/base/scoped_fd.h"

namespace cuflight::logstore {

// Owns a file descriptor (cuflight/base/scoped_fd.h).
using base::ScopedFd;

// A file named relative to an open directory: `dir` is borrowed, `name` is one path component
// (opened with O_NOFOLLOW, so a symbolic link is never followed), `shown` is its full path, for
// messages only.
struct FileAt {
  int dir = -1;
  std::string name;
  std::string shown;
};

// openat(file.dir, file.name, flags | O_NOFOLLOW | O_CLOEXEC, mode): -1 with errno set on
// failure (ELOOP for a symbolic link).
int OpenAt(const FileAt& file, int flags, mode_t mode = 0);

// Cuts `file` right after its last '\n' (to 0 bytes when it has none), so that it ends on a line
// boundary, and fdatasyncs it when it changed. *bytes_trimmed is how much was cut (0 when the file
// already ended in '\n' or was empty). False with *error set if the file cannot be opened, read
// or truncated.
bool TrimTornTail(const FileAt& file, uint64_t* bytes_trimmed, std::string* error);

// The "seq" member of one JSON line (a trailing "\n" or "\r\n" allowed) if the line is a JSON
// object whose "seq" is an integer in [0, 2^64-1]; nullopt otherwise.
std::optional<uint64_t> SeqOfLine(std::string_view line);

// The seq of the last line of `file` that has one (SeqOfLine), reading the file backwards in
// chunks, so the cost is that of the last few lines. nullopt when no line has one, and when the
// file cannot be read (*error is then set; it is left untouched otherwise).
std::optional<uint64_t> LastSeqInPlainFile(const FileAt& file, std::string* error);

// Writes all `size` bytes of `data` to `fd`, retrying after EINTR and short writes. Returns the
// number of bytes written; when that is less than `size`, *err holds the errno of the failure.
size_t WriteFully(int fd, const char* data, size_t size, int* err);

// fsync(2) of a directory, making renames and new names in it durable. False on failure (errno
// set). The first form borrows an open directory descriptor.
bool FsyncDirectory(int dir_fd);
bool FsyncDirectory(const std::filesystem::path& dir);

}  // namespace cuflight::logstore

#endif  // CUFLIGHT_LOGSTORE_FILES_SEGMENT_FILE_H_
