// Notices kernel timing that stops while launches go on, and says why as far as the library can
// tell.
//
// With the unversioned (global) CUPTI activity API, a later CUPTI client in the process
// (torch.profiler's Kineto, Triton's proton, a second tool) can register its own buffer callbacks
// or disable kernel activity records: CUPTI then hands this library's records to that client, or
// writes none, and says nothing. Launch callbacks keep coming (they are this subscriber's own).
// The sender thread reports every launch it handles and every kernel activity record it parses;
// when `min_launches` launches went by without a single kernel record, `silence_ns` or more after
// the first of them (the sender flushes activity buffers every 500 ms, so records of kernels that
// finished arrive well within that), timing is said to have stopped: one warning, and the launches recorded from then
// on are counted (timing_stopped, with reason "records_stopped"). A GPU that stops completing
// kernels looks the same from here, which the warning and the docs say. When records arrive again
// the stop is over: the count returns to 0 (those launches are being timed after all), and a line
// says so.
//
// When timing could not be enabled at all (another tool holds activity tracing), every launch is
// counted with reason "unavailable".
//
// The sender thread calls every method but the counters, which any thread may read.
#ifndef CUFLIGHT_LIBINJECT_SRC_TIMING_WATCH_H_
#define CUFLIGHT_LIBINJECT_SRC_TIMING_WATCH_H_

#include <atomic>
#include <cstdint>
#include <string_view>

#include "cuflight/schema/events.h"

namespace cuflight::inject {

using TimingStop = schema::TimingStoppedReason;

class TimingWatch {
 public:
  struct Options {
    int64_t silence_ns = 10'000'000'000;
    uint64_t min_launches = 64;
  };

  TimingWatch() = default;
  explicit TimingWatch(Options options) : options_(options) {}

  // Timing could not be enabled: every launch counts from now on.
  void SetUnavailable() noexcept;
  // A launch whose kernel should produce a record, at `now_ns` (any monotonic clock).
  void OnLaunch(int64_t now_ns) noexcept;
  // A kernel activity record was parsed. True when it ends a stop (the caller says so once).
  bool OnRecord() noexcept;
  // True when this call finds that timing has just stopped (the caller says so once).
  bool Check(int64_t now_ns) noexcept;

  // Launches recorded while timing was stopped (all of them when unavailable); 0 when none.
  uint64_t stopped_launches() const noexcept {
    return stopped_launches_.load(std::memory_order_relaxed);
  }
  TimingStop stop() const noexcept {
    return static_cast<TimingStop>(stop_.load(std::memory_order_relaxed));
  }
  // Nanoseconds since the first launch that waited in vain, when the stop was noticed.
  int64_t silence_at_stop_ns() const noexcept { return silence_at_stop_ns_; }

 private:
  Options options_;
  int64_t first_waiting_launch_ns_ = 0;  // the first launch after the last record
  uint64_t waiting_launches_ = 0;        // launches since the last record
  int64_t silence_at_stop_ns_ = 0;
  std::atomic<uint64_t> stopped_launches_{0};
  std::atomic<uint8_t> stop_{0};
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_TIMING_WATCH_H_
