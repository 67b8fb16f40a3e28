#include "producer_blackbox.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cuflight/blackbox/region_layout.h"
#include "cuflight/blackbox/region_reader.h"
#include "cuflight/blackbox/region_source.h"

namespace cuflight::collector {
namespace {

#ifndef SO_PEERPIDFD
constexpr int SO_PEERPIDFD = 77;  // Linux 6.5 (asm-generic/socket.h)
#endif
#ifndef SYS_pidfd_open
constexpr long SYS_pidfd_open = 434;  // Linux 5.3, one number on every architecture
#endif
#ifndef SYS_pidfd_send_signal
constexpr long SYS_pidfd_send_signal = 424;  // Linux 5.1, likewise
#endif

std::string Errno() { return std::strerror(errno); }  // NOLINT(concurrency-mt-unsafe)

// What the producer's end is learnt from (design note 1).
struct End {
  int fd = -1;
  bool proc_dir = false;
  std::string_view source;
};

// A pidfd: pidfd_send_signal(2) with signal 0 checks the descriptor before anything else and
// answers EBADF for one that is not a pidfd (0, ESRCH for a process gone, EPERM for one this
// collector may not signal: all pidfds).
bool IsPidfd(int fd) {
  if (syscall(SYS_pidfd_send_signal, fd, 0, nullptr, 0) == 0) return true;
  return errno == ESRCH || errno == EPERM;
}

// A /proc/<pid> directory: a directory on procfs.
bool IsProcDir(int fd) {
  struct stat st {};
  struct statfs fs {};
  return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && fstatfs(fd, &fs) == 0 &&
         fs.f_type == PROC_SUPER_MAGIC;
}

// The best source `sources` allows (design note 1); closes `passed` unless it is the one used.
End ProducerEnd(int socket, pid_t peer_pid, int passed, const ProducerEndSources& sources,
                std::string* tried) {
  const auto take_passed = [&]() -> End {
    if (passed < 0) return {};
    if (sources.passed_pidfd && IsPidfd(passed)) return {passed, false, "passed_pidfd"};
    if (sources.passed_proc_dir && IsProcDir(passed)) return {passed, true, "passed_proc_dir"};
    *tried += "; the descriptor it passed of itself is not one this collector may use";
    return {};
  };
  End end;
  if (sources.peer_pidfd) {
    int pidfd = -1;
    socklen_t len = sizeof(pidfd);
    if (getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0) {
      fcntl(pidfd, F_SETFD, FD_CLOEXEC);
      end = {pidfd, false, "peer_pidfd"};
    } else {
      *tried += "; SO_PEERPIDFD: " + Errno();
    }
  }
  if (end.fd < 0 && sources.pidfd_of_peer && peer_pid > 0) {
    // pidfd_open(2) makes the descriptor close-on-exec.
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, peer_pid, 0));
    if (pidfd >= 0) {
      end = {pidfd, false, "pidfd_open"};
    } else {
      *tried += "; pidfd_open: " + Errno();
    }
  }
  if (end.fd < 0) end = take_passed();
  if (passed >= 0 && end.fd != passed) close(passed);
  return end;
}

}  // namespace

std::unique_ptr<ProducerBlackbox> ProducerBlackbox::Adopt(int fd, int passed_end, int socket,
                                                          pid_t peer_pid,
                                                          const ProducerEndSources& sources,
                                                          std::string_view* reason,
                                                          std::string* why) {
  const auto refuse = [fd, &passed_end, reason, why](std::string_view label, std::string text) {
    close(fd);
    if (passed_end >= 0) close(passed_end);
    *reason = label;
    *why = std::move(text);
    return nullptr;
  };
  struct stat st {};
  struct statfs fs {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fstatfs(fd, &fs) != 0 ||
      fs.f_type != TMPFS_MAGIC) {
    return refuse("not_memfd", "not a memfd");
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return refuse("not_memfd", "not a memfd (F_GET_SEALS: " + Errno() + ")");
  if ((seals & F_SEAL_SHRINK) == 0) {
    return refuse("not_sealed", "not sealed against shrinking (F_SEAL_SHRINK)");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < blackbox::kHeaderBytes) {
    return refuse("too_small", std::to_string(size) + " bytes, shorter than a black box header");
  }
  if (size > blackbox::kMaxRegionBytes) {
    return refuse("too_large", std::to_string(size) + " bytes, more than the " +
                                   std::to_string(blackbox::kMaxRegionBytes >> 20) +
                                   " MiB allowed");
  }
  std::string message;
  blackbox::RegionError error;
  {
    blackbox::FdSource source(fd, size);  // the header's page, which the producer wrote first
    error = blackbox::CheckRegion(source, &message);
  }
  if (error != blackbox::RegionError::kNone) {
    return refuse(blackbox::RegionErrorName(error), std::move(message));
  }
  std::string tried;
  const End end = ProducerEnd(socket, peer_pid, passed_end, sources, &tried);
  passed_end = -1;  // ProducerEnd took it
  if (end.fd < 0) {
    return refuse("no_pidfd", "no pidfd of the producer (pid " + std::to_string(peer_pid) + tried +
                                  "): its end could not be told from a closed connection");
  }
  return std::unique_ptr<ProducerBlackbox>(
      new ProducerBlackbox(fd, end.fd, end.proc_dir, end.source, size));
}

ProducerBlackbox::~ProducerBlackbox() {
  close(fd_);
  close(end_fd_);
}

bool ProducerBlackbox::ProducerGone() const {
  if (!proc_dir_) {
    pollfd p{end_fd_, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
  }
  // Design note 1d. procfs files never block; O_NOFOLLOW and O_NONBLOCK all the same.
  const int stat_fd = openat(end_fd_, "stat", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (stat_fd < 0) return errno == ENOENT || errno == ESRCH;  // reaped
  char buf[512];
  const ssize_t n = read(stat_fd, buf, sizeof(buf) - 1);
  close(stat_fd);
  if (n <= 0) return n < 0 && errno == ESRCH;
  buf[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')' (comm may hold one).
  const char* paren = std::strrchr(buf, ')');
  if (paren == nullptr || paren[1] != ' ') return false;
  return paren[2] == 'Z' || paren[2] == 'X';
}

}  // namespace cuflight::collector
