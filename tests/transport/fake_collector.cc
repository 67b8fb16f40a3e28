#include "fake_collector.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include "cuflight/schema/ack.h"

namespace cuflight::transport::testing {
namespace {

[[noreturn]] void Fail(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

std::optional<uint64_t> SeqOf(std::string_view line) {
  constexpr std::string_view kKey = "\"seq\":";
  const size_t at = line.find(kKey);
  if (at == std::string_view::npos) return std::nullopt;
  const char* begin = line.data() + at + kKey.size();
  uint64_t seq = 0;
  auto [end, ec] = std::from_chars(begin, line.data() + line.size(), seq);
  if (ec != std::errc() || end == begin) return std::nullopt;
  return seq;
}

}  // namespace

FakeCollector::FakeCollector(std::string path, std::shared_ptr<Store> store)
    : path_(std::move(path)), store_(std::move(store)) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof(addr.sun_path)) throw std::runtime_error("socket path too long");
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  unlink(path_.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Fail("bind");
  if (listen(fd, 64) != 0) Fail("listen");
  Start(fd);
}

FakeCollector::FakeCollector(std::shared_ptr<Store> store) : store_(std::move(store)) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Fail("bind");
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) Fail("getsockname");
  port_ = ntohs(addr.sin_port);
  if (listen(fd, 64) != 0) Fail("listen");
  Start(fd);
}

void FakeCollector::Start(int listen_fd) {
  listen_fd_ = listen_fd;
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) Fail("eventfd");
  thread_ = std::thread([this] { Run(); });
}

FakeCollector::~FakeCollector() { Kill(); }

void FakeCollector::Kill() {
  {
    std::lock_guard<std::mutex> lock(store_->mu);
    if (killed_) return;
    killed_ = true;
    stop_ = true;
  }
  Wake();
  thread_.join();
  std::lock_guard<std::mutex> lock(store_->mu);
  for (auto& c : conns_) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->info.open = false;
  }
  close(listen_fd_);
  close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
  if (!path_.empty()) unlink(path_.c_str());
}

void FakeCollector::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void FakeCollector::SetAckMode(AckMode mode) {
  std::lock_guard<std::mutex> lock(store_->mu);
  ack_mode_ = mode;
}

void FakeCollector::SetReadChunk(size_t bytes) {
  std::lock_guard<std::mutex> lock(store_->mu);
  read_chunk_ = bytes;
}

void FakeCollector::SetPaused(bool paused) {
  {
    std::lock_guard<std::mutex> lock(store_->mu);
    paused_ = paused;
  }
  Wake();
}

void FakeCollector::SendRaw(size_t index, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(store_->mu);
  if (index >= conns_.size() || conns_[index]->fd < 0) throw std::runtime_error("no connection");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        send(conns_[index]->fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("send");
    done += static_cast<size_t>(n);
  }
}

void FakeCollector::ShutdownRead(size_t index) {
  {
    std::lock_guard<std::mutex> lock(store_->mu);
    if (index >= conns_.size() || conns_[index]->fd < 0) throw std::runtime_error("no connection");
    if (shutdown(conns_[index]->fd, SHUT_RD) != 0) Fail("shutdown");
    conns_[index]->read_shut = true;
  }
  Wake();
}

std::vector<FakeCollector::Connection> FakeCollector::connections() const {
  std::lock_guard<std::mutex> lock(store_->mu);
  std::vector<Connection> out;
  for (const auto& c : conns_) out.push_back(c->info);
  return out;
}

size_t FakeCollector::connection_count() const {
  std::lock_guard<std::mutex> lock(store_->mu);
  return conns_.size();
}

size_t FakeCollector::received(size_t index) const {
  std::lock_guard<std::mutex> lock(store_->mu);
  return index < conns_.size() ? conns_[index]->info.seqs.size() : 0;
}

int64_t FakeCollector::last_seq(size_t index) const {
  std::lock_guard<std::mutex> lock(store_->mu);
  if (index >= conns_.size() || conns_[index]->info.seqs.empty()) return -1;
  return static_cast<int64_t>(conns_[index]->info.seqs.back());
}

void FakeCollector::Run() {
  std::vector<pollfd> fds;
  std::vector<Conn*> polled;
  for (;;) {
    fds.clear();
    polled.clear();
    {
      std::lock_guard<std::mutex> lock(store_->mu);
      if (stop_) return;
      fds.push_back({wake_fd_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      if (!paused_) {
        for (auto& c : conns_) {
          if (c->fd < 0 || c->read_shut) continue;
          fds.push_back({c->fd, POLLIN, 0});
          polled.push_back(c.get());
        }
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      Fail("poll");
    }
    std::lock_guard<std::mutex> lock(store_->mu);
    if (stop_) return;
    if (fds[0].revents != 0) {
      uint64_t v;
      (void)!read(wake_fd_, &v, sizeof(v));
    }
    if (fds[1].revents != 0) AcceptAll();
    if (paused_) continue;
    for (size_t i = 0; i < polled.size(); ++i) {
      Conn& c = *polled[i];
      if (fds[i + 2].revents == 0 || c.fd < 0 || c.read_shut) continue;
      if (!ReadOnce(c)) {
        close(c.fd);
        c.fd = -1;
        c.info.open = false;
      }
    }
  }
}

void FakeCollector::AcceptAll() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (path_.empty() || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) cred.pid = 0;
    c->info.pid = cred.pid;
    conns_.push_back(std::move(c));
  }
}

bool FakeCollector::ReadOnce(Conn& c) {
  std::string buf(read_chunk_, '\0');
  // Descriptors passed with SCM_RIGHTS (a producer's black box): each is described, then closed.
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(c.fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) return false;
  for (cmsghdr* h = CMSG_FIRSTHDR(&msg); h != nullptr; h = CMSG_NXTHDR(&msg, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
      struct stat st {};
      PassedFd passed;
      passed.at_byte = c.info.bytes;
      if (fstat(fd, &st) == 0) {
        passed.dev = st.st_dev;
        passed.ino = st.st_ino;
      }
      c.info.passed.push_back(passed);
      close(fd);
    }
  }
  c.info.bytes += static_cast<uint64_t>(n);
  c.partial.append(buf.data(), static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl; (nl = c.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    HandleLine(c, c.partial.substr(start, nl + 1 - start));
  }
  c.partial.erase(0, start);
  auto it = store_->highest.find(c.info.pid);
  if (ack_mode_ == AckMode::kAuto && it != store_->highest.end()) {
    char ack[schema::kMaxAckLineBytes];
    const size_t len = schema::EncodeAck(it->second, ack, sizeof(ack));
    // The ack is small and the sender reads continuously; a full buffer only loses this ack,
    // which a later one covers.
    (void)send(c.fd, ack, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  return true;
}

void FakeCollector::HandleLine(Conn& c, std::string line) {
  const std::optional<uint64_t> seq = SeqOf(line);
  if (!seq) throw std::runtime_error("line without seq: " + line);
  c.info.seqs.push_back(*seq);
  c.info.lines.push_back(line);
  auto it = store_->highest.find(c.info.pid);
  if (it != store_->highest.end() && *seq <= it->second) {
    ++store_->duplicates;
    return;
  }
  store_->highest[c.info.pid] = *seq;
  store_->stored[c.info.pid].push_back(*seq);
  store_->stored_lines[c.info.pid].push_back(std::move(line));
}

}  // namespace cuflight::transport::testing
