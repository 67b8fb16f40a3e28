// The event clock: CLOCK_REALTIME in nanoseconds at the cost of one rdtsc, for the launch
// callback's timestamp (the ts_ns of kernel and api_error events).
//
// 1. Why. clock_gettime(CLOCK_REALTIME) through the vDSO costs about 24 ns on the 2-vCPU EPYC VM
//    of docs/performance.md, a quarter of the launch callback; a plain rdtsc costs about 10 ns.
//    The vDSO reads the same counter, ordered by lfence, and scales it with the kernel's mult and
//    shift under a seqlock: this clock does the same with a line of its own and no fence.
// 2. What the readers of ts_ns need. The schema says CLOCK_REALTIME. The report's --since/--until
//    windows, first/last times, timelines and trace export place launches at microseconds and
//    above; the sender compares a record's time with its own clock_gettime (the stall tracker's
//    launch ages, milliseconds); events are ordered by seq, never by ts_ns. So: within about a
//    microsecond of CLOCK_REALTIME, nanosecond resolution, never backwards on one thread. A coarse
//    clock (CLOCK_REALTIME_COARSE: one tick per 4 ms) would give a burst of launches one time.
// 3. When the counter is used. On x86-64, when the kernel itself keeps time with it
//    (/sys/devices/system/clocksource/clocksource0/current_clocksource is "tsc": the kernel found
//    it invariant and synchronised across CPUs, and its watchdog switches away from it when that
//    stops being true; read again about once a second), once Refresh has fitted a line, and
//    while that line is younger than kMaxExtrapolationNs. Otherwise NowNs() is clock_gettime
//    itself: before the first fit, in a forked child until a refresher runs again, with a sender
//    thread stuck for a second, on another architecture.
// 4. The fit. Refresh (one thread at a time, every kMinRefreshNs at most; a second caller skips)
//    samples CLOCK_REALTIME between two lfence-ordered counter reads. The rate (ns per tick) comes
//    from a sample 1 to 2 s old, so a sample's jitter (< 1 us) moves it by less than 1e-6. The
//    line stays continuous: each refresh starts it from its own value at the new sample's counter
//    and steers its slope so that it meets CLOCK_REALTIME one refresh interval later, as the
//    kernel follows NTP by slewing. An error over kStepNs (the wall clock was set) is taken at
//    once, as clock_gettime itself jumps.
// 5. Order across threads. rdtsc without a fence may execute some tens of cycles before the
//    instructions ahead of it; the vDSO fences so that a read on one CPU after a message from
//    another is never earlier. Launches are microseconds apart (CUPTI's dispatch and the driver's
//    own work lie between two), far more than that window.
// 6. fork. The child reads the same counter: the parent's line holds. AfterForkInChild releases a
//    refresh the forking thread was in the middle of (the child has one thread).
//
// Thread contract: NowNs from any thread, lock-free and async-signal-safe; Refresh from any
// thread (concurrent calls skip); Update from one thread at a time (Refresh's, or a test's).
#ifndef CUFLIGHT_BASE_TSC_CLOCK_H_
#define CUFLIGHT_BASE_TSC_CLOCK_H_

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "cuflight/base/clock.h"

namespace cuflight::base {

namespace internal {
// 128-bit products and quotients (one mul or div on x86-64); a GCC/Clang extension.
__extension__ typedef unsigned __int128 U128;
__extension__ typedef __int128 I128;
}  // namespace internal

class TscRealtimeClock {
 public:
  // Refreshes closer together than this only read the clock (a shorter interval would steer the
  // slope on the samples' jitter).
  static constexpr int64_t kMinRefreshNs = 10'000'000;
  // The rate's baseline is a sample between one and two of these old.
  static constexpr int64_t kRebaseNs = 1'000'000'000;
  // A line not refreshed for this long is not used (its error grows with its age).
  static constexpr int64_t kMaxExtrapolationNs = 1'000'000'000;
  // A larger difference between the line and CLOCK_REALTIME is a step of the wall clock.
  static constexpr int64_t kStepNs = 1'000'000;

  constexpr TscRealtimeClock() = default;
  TscRealtimeClock(const TscRealtimeClock&) = delete;
  TscRealtimeClock& operator=(const TscRealtimeClock&) = delete;

  // CLOCK_REALTIME in ns (see 2 for how close).
  int64_t NowNs() const noexcept {
#if defined(__x86_64__)
    int64_t ns;
    if (LineAt(0, /*read_counter=*/true, &ns)) return ns;
#endif
    return NowRealtimeNs();
  }

  // The published line's time at counter value `tsc` (tests give their own): false when no line
  // is fitted, `tsc` lies before its start or kMaxExtrapolationNs or more after it.
  bool LineAt(uint64_t tsc, int64_t* ns) const noexcept { return LineAt(tsc, false, ns); }

