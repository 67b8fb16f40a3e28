// Which stream a producer connection writes: what its process_start claims, joined with what the
// collector can verify about the writer (docs/collector.md, "Process identity").
//
// Rules:
//  1. A producer that reports an instance_id (random per process image) is named by what it
//     reports: host, exe, the pid it sees itself and start_ns, plus the instance id. The pid the
//     collector sees (SO_PEERCRED) may be 0 (the peer is outside the collector's pid namespace) or
//     another number (the peer is in a child namespace): neither is an identity.
//  2. The owner, appended to every name but one, is what the collector verified: "u<uid>" on the
//     Unix socket (the kernel's uid of the peer), so a connection of another uid never reaches
//     the stream; over TCP nothing is verified, so each connection gets a stream of its own,
//     "t<16 hex digits>" from a per-connection random token, unless the operator opted in to
//     trusting TCP payloads ("tcp": any TCP client may continue any TCP stream).
//  3. On the Unix socket, when the peer is in the collector's pid namespace (or its namespace is
//     unknown) and the kernel reports its pid, that pid wins over the payload's (a differing
//     payload pid is rewritten in the stored lines).
//  4. An older producer (no instance_id) whose pid the kernel verified keeps the short name
//     <host>-<exe>-<pid>-<start_ns> of earlier versions, so its existing logs continue.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_IDENTITY_H_
#define CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_IDENTITY_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "log_sink.h"

namespace cuflight::collector {

// What a process_start line says about the process.
struct ClaimedIdentity {
  std::string_view hostname;
  std::string_view exe;
  int32_t pid = 0;  // the line's header pid
  int64_t start_ns = 0;
  uint64_t instance_id = 0;  // 0: not reported
  uint64_t pid_ns = 0;       // 0: not reported
};

// What the collector knows about the connection.
struct PeerFacts {
  bool is_unix = false;
  pid_t pid = 0;  // SO_PEERCRED (Unix); 0 when the peer is not in the collector's pid namespace
  uid_t uid = 0;  // SO_PEERCRED (Unix)
  std::string_view tcp_token;  // TCP: random per connection, 16 hex digits
};

struct IdentityPolicy {
  bool tcp_trust_identity = false;  // --tcp-trust-identity
  uint64_t own_pid_ns = 0;          // the collector's pid namespace inode; 0 if unknown
};

struct ResolvedIdentity {
  ProcessKey key;
  // The kernel's pid replaces a differing payload pid in every stored line (rule 3).
  bool rewrite_pid = false;
  // A stream of this connection alone (TCP without trust): nobody can continue it later.
  bool per_connection = false;
};

ResolvedIdentity ResolveIdentity(const ClaimedIdentity& claim, const PeerFacts& peer,
                                 const IdentityPolicy& policy);

// Inode of /proc/self/ns/pid, 0 if it cannot be read.
uint64_t OwnPidNamespace() noexcept;

// 16 lowercase hex digits from getrandom(2) (a clock mix if that fails).
std::string NewConnectionToken();

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_IDENTITY_H_
