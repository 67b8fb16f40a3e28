#include "test_collector.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "cuflight/schema/ack.h"

namespace cuflight::inject::testing {

std::string TempSocketPath(const std::string& tag) {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  return dir + "/cfi-" + std::to_string(getpid()) + "-" + tag + "-" +
         std::to_string(counter.fetch_add(1)) + ".sock";
}

TestCollector::TestCollector(std::string path) : path_(std::move(path)) {
  unlink(path_.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 16) != 0) {
    std::perror("TestCollector bind/listen");
    std::abort();
  }
  if (pipe2(wake_, O_CLOEXEC) != 0) std::abort();
  thread_ = std::thread([this] { Run(); });
}

TestCollector::~TestCollector() {
  const char c = 'x';
  (void)!write(wake_[1], &c, 1);
  thread_.join();
  close(listen_fd_);
  close(wake_[0]);
  close(wake_[1]);
  unlink(path_.c_str());
}

void TestCollector::Run() {
  struct Conn {
    int fd;
    std::string pending;
  };
  std::vector<Conn> conns;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const Conn& c : conns) fds.push_back({c.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 1000);
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) conns.push_back({fd, {}});
    }
    for (size_t i = 0; i < conns.size();) {
      Conn& c = conns[i];
      char buf[65536];
      const ssize_t n = (fds.size() > i + 2 && fds[i + 2].revents) ? read(c.fd, buf, sizeof(buf)) : -2;
      if (n == -2 || (n < 0 && errno == EAGAIN)) {
        ++i;
        continue;
      }
      if (n <= 0) {
        close(c.fd);
        conns.erase(conns.begin() + static_cast<long>(i));
        continue;
      }
      c.pending.append(buf, static_cast<size_t>(n));
      uint64_t highest = 0;
      bool any = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        size_t start = 0;
        for (size_t nl; (nl = c.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
          std::string line = c.pending.substr(start, nl - start);
          const size_t at = line.find("\"seq\":");
          if (at != std::string::npos) {
            highest = std::max<uint64_t>(highest, std::strtoull(line.c_str() + at + 6, nullptr, 10));
            any = true;
          }
          lines_.push_back(std::move(line));
        }
        c.pending.erase(0, start);
      }
      cv_.notify_all();
      if (any) {
        char ack[schema::kMaxAckLineBytes];
        const size_t len = schema::EncodeAck(highest, ack, sizeof(ack));
        (void)!send(c.fd, ack, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      ++i;
    }
  }
  for (const Conn& c : conns) close(c.fd);
}

std::vector<std::string> TestCollector::Lines() {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

bool TestCollector::WaitFor(const std::function<bool(const std::vector<std::string>&)>& predicate,
                            std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return predicate(lines_); });
}

}  // namespace cuflight::inject::testing
