// The collector's listening sockets.
//
// 1. Unix socket: it lives in a directory only its owner can write (created 0700 when missing;
//    an existing one must be a real directory owned by the collector's user, not writable by
//    group or others), so nobody else can replace the socket between the checks below and
//    bind(2). The socket file is created 0600: only the collector's user (and root) may connect.
//    With a socket group it is 0660 with that group, directories created for it are 0710 with
//    that group, and an existing directory must let the group search it (the collector also
//    checks each peer's groups when it accepts: collector.cc).
// 2. An existing file at the socket path is removed only if it is a socket owned by this user
//    that nobody listens on (connect(2) is refused: a collector that died left it). A live socket,
//    another user's file or a non-socket is refused.
// 3. TCP: IPv4 or IPv6, loopback addresses only unless remote addresses are explicitly allowed.
// All descriptors are non-blocking and close-on-exec.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_LISTEN_SOCKETS_H_
#define CUFLIGHT_COLLECTOR_DAEMON_LISTEN_SOCKETS_H_

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

#include "collector_options.h"

namespace cuflight::collector {

// Why a listener could not be opened: one line naming the flag, and whether the value itself is
// unacceptable (exit status 2) or the environment prevented it (exit status 1).
struct ListenError {
  bool bad_value = false;
  std::string line;
};

class UnixListener {
 public:
  UnixListener() = default;
  ~UnixListener();
  UnixListener(UnixListener&& other) noexcept;
  UnixListener& operator=(UnixListener&& other) noexcept;
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  // Binds and listens at `path` as described above; `group`: the socket group (--socket-group),
  // of which the collector's user must be a member (or root). On failure returns an invalid
  // listener (fd() < 0) and fills *error.
  static UnixListener Open(const std::filesystem::path& path, ListenError* error,
                           std::optional<gid_t> group = std::nullopt);

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }

  // Closes the socket and unlinks the path if it is still the file this listener created (same
  // device and inode), never a file someone put there since. Idempotent.
  void Close();

 private:
  int fd_ = -1;
  std::filesystem::path path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

class TcpListener {
 public:
  TcpListener() = default;
  ~TcpListener();
  TcpListener(TcpListener&& other) noexcept;
  TcpListener& operator=(TcpListener&& other) noexcept;
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // Resolves `where.host` (numeric or a name) and listens on its first address. A non-loopback
  // address without `allow_remote` is a bad value. `flag` names the setting in error lines.
  static TcpListener Open(const HostPort& where, bool allow_remote, const char* flag,
                          ListenError* error);

  int fd() const { return fd_; }
  int port() const { return port_; }  // the bound port (the kernel's choice for port 0)
  void Close();

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_LISTEN_SOCKETS_H_
