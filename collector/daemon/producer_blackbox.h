// A producer's black box as the collector holds it (docs/protocol.md, "The black box"): the
// memfd the producer passed on its Unix connection, checked, and a descriptor of the producer
// that says when it has died: the only time the region is read. The memfd is never mapped: it is
// read with pread(2) (blackbox::FdSource), so that the pages the producer never wrote are not
// allocated and charged to the collector's memory cgroup (region_source.h).
//
// What is accepted: a memfd on tmpfs (not hugetlbfs), sealed against shrinking (so that the
// size its header was checked against holds while it is read), of kHeaderBytes to
// blackbox::kMaxRegionBytes, whose header is a black box of this layout version; and a producer
// whose end can be learnt.
//
// Design notes
// 1. How the producer's end is learnt, best first (ProducerEndSources; what each kernel has):
//    a. SO_PEERPIDFD (Linux 6.5): the kernel's pidfd of the process that connected, in any pid
//       namespace.
//    b. pidfd_open(2) of the SO_PEERCRED pid (Linux 5.3), when this collector's pid namespace
//       shows the producer (a collector on the host: systemd).
//    c. The pidfd the producer passed of itself after the memfd (Linux 5.3): a collector in a pid
//       namespace of its own (a Kubernetes DaemonSet) on 5.3 to 6.4 (Ubuntu 22.04's 5.15,
//       RHEL 9's 5.14). It is checked to be a pidfd (pidfd_send_signal(2) with signal 0 answers
//       EBADF for any other descriptor).
//    d. The /proc/<pid> directory the producer passed of itself (any kernel: RHEL 8's 4.18,
//       where no pidfd exists): checked to be a directory on procfs; not pollable, so the
//       collector asks it on its tick (ProducerGone: the directory's `stat` cannot be opened once
//       the process is reaped, and says state Z or X while it is a zombie).
//    The producer's own descriptors (c, d) are its word, not the kernel's: a forged one can only
//    make its own black box be read early (a region still being written: its own events,
//    validated like any line) or not at all. The descriptors of a and b are the kernel's.
// 2. A source not used is closed at once: a box holds one descriptor of its producer.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_BLACKBOX_H_
#define CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_BLACKBOX_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace cuflight::collector {

// The sources of design note 1 the collector may use. All by default; tests turn some off to run
// an older kernel's path on any kernel.
struct ProducerEndSources {
  bool peer_pidfd = true;       // a. SO_PEERPIDFD
  bool pidfd_of_peer = true;    // b. pidfd_open of the SO_PEERCRED pid
  bool passed_pidfd = true;     // c. the producer's pidfd of itself
  bool passed_proc_dir = true;  // d. the producer's /proc directory
};

class ProducerBlackbox {
 public:
  // Takes ownership of `fd` and of `passed_end` (the descriptor the producer passed after it, or
  // -1; closed when not used, design note 2): both closed when refused. `socket`: the
  // connection it came on (for SO_PEERPIDFD); `peer_pid`: its SO_PEERCRED pid (0 when this pid
  // namespace does not show it). Returns nullptr when refused, with *reason a metrics label
  // ("not_memfd", "not_sealed", "too_small", "too_large", "no_pidfd", or a
  // blackbox::RegionErrorName) and *why a sentence for the log.
  static std::unique_ptr<ProducerBlackbox> Adopt(int fd, int passed_end, int socket, pid_t peer_pid,
                                                 const ProducerEndSources& sources,
                                                 std::string_view* reason, std::string* why);
  ~ProducerBlackbox();
  ProducerBlackbox(const ProducerBlackbox&) = delete;
  ProducerBlackbox& operator=(const ProducerBlackbox&) = delete;

  // The memfd (read it with blackbox::FdSource) and its size.
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  // A pidfd, readable (EPOLLIN) once the producer has exited; -1 when the end is learnt from a
  // /proc directory, which only ProducerGone can ask (the caller asks it on a timer).
  int pidfd() const { return proc_dir_ ? -1 : end_fd_; }
  // Which source of design note 1 it uses: "peer_pidfd", "pidfd_open", "passed_pidfd",
  // "passed_proc_dir".
  std::string_view end_source() const { return end_source_; }
  // True when the producer has exited; does not wait.
  bool ProducerGone() const;

 private:
  ProducerBlackbox(int fd, int end_fd, bool proc_dir, std::string_view end_source, uint64_t size)
      : fd_(fd), end_fd_(end_fd), proc_dir_(proc_dir), end_source_(end_source), size_(size) {}

  const int fd_;
  const int end_fd_;
  const bool proc_dir_;
  const std::string_view end_source_;
  const uint64_t size_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_BLACKBOX_H_
