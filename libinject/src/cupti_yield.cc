#include "cupti_yield.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "log.h"

namespace cuflight::inject {

CuptiYield::CuptiYield(Options options, Hooks hooks, Clock::time_point now)
    : options_(std::move(options)), hooks_(std::move(hooks)) {
  next_file_check_ = now;
  if (options_.start_yielded) {
    // Never subscribed: nothing to release. Counts as a yield from now.
    state_ = State::kOff;
    gated_.store(true, std::memory_order_relaxed);
    yields_.store(1, std::memory_order_relaxed);
    off_since_ns_.store(std::max<int64_t>(Ns(now), 1), std::memory_order_relaxed);
    hold_until_ = now + options_.start_hold;
    next_attempt_ = hold_until_;
  }
}

void CuptiYield::BeginYield() noexcept {
  state_ = State::kReleasing;
  gated_.store(true, std::memory_order_relaxed);
}

void CuptiYield::Request(uint64_t for_ms, Clock::time_point now) noexcept {
  const Clock::time_point until = now + std::chrono::milliseconds(for_ms);
  if (for_ms == 0) {
    hold_until_ = now;
    if (state_ == State::kOff || state_ == State::kGaveUp) {
      // Asked to come back: at once, with a fresh set of attempts.
      state_ = State::kOff;
      attempts_ = 0;
      next_attempt_ = now;
    }
    return;
  }
  hold_until_ = until;  // a newer request replaces an older one
  switch (state_) {
    case State::kOn:
      Log().info("yielding CUPTI for at least {} ms, as the collector asked (cuflight yield)",
                 for_ms);
      BeginYield();
      break;
    case State::kReleasing:
      break;
    case State::kOff:
    case State::kGaveUp:
      state_ = State::kOff;
      attempts_ = 0;
      next_attempt_ = until;
      break;
  }
}

CuptiYield::Action CuptiYield::Poll(Clock::time_point now) noexcept {
  if (!options_.trigger_file.empty() && now >= next_file_check_) {
    next_file_check_ = now + options_.trigger_poll;
    struct stat st {};
    const bool exists = stat(options_.trigger_file.c_str(), &st) == 0;
    if (exists && !file_held_) {
      file_held_ = true;
      if (state_ == State::kOn) {
        Log().info("yielding CUPTI while {} exists (CUFLIGHT_YIELD)", options_.trigger_file);
        BeginYield();
      }
    } else if (!exists && file_held_) {
      file_held_ = false;
      if (state_ == State::kOff || state_ == State::kGaveUp) {
        state_ = State::kOff;
        attempts_ = 0;
        next_attempt_ = std::max(now, hold_until_);
      }
    }
  }
  if (state_ == State::kReleasing) return Action::kRelease;
  if (state_ == State::kOff && !file_held_ && now >= next_attempt_ && now >= hold_until_) {
    TryTake(now);
  }
  return Action::kNone;
}

void CuptiYield::Released(Clock::time_point now) noexcept {
  if (state_ != State::kReleasing) return;
  if (hooks_.release) hooks_.release();
  state_ = State::kOff;
  yields_.fetch_add(1, std::memory_order_relaxed);
  off_since_ns_.store(std::max<int64_t>(Ns(now), 1), std::memory_order_relaxed);
  attempts_ = 0;
  next_attempt_ = hold_until_;
}

void CuptiYield::TryTake(Clock::time_point now) noexcept {
  const CUptiResult result = hooks_.take ? hooks_.take() : CUPTI_ERROR_NOT_INITIALIZED;
  if (result == CUPTI_SUCCESS) {
    state_ = State::kOn;
    resumed_ = true;
    const int64_t since = off_since_ns_.exchange(0, std::memory_order_relaxed);
    const uint64_t off_ns = since > 0 ? static_cast<uint64_t>(std::max<int64_t>(Ns(now) - since, 0)) : 0;
    closed_ns_.fetch_add(off_ns, std::memory_order_relaxed);
    gated_.store(false, std::memory_order_relaxed);
    Log().info("took CUPTI back after {} ms off it ({} attempt{}); recording again",
               off_ns / 1'000'000, attempts_ + 1, attempts_ == 0 ? "" : "s");
    attempts_ = 0;
    return;
  }
  ++attempts_;
  if (attempts_ >= options_.max_attempts) {
    state_ = State::kGaveUp;
    Log().warn("CUPTI still held by another tool after {} attempts to take it back; cuflight "
               "records nothing more in this process (cuflight yield --resume tries again)",
               attempts_);
    return;
  }
  // 1 s, 2 s, 4 s, ... capped (design point 3).
  auto delay = options_.backoff_min;
  for (int i = 1; i < attempts_ && delay < options_.backoff_max; ++i) delay *= 2;
  next_attempt_ = now + std::min(delay, options_.backoff_max);
  Log().debug("CUPTI is still held by another tool (result {}); next try in {} ms",
              static_cast<int>(result),
              std::chrono::duration_cast<std::chrono::milliseconds>(next_attempt_ - now).count());
}

bool CuptiYield::TakeResumed() noexcept { return std::exchange(resumed_, false); }

uint64_t CuptiYield::yielded_ns(Clock::time_point now) const noexcept {
  uint64_t total = closed_ns_.load(std::memory_order_relaxed);
  const int64_t since = off_since_ns_.load(std::memory_order_relaxed);
  if (since > 0) total += static_cast<uint64_t>(std::max<int64_t>(Ns(now) - since, 0));
  return total;
}

}  // namespace cuflight::inject
