// The sampled timing policy's windows (CUFLIGHT_TIMING=sampled) on a generated log's clock: which
// launches a producer would have made inside a timing window, for log_gen (log_gen.h, 3a) to write
// what the injected library writes under that policy: `timing_window` on every launch, and a
// kernel_time only for the launches made in a window.
//
// 1. The rules, as the environment contract states them (schema/env/README.md: CUFLIGHT_TIMING,
//    CUFLIGHT_TIMING_WINDOW_MS, CUFLIGHT_TIMING_PERIOD_MS, CUFLIGHT_TIMING_NEW_CONFIGS) and the
//    library's design notes detail them (libinject/src/timing_windows.h, points 1 and 4):
//    a. a window opens at the process's start;
//    b. periodic ones open at start + phase + k * period (k = 0, 1, ...), phase in [0, period);
//    c. a launch made outside every window, of a configuration not yet timed, opens one when the
//       policy's new-configuration windows are on, unless the configuration already opened
//       kMaxAskPerConfig windows, or one of its launches made in a window awaits its record
//       (kernel_time) and was made less than kAwaitRecordNs ago, or the last window closed less
//       than one window length ago. The launch that opens it is not in it. A configuration is
//       timed once the record of its latest launch made in a window comes; past kMaxConfigs
//       configurations, the others open no window;
//    d. each window stays open `window`; a window due while one is open extends that one to its
//       own end (one window, counted once).
//    A launch is in a window when its time t is in [open, close): made at the instant a window
//    opens it is in it, at the instant it closes it is not.
// 2. Not the library's TimingWindows itself: that is a piece of the injected library (its CUPTI
//    calls and launch records), and `cuflight demo` links this generator; cli/ may not link
//    libinject/ (docs/architecture.md, the dependency rule). Its three constants are repeated
//    here; tests/logstore/log_gen_sampled_test.cc holds them equal to the library's.
// 3. Where the generator has nothing to model, the schedule is the rules' ideal: time is
//    continuous (the library's sender thread acts at its next step, within ~10 ms; here a window
//    opens and closes at its exact time, and no periodic window is ever skipped); a launch call
//    takes no time, so no launch straddles a window's edge (timing_windows.h, point 3: none is
//    `kLaunchAtTimingWindowEdge`); no stall windows (point 6: the generator's stall events are
//    reports, not a stream that stops).
//
// Thread contract: one thread; times never go back.
#ifndef CUFLIGHT_BENCH_LOG_GEN_TIMING_SCHEDULE_H_
#define CUFLIGHT_BENCH_LOG_GEN_TIMING_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace cuflight::bench {

class TimingSchedule {
 public:
  // As libinject/src/timing_windows.h's TimingWindows::kMaxConfigs, kMaxAskPerConfig (the env
  // README's "a configuration opens at most 4 windows") and kAwaitRecord.
  static constexpr size_t kMaxConfigs = 16384;
  static constexpr uint32_t kMaxAskPerConfig = 4;
  static constexpr int64_t kAwaitRecordNs = 2'000'000'000;

  struct Options {
    int64_t window_ns = 100'000'000;     // CUFLIGHT_TIMING_WINDOW_MS, > 0
    int64_t period_ns = 10'000'000'000;  // CUFLIGHT_TIMING_PERIOD_MS, >= 2 * window_ns
    int64_t phase_ns = 0;                // in [0, period_ns)
    bool new_configs = true;             // CUFLIGHT_TIMING_NEW_CONFIGS
  };

  // Opens the start's window (1a) at start_ns. Options out of range are taken as the library
  // takes them: a window of at least 1 ns, a period of at least two windows, the phase modulo
  // the period.
  TimingSchedule(Options options, int64_t start_ns);

  // Moves the clock to now_ns (>= every time given before): closes the windows whose time is up
  // and opens the periodic ones due by then, in time order.
  void AdvanceTo(int64_t now_ns);
  // A launch at now_ns (AdvanceTo is applied first) of configuration `config` (any key that is
  // the same for launches of one function, device, grid, block, cluster and dynamic shared
  // memory) with this correlation id. Returns whether it was made in a window; may open a window
  // for its configuration (1c) from now_ns on.
  bool OnLaunch(uint64_t config, uint64_t correlation_id, int64_t now_ns);
  // The record (kernel_time) of the launch with this correlation id comes now.
  void OnRecord(uint64_t correlation_id);

  // Windows opened, ns they were open up to now_ns (an open one counted up to now_ns), launches
  // made in one: process_end's and stats' timing_windows, timing_window_ns, launches_in_window.
  uint64_t windows() const { return windows_; }
  uint64_t window_ns(int64_t now_ns) const;
  uint64_t launches_in_window() const { return launches_in_window_; }
  // Configurations seen, those timed, launches of configurations past kMaxConfigs.
  size_t configs() const { return configs_.size(); }
  size_t configs_timed() const { return timed_; }
  uint64_t configs_untracked() const { return untracked_; }

 private:
  struct Config {
    bool timed = false;
    bool awaiting = false;  // `awaited` is in awaited_
    uint32_t asked = 0;     // windows this configuration opened
    uint64_t awaited = 0;   // correlation id of its latest launch made in a window
    int64_t awaited_at = 0;
  };
  void Open(int64_t at_ns, int64_t until_ns);
  void Close();

  Options options_;
  bool open_ = false;
  int64_t opened_at_ = 0;
  int64_t close_at_ = 0;
  int64_t closed_at_ = 0;
  int64_t next_periodic_ = 0;
  uint64_t windows_ = 0;
  uint64_t closed_ns_ = 0;
  uint64_t launches_in_window_ = 0;
  std::unordered_map<uint64_t, Config> configs_;
  std::unordered_map<uint64_t, uint64_t> awaited_;  // correlation id -> configuration
  size_t timed_ = 0;
  uint64_t untracked_ = 0;
};

}  // namespace cuflight::bench

#endif  // CUFLIGHT_BENCH_LOG_GEN_TIMING_SCHEDULE_H_
