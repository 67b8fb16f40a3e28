// A producer's black box as the collector holds it (docs/protocol.md, "The black box"): the
// memfd the producer passed on its Unix connection, checked, and a pidfd of the producer, which
// says when it has died: the only time the region is read. The memfd is never mapped: it is
// read with pread(2) (blackbox::FdSource), so that the pages the producer never wrote are not
// allocated and charged to the collector's memory cgroup (region_source.h).
//
// What is accepted: a memfd on tmpfs (not hugetlbfs), sealed against shrinking (so that the
// size its header was checked against holds while it is read), of kHeaderBytes to
// blackbox::kMaxRegionBytes, whose header is a black box of this layout version; and a producer
// whose pidfd can be had (SO_PEERPIDFD, else pidfd_open of the SO_PEERCRED pid).
#ifndef CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_BLACKBOX_H_
#define CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_BLACKBOX_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace cuflight::collector {

class ProducerBlackbox {
 public:
  // Takes ownership of `fd` (closed when refused). `socket`: the connection it came on (for
  // SO_PEERPIDFD); `peer_pid`: its SO_PEERCRED pid. Returns nullptr when refused, with *reason a
  // metrics label ("not_memfd", "not_sealed", "too_small", "too_large",
  // "no_pidfd", or a blackbox::RegionErrorName) and *why a sentence for the log.
  static std::unique_ptr<ProducerBlackbox> Adopt(int fd, int socket, pid_t peer_pid,
                                                 std::string_view* reason, std::string* why);
  ~ProducerBlackbox();
  ProducerBlackbox(const ProducerBlackbox&) = delete;
  ProducerBlackbox& operator=(const ProducerBlackbox&) = delete;

  // The memfd (read it with blackbox::FdSource) and its size.
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  // Readable (EPOLLIN) once the producer has exited.
  int pidfd() const { return pidfd_; }
  // True when the producer has exited; does not wait.
  bool ProducerGone() const;

 private:
  ProducerBlackbox(int fd, int pidfd, uint64_t size) : fd_(fd), pidfd_(pidfd), size_(size) {}

  const int fd_;
  const int pidfd_;
  const uint64_t size_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_BLACKBOX_H_
