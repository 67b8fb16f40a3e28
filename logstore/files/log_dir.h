// The collector's log directory: trusted once at start, then the root of every file operation of
// the log sink, its worker and retention.
//
// 1. Trust: the directory (made 0700 when missing) must be a directory owned by the collector's
//    effective uid and writable by nobody else (no group or other write bit), so no other user
//    can plant, swap or remove files in it. When other users' processes are recorded (a socket
//    group), also readable by none of them: no read or search bit for others, and none for its
//    group when that is the socket group, since the logs hold every recorded user's command
//    lines. (Without one the logs hold only the collector's own user's processes.) The path given
//    may itself be a symbolic link (an operator's choice, resolved once, here); nothing inside the
//    directory is ever followed.
// 2. Every open, stat, rename and unlink below it is an *at(2) call on the directory's descriptor
//    or on a date directory opened from it, one path component at a time, with O_NOFOLLOW
//    (AT_SYMLINK_NOFOLLOW for stat): a symbolic link inside the log directory fails the call
//    (ELOOP, ENOTDIR) instead of leading somewhere else.
#ifndef CUFLIGHT_LOGSTORE_FILES_LOG_DIR_H_
#define CUFLIGHT_LOGSTORE_FILES_LOG_DIR_H_

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuflight::logstore {

class LogDir {
 public:
  // Creates `path` when missing (0700; missing parents as mkdir -p makes them), opens it and
  // checks it as described above; `untrusted_group`: the socket group (nullopt: none, only the
  // collector's own user is recorded). nullptr with *error set (one line naming the directory and,
  // for a trust failure, what to change).
  static std::unique_ptr<LogDir> Open(const std::filesystem::path& path, std::string* error,
                                      std::optional<gid_t> untrusted_group = std::nullopt);
  ~LogDir();
  LogDir(const LogDir&) = delete;
  LogDir& operator=(const LogDir&) = delete;

  // The directory's descriptor (O_RDONLY | O_DIRECTORY), valid for the object's life.
  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }

  // Opens the subdirectory `name` (one path component) with O_DIRECTORY | O_NOFOLLOW; with
  // `create`, makes it (0700) first when missing. The caller owns the returned descriptor; -1
  // with errno set on failure (ELOOP or ENOTDIR for a symbolic link). Any thread.
  int OpenSubdir(const std::string& name, bool create) const;

  // "<path>/<sub>" and "<path>/<sub>/<name>", for messages.
  std::string Shown(std::string_view sub, std::string_view name = {}) const;

 private:
  LogDir(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::filesystem::path path_;
  const int fd_;
};

// One entry of a directory listing.
struct DirEntry {
  enum class Kind { kRegular, kDirectory, kSymlink, kOther };
  std::string name;
  Kind kind = Kind::kOther;
};

// The entries of the open directory `dir_fd` (without "." and ".."), in directory order, read
// through a descriptor of its own (dir_fd's offset is untouched). The kind comes from the
// directory entry, or from fstatat(AT_SYMLINK_NOFOLLOW) when the filesystem does not say. False
// with *err set when the directory cannot be read (what was read stays in *out).
bool ListDirectory(int dir_fd, std::vector<DirEntry>* out, int* err);

}  // namespace cuflight::logstore

#endif  // CUFLIGHT_LOGSTORE_FILES_LOG_DIR_H_
