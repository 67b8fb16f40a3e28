// The event filters `cuflight tail` shares with `cuflight report`: a kernel-name regex, pids and a
// limiting resource.
#ifndef CUFLIGHT_CLI_EVENT_FILTER_H_
#define CUFLIGHT_CLI_EVENT_FILTER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cuflight/schema/events.h"
#include "cuflight/schema/join_key.h"

namespace cuflight::cli {

class EventFilter {
 public:
  // Throws cli::UsageError naming the flag for a regex that does not compile (--kernel) or a
  // resource name `cuflight report --limiter` would reject (report::ParseLimiter). Empty
  // `kernel_regex`, `pids` or `limiter`: no filter of that kind.
  EventFilter(const std::string& kernel_regex, std::vector<int32_t> pids,
              const std::string& limiter);

  // Whether to show `event`, sent by the process the caller numbered `process` (one number per
  // process, told apart as the report's model does: report::ProcessKeys, so that two processes
  // sharing a pid, the pid 1 of two containers or a reused pid, have two numbers). With --pid
  // only events of those pids. With --kernel or --limiter only kernel events whose name contains
  // a match (the demangled name, else the mangled one) and whose limiting_resource is the one
  // named, plus the kernel_time events of the kernels shown (joined by process and
  // schema::JoinKey: correlation_id, graph node and device; the kernel therefore must come
  // first, as the producer sends them). Stall events pass the kernel filters (only --pid selects
  // them). Not const: remembers the kernels shown.
  bool Accept(const schema::OwnedEvent& event, uint32_t process);

  // (process, join key) of kernels shown whose kernel_time has not been seen, bounded (oldest
  // first forgotten) so a stream without timing cannot grow it without end.
  static constexpr size_t kMaxPending = 1 << 16;

 private:

  std::optional<std::regex> kernel_;
  std::vector<int32_t> pids_;
  std::optional<schema::Resource> limiter_;
  using ProcessJoinKey = std::pair<uint32_t, schema::JoinKey>;
  std::set<ProcessJoinKey> pending_;
  std::deque<ProcessJoinKey> pending_order_;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_EVENT_FILTER_H_
