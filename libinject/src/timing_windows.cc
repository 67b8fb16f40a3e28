#include "timing_windows.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "function_table.h"
#include "mix64.h"

namespace cuflight::inject {
namespace {

int64_t Ns(TimingWindows::Clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// A phase in [0, period): from the clock and the pid, so that the processes of a fleet started
// together do not open their periodic windows in step.
std::chrono::nanoseconds RandomPhase(std::chrono::nanoseconds period) noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t seed = Mix64(static_cast<uint64_t>(ts.tv_nsec) ^
                              static_cast<uint64_t>(ts.tv_sec) << 30 ^
                              static_cast<uint64_t>(getpid()) << 12);
  const auto span = static_cast<uint64_t>(std::max<int64_t>(1, period.count()));
  return std::chrono::nanoseconds(static_cast<int64_t>(seed % span));
}

}  // namespace

TimingWindows::TimingWindows(TimingWindowOptions options, const CuptiApi* cupti)
    : options_(options), cupti_(cupti) {
  if (options_.window.count() <= 0) options_.window = std::chrono::milliseconds(1);
  if (options_.period < options_.window * 2) options_.period = options_.window * 2;
}

uint64_t TimingWindows::ConfigKey(const LaunchRecord& r) noexcept {
  // What sets a kernel's duration: the function, where and how it was launched (design point 4).
  uint64_t h = Mix64(r.function != nullptr ? r.function->id : 0);
  const uint64_t words[] = {
      uint64_t{r.grid[0]} | uint64_t{r.grid[1]} << 32,
      uint64_t{r.grid[2]} | uint64_t{r.block[0]} << 32,
      uint64_t{r.block[1]} | uint64_t{r.block[2]} << 32,
      uint64_t{r.cluster[0]} | uint64_t{r.cluster[1]} << 32,
      uint64_t{r.cluster[2]} | uint64_t{r.dyn_smem} << 32,
      static_cast<uint64_t>(static_cast<uint8_t>(r.device)),
  };
  for (const uint64_t w : words) h = Mix64(h ^ (w + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
  return h;
}

bool TimingWindows::Open(Clock::time_point now, Clock::time_point until) noexcept {
  if (open_) {
    close_at_ = std::max(close_at_, until);
    return true;
  }
  MoveTo(kOpening);
  if (cupti_->SetActivityKind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true) != CUPTI_SUCCESS) {
    // Back to closed (a launch that saw `opening` is an edge launch: nothing waits for it).
    MoveTo(kClosed);
    ++failed_calls_;
    return false;
  }
  // Only now (design point 3): a launch that reads `open` runs with kernel activity on.
  MoveTo(kOpen);
  open_ = true;
  opened_at_ = now;
  close_at_ = until;
  windows_.fetch_add(1, std::memory_order_relaxed);
  open_since_ns_.store(Ns(now), std::memory_order_relaxed);
  return true;
}

void TimingWindows::Close(Clock::time_point now) noexcept {
  if (!open_) return;
  // Before the disable call (design point 3): a launch that reads `closing` is not in a window.
  MoveTo(kClosing);
  open_ = false;
  closed_at_ = now;
  closed_ns_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, Ns(now) - Ns(opened_at_))),
                       std::memory_order_relaxed);
  open_since_ns_.store(-1, std::memory_order_relaxed);
  if (cupti_->SetActivityKind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, false) != CUPTI_SUCCESS) {
    // Kernel activity stays on: the phase stays `closing`, so every launch is an edge launch
    // (nothing waits for it, its record is dropped) until the next window opens.
    ++failed_calls_;
    return;
  }
  MoveTo(kClosed);
}

void TimingWindows::MoveTo(uint64_t phase) noexcept {
  // Only this thread writes the word: always forward, to the next value in `phase`, so that a
  // launch whose entry and exit straddle any step reads two values. seq_cst: the store is ordered
  // with the CUPTI call after it (a release store would let that call's effects come first) and
  // after the one before it.
  const uint64_t v = state_.load(std::memory_order_relaxed);
  const uint64_t step = (phase + 4 - v % 4) % 4;
  state_.store(v + (step == 0 ? 4 : step), std::memory_order_seq_cst);
}

