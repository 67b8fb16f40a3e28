// The sampled timing policy (CUFLIGHT_TIMING=sampled): kernel activity records
// (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) are enabled only in timing windows, so that the CUPTI
// instrumentation of every kernel is paid only a small share of the time, while every distinct
// kernel configuration still gets durations early and the rest is sampled evenly enough to
// estimate from.
//
// 1. Windows. One opens when the sender thread starts; one whenever a launch record shows a kernel
//    configuration not yet timed (CUFLIGHT_TIMING_NEW_CONFIGS); and periodic ones, one every
//    CUFLIGHT_TIMING_PERIOD_MS from a random phase. Each stays open CUFLIGHT_TIMING_WINDOW_MS.
//    With the defaults (100 ms every 10 s) the periodic duty cycle is 1%.
// 2. Off the application's threads. Every enable and disable is made by the sender thread (Tick,
//    OnLaunch), never from a CUPTI callback: cuptiActivityEnable/Disable take CUPTI's locks, which
//    an application thread inside a driver call may hold, and CUPTI serialises such calls per
//    subscriber (cupti_callbacks.h, "a subscriber must serialize access to" its enable calls).
//    One thread makes them all, so they never overlap.
// 3. Which launches are in a window. An application thread reads one word, `state()`, with one
//    relaxed load at the launch's API exit, and once at its API entry (CUpti_CallbackData::
//    correlationData carries the entry's value to the exit). The word counts the sender's steps
//    through four phases, its value modulo 4: closed, opening (the enable call in progress),
//    open, closing (the disable call in progress); the sender moves it to open only after the
//    enable call returned, and to closed only after the disable call returned (seq_cst stores).
//    A launch whose entry and exit read the same value:
//      - open: made entirely inside one window; kernel activity was enabled for the whole launch
//        call, and CUPTI makes its record (kLaunchInTimingWindow);
//      - closed: made entirely while kernel activity was disabled; no record can come.
//    Any other launch overlapped an enable or disable call: it may or may not be timed
//    (kLaunchAtTimingWindowEdge). It is flagged outside a window, and the sender thread drops a
//    kernel record that comes for it (OnKernelRecord), so that timing_window is true exactly for
//    the launches that get a kernel_time, and the stall tracker and TimingWatch, which wait only
//    for in-window launches, never wait for a record that does not come.
// 4. New configurations. A configuration is the function (FunctionInfo::id, never reused), the
//    device, grid, block, cluster and dynamic shared memory: what sets a kernel's duration. It
//    counts as timed once a launch of it made inside a window got its kernel record (by
//    correlation id). Until then each launch of it outside a window may open a window (not while
//    the record of one of its launches in a window is awaited, kAwaitRecord), at most
//    kMaxAskPerConfig times (a configuration whose records never come does not keep windows
//    open), and not sooner than one window length after the last window closed (so new
//    configurations keep kernel activity enabled at most half the time). The table holds
//    kMaxConfigs configurations; launches of others open no window (counted: configs_untracked).
// 5. Graphs. Kernel nodes of CUDA graphs reach the library only through their activity records
//    (no launch callback): under sampled they are seen only for graph launches inside a window.
//    Whether CUPTI records the nodes of a graph instantiated while kernel activity was disabled
//    is a question for the GPU checklist (docs/performance.md, "The sampled timing policy"):
//    CUPTI's documentation does not say. cupti_activity.h's cuptiActivityEnable says only
//    "Enable collection of a specific kind of activity record"; cuptiActivityEnableAndDump dumps
//    records of what happened before it for devices, contexts, streams, NVLink and PCIe only
//    ("For other activities, the behavior is similar to the API cuptiActivityEnable"); the
//    kernel record's graphId / graphNodeId and the release notes (through CUDA 13.1 Update 1)
//    say nothing of when a graph was instantiated.
// 6. Stalls. A stream whose launches were all made outside windows, that no synchronising call
//    covers and that shows no progress for the stall threshold cannot be judged from what the
//    library has (stall_tracker.h, point 10); the stall tracker asks for a window
//    (OpenForStall, once per stream for the launches it had, at most once per threshold per
//    stream), so that the stream's next launches get records and show whether it moves. Such a
//    window costs what any other does; it shows nothing of a stream that gets no launch while it
//    is open.
//
// Thread contract: state() from any thread; counters from any thread; everything else on the
// sender thread only.
#ifndef CUFLIGHT_LIBINJECT_SRC_TIMING_WINDOWS_H_
#define CUFLIGHT_LIBINJECT_SRC_TIMING_WINDOWS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "cupti_api.h"
#include "launch_record.h"

namespace cuflight::inject {

struct TimingWindowOptions {
  std::chrono::nanoseconds window{std::chrono::milliseconds(100)};
  std::chrono::nanoseconds period{std::chrono::seconds(10)};
  bool new_configs = true;
  // The periodic windows' phase, in [0, period); tests fix it. Negative: random.
  std::chrono::nanoseconds phase{-1};
};

class TimingWindows {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr size_t kMaxConfigs = 16384;
  static constexpr uint32_t kMaxAskPerConfig = 4;
  // A configuration with a launch in a window whose record has not come yet opens no window for
  // this long: the record comes with the next activity flush (every 500 ms at most).
  static constexpr std::chrono::seconds kAwaitRecord{2};

  // `cupti` (its SetActivityKind, through the activity family in use) outlives this object.
  TimingWindows(TimingWindowOptions options, const CuptiApi* cupti);
  TimingWindows(const TimingWindows&) = delete;
  TimingWindows& operator=(const TimingWindows&) = delete;