  // Reads CLOCK_REALTIME and, at most every kMinRefreshNs, fits the line to it (4). Returns the
  // CLOCK_REALTIME read. Meant for a thread off the hot path that runs at least every few tens of
  // milliseconds (the injector's sender thread).
  int64_t Refresh() noexcept {
#if defined(__x86_64__)
    if (writing_.exchange(true, std::memory_order_acquire)) return NowRealtimeNs();
    Sample s = Take();
    if (s.ns - last_ns_ >= kMinRefreshNs || s.ns < last_ns_ || !have_line_) {
      if (s.ns - checked_ns_ >= kRebaseNs || s.ns < checked_ns_ || checked_ns_ == 0) {
        checked_ns_ = s.ns;
        usable_ = KernelUsesTsc();
      }
      if (!usable_) {
        Forget();
      } else {
        for (int i = 0; i < 2 && s.width > kMaxSampleWidthTicks; ++i) s = Take();
        if (s.width <= kMaxSampleWidthTicks) Update(s.tsc, s.ns);
      }
    }
    writing_.store(false, std::memory_order_release);
    return s.ns;
#else
    return NowRealtimeNs();
#endif
  }

  // The fit on one sample: the counter `tsc` read at CLOCK_REALTIME `ns` (4). Exposed for tests,
  // which give made-up samples. One thread at a time.
  void Update(uint64_t tsc, int64_t ns) noexcept {
    if (!have_base_ || tsc <= last_tsc_ || ns <= base_ns_) {
      // The first sample, or one that cannot follow the last (the counter went back: another
      // machine after a migration; the wall clock set back before the baseline): start again.
      Forget();
      base_tsc_ = cand_tsc_ = last_tsc_ = tsc;
      base_ns_ = cand_ns_ = last_ns_ = ns;
      have_base_ = true;
      return;
    }
    if (ns - base_ns_ < kMinRefreshNs) return;  // too short a baseline for a rate yet
    uint64_t rate = static_cast<uint64_t>(
        (static_cast<internal::U128>(static_cast<uint64_t>(ns - base_ns_)) << 32) /
        (tsc - base_tsc_));
    if (rate == 0) return;
    int64_t start_ns = ns;
    uint64_t mult = rate;
    if (have_line_) {
      const int64_t predicted = line_ns0_ + Scale(tsc - line_tsc0_, line_mult_);
      const int64_t error = ns - predicted;
      if (error <= kStepNs && error >= -kStepNs) {
        // Continuous at this sample, and CLOCK_REALTIME again one interval on.
        start_ns = predicted;
        const internal::I128 steer =
            (static_cast<internal::I128>(error) << 32) / static_cast<internal::I128>(tsc - last_tsc_);
        const internal::I128 steered = static_cast<internal::I128>(rate) + steer;
        if (steered > 0) mult = static_cast<uint64_t>(steered);
      } else {
        // The wall clock was set: the line jumps with it. The baseline spans the step, so its
        // rate is wrong; the last rate holds until a baseline after the step is long enough.
        mult = rate = rate_;
        base_tsc_ = cand_tsc_ = tsc;
        base_ns_ = cand_ns_ = ns;
      }
    }
    rate_ = rate;
    // Ticks in kMaxExtrapolationNs: ns << 32 / (ns per tick << 32).
    const uint64_t limit = static_cast<uint64_t>(
        (static_cast<internal::U128>(kMaxExtrapolationNs) << 32) / rate);
    Publish(tsc, start_ns, mult, limit);
    line_tsc0_ = tsc;
    line_ns0_ = start_ns;
    line_mult_ = mult;
    have_line_ = true;
    last_tsc_ = tsc;
    last_ns_ = ns;
    if (ns - cand_ns_ >= kRebaseNs) {
      base_tsc_ = cand_tsc_;
      base_ns_ = cand_ns_;
      cand_tsc_ = tsc;
      cand_ns_ = ns;
    }
  }

  // NowNs reads clock_gettime until Refresh fits a new line. One thread at a time, as Update.
  void Reset() noexcept { Forget(); }

  // True while NowNs reads the counter (a fitted line is published).
  bool counter_in_use() const noexcept { return limit_.load(std::memory_order_relaxed) != 0; }

  // In a forked child (one thread): a refresh the parent's forking thread was making is dropped
  // with its line, and the next Refresh fits anew.
  void AfterForkInChild() noexcept {
    if (!writing_.load(std::memory_order_relaxed)) return;
    limit_.store(0, std::memory_order_relaxed);
    seq_.store((seq_.load(std::memory_order_relaxed) | 1) + 1, std::memory_order_release);
    have_base_ = false;
    have_line_ = false;
    writing_.store(false, std::memory_order_release);
  }

