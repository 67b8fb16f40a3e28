#include "blackbox_producer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace cuflight::collector::testing {

pid_t SpawnProducer(const std::filesystem::path& socket, const std::string& bytes,
                    std::vector<int> fds, End end, Self self) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  if (self != Self::kNothing) fds.push_back(-1);  // its place, filled in the child
  const size_t fd_bytes = std::min<size_t>(fds.size(), 4) * sizeof(int);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // The child: system calls only (the parent has threads).
  if (self == Self::kPidfd) {
    fds.back() = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
  } else if (self == Self::kProcDir) {
    fds.back() = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
  }
  if (self != Self::kNothing && fds.back() < 0) _exit(3);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(1);
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd_bytes > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(fd_bytes);
    auto* c = reinterpret_cast<cmsghdr*>(control);  // the first header starts the buffer
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fd_bytes);
    std::memcpy(CMSG_DATA(c), fds.data(), fd_bytes);
  }
  // A Unix socket takes it all at once (far below its buffer).
  if (sendmsg(fd, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) _exit(2);
  if (end == End::kKill) raise(SIGKILL);
  if (end == End::kLinger) close(fd);
  for (;;) pause();
}

void Reap(pid_t pid, bool kill_first) {
  if (kill_first) kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

}  // namespace cuflight::collector::testing
