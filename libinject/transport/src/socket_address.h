// Where the collector listens, parsed once, and the non-blocking connect to it.
//
// Accepted forms: a Unix socket path ("/run/user/1000/cuflight/collector.sock"), or
// "tcp:HOST:PORT" with HOST a numeric IPv4 address, a bracketed numeric IPv6 address
// ("tcp:[::1]:9000") or "localhost" (127.0.0.1). Names are not resolved: resolving can block,
// and these calls never do.
#ifndef CUFLIGHT_TRANSPORT_SRC_SOCKET_ADDRESS_H_
#define CUFLIGHT_TRANSPORT_SRC_SOCKET_ADDRESS_H_

#include <sys/socket.h>

#include <string_view>

namespace cuflight::transport::internal {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t len = 0;  // 0: not a valid address
  bool valid() const noexcept { return len != 0; }
  int family() const noexcept { return storage.ss_family; }
};

// Parses `spec`. Returns false (and leaves *out invalid) for an empty spec, a Unix path that does
// not fit in sockaddr_un (107 bytes), a path with a NUL byte, or a malformed tcp: form.
bool ParseSocketAddress(std::string_view spec, SocketAddress* out) noexcept;

// Opens a SOCK_STREAM socket with SOCK_NONBLOCK | SOCK_CLOEXEC and starts connecting to `addr`.
// Returns the fd, with *in_progress set when the connection is still being made (TCP:
// EINPROGRESS; finish it with FinishConnect once the fd is writable). Returns -1 with errno set on
// failure (ENOENT, ECONNREFUSED, EAGAIN for a full Unix backlog, ...); the fd is then closed.
int StartConnect(const SocketAddress& addr, bool* in_progress) noexcept;

// For a connect that was in progress: 0 once connected, EINPROGRESS while still pending, or the
// error that ended it. Never blocks.
int FinishConnect(int fd) noexcept;

}  // namespace cuflight::transport::internal

#endif  // CUFLIGHT_TRANSPORT_SRC_SOCKET_ADDRESS_H_
