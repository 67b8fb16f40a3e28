// Owns a file descriptor: closes it on destruction. Never throws.
#ifndef CUFLIGHT_BASE_SCOPED_FD_H_
#define CUFLIGHT_BASE_SCOPED_FD_H_

#include <unistd.h>

#include <utility>

namespace cuflight::base {

class ScopedFd {
 public:
  // `fd` may be negative (a failed open): then there is nothing to close.
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { Close(); }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  int Get() const { return fd_; }

  // Closes now; false if close(2) reported an error (a delayed write error on some filesystems).
  bool Close() {
    if (fd_ < 0) return true;
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0;
  }

  // Gives the descriptor up to the caller, who closes it; this one holds none after.
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace cuflight::base

#endif  // CUFLIGHT_BASE_SCOPED_FD_H_
