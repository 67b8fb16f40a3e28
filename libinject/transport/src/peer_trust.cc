#include "cuflight/transport/peer_trust.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cuflight::transport {
namespace {

constexpr size_t kMaxPath = 108;  // sockaddr_un::sun_path

// The errno's name ("ENOENT"): strerror may translate, and so allocate, which this code (also run
// from a crash handler's flush) must not.
const char* ErrnoName(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : "an unknown error";
}

// "1000, 0 or 999" for the message.
void UidList(const TrustedUids& trusted, char* out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < trusted.count && used < cap; ++i) {
    const char* sep = i == 0 ? "" : (i + 1 == trusted.count ? " or " : ", ");
    const int n =
        std::snprintf(out + used, cap - used, "%s%u", sep, static_cast<unsigned>(trusted.uids[i]));
    if (n < 0) break;
    used += static_cast<size_t>(n);
  }
}

}  // namespace

bool TrustedUids::Contains(uid_t uid) const noexcept {
  for (int i = 0; i < count; ++i) {
    if (uids[i] == uid) return true;
  }
  return false;
}

void TrustedUids::Add(uid_t uid) noexcept {
  if (Contains(uid) || count == kMax) return;
  uids[count++] = uid;
}

TrustedUids ProducerTrustedUids(int64_t extra_uid) noexcept {
  TrustedUids t;
  t.Add(getuid());
  t.Add(geteuid());
  t.Add(0);
  if (extra_uid >= 0 && extra_uid <= int64_t{0xfffffffe}) t.Add(static_cast<uid_t>(extra_uid));
  return t;
}

bool DirectoryTrusted(const struct stat& st, const TrustedUids& trusted, const char* dir, char* why,
                      size_t cap) noexcept {
  char uids[64];
  if (!S_ISDIR(st.st_mode)) {
    std::snprintf(why, cap, "%s is not a directory", dir);
    return false;
  }
  if (!trusted.Contains(st.st_uid)) {
    UidList(trusted, uids, sizeof(uids));
    std::snprintf(why, cap,
                  "directory %s is owned by uid %u, not by uid %s (another user may have "
                  "created it to receive these events; set CUFLIGHT_COLLECTOR_UID to trust a "
                  "collector of another uid)",
                  dir, static_cast<unsigned>(st.st_uid), uids);
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    std::snprintf(why, cap,
                  "directory %s is writable by group or others (mode %03o) and not sticky: "
                  "anyone could replace the socket",
                  dir, static_cast<unsigned>(st.st_mode & 07777));
    return false;
  }
  return true;
}

SocketDirectory CheckSocketDirectory(const char* socket_path, const TrustedUids& trusted, char* why,
                                     size_t cap) noexcept {
  char dir[kMaxPath + 1];
  const char* slash = std::strrchr(socket_path, '/');
  if (slash == nullptr) {
    std::snprintf(dir, sizeof(dir), ".");
  } else if (slash == socket_path) {
    std::snprintf(dir, sizeof(dir), "/");
  } else {
    const size_t n = static_cast<size_t>(slash - socket_path);
    if (n > kMaxPath) {
      std::snprintf(why, cap, "socket path is too long");
      return SocketDirectory::kUntrusted;
    }
    std::memcpy(dir, socket_path, n);
    dir[n] = '\0';
  }
  struct stat st {};
  if (stat(dir, &st) != 0) {
    const int err = errno;
    std::snprintf(why, cap, "cannot examine directory %s: %s", dir, ErrnoName(err));
    // No directory, no socket: no collector yet, like a refused connection.
    return err == ENOENT || err == ENOTDIR ? SocketDirectory::kMissing
                                           : SocketDirectory::kUntrusted;
  }
  return DirectoryTrusted(st, trusted, dir, why, cap) ? SocketDirectory::kTrusted
                                                      : SocketDirectory::kUntrusted;
}

bool CheckSocketPeer(int fd, const TrustedUids& trusted, char* why, size_t cap) noexcept {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    const int err = errno;
    std::snprintf(why, cap, "cannot read the collector's credentials (SO_PEERCRED): %s",
                  ErrnoName(err));
    return false;
  }
  if (!trusted.Contains(cred.uid)) {
    char uids[64];
    UidList(trusted, uids, sizeof(uids));
    std::snprintf(why, cap,
                  "the collector listening there runs as uid %u (pid %d), not as uid %s; set "
                  "CUFLIGHT_COLLECTOR_UID to trust a collector of another uid",
                  static_cast<unsigned>(cred.uid), static_cast<int>(cred.pid), uids);
    return false;
  }
  return true;
}

}  // namespace cuflight::transport
