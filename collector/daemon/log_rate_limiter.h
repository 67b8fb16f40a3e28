// Rate limit for log lines a peer can cause (rejected lines): a burst per key and window, then
// silence, with the number of suppressed lines reported on the next line allowed.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_LOG_RATE_LIMITER_H_
#define CUFLIGHT_COLLECTOR_DAEMON_LOG_RATE_LIMITER_H_

#include <chrono>
#include <cstdint>
#include <vector>

namespace cuflight::collector {

class LogRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // Keys 0..key_count-1; at most `burst` lines per key in each `window`.
  LogRateLimiter(int key_count, int burst, Clock::duration window);

  // Whether a line for `key` may be logged now. When it may, *suppressed receives how many lines
  // for this key were refused since the last allowed one (then reset). Not thread-safe.
  bool Allow(int key, Clock::time_point now, uint64_t* suppressed);

 private:
  struct Slot {
    Clock::time_point window_start{};
    int used = 0;
    uint64_t suppressed = 0;
  };
  std::vector<Slot> slots_;
  int burst_;
  Clock::duration window_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_LOG_RATE_LIMITER_H_
