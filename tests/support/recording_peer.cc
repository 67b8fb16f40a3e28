#include "recording_peer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

namespace cuflight::test_support {
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

RecordingPeer::RecordingPeer(std::string path, std::string upstream)
    : path_(std::move(path)), upstream_(std::move(upstream)) {
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

RecordingPeer::RecordingPeer(TcpTag, std::string upstream) : upstream_(std::move(upstream)) {
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

int RecordingPeer::ConnectUpstream() {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (upstream_.size() >= sizeof(addr.sun_path)) throw std::runtime_error("upstream path too long");
  std::memcpy(addr.sun_path, upstream_.c_str(), upstream_.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);  // no collector there: this connection is recorded, not relayed
    return -1;
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) Fail("fcntl");
  return fd;
}

void RecordingPeer::Start(int listen_fd) {
  listen_fd_ = listen_fd;
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) Fail("eventfd");
  thread_ = std::thread([this] { Run(); });
}

RecordingPeer::~RecordingPeer() { Kill(); }

void RecordingPeer::Kill() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (killed_) return;
    killed_ = true;
    stop_ = true;
  }
  Wake();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : conns_) {
    if (c->fd >= 0) close(c->fd);
    // Abruptly: what was read from the producer and not yet relayed is lost.
    if (c->up >= 0) close(c->up);
    c->fd = c->up = -1;
    c->info.open = false;
  }
  close(listen_fd_);
  close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
  if (!path_.empty()) unlink(path_.c_str());
}

void RecordingPeer::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void RecordingPeer::SetReadChunk(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  read_chunk_ = bytes;
}

void RecordingPeer::SetPaused(bool paused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = paused;
  }
  Wake();
}

void RecordingPeer::SendRaw(size_t index, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
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

void RecordingPeer::ShutdownRead(size_t index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index >= conns_.size() || conns_[index]->fd < 0) throw std::runtime_error("no connection");
    if (shutdown(conns_[index]->fd, SHUT_RD) != 0) Fail("shutdown");
    conns_[index]->read_shut = true;
  }
  Wake();
}

std::vector<RecordingPeer::Connection> RecordingPeer::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Connection> out;
  for (const auto& c : conns_) out.push_back(c->info);
  return out;
}

size_t RecordingPeer::connection_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return conns_.size();
}

size_t RecordingPeer::received(size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index < conns_.size() ? conns_[index]->info.seqs.size() : 0;
}

int64_t RecordingPeer::last_seq(size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (index >= conns_.size() || conns_[index]->info.seqs.empty()) return -1;
  return static_cast<int64_t>(conns_[index]->info.seqs.back());
}

void RecordingPeer::Run() {
  struct Polled {
    Conn* conn;
    bool upstream;  // the connection's relay to the collector, not the producer's socket
  };
  std::vector<pollfd> fds;
  std::vector<Polled> polled;
  for (;;) {
    fds.clear();
    polled.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      fds.push_back({wake_fd_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& c : conns_) {
        if (!paused_ && c->fd >= 0 && !c->read_shut) {
          fds.push_back({c->fd, POLLIN, 0});
          polled.push_back({c.get(), false});
        }
        if (c->up >= 0) {
          fds.push_back({c->up, static_cast<short>(POLLIN | (c->up_out.empty() ? 0 : POLLOUT)), 0});
          polled.push_back({c.get(), true});
        }
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      Fail("poll");
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    if (fds[0].revents != 0) {
      uint64_t v;
      (void)!read(wake_fd_, &v, sizeof(v));
    }
    if (fds[1].revents != 0) AcceptAll();
    for (size_t i = 0; i < polled.size(); ++i) {
      Conn& c = *polled[i].conn;
      if (fds[i + 2].revents == 0) continue;
      if (polled[i].upstream) {
        if (c.up >= 0) RelayFromCollector(c);
        continue;
      }
      if (paused_ || c.fd < 0 || c.read_shut) continue;
      if (!ReadOnce(c)) {
        close(c.fd);
        c.fd = -1;
        c.info.open = false;
        CloseUpstream(c);
      }
    }
  }
}

void RecordingPeer::FlushUpstream(Conn& c) {
  while (c.up >= 0 && !c.up_out.empty()) {
    const ssize_t n = send(c.up, c.up_out.data(), c.up_out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // the rest when the collector reads (POLLOUT)
    if (n < 0) {
      close(c.up);
      c.up = -1;
      return;
    }
    c.up_out.erase(0, static_cast<size_t>(n));
  }
}

void RecordingPeer::RelayFromCollector(Conn& c) {
  FlushUpstream(c);
  if (c.up < 0) return;
  char buf[4096];
  const ssize_t n = recv(c.up, buf, sizeof(buf), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {  // the collector closed the connection
    close(c.up);
    c.up = -1;
    return;
  }
  if (hold_acks_ || c.fd < 0) return;  // held acks are dropped: later ones cover them
  // Acks are small and the producer reads continuously; a full buffer only loses this ack,
  // which a later one covers (as with the collector's own).
  (void)send(c.fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void RecordingPeer::CloseUpstream(Conn& c) {
  if (c.up < 0) return;
  // What the producer sent before it closed still reaches the collector.
  const int flags = fcntl(c.up, F_GETFL);
  if (flags >= 0) (void)fcntl(c.up, F_SETFL, flags & ~O_NONBLOCK);
  while (!c.up_out.empty()) {
    const ssize_t n = send(c.up, c.up_out.data(), c.up_out.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    c.up_out.erase(0, static_cast<size_t>(n));
  }
  close(c.up);
  c.up = -1;
}

void RecordingPeer::SetHoldAcks(bool hold) {
  std::lock_guard<std::mutex> lock(mu_);
  hold_acks_ = hold;
}

void RecordingPeer::AcceptAll() {
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

namespace {

// The "Pid:" line of a pidfd's /proc/self/fdinfo entry (Documentation/filesystems/proc.rst,
// "pidfd"); 0 for a descriptor without one.
int64_t PidfdPid(int fd) {
  const std::string path = "/proc/self/fdinfo/" + std::to_string(fd);
  const int info = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (info < 0) return 0;
  char buf[1024];
  const ssize_t n = read(info, buf, sizeof(buf) - 1);
  close(info);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* at = std::strstr(buf, "\nPid:");
  return at != nullptr ? std::strtoll(at + 5, nullptr, 10) : 0;
}

}  // namespace

bool RecordingPeer::ReadOnce(Conn& c) {
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
      passed.pidfd_pid = PidfdPid(fd);
      c.info.passed.push_back(passed);
      close(fd);
    }
  }
  c.info.bytes += static_cast<uint64_t>(n);
  c.partial.append(buf.data(), static_cast<size_t>(n));
  if (!upstream_.empty() && !c.up_opened) {
    // Opened with the first bytes to relay: the collector's handshake timeout does not run
    // while this peer holds the producer's bytes unread.
    c.up = ConnectUpstream();
    c.up_opened = true;
  }
  if (c.up >= 0) {
    c.up_out.append(buf.data(), static_cast<size_t>(n));
    FlushUpstream(c);
  }
  size_t start = 0;
  for (size_t nl; (nl = c.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = c.partial.substr(start, nl + 1 - start);
    const std::optional<uint64_t> seq = SeqOf(line);
    if (!seq) throw std::runtime_error("line without seq: " + line);
    c.info.seqs.push_back(*seq);
    c.info.lines.push_back(std::move(line));
  }
  c.partial.erase(0, start);
  return true;
}

}  // namespace cuflight::test_support
