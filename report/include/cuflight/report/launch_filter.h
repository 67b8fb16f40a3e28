// The launch filters `cuflight report` and `cuflight export` share: processes (--pid), a
// kernel-name regex (--kernel) and a time window (--since, --until), one definition for both.
#ifndef CUFLIGHT_REPORT_LAUNCH_FILTER_H_
#define CUFLIGHT_REPORT_LAUNCH_FILTER_H_

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuflight/report/report_options.h"
#include "cuflight/schema/events.h"

namespace cuflight::report {

class LaunchFilter {
 public:
  // From the filter fields of `options` (kernel_regex, pids, since_ns, until_ns), which
  // CheckReportOptions has accepted (the regex compiles). The limiter is not a launch filter: the
  // report applies it to signatures.
  explicit LaunchFilter(const ReportOptions& options);

  // Whether events of process `pid` are read at all (--pid; every pid when none was given).
  bool Pid(int32_t pid) const;
  // Whether the filters select processes by attribution (--job, --rank, --pod).
  bool filters_attribution() const { return !job_.empty() || !ranks_.empty() || !pod_.empty(); }
  // Whether a process with this process_start attribution (sorted by name or not) is selected:
  // its "job" is --job's, its "rank" one of --rank's, and its pod (pod_name,
  // "pod_namespace/pod_name" or pod_uid) --pod's, each when given. A value the attribution does
  // not have does not match. True when none is given.
  bool Attribution(const std::vector<std::pair<std::string, std::string>>& attribution) const;
  // Whether a launch (or a marker) at host time `ts_ns` is in the window [since, until].
  bool InWindow(int64_t ts_ns) const;
  // Whether the regex (ECMAScript, searched) matches the mangled name or, when there is one, the
  // demangled name; true without --kernel. Not cached: callers that see a name many times cache
  // the answer (Launch does).
  bool NameMatches(std::string_view name, std::string_view demangled) const;
  // Pid, InWindow(header.ts_ns) and NameMatches for a kernel event, the name's answer cached.
  bool Launch(const schema::OwnedKernelEvent& e);

  bool filters_names() const { return regex_.has_value(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::optional<std::regex> regex_;
  std::vector<int32_t> pids_;
  std::string job_;
  std::vector<int32_t> ranks_;
  std::string pod_;
  std::optional<int64_t> since_ns_;
  std::optional<int64_t> until_ns_;
  std::unordered_map<std::string, bool, Hash, std::equal_to<>> names_;
};

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_LAUNCH_FILTER_H_
