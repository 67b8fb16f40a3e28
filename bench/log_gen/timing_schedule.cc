#include "timing_schedule.h"

#include <algorithm>

namespace cuflight::bench {

TimingSchedule::TimingSchedule(Options options, int64_t start_ns) : options_(options) {
  // As TimingWindows' constructor and Start take out-of-range options.
  options_.window_ns = std::max<int64_t>(1, options_.window_ns);
  options_.period_ns = std::max(options_.period_ns, options_.window_ns * 2);
  options_.phase_ns = std::max<int64_t>(0, options_.phase_ns) % options_.period_ns;
  next_periodic_ = start_ns + options_.phase_ns;
  closed_at_ = start_ns - options_.window_ns;     // no cool-down before the first configuration
  Open(start_ns, start_ns + options_.window_ns);  // 1a
}

void TimingSchedule::Open(int64_t at_ns, int64_t until_ns) {
  if (open_) {  // 1d: the open window lasts to the later end
    close_at_ = std::max(close_at_, until_ns);
    return;
  }
  open_ = true;
  opened_at_ = at_ns;
  close_at_ = until_ns;
  ++windows_;
}

void TimingSchedule::Close() {
  open_ = false;
  closed_at_ = close_at_;
  closed_ns_ += static_cast<uint64_t>(close_at_ - opened_at_);
}

void TimingSchedule::AdvanceTo(int64_t now_ns) {
  // The closes and periodic opens due by now_ns, earliest first; a close and an open at the same
  // instant: the close first (a window that ends as the next begins is two windows).
  for (;;) {
    if (open_ && close_at_ <= now_ns && close_at_ <= next_periodic_) {
      Close();
    } else if (next_periodic_ <= now_ns) {
      Open(next_periodic_, next_periodic_ + options_.window_ns);  // 1b
      next_periodic_ += options_.period_ns;
    } else {
      return;
    }
  }
}

bool TimingSchedule::OnLaunch(uint64_t config, uint64_t correlation_id, int64_t now_ns) {
  AdvanceTo(now_ns);
  const bool in_window = open_;
  if (in_window) ++launches_in_window_;
  auto it = configs_.find(config);
  if (it == configs_.end()) {
    if (configs_.size() >= kMaxConfigs) {
      ++untracked_;
      return in_window;
    }
    it = configs_.emplace(config, Config{}).first;
  }
  Config& c = it->second;
  if (c.timed) return in_window;
  if (in_window) {
    // The latest launch made in a window is the one whose record times the configuration.
    if (c.awaiting) awaited_.erase(c.awaited);
    c.awaiting = true;
    c.awaited = correlation_id;
    c.awaited_at = now_ns;
    awaited_[correlation_id] = config;
    return in_window;
  }
  const bool awaited = c.awaiting && now_ns - c.awaited_at < kAwaitRecordNs;
  if (options_.new_configs && !awaited && c.asked < kMaxAskPerConfig &&
      now_ns - closed_at_ >= options_.window_ns) {
    Open(now_ns, now_ns + options_.window_ns);  // 1c
    ++c.asked;
  }
  return in_window;
}

void TimingSchedule::OnRecord(uint64_t correlation_id) {
  const auto it = awaited_.find(correlation_id);
  if (it == awaited_.end()) return;
  const auto c = configs_.find(it->second);
  awaited_.erase(it);
  if (c == configs_.end() || c->second.timed) return;
  c->second.timed = true;
  c->second.awaiting = false;
  ++timed_;
}

uint64_t TimingSchedule::window_ns(int64_t now_ns) const {
  uint64_t ns = closed_ns_;
  if (open_) ns += static_cast<uint64_t>(std::max<int64_t>(0, now_ns - opened_at_));
  return ns;
}

}  // namespace cuflight::bench
