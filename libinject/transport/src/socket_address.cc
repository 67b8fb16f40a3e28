#include "socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cuflight::transport::internal {
namespace {

constexpr std::string_view kTcpPrefix = "tcp:";

// inet_pton wants a NUL-terminated string; numeric hosts are short.
bool CopyHost(std::string_view host, char* buf, size_t cap) {
  if (host.empty() || host.size() >= cap) return false;
  std::memcpy(buf, host.data(), host.size());
  buf[host.size()] = '\0';
  return true;
}

bool ParseTcp(std::string_view rest, SocketAddress* out) {
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string_view host = rest.substr(0, colon);
  const std::string_view port_text = rest.substr(colon + 1);
  uint16_t port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0) return false;

  char buf[INET6_ADDRSTRLEN + 1];
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out->storage);
    if (!CopyHost(host.substr(1, host.size() - 2), buf, sizeof(buf)) ||
        inet_pton(AF_INET6, buf, &sin6->sin6_addr) != 1) {
      return false;
    }
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    out->len = sizeof(sockaddr_in6);
    return true;
  }
  if (host == "localhost") host = "127.0.0.1";
  auto* sin = reinterpret_cast<sockaddr_in*>(&out->storage);
  if (!CopyHost(host, buf, sizeof(buf)) || inet_pton(AF_INET, buf, &sin->sin_addr) != 1) {
    return false;
  }
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  out->len = sizeof(sockaddr_in);
  return true;
}

}  // namespace

bool ParseSocketAddress(std::string_view spec, SocketAddress* out) noexcept {
  *out = SocketAddress{};
  if (spec.substr(0, kTcpPrefix.size()) == kTcpPrefix) {
    if (!ParseTcp(spec.substr(kTcpPrefix.size()), out)) *out = SocketAddress{};
    return out->valid();
  }
  auto* sun = reinterpret_cast<sockaddr_un*>(&out->storage);
  if (spec.empty() || spec.size() >= sizeof(sun->sun_path) ||
      spec.find('\0') != std::string_view::npos) {
    return false;
  }
  sun->sun_family = AF_UNIX;
  std::memcpy(sun->sun_path, spec.data(), spec.size());
  sun->sun_path[spec.size()] = '\0';
  out->len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + spec.size() + 1);
  return true;
}

int StartConnect(const SocketAddress& addr, bool* in_progress) noexcept {
  *in_progress = false;
  if (!addr.valid()) {
    errno = EINVAL;
    return -1;
  }
  const int fd = socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (addr.family() != AF_UNIX) {
    // The sender batches its own writes; Nagle would only add latency to acks' round trip.
    const int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) == 0) return fd;
  const int err = errno;
  if (addr.family() != AF_UNIX && (err == EINPROGRESS || err == EINTR)) {
    *in_progress = true;
    return fd;
  }
  close(fd);
  errno = err;
  return -1;
}

int FinishConnect(int fd) noexcept {
  pollfd p{fd, POLLOUT, 0};
  const int n = poll(&p, 1, 0);
  if (n < 0) return errno == EINTR ? EINPROGRESS : errno;
  if (n == 0) return EINPROGRESS;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

}  // namespace cuflight::transport::internal
