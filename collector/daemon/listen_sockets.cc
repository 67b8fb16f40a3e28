#include "listen_sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "cuflight/base/scoped_fd.h"

namespace cuflight::collector {
namespace {

std::string Errno(int err) { return std::strerror(err); }  // NOLINT(concurrency-mt-unsafe)

ListenError Bad(std::string line) { return ListenError{true, std::move(line)}; }
ListenError Failed(std::string line) { return ListenError{false, std::move(line)}; }

bool FillSockaddr(const std::filesystem::path& path, sockaddr_un* addr) {
  const std::string& text = path.native();
  if (text.empty() || text.size() >= sizeof(addr->sun_path)) return false;
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path, text.data(), text.size());
  return true;
}

constexpr const char* kGroupMemberHint =
    " (the collector's user must be a member of that group, or root)";

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Creates `dir` and its missing parents, each 0700; with a socket group, each 0710 with that
// group (search only: members reach the socket, nobody else lists or writes the directory).
bool MakeDirectories(const std::filesystem::path& dir, std::optional<gid_t> group,
                     std::string* why) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) == 0) return true;
  if (errno != ENOENT) {
    *why = "cannot inspect " + dir.string() + ": " + Errno(errno);
    return false;
  }
  if (dir.has_parent_path() && dir.parent_path() != dir &&
      !MakeDirectories(dir.parent_path(), group, why)) {
    return false;
  }
  if (mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST) return true;  // made by someone else meanwhile: checked by the caller
    *why = "cannot create directory " + dir.string() + ": " + Errno(errno);
    return false;
  }
  if (group && (lchown(dir.c_str(), static_cast<uid_t>(-1), *group) != 0 ||
                chmod(dir.c_str(), 0710) != 0)) {
    *why = "cannot give directory " + dir.string() + " to group " + std::to_string(*group) +
           ": " + Errno(errno) + kGroupMemberHint;
    return false;
  }
  return true;
}

