// `cuflight yield`'s requests (cuflight/schema/control.h; docs/protocol.md, "Yielding CUPTI"):
// what a request says, who may make a process yield, and the reply.
//
// 1. A request is the first line of a Unix-socket connection, a JSON object of type
//    `yield_request` instead of a process_start; everything else about the connection is as for a
//    producer (the socket's mode, --socket-group and SO_PEERCRED decide who may connect, and it
//    takes a connection slot until it is answered and closed).
// 2. Think of a hostile tenant: a request reaches a producer only when the requester is root or
//    has the producer's own uid (both SO_PEERCRED, the kernel's word, never the request's), and
//    never a TCP producer unless the requester is root (no uid is known for it). A request over
//    TCP is refused outright. A match the requester may not ask is counted `refused` in the
//    reply, so a user learns that a process exists only for processes they could see anyway with
//    ps(1) (pid and exe, no argv).
#ifndef CUFLIGHT_COLLECTOR_DAEMON_YIELD_CONTROL_H_
#define CUFLIGHT_COLLECTOR_DAEMON_YIELD_CONTROL_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cuflight::collector {

struct YieldRequest {
  int32_t pid = 0;      // > 0 with pid_ns: that process; 0: by job
  uint64_t pid_ns = 0;  // the pid's namespace (inode); 0: not known to the requester
  std::string job;      // process_start's attribution.job
  uint64_t for_ms = 0;  // 0: end a yield now
};

// Whether `line` is meant as a yield request (an object naming the type), cheaply: the
// collector then parses it with ParseYieldRequest instead of validating it as an event.
bool LooksLikeYieldRequest(std::string_view line) noexcept;

// Parses a request (design point 1). False with *error (one line) for anything else: not an
// object, another type or version, neither or both of pid and job, pid outside [1, 2^31-1],
// job empty or over 256 bytes, for_ms above schema::kMaxYieldMs. Never throws.
bool ParseYieldRequest(std::string_view line, YieldRequest* request, std::string* error) noexcept;

// Design point 2.
bool MayYield(uid_t requester, bool producer_is_unix, uid_t producer_uid) noexcept;

// One producer a request matched.
struct YieldTarget {
  int32_t pid = 0;  // as its process_start says
  std::string exe;
  uid_t uid = 0;  // SO_PEERCRED (Unix producers)
  bool asked = false;
  std::string why;  // when not asked
};

// The reply line (with its '\n'): {"type":"yield_reply","version":1,"matched":M,"asked":A,
// "refused":R,"processes":[...]} (at most 64 listed), or with "error":"..." and no processes.
std::string EncodeYieldReply(const std::vector<YieldTarget>& targets, std::string_view error);

// The `job` of a process_start line's attribution ("" when none or not a process_start).
std::string JobOfProcessStart(std::string_view line) noexcept;

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_YIELD_CONTROL_H_
