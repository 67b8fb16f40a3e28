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

std::string Errno() { return std::strerror(errno); }  // NOLINT(concurrency-mt-unsafe)

// The producer's pidfd: the socket's peer's own (SO_PEERPIDFD, Linux 6.5: the process that
// connected, whatever happened to its pid since), else one opened from its pid; -1 when neither
// can be had (an older kernel, a pid this collector's pid namespace does not show).
int PeerPidfd(int socket, pid_t peer_pid) {
  int pidfd = -1;
  socklen_t len = sizeof(pidfd);
  if (getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0) {
    fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    return pidfd;
  }
  if (peer_pid <= 0) return -1;
  // pidfd_open(2) makes the descriptor close-on-exec.
  return static_cast<int>(syscall(SYS_pidfd_open, peer_pid, 0));
}

}  // namespace

std::unique_ptr<ProducerBlackbox> ProducerBlackbox::Adopt(int fd, int socket, pid_t peer_pid,
                                                          std::string_view* reason,
                                                          std::string* why) {
  const auto refuse = [fd, reason, why](std::string_view label, std::string text) {
    close(fd);
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
  const int pidfd = PeerPidfd(socket, peer_pid);
  if (pidfd < 0) {
    return refuse("no_pidfd", "no pidfd of the producer (pid " + std::to_string(peer_pid) +
                                  "): its end could not be told from a closed connection");
  }
  return std::unique_ptr<ProducerBlackbox>(new ProducerBlackbox(fd, pidfd, size));
}

ProducerBlackbox::~ProducerBlackbox() {
  close(fd_);
  close(pidfd_);
}

bool ProducerBlackbox::ProducerGone() const {
  pollfd p{pidfd_, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

}  // namespace cuflight::collector
