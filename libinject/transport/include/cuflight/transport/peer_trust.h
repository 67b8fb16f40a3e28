// Whom a producer sends its events to over a Unix socket (docs/protocol.md, "Who the producer
// sends to"). Events carry the command line (argv, with whatever secrets it holds) and kernel
// names: a socket another user put in the producer's way must not get them.
//
//  1. Trusted uids: the producer's real and effective uid, root (0: it can read the process
//     anyway), and one more given by configuration (CUFLIGHT_COLLECTOR_UID), for a collector
//     that serves many users under a uid of its own.
//  2. Before connecting, the socket's directory (after symbolic links) must be owned by a
//     trusted uid and not writable by group or others, unless it has the sticky bit (/tmp:
//     nobody can remove or rename another's entry there; the peer check below decides).
//  3. After connecting and before sending anything, the peer's uid (SO_PEERCRED: the uid of the
//     process that listens) must be trusted.
// TCP has no peer credentials: a tcp: address is explicit configuration and is not checked.
// Nothing here allocates or throws; the calls are lstat/stat/getsockopt only.
#ifndef CUFLIGHT_TRANSPORT_PEER_TRUST_H_
#define CUFLIGHT_TRANSPORT_PEER_TRUST_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace cuflight::transport {

struct TrustedUids {
  static constexpr int kMax = 4;
  uid_t uids[kMax] = {};
  int count = 0;

  bool Contains(uid_t uid) const noexcept;
  // Adds `uid` unless present or full.
  void Add(uid_t uid) noexcept;
};

// getuid(), geteuid(), 0 and, when in [0, 2^32-2], `extra_uid` (-1: none).
TrustedUids ProducerTrustedUids(int64_t extra_uid) noexcept;

// Rule 2 on the result of stat(2) of a directory: true, or false with one sentence in `why`
// (NUL-terminated, cut to `cap`) naming `dir` and what is wrong.
bool DirectoryTrusted(const struct stat& st, const TrustedUids& trusted, const char* dir, char* why,
                      size_t cap) noexcept;

enum class SocketDirectory : uint8_t {
  kTrusted,
  kMissing,    // it does not exist (no collector has created it yet): not a trust failure
  kUntrusted,  // it breaks rule 2 or cannot be examined; `why` says how
};

// Rule 2 for the directory of `socket_path` (the part before its last '/'; "." when there is
// none). `why` is written for every verdict but kTrusted.
SocketDirectory CheckSocketDirectory(const char* socket_path, const TrustedUids& trusted, char* why,
                                     size_t cap) noexcept;

// Rule 3 for a connected Unix socket `fd`. A peer whose credentials cannot be read is refused.
bool CheckSocketPeer(int fd, const TrustedUids& trusted, char* why, size_t cap) noexcept;

}  // namespace cuflight::transport

#endif  // CUFLIGHT_TRANSPORT_PEER_TRUST_H_
