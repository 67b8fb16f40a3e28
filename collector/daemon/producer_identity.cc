#include "producer_identity.h"

#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <chrono>

namespace cuflight::collector {

ResolvedIdentity ResolveIdentity(const ClaimedIdentity& claim, const PeerFacts& peer,
                                 const IdentityPolicy& policy) {
  ResolvedIdentity r;
  r.key.hostname = std::string(claim.hostname);
  r.key.exe = std::string(claim.exe);
  r.key.start_ns = claim.start_ns;
  r.key.instance_id = claim.instance_id;
  r.key.pid = claim.pid;
  if (peer.is_unix) {
    const bool other_namespace =
        claim.pid_ns != 0 && policy.own_pid_ns != 0 && claim.pid_ns != policy.own_pid_ns;
    const bool kernel_pid = peer.pid != 0 && !other_namespace;
    if (kernel_pid) {
      r.key.pid = static_cast<int32_t>(peer.pid);
      r.rewrite_pid = claim.pid != r.key.pid;
    }
    // An older producer with a verified pid keeps the short name (rule 4).
    if (!(kernel_pid && claim.instance_id == 0)) r.key.owner = fmt::format("u{}", peer.uid);
    return r;
  }
  if (policy.tcp_trust_identity) {
    r.key.owner = "tcp";
  } else {
    r.key.owner = fmt::format("t{}", peer.tcp_token);
    r.per_connection = true;
  }
  return r;
}

uint64_t OwnPidNamespace() noexcept {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::string NewConnectionToken() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(value))) {
    static uint64_t counter = 0;
    value = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) *
                0x9e3779b97f4a7c15ull +
            ++counter;
  }
  return fmt::format("{:016x}", value);
}

}  // namespace cuflight::collector