  // The word the launch callback reads (design point 3): its value modulo 4 is the phase.
  static constexpr uint64_t kClosed = 0, kOpening = 1, kOpen = 2, kClosing = 3;
  const std::atomic<uint64_t>* state() const noexcept { return &state_; }
  // The launch_flags bit for a launch whose API entry read `at_entry` and whose exit read
  // `at_exit`: kLaunchInTimingWindow, kLaunchAtTimingWindowEdge, or 0 (made while closed).
  static uint8_t LaunchFlag(uint64_t at_entry, uint64_t at_exit) noexcept {
    if (at_entry != at_exit) return blackbox::kLaunchAtTimingWindowEdge;
    switch (at_exit % 4) {
      case kOpen:
        return blackbox::kLaunchInTimingWindow;
      case kClosed:
        return 0;
      default:
        return blackbox::kLaunchAtTimingWindowEdge;
    }
  }

  // Sender thread. Opens the window at start. False: kernel activity could not be enabled (the
  // caller says why and treats timing as unavailable; no window opens later).
  bool Start(Clock::time_point now) noexcept;
  // Sender thread, every step: closes a window whose time is up, opens a periodic one when due.
  void Tick(Clock::time_point now) noexcept;
  // Sender thread: a window now, for the stall tracker (design point 6); counted in windows()
  // and stall_windows().
  void OpenForStall(Clock::time_point now) noexcept;
  uint64_t stall_windows() const { return stall_windows_; }
  // Sender thread: a recorded launch (kLaunch record); may open a window for a configuration not
  // yet timed (design point 4). Returns whether the launch was made in a window.
  bool OnLaunch(const LaunchRecord& record, Clock::time_point now) noexcept;
  // Sender thread: a kernel activity record (complete) with this correlation id arrived. False
  // when it is the record of a launch made across a window's edge (its kernel event said
  // timing_window false): the caller sends no kernel_time for it.
  bool OnKernelRecord(uint32_t correlation_id) noexcept;

  // Kernel activity cannot be used at all (its set-up failed): no window ever opens. Before Start.
  void SetUnavailable() noexcept { failed_ = true; }
  bool failed() const noexcept { return failed_; }
  // Windows opened, ns they were open in all (an open one up to `now`), launches in a window.
  uint64_t windows() const noexcept { return windows_.load(std::memory_order_relaxed); }
  uint64_t window_ns(Clock::time_point now) const noexcept;
  uint64_t launches_in_window() const noexcept {
    return launches_in_window_.load(std::memory_order_relaxed);
  }
  // Configurations seen, those timed, and launches of configurations the full table could not
  // hold.
  size_t configs() const noexcept { return configs_.size(); }
  size_t configs_timed() const noexcept { return timed_; }
  uint64_t configs_untracked() const noexcept { return untracked_; }
  // Enable or disable calls that failed after the start (each leaves the state as it was).
  uint64_t failed_calls() const noexcept { return failed_calls_; }
  // Launches made across a window's edge, and the kernel records of such launches dropped.
  uint64_t edge_launches() const noexcept { return edge_launches_; }
  uint64_t edge_records_dropped() const noexcept { return edge_dropped_; }

  // Launches across an edge remembered until their record comes (it may not); past this, the
  // oldest are forgotten (a record of one comes through as a kernel_time).
  static constexpr size_t kMaxEdgeLaunches = 4096;

 private:
  struct Config {
    bool timed = false;
    bool awaiting = false;     // `awaited` is in awaited_
    uint32_t asked = 0;        // windows this configuration opened
    uint32_t awaited = 0;      // correlation id of its latest launch in a window
    Clock::time_point awaited_at{};  // when that launch was handled
  };
  static uint64_t ConfigKey(const LaunchRecord& record) noexcept;
  bool Open(Clock::time_point now, Clock::time_point until) noexcept;
  // Moves the word to the next value in `phase` (kClosed ... kClosing).
  void MoveTo(uint64_t phase) noexcept;
  void Close(Clock::time_point now) noexcept;

  TimingWindowOptions options_;
  const CuptiApi* cupti_;
  std::atomic<uint64_t> state_{0};
  bool open_ = false;
  bool failed_ = false;
  Clock::time_point opened_at_{};
  Clock::time_point close_at_{};
  Clock::time_point closed_at_{};
  Clock::time_point next_periodic_{};
  std::atomic<uint64_t> windows_{0};
  std::atomic<uint64_t> closed_ns_{0};        // time of the windows already closed
  std::atomic<int64_t> open_since_ns_{-1};    // steady clock ns of the open window; -1: none
  std::atomic<uint64_t> launches_in_window_{0};
  uint64_t failed_calls_ = 0;
  uint64_t stall_windows_ = 0;
  // Configuration key -> its state; correlation id of the latest in-window launch of each
  // configuration not yet timed -> that configuration (at most one per configuration).
  std::unordered_map<uint64_t, Config> configs_;
  std::unordered_map<uint32_t, uint64_t> awaited_;
  size_t timed_ = 0;
  uint64_t untracked_ = 0;
  // Correlation ids of the launches made across an edge, in a ring of kMaxEdgeLaunches, and as a
  // set.
  std::unordered_map<uint32_t, uint32_t> edge_;  // id -> times it is in the ring
  std::vector<uint32_t> edge_ring_;
  size_t edge_next_ = 0;
  uint64_t edge_launches_ = 0;
  uint64_t edge_dropped_ = 0;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_TIMING_WINDOWS_H_