// Whether something accepts connections at `addr`: a refused connection means a stale socket.
// A connection that is accepted, or pending because the backlog is full, means a live one.
bool SomeoneListens(const sockaddr_un& addr, int* connect_errno) {
  base::ScopedFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (probe.Get() < 0) {
    *connect_errno = errno;
    return true;  // cannot tell: treat as live, never remove
  }
  if (connect(probe.Get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    return true;
  }
  *connect_errno = errno;
  return errno != ECONNREFUSED;
}

bool IsLoopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

std::string AddressText(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST] = {};
  if (getnameinfo(addr, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

}  // namespace

UnixListener::~UnixListener() { Close(); }

UnixListener::UnixListener(UnixListener&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      dev_(other.dev_),
      ino_(other.ino_) {}

UnixListener& UnixListener::operator=(UnixListener&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    dev_ = other.dev_;
    ino_ = other.ino_;
  }
  return *this;
}

UnixListener UnixListener::Open(const std::filesystem::path& path, ListenError* error,
                                std::optional<gid_t> group) {
  UnixListener listener;
  sockaddr_un addr{};
  if (!FillSockaddr(path, &addr)) {
    *error = Bad("--socket: " + path.string() + " is not a usable Unix socket path");
    return listener;
  }
  const std::filesystem::path dir =
      path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string why;
  if (!MakeDirectories(dir, group, &why)) {
    *error = Failed("--socket: " + why);
    return listener;
  }
  struct stat dir_stat {};
  if (lstat(dir.c_str(), &dir_stat) != 0) {
    *error = Failed("--socket: cannot inspect " + dir.string() + ": " + Errno(errno));
    return listener;
  }
  if (!S_ISDIR(dir_stat.st_mode)) {
    *error = Bad("--socket: " + dir.string() + " is not a directory (a symbolic link is refused)");
    return listener;
  }
  if (dir_stat.st_uid != geteuid()) {
    // Also the default /tmp/cuflight-<uid> created first by another user to receive this user's
    // producers' events: never listen there (producers refuse it too).
    *error = Bad("--socket: directory " + dir.string() + " is owned by uid " +
                 std::to_string(dir_stat.st_uid) + ", not by this user (uid " +
                 std::to_string(geteuid()) +
                 "); someone else made it, maybe to receive this user's events: remove it, or "
                 "choose another path (--socket, XDG_RUNTIME_DIR)");
    return listener;
  }
  if ((dir_stat.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    *error = Bad("--socket: directory " + dir.string() +
                 " is writable by group or others; use a directory only its owner can write");
    return listener;
  }
  const bool group_may_search = group && ((dir_stat.st_gid == *group &&
                                           (dir_stat.st_mode & S_IXGRP) != 0) ||
                                          (dir_stat.st_mode & S_IXOTH) != 0);
  if (group && !group_may_search) {
    *error = Failed("--socket-group: members of group " + std::to_string(*group) +
                    " cannot reach the socket: its directory " + dir.string() + " (mode " +
                    Octal(dir_stat.st_mode) + ", group " + std::to_string(dir_stat.st_gid) +
                    ") does not let them search it; give the directory that group with g+x "
                    "(chgrp, chmod 0750; systemd: Group= and RuntimeDirectoryMode=0750)");
    return listener;
  }

  struct stat existing {};
  if (lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      *error = Bad("--socket: " + path.string() + " exists and is not a socket");
      return listener;
    }
    if (existing.st_uid != geteuid()) {
      *error = Bad("--socket: " + path.string() + " is owned by uid " +
                   std::to_string(existing.st_uid) + ", not by this user");
      return listener;
    }
    int connect_errno = 0;
    if (SomeoneListens(addr, &connect_errno)) {
      *error = Failed("--socket: another collector is listening on " + path.string() +
                      (connect_errno != 0 ? " (" + Errno(connect_errno) + ")" : ""));
      return listener;
    }
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      *error =
          Failed("--socket: cannot remove the stale socket " + path.string() + ": " + Errno(errno));
      return listener;
    }
  } else if (errno != ENOENT) {
    *error = Failed("--socket: cannot inspect " + path.string() + ": " + Errno(errno));
    return listener;
  }

  base::ScopedFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.Get() < 0) {
    *error = Failed("--socket: socket(): " + Errno(errno));
    return listener;
  }
  // bind(2) creates the file with the umask applied: create it 0600, then (with a socket group)
  // give it the group and widen it to 0660, so there is no moment where others may connect.
  const mode_t old_mask = umask(0177);
  const int bound = bind(fd.Get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  umask(old_mask);
  if (bound != 0) {
    *error = Failed("--socket: cannot bind " + path.string() + ": " + Errno(bind_errno));
    return listener;
  }
  if (group && lchown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    *error = Failed("--socket-group: cannot give the socket " + path.string() + " to group " +
                    std::to_string(*group) + ": " + Errno(errno) + kGroupMemberHint);
    unlink(path.c_str());
    return listener;
  }
  struct stat created {};
  if (chmod(path.c_str(), group ? 0660 : 0600) != 0 || lstat(path.c_str(), &created) != 0) {
    *error = Failed("--socket: cannot set the mode of " + path.string() + ": " + Errno(errno));
    unlink(path.c_str());
    return listener;
  }
  if (listen(fd.Get(), SOMAXCONN) != 0) {
    *error = Failed("--socket: cannot listen on " + path.string() + ": " + Errno(errno));
    unlink(path.c_str());
    return listener;
  }
  listener.fd_ = fd.Release();
  listener.path_ = path;
  listener.dev_ = created.st_dev;
  listener.ino_ = created.st_ino;
  return listener;
}

void UnixListener::Close() {
  if (fd_ < 0) return;
  struct stat st {};
  if (lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    unlink(path_.c_str());
  }
  close(fd_);
  fd_ = -1;
}

TcpListener::~TcpListener() { Close(); }

TcpListener::TcpListener(TcpListener&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}

TcpListener& TcpListener::operator=(TcpListener&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

TcpListener TcpListener::Open(const HostPort& where, bool allow_remote, const char* flag,
                              ListenError* error) {
  TcpListener listener;
  const std::string prefix = std::string(flag) + ": ";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(where.port);
  const int rc = getaddrinfo(where.host.c_str(), port_text.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    *error = Bad(prefix + "cannot resolve '" + where.host + "': " + gai_strerror(rc));
    return listener;
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(found, freeaddrinfo);
  if (!allow_remote && !IsLoopback(found->ai_addr)) {
    *error = Bad(prefix + AddressText(found->ai_addr, found->ai_addrlen) +
                 " is not a loopback address; add --tcp-allow-remote to accept producers on it");
    return listener;
  }
  base::ScopedFd fd(socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.Get() < 0) {
    *error = Failed(prefix + "socket(): " + Errno(errno));
    return listener;
  }
  const int one = 1;
  setsockopt(fd.Get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.Get(), found->ai_addr, found->ai_addrlen) != 0) {
    *error = Failed(prefix + "cannot bind " + where.host + ":" + port_text + ": " + Errno(errno));
    return listener;
  }
  if (listen(fd.Get(), SOMAXCONN) != 0) {
    *error = Failed(prefix + "cannot listen: " + Errno(errno));
    return listener;
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd.Get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    *error = Failed(prefix + "getsockname(): " + Errno(errno));
    return listener;
  }
  listener.port_ = bound.ss_family == AF_INET
                       ? ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port)
                       : ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
  listener.fd_ = fd.Release();
  return listener;
}

void TcpListener::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace cuflight::collector
