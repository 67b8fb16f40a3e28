#include "log_rate_limiter.h"

namespace cuflight::collector {

LogRateLimiter::LogRateLimiter(int key_count, int burst, Clock::duration window)
    : slots_(static_cast<size_t>(key_count)), burst_(burst), window_(window) {}

bool LogRateLimiter::Allow(int key, Clock::time_point now, uint64_t* suppressed) {
  if (key < 0 || static_cast<size_t>(key) >= slots_.size()) return false;
  Slot& slot = slots_[static_cast<size_t>(key)];
  if (slot.used == 0 || now - slot.window_start >= window_) {
    slot.window_start = now;
    slot.used = 0;
  }
  if (slot.used >= burst_) {
    ++slot.suppressed;
    return false;
  }
  ++slot.used;
  *suppressed = slot.suppressed;
  slot.suppressed = 0;
  return true;
}

}  // namespace cuflight::collector