 private:
  // Ticks between the two counter reads around clock_gettime beyond which a sample is taken again
  // (the thread was interrupted): 1 us at 2.5 GHz; a sample takes about 50 ns.
  static constexpr uint64_t kMaxSampleWidthTicks = 2'500;

  struct Sample {
    uint64_t tsc;
    int64_t ns;
    uint64_t width;
  };

  // Seqlock reader. The counter is read (read_counter) only once a line is known to exist.
  [[gnu::always_inline]] bool LineAt(uint64_t tsc, bool read_counter, int64_t* ns) const noexcept {
    const uint32_t seq = seq_.load(std::memory_order_acquire);
    const uint64_t limit = limit_.load(std::memory_order_relaxed);
    if (limit == 0) return false;
    const uint64_t tsc0 = tsc0_.load(std::memory_order_relaxed);
    const int64_t ns0 = ns0_.load(std::memory_order_relaxed);
    const uint64_t mult = mult_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
#if defined(__x86_64__)
    if (read_counter) tsc = __builtin_ia32_rdtsc();
#endif
    // A counter value before the line's start wraps to a huge delta: not used.
    const uint64_t delta = tsc - tsc0;
    if (delta >= limit || (seq & 1) != 0 || seq_.load(std::memory_order_relaxed) != seq) {
      return false;
    }
    *ns = ns0 + Scale(delta, mult);
    return true;
  }

  static int64_t Scale(uint64_t delta, uint64_t mult) noexcept {
    return static_cast<int64_t>((static_cast<internal::U128>(delta) * mult) >> 32);
  }

#if defined(__x86_64__)
  static Sample Take() noexcept {
    __builtin_ia32_lfence();
    const uint64_t before = __builtin_ia32_rdtsc();
    const int64_t ns = NowRealtimeNs();
    __builtin_ia32_lfence();
    const uint64_t after = __builtin_ia32_rdtsc();
    return Sample{before + (after - before) / 2, ns, after - before};
  }

  static bool KernelUsesTsc() noexcept {
    const int fd =
        open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char text[16] = {};
    const ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    return n >= 3 && std::strncmp(text, "tsc\n", 4) == 0;
  }
#endif

  // Seqlock writer (one at a time): odd while the line changes.
  void Publish(uint64_t tsc0, int64_t ns0, uint64_t mult, uint64_t limit) noexcept {
    const uint32_t seq = seq_.load(std::memory_order_relaxed);
    seq_.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    tsc0_.store(tsc0, std::memory_order_relaxed);
    ns0_.store(ns0, std::memory_order_relaxed);
    mult_.store(mult, std::memory_order_relaxed);
    limit_.store(limit, std::memory_order_relaxed);
    seq_.store(seq + 2, std::memory_order_release);
  }

  // NowNs falls back to clock_gettime until a new line is fitted.
  void Forget() noexcept {
    if (limit_.load(std::memory_order_relaxed) != 0) Publish(0, 0, 0, 0);
    have_base_ = false;
    have_line_ = false;
  }

  // The published line: ns = ns0 + (tsc - tsc0) * mult / 2^32 while tsc - tsc0 < limit.
  std::atomic<uint32_t> seq_{0};
  std::atomic<uint64_t> tsc0_{0};
  std::atomic<int64_t> ns0_{0};
  std::atomic<uint64_t> mult_{0};
  std::atomic<uint64_t> limit_{0};  // 0: not in use

  // The writer's own state, under writing_.
  std::atomic<bool> writing_{false};
  bool usable_ = false;
  int64_t checked_ns_ = 0;  // when the clocksource was last read
  bool have_base_ = false;
  bool have_line_ = false;
  uint64_t base_tsc_ = 0;  // the rate's baseline sample
  int64_t base_ns_ = 0;
  uint64_t cand_tsc_ = 0;  // the next baseline
  int64_t cand_ns_ = 0;
  uint64_t last_tsc_ = 0;  // the last sample fitted
  int64_t last_ns_ = 0;
  uint64_t line_tsc0_ = 0;  // the published line, as the writer keeps it
  int64_t line_ns0_ = 0;
  uint64_t line_mult_ = 0;
  uint64_t rate_ = 0;  // ns per tick << 32, from the baseline
};

namespace internal {
inline constinit TscRealtimeClock g_event_clock;
}  // namespace internal

// The process's event clock: the injector's launch callback reads it, its sender thread
// refreshes it.
inline TscRealtimeClock& EventClock() noexcept { return internal::g_event_clock; }

}  // namespace cuflight::base

#endif  // CUFLIGHT_BASE_TSC_CLOCK_H_
