// A producer's black box as the collector holds it (docs/protocol.md, "The black box"): the
// memfd the producer passed on its Unix connection, checked and mapped read-only, and a pidfd of
// the producer, which says when it has died: the only time the region is read.
//
// What is accepted: a memfd on tmpfs (not hugetlbfs), sealed against shrinking (so the producer
// cannot truncate it under the mapping and make a read fault), of kHeaderBytes to
// blackbox::kMaxRegionBytes, whose header is a black box of this layout version; and a producer
// whose pidfd can be had (SO_PEERPIDFD, else pidfd_open of the SO_PEERCRED pid).
#ifndef CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_BLACKBOX_H_
#define CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_BLACKBOX_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace cuflight::collector {

class ProducerBlackbox {
 public:
  // Takes ownership of `fd` (closed when refused). `socket`: the connection it came on (for
  // SO_PEERPIDFD); `peer_pid`: its SO_PEERCRED pid. Returns nullptr when refused, with *reason a
  // metrics label ("not_memfd", "not_sealed", "too_small", "too_large", "map_failed",
  // "no_pidfd", or a blackbox::RegionErrorName) and *why a sentence for the log.
  static std::unique_ptr<ProducerBlackbox> Adopt(int fd, int socket, pid_t peer_pid,
                                                 std::string_view* reason, std::string* why);
  ~ProducerBlackbox();
  ProducerBlackbox(const ProducerBlackbox&) = delete;
  ProducerBlackbox& operator=(const ProducerBlackbox&) = delete;

  std::span<const uint8_t> bytes() const { return {base_, size_}; }
  // Readable (EPOLLIN) once the producer has exited.
  int pidfd() const { return pidfd_; }
  // True when the producer has exited; does not wait.
  bool ProducerGone() const;

 private:
  ProducerBlackbox(int fd, int pidfd, const uint8_t* base, size_t size)
      : fd_(fd), pidfd_(pidfd), base_(base), size_(size) {}

  const int fd_;
  const int pidfd_;
  const uint8_t* const base_;
  const size_t size_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_BLACKBOX_H_
