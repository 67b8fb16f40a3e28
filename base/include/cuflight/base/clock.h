// The two clocks, inline (the injected library's launch callback reads the first): the host's
// wall clock for event timestamps (schema: ts_ns is CLOCK_REALTIME), and the monotonic clock for
// deadlines. clock_gettime is async-signal-safe, so both may be read from a fatal-signal handler.
#ifndef CUFLIGHT_BASE_CLOCK_H_
#define CUFLIGHT_BASE_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace cuflight::base {

// CLOCK_REALTIME in ns: the ts_ns of events.
inline int64_t NowRealtimeNs() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// CLOCK_MONOTONIC in ns: for waits and deadlines.
inline int64_t MonotonicNs() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace cuflight::base

#endif  // CUFLIGHT_BASE_CLOCK_H_
