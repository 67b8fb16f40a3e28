// Taking turns with other CUPTI tools (docs/profilers.md). Before CUDA 13.3 (or on a driver
// before r610) CUPTI has one subscriber per process: cupti_callbacks.h, cuptiSubscribe:
// "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED if there is already a CUPTI subscriber". While
// cuflight holds it, torch.profiler (Kineto) and any other CUPTI client started in the process get
// that error. A yield hands CUPTI over and takes it back later.
//
// 1. Triggers. A request from the collector (`cuflight yield`, the yield line of
//    cuflight/schema/control.h: stay off at least for_ms; for_ms 0 ends a yield now);
//    CUFLIGHT_YIELD=start (off from the start, first try after CUFLIGHT_YIELD_MS); a trigger file
//    (CUFLIGHT_YIELD=/path: off while it exists, stat(2) every trigger_poll by the sender thread;
//    no signal, nothing the application must link).
// 2. Yielding, on the sender thread only: the gate closes first (the CUPTI callback records
//    nothing more and counts the launches it sees, launches_yielded), Poll returns kRelease, and
//    the sender thread stops kernel activity (not before CUPTI 13.0 Update 1, whose disable may
//    deadlock: SenderThreadOptions::kernel_disable_safe), flushes CUPTI's buffers (forced under the
//    unversioned API: nothing of ours is left in a buffer another tool's callbacks would get),
//    turns what they hold into events, and calls Released, which unsubscribes (hooks.release:
//    cuptiUnsubscribe). A callback already past the gate when the unsubscribe comes finishes
//    normally: it uses nothing the yield frees (the pipeline and tables live until the process
//    ends), so callbacks in flight are safe.
// 3. Taking CUPTI back: once the hold is over (and the trigger file gone), Poll calls hooks.take
//    (cuptiSubscribe, the driver callbacks, the activity set-up, and forgetting what the callbacks
//    would have kept current meanwhile) at most once per step, never on an application thread.
//    A refusal (another tool holds CUPTI) is retried after 1 s, doubling to 60 s, at most
//    max_attempts times (1440: about a day at 60 s); then the library stays off for the rest of
//    the process with one warning. Each attempt is one non-blocking CUPTI call.
// 4. What is recorded: yields (hand-overs, a start yielded included), yielded_ns (time off CUPTI,
//    an ongoing yield up to now), launches_yielded (launches the gate turned away), yielded (off
//    now): in stats, process_end and process_crash (schema/v1). Launches made while unsubscribed
//    are not seen by the library at all; yielded_ns says how long that was.
// Threads: gated() and CountLaunch() from any thread (the CUPTI callback: one relaxed load, one
// relaxed add); the counters from any thread; everything else on the sender thread.
#ifndef CUFLIGHT_LIBINJECT_SRC_CUPTI_YIELD_H_
#define CUFLIGHT_LIBINJECT_SRC_CUPTI_YIELD_H_

#include <cupti.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace cuflight::inject {

class CuptiYield {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    // CUFLIGHT_YIELD=start, or a trigger file that exists at start: off CUPTI from the start (the
    // library did not subscribe), first try at start + start_hold.
    bool start_yielded = false;
    std::chrono::milliseconds start_hold{60'000};
    // CUFLIGHT_YIELD=/path: off while this file exists; empty: none.
    std::string trigger_file;
    std::chrono::milliseconds trigger_poll{250};
    // Design point 3.
    std::chrono::milliseconds backoff_min{1'000};
    std::chrono::milliseconds backoff_max{60'000};
    int max_attempts = 1440;
  };
  // The CUPTI calls, made on the sender thread (design points 2 and 3). `take` returns
  // CUPTI_SUCCESS once subscribed and set up again, or the error of the refused subscription.
  struct Hooks {
    std::function<void()> release;
    std::function<CUptiResult()> take;
  };

  CuptiYield(Options options, Hooks hooks, Clock::time_point now);
  CuptiYield(const CuptiYield&) = delete;
  CuptiYield& operator=(const CuptiYield&) = delete;

  // Any thread: true while callbacks must record nothing (from a yield request until CUPTI is
  // taken back and the tables are current again).
  bool gated() const noexcept { return gated_.load(std::memory_order_relaxed); }
  // Sender thread, inside hooks.take once subscribed and set up, before the callbacks are enabled:
  // the callback records again from now.
  void OpenGate() noexcept { gated_.store(false, std::memory_order_relaxed); }
  // Any thread: a launch callback turned away by the gate.
  void CountLaunch() noexcept { launches_yielded_.fetch_add(1, std::memory_order_relaxed); }

  enum class Action { kNone, kRelease };
  // Sender thread: the collector's yield line (for_ms > 0: stay off at least that long, from now;
  // 0: end a yield now). A request while on CUPTI closes the gate at once.
  void Request(uint64_t for_ms, Clock::time_point now) noexcept;
  // Sender thread, every step: reads the trigger file when due, tries to take CUPTI back when due.
  // kRelease: the caller must stop its activity collection, flush and drain, then call Released.
  Action Poll(Clock::time_point now) noexcept;
  // Sender thread, after kRelease: unsubscribes (hooks.release).
  void Released(Clock::time_point now) noexcept;
  // Sender thread: true once after each time CUPTI was taken back (the caller starts its stall
  // tracking afresh).
  bool TakeResumed() noexcept;
  // Whether CUPTI is not ours now (yielding, yielded, or waiting to take it back): the sender
  // thread then makes no CUPTI call (no flush, no activity switch, no dropped-record read).
  bool off() const noexcept { return state_ != State::kOn; }

  uint64_t yields() const noexcept { return yields_.load(std::memory_order_relaxed); }
  uint64_t yielded_ns(Clock::time_point now) const noexcept;
  uint64_t launches_yielded() const noexcept {
    return launches_yielded_.load(std::memory_order_relaxed);
  }
  bool yielded() const noexcept { return gated(); }
  int attempts() const noexcept { return attempts_; }

 private:
  enum class State { kOn, kReleasing, kOff, kGaveUp };
  static int64_t Ns(Clock::time_point t) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  void BeginYield() noexcept;
  void TryTake(Clock::time_point now) noexcept;

  Options options_;
  Hooks hooks_;
  State state_ = State::kOn;
  Clock::time_point hold_until_{};
  Clock::time_point next_attempt_{};
  Clock::time_point next_file_check_{};
  bool file_held_ = false;
  int attempts_ = 0;
  bool resumed_ = false;
  std::atomic<bool> gated_{false};
  std::atomic<uint64_t> yields_{0};
  std::atomic<uint64_t> launches_yielded_{0};
  std::atomic<uint64_t> closed_ns_{0};    // yields that ended, in all
  std::atomic<int64_t> off_since_ns_{0};  // the current yield's start (Ns), 0: none
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CUPTI_YIELD_H_