bool TimingWindows::Start(Clock::time_point now) noexcept {
  const std::chrono::nanoseconds phase =
      options_.phase.count() >= 0 ? options_.phase % options_.period : RandomPhase(options_.period);
  next_periodic_ = now + phase;
  closed_at_ = now - options_.window;  // no cool-down before the first new configuration
  if (!Open(now, now + options_.window)) {
    failed_ = true;
    return false;
  }
  return true;
}

void TimingWindows::Tick(Clock::time_point now) noexcept {
  if (failed_) return;
  if (open_ && now >= close_at_) Close(now);
  if (now >= next_periodic_) {
    // Periods missed (a step that took long) are skipped, not caught up.
    while (next_periodic_ <= now) next_periodic_ += options_.period;
    Open(now, now + options_.window);
  }
}

void TimingWindows::OpenForStall(Clock::time_point now) noexcept {
  if (failed_) return;
  if (Open(now, now + options_.window)) ++stall_windows_;
}

bool TimingWindows::OnLaunch(const LaunchRecord& record, Clock::time_point now) noexcept {
  const bool in_window = (record.launch_flags & blackbox::kLaunchInTimingWindow) != 0;
  if (in_window) launches_in_window_.fetch_add(1, std::memory_order_relaxed);
  if (failed_) return in_window;
  try {
    if ((record.launch_flags & blackbox::kLaunchAtTimingWindowEdge) != 0) {
      ++edge_launches_;
      if (edge_ring_.empty()) edge_ring_.assign(kMaxEdgeLaunches, 0);
      const auto id = static_cast<uint32_t>(record.correlation_id);
      if (edge_launches_ > kMaxEdgeLaunches) {  // the slot's previous id is forgotten
        const auto old = edge_.find(edge_ring_[edge_next_]);
        if (old != edge_.end() && --old->second == 0) edge_.erase(old);
      }
      edge_ring_[edge_next_] = id;
      edge_next_ = (edge_next_ + 1) % kMaxEdgeLaunches;
      ++edge_[id];
    }
    const uint64_t key = ConfigKey(record);
    auto it = configs_.find(key);
    if (it == configs_.end()) {
      if (configs_.size() >= kMaxConfigs) {
        ++untracked_;
        return in_window;
      }
      it = configs_.emplace(key, Config{}).first;
    }
    Config& config = it->second;
    if (config.timed) return in_window;
    if (in_window) {
      // Its record names it timed (OnKernelRecord); the latest such launch is the one awaited.
      if (config.awaiting) awaited_.erase(config.awaited);
      config.awaited = static_cast<uint32_t>(record.correlation_id);  // CUPTI's ids are 32 bits
      config.awaiting = true;
      config.awaited_at = now;
      awaited_[config.awaited] = key;
      return in_window;
    }
    const bool awaited = config.awaiting && now - config.awaited_at < kAwaitRecord;
    if (options_.new_configs && !open_ && !awaited && config.asked < kMaxAskPerConfig &&
        now - closed_at_ >= options_.window) {
      if (Open(now, now + options_.window)) ++config.asked;
    }
  } catch (...) {  // std::bad_alloc: this launch opens no window
  }
  return in_window;
}

bool TimingWindows::OnKernelRecord(uint32_t correlation_id) noexcept {
  if (!edge_.empty() && edge_.contains(correlation_id)) {
    ++edge_dropped_;  // stays in the ring until its slot is reused
    return false;
  }
  const auto it = awaited_.find(correlation_id);
  if (it == awaited_.end()) return true;
  const auto config = configs_.find(it->second);
  awaited_.erase(it);
  if (config == configs_.end() || config->second.timed) return true;
  config->second.timed = true;
  config->second.awaiting = false;
  ++timed_;
  return true;
}

uint64_t TimingWindows::window_ns(Clock::time_point now) const noexcept {
  uint64_t ns = closed_ns_.load(std::memory_order_relaxed);
  const int64_t since = open_since_ns_.load(std::memory_order_relaxed);
  if (since >= 0) ns += static_cast<uint64_t>(std::max<int64_t>(0, Ns(now) - since));
  return ns;
}

}  // namespace cuflight::inject
