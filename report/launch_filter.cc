#include "cuflight/report/launch_filter.h"

#include <algorithm>
#include <charconv>

namespace cuflight::report {

LaunchFilter::LaunchFilter(const ReportOptions& options)
    : pids_(options.pids),
      job_(options.job),
      ranks_(options.ranks),
      pod_(options.pod),
      since_ns_(options.since_ns),
      until_ns_(options.until_ns) {
  if (!options.kernel_regex.empty()) regex_.emplace(options.kernel_regex, std::regex::ECMAScript);
  std::sort(pids_.begin(), pids_.end());
  std::sort(ranks_.begin(), ranks_.end());
}

bool LaunchFilter::Attribution(
    const std::vector<std::pair<std::string, std::string>>& attribution) const {
  auto value = [&](std::string_view key) -> const std::string* {
    for (const auto& [k, v] : attribution) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  if (!job_.empty()) {
    const std::string* job = value("job");
    if (job == nullptr || *job != job_) return false;
  }
  if (!ranks_.empty()) {
    // A decimal integer without leading zeros (process_start.schema.json): compared as text.
    const std::string* rank = value("rank");
    if (rank == nullptr) return false;
    int32_t r = 0;
    const auto [end, ec] = std::from_chars(rank->data(), rank->data() + rank->size(), r);
    if (ec != std::errc() || end != rank->data() + rank->size()) return false;
    if (!std::binary_search(ranks_.begin(), ranks_.end(), r)) return false;
  }
  if (!pod_.empty()) {
    const std::string* name = value("pod_name");
    const std::string* ns = value("pod_namespace");
    const std::string* uid = value("pod_uid");
    const bool match = (name != nullptr && *name == pod_) ||
                       (name != nullptr && ns != nullptr && *ns + "/" + *name == pod_) ||
                       (uid != nullptr && *uid == pod_);
    if (!match) return false;
  }
  return true;
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
