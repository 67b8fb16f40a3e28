#include "event_filter.h"

#include <algorithm>
#include <string_view>

#include "cuflight/report/limiter_name.h"
#include "usage_error.h"

namespace cuflight::cli {

EventFilter::EventFilter(const std::string& kernel_regex, std::vector<int32_t> pids,
                         const std::string& limiter)
    : pids_(std::move(pids)) {
  if (!kernel_regex.empty()) {
    try {
      kernel_.emplace(kernel_regex, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      throw cli::UsageError("--kernel '" + kernel_regex +
                            "' is not a valid ECMAScript regular expression (" + e.what() + ")");
    }
  }
  if (!limiter.empty()) {
    limiter_ = report::ParseLimiter(limiter);
    if (!limiter_) throw cli::UsageError(report::LimiterError(limiter));
  }
}

bool EventFilter::Accept(const schema::OwnedEvent& event, uint32_t process) {
  const schema::Header& header = schema::HeaderOf(event);
  if (!pids_.empty() && std::find(pids_.begin(), pids_.end(), header.pid) == pids_.end()) {
    return false;
  }
  // A stall is shown whatever the kernel filters say: a hang matters whichever kernel it is.
  if (!kernel_ && !limiter_) return true;
  if (std::holds_alternative<schema::OwnedStallEvent>(event)) return true;
  if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&event)) {
    return pending_.erase({process, schema::JoinKeyOf(*t)}) > 0;
  }
  const auto* k = std::get_if<schema::OwnedKernelEvent>(&event);
  if (k == nullptr) return false;
  // At full occupancy no resource limits the kernel.
  if (limiter_ && (k->occupancy.limiting_resource != *limiter_ || k->occupancy.occupancy >= 1.0)) {
    return false;
  }
  if (kernel_ && !std::regex_search(k->demangled.empty() ? k->name : k->demangled, *kernel_)) {
    return false;
  }
  // Its kernel_time, when one may come (schema::ExpectsKernelTime), is shown with it.
  if (schema::ExpectsKernelTime(*k) && pending_.insert({process, schema::JoinKeyOf(*k)}).second) {
    pending_order_.emplace_back(process, schema::JoinKeyOf(*k));
    if (pending_order_.size() > kMaxPending) {
      pending_.erase(pending_order_.front());
      pending_order_.pop_front();
    }
  }
  return true;
}

}  // namespace cuflight::cli
