#include "cuflight/report/launch_filter.h"

#include <algorithm>

namespace cuflight::report {

LaunchFilter::LaunchFilter(const ReportOptions& options)
    : pids_(options.pids), since_ns_(options.since_ns), until_ns_(options.until_ns) {
  if (!options.kernel_regex.empty()) regex_.emplace(options.kernel_regex, std::regex::ECMAScript);
  std::sort(pids_.begin(), pids_.end());
}

bool LaunchFilter::Pid(int32_t pid) const {
  return pids_.empty() || std::binary_search(pids_.begin(), pids_.end(), pid);
}

bool LaunchFilter::InWindow(int64_t ts_ns) const {
  if (since_ns_ && ts_ns < *since_ns_) return false;
  return !(until_ns_ && ts_ns > *until_ns_);
}

bool LaunchFilter::NameMatches(std::string_view name, std::string_view demangled) const {
  if (!regex_) return true;
  return std::regex_search(name.begin(), name.end(), *regex_) ||
         (!demangled.empty() && std::regex_search(demangled.begin(), demangled.end(), *regex_));
}

bool LaunchFilter::Launch(const schema::OwnedKernelEvent& e) {
  if (!Pid(e.header.pid) || !InWindow(e.header.ts_ns)) return false;
  if (!regex_) return true;
  auto it = names_.find(std::string_view(e.name));
  if (it == names_.end()) it = names_.emplace(e.name, NameMatches(e.name, e.demangled)).first;
  return it->second;
}

}  // namespace cuflight::report
