#include "log_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>

#include "segment_error_log.h"

namespace cuflight::logstore {
namespace {

// Only the collector's user reads the logs: they hold other users' command lines.
constexpr mode_t kDirMode = 0700;

std::string OctalMode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

DirEntry::Kind KindOfMode(mode_t mode) {
  if (S_ISREG(mode)) return DirEntry::Kind::kRegular;
  if (S_ISDIR(mode)) return DirEntry::Kind::kDirectory;
  if (S_ISLNK(mode)) return DirEntry::Kind::kSymlink;
  return DirEntry::Kind::kOther;
}

}  // namespace

std::unique_ptr<LogDir> LogDir::Open(const std::filesystem::path& path, std::string* error,
                                     std::optional<gid_t> untrusted_group) {
  if (path.empty()) {
    *error = "log sink: no log directory given";
    return nullptr;
  }
  const std::filesystem::path parent = path.parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);  // a failure shows in the mkdir below
  }
  if (::mkdir(path.c_str(), kDirMode) != 0 && errno != EEXIST) {
    *error = RateLimitedLog::Describe("cannot create log directory", path.native(), errno);
    return nullptr;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *error = RateLimitedLog::Describe("cannot open log directory", path.native(), errno);
    return nullptr;
  }
  std::unique_ptr<LogDir> dir(new LogDir(path, fd));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *error = RateLimitedLog::Describe("cannot stat log directory", path.native(), errno);
    return nullptr;
  }
  if (st.st_uid != ::geteuid()) {
    *error = "log directory " + path.native() + " is owned by uid " + std::to_string(st.st_uid) +
             ", not by the collector's uid " + std::to_string(::geteuid()) +
             "; give it to the collector's user (chown) or use another directory";
    return nullptr;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    *error = "log directory " + path.native() + " is writable by group or others (mode " +
             OctalMode(st.st_mode) + "); remove those write bits (chmod go-w) or use another " +
             "directory";
    return nullptr;
  }
  if (untrusted_group && (st.st_mode & (S_IROTH | S_IXOTH)) != 0) {
    *error = "log directory " + path.native() + " can be read by others (mode " +
             OctalMode(st.st_mode) + "): the logs hold every recorded user's command lines; " +
             "make it 0700 (chmod go-rwx) or use another directory";
    return nullptr;
  }
  if (untrusted_group && st.st_gid == *untrusted_group && (st.st_mode & (S_IRGRP | S_IXGRP)) != 0) {
    *error = "log directory " + path.native() + " can be read by group " +
             std::to_string(st.st_gid) + ", the socket group (mode " + OctalMode(st.st_mode) +
             "): every recorded user could read the others' logs; make it 0700 (chmod g-rx) " +
             "or give it another group";
    return nullptr;
  }
  return dir;
}

LogDir::~LogDir() { ::close(fd_); }

int LogDir::OpenSubdir(const std::string& name, bool create) const {
  if (create && ::mkdirat(fd_, name.c_str(), kDirMode) != 0 && errno != EEXIST) return -1;
  return ::openat(fd_, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

std::string LogDir::Shown(std::string_view sub, std::string_view name) const {
  std::string out = path_.native();
  if (!out.empty() && out.back() != '/') out += '/';
  out += sub;
  if (!name.empty()) {
    out += '/';
    out += name;
  }
  return out;
}

bool ListDirectory(int dir_fd, std::vector<DirEntry>* out, int* err) {
  // A descriptor of its own: readdir moves the offset of the open file description.
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    *err = errno;
    ::close(fd);
    return false;
  }
  bool ok = true;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(dir);  // NOLINT(concurrency-mt-unsafe): this stream is ours
    if (e == nullptr) {
      if (errno != 0) {
        *err = errno;
        ok = false;
      }
      break;
    }
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    DirEntry entry;
    entry.name = std::string(name);
    switch (e->d_type) {
      case DT_REG:
        entry.kind = DirEntry::Kind::kRegular;
        break;
      case DT_DIR:
        entry.kind = DirEntry::Kind::kDirectory;
        break;
      case DT_LNK:
        entry.kind = DirEntry::Kind::kSymlink;
        break;
      case DT_UNKNOWN: {
        struct stat st {};
        entry.kind = ::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0
                         ? KindOfMode(st.st_mode)
                         : DirEntry::Kind::kOther;
        break;
      }
      default:
        entry.kind = DirEntry::Kind::kOther;
        break;
    }
    out->push_back(std::move(entry));
  }
  ::closedir(dir);
  return ok;
}

}  // namespace cuflight::logstore
