// bench/log_gen under the sampled timing policy (log_gen.h, 3a; timing_schedule.h): which launches
// are in a timing window, checked against the policy's rule as schema/env/README.md states it
// (CUFLIGHT_TIMING, _WINDOW_MS, _PERIOD_MS, _NEW_CONFIGS), computed here from the log's own
// events, not by the generator's schedule: once in closed form (periodic windows only), once by
// replaying the rule over the launches and the kernel_time lines as they come. And the three
// policies make the same launches from one seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuflight/schema/events.h"
#include "log_gen.h"
#include "log_gen_logs.h"
#include "temp_dir.h"
#include "timing_schedule.h"
#include "timing_windows.h"  // libinject/src: the library's constants, for the check below

namespace cuflight::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

// timing_schedule.h, 2: the constants repeated from the library's TimingWindows.
static_assert(TimingSchedule::kMaxConfigs == inject::TimingWindows::kMaxConfigs);
static_assert(TimingSchedule::kMaxAskPerConfig == inject::TimingWindows::kMaxAskPerConfig);
static_assert(TimingSchedule::kAwaitRecordNs ==
              std::chrono::nanoseconds(inject::TimingWindows::kAwaitRecord).count());

std::string ConfigValue(const Log& log, const std::string& key) {
  const auto starts = EventsOf<schema::OwnedProcessStartEvent>(log);
  for (const auto& [k, v] : starts.at(0).config) {
    if (k == key) return v;
  }
  return "absent";
}

std::set<uint64_t> TimedIds(const Log& log) {
  std::set<uint64_t> ids;
  for (const auto& t : EventsOf<schema::OwnedKernelTimeEvent>(log)) ids.insert(t.correlation_id);
  return ids;
}

// Periodic windows only (CUFLIGHT_TIMING_NEW_CONFIGS=0): 100 ms every 1,000 ms from a phase of
// 100 ms, launches about 1 ms apart (0.5 to 1.5 ms) for about 5 s. By the README's rule a launch
// at t (from the process's start s) is in a window when t - s < 100 ms (the start's) or when
// t - s >= 100 ms and (t - s - 100 ms) mod 1,000 ms < 100 ms. 5,000 launches of 0.5-1.5 ms end
// near 5.0 s: windows at 0, 100, 1,100, 2,100, 3,100 and 4,100 ms, 6 in all, open 600 ms, about
// 600 launches (one a millisecond) of 5,000. The first periodic window opens as the start's
// closes: two windows, back to back (the library closes a window whose time is up before it opens
// the periodic one due then: TimingWindows::Tick), not one of 200 ms.
TEST(LogGenSampledTest, PeriodicWindowsAreTheDocumentedScheduleByHand) {
  test_support::TempDir dir;
  LogSpec spec;
  spec.launches = 5'000;
  spec.kernels = 5;
  spec.launch_gap_ns = kMs;
  spec.timing = schema::TimingPolicy::kSampled;
  spec.timing_window_ms = 100;
  spec.timing_period_ms = 1'000;
  spec.timing_phase_ns = 100 * kMs;
  spec.timing_new_configs = false;
  const Log log = MakeLog(dir.path(), spec);

  EXPECT_EQ(ConfigValue(log, "timing"), "sampled");
  EXPECT_EQ(ConfigValue(log, "timing_window_ms"), "100");
  EXPECT_EQ(ConfigValue(log, "timing_period_ms"), "1000");
  EXPECT_EQ(ConfigValue(log, "timing_new_configs"), "false");
  const int64_t s = EventsOf<schema::OwnedProcessStartEvent>(log).at(0).start_ns;
  const auto ends = EventsOf<schema::OwnedProcessEndEvent>(log);
  ASSERT_EQ(ends.size(), 1u);
  const int64_t end = ends[0].header.ts_ns;
  ASSERT_GT(end - s, 4'200 * kMs);  // past the sixth window's end
  ASSERT_LT(end - s, 5'100 * kMs);  // before a seventh

  std::set<uint64_t> in_window;
  const auto kernels = EventsOf<schema::OwnedKernelEvent>(log);
  ASSERT_EQ(kernels.size(), 5'000u);
  for (const auto& k : kernels) {
    const int64_t t = k.header.ts_ns - s;
    const bool expected =
        t < 100 * kMs || (t >= 100 * kMs && (t - 100 * kMs) % (1'000 * kMs) < 100 * kMs);
    ASSERT_TRUE(k.timing_window.has_value()) << k.correlation_id;
    EXPECT_EQ(*k.timing_window, expected) << "launch at " << t << " ns";
    if (expected) in_window.insert(k.correlation_id);
  }
  EXPECT_GT(in_window.size(), 540u);
  EXPECT_LT(in_window.size(), 660u);
  EXPECT_EQ(TimedIds(log), in_window);
  EXPECT_EQ(ends[0].timing_policy, schema::TimingPolicy::kSampled);
  EXPECT_EQ(ends[0].timing_windows, 6u);
  EXPECT_EQ(ends[0].timing_window_ns, 600 * kMs);
  EXPECT_EQ(ends[0].launches_in_window, in_window.size());
  EXPECT_EQ(log.totals.in_window, in_window.size());
}

// The README's rule, replayed over a log in the order of its lines: a window at the start; the
// periodic ones at start + phase + k * period; and, for a launch outside every window of a
// configuration (function and grid here: each kernel's block and shared memory are its own) not
// yet timed, one from that launch on, unless the configuration opened 4 already, the last window
// closed less than one window length before, or a launch of it made in a window less than 2 s ago
// waits for its kernel_time (libinject/src/timing_windows.h, point 4). The latest launch made in a
// window is the one whose kernel_time times its configuration. A window due while one is open
// lengthens that one. Windows are [open, close) intervals.
struct Replay {
  int64_t window = 0, period = 0;
  int64_t next_periodic = 0;
  std::vector<std::pair<int64_t, int64_t>> windows;
  struct Config {
    bool timed = false;
    int asked = 0;
    bool waiting = false;
    uint64_t waiting_for = 0;
    int64_t since = 0;
  };
  std::map<std::pair<std::string, std::tuple<uint32_t, uint32_t, uint32_t>>, Config> configs;
  std::map<uint64_t, Config*> waiting;  // correlation id -> its configuration
  uint64_t in_window = 0;

  Replay(int64_t start, int64_t w, int64_t p, int64_t phase)
      : window(w), period(p), next_periodic(start + phase), windows{{start, start + w}} {}

  void PeriodicUpTo(int64_t t) {
    for (; next_periodic <= t; next_periodic += period) {
      auto& last = windows.back();
      if (last.second > next_periodic) {
        last.second = std::max(last.second, next_periodic + window);
      } else {
        windows.emplace_back(next_periodic, next_periodic + window);
      }
    }
  }
  bool Launch(const schema::OwnedKernelEvent& k) {
    const int64_t t = k.header.ts_ns;
    PeriodicUpTo(t);
    const bool in = windows.back().first <= t && t < windows.back().second;
    in_window += in ? 1 : 0;
    Config& c = configs[{k.name, {k.grid.x, k.grid.y, k.grid.z}}];
    if (c.timed) return in;
    if (in) {
      if (c.waiting) waiting.erase(c.waiting_for);
      c.waiting = true;
      c.waiting_for = k.correlation_id;
      c.since = t;
      waiting[k.correlation_id] = &c;
    } else if (c.asked < 4 && t - windows.back().second >= window &&
               !(c.waiting && t - c.since < 2'000 * kMs)) {
      windows.emplace_back(t, t + window);
      ++c.asked;
    }
    return in;
  }
  void Time(const schema::OwnedKernelTimeEvent& time) {
    const auto it = waiting.find(time.correlation_id);
    if (it == waiting.end()) return;
    it->second->timed = true;
    it->second->waiting = false;
    waiting.erase(it);
  }
  uint64_t OpenNs(int64_t until) const {
    uint64_t ns = 0;
    for (const auto& [open, close] : windows) {
      if (open < until) ns += static_cast<uint64_t>(std::min(close, until) - open);
    }
    return ns;
  }
};

struct ReplayCase {
  const char* name;
  uint64_t launches;
  int kernels;
  int64_t launch_gap_ns;
  uint64_t flush_every;
  uint64_t untimed_every;
  uint32_t window_ms;
  uint32_t period_ms;
  int64_t phase_ns;
};

void PrintTo(const ReplayCase& c, std::ostream* os) { *os << c.name; }

class LogGenSampledReplay : public ::testing::TestWithParam<ReplayCase> {};

TEST_P(LogGenSampledReplay, EveryLaunchIsInAWindowExactlyWhenTheRuleSays) {
  const ReplayCase& c = GetParam();
  test_support::TempDir dir;
  LogSpec spec;
  spec.launches = c.launches;
  spec.kernels = c.kernels;
  spec.launch_gap_ns = c.launch_gap_ns;
  spec.flush_every = c.flush_every;
  spec.untimed_every = c.untimed_every;
  spec.timing = schema::TimingPolicy::kSampled;
  spec.timing_window_ms = c.window_ms;
  spec.timing_period_ms = c.period_ms;
  spec.timing_phase_ns = c.phase_ns;
  spec.rotate_bytes = 4 << 20;
  spec.intern = true;
  const Log log = MakeLog(dir.path(), spec);

  Replay replay(EventsOf<schema::OwnedProcessStartEvent>(log).at(0).start_ns,
                int64_t{c.window_ms} * kMs, int64_t{c.period_ms} * kMs, c.phase_ns);
  std::set<uint64_t> in_window;
  size_t launches = 0;
  for (const schema::OwnedEvent& e : log.events) {
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e)) {
      ++launches;
      const bool expected = replay.Launch(*k);
      ASSERT_TRUE(k->timing_window.has_value()) << k->correlation_id;
      ASSERT_EQ(*k->timing_window, expected) << "correlation id " << k->correlation_id;
      if (expected) in_window.insert(k->correlation_id);
    } else if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&e)) {
      replay.Time(*t);
    }
  }
  ASSERT_EQ(launches, c.launches);
  const auto ends = EventsOf<schema::OwnedProcessEndEvent>(log);
  ASSERT_EQ(ends.size(), 1u);
  replay.PeriodicUpTo(ends[0].header.ts_ns);
  EXPECT_EQ(ends[0].timing_windows, replay.windows.size());
  EXPECT_EQ(ends[0].timing_window_ns, replay.OpenNs(ends[0].header.ts_ns));
  EXPECT_EQ(ends[0].launches_in_window, in_window.size());
  // Only launches in a window are timed (all of them, but for the records lost on purpose).
  const std::set<uint64_t> timed = TimedIds(log);
  EXPECT_TRUE(std::includes(in_window.begin(), in_window.end(), timed.begin(), timed.end()));
  if (c.untimed_every == 0) {
    EXPECT_EQ(timed, in_window);
  } else {
    EXPECT_LT(timed.size(), in_window.size());
  }
  // The case exercises what it is for: windows beyond the start's and the periodic ones (opened
  // by configurations not yet timed), and configurations that asked for as many as they may.
  const int64_t length = ends[0].header.ts_ns - replay.windows.front().first;
  EXPECT_GT(replay.windows.size(), 2 + static_cast<size_t>(length / (int64_t{c.period_ms} * kMs)));
  int asked_four = 0;
  for (const auto& [key, config] : replay.configs) asked_four += config.asked == 4 ? 1 : 0;
  EXPECT_GT(asked_four, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LogGenSampledReplay,
    ::testing::Values(
        // 0.4 s, 600 configurations first launched mostly after the start's 2 ms window; records
        // come with the flush every 4,096 launches (~80 ms), so a configuration waits for one.
        ReplayCase{"many_configs", 20'000, 200, 20'000, 4'096, 0, 2, 100, 30 * kMs},
        // 5 s, every third launch's record lost (never timed by it), flushes every 64 launches:
        // configurations wait past the 2 s limit and ask again, up to 4 windows each.
        ReplayCase{"records_lost", 20'000, 60, 250'000, 64, 3, 5, 1'000, 0}),
    [](const ::testing::TestParamInfo<ReplayCase>& param) {
      return std::string(param.param.name);
    });

// Without a phase given, each process's is drawn from its seed: the launches each process made in
// a periodic window lie in one window-long span of the period (modulo it), the two processes'
// spans differ, and the same spec writes the same flags again.
TEST(LogGenSampledTest, EachProcessDrawsItsOwnPhaseFromItsSeed) {
  test_support::TempDir dir;
  LogSpec spec;
  spec.launches = 3'000;
  spec.processes = 2;
  spec.kernels = 5;
  spec.launch_gap_ns = kMs;
  spec.timing = schema::TimingPolicy::kSampled;
  spec.timing_window_ms = 10;
  spec.timing_period_ms = 200;
  spec.timing_new_configs = false;
  const Log log = MakeLog(dir.path() / "a", spec);
  const Log again = MakeLog(dir.path() / "b", spec);
  std::map<int32_t, int64_t> start;
  for (const auto& p : EventsOf<schema::OwnedProcessStartEvent>(log))
    start[p.header.pid] = p.start_ns;
  ASSERT_EQ(start.size(), 2u);
  std::map<int32_t, std::vector<int64_t>> residues;  // (t - start) mod period, past the start's
  std::vector<bool> flags;
  for (const auto& k : EventsOf<schema::OwnedKernelEvent>(log)) {
    ASSERT_TRUE(k.timing_window.has_value());
    flags.push_back(*k.timing_window);
    const int64_t t = k.header.ts_ns - start.at(k.header.pid);
    if (*k.timing_window && t >= 10 * kMs) residues[k.header.pid].push_back(t % (200 * kMs));
  }
  std::vector<bool> flags_again;
  for (const auto& k : EventsOf<schema::OwnedKernelEvent>(again)) {
    flags_again.push_back(k.timing_window.value_or(false));
  }
  EXPECT_EQ(flags, flags_again);
  ASSERT_EQ(residues.size(), 2u);
  int64_t first[2] = {0, 0};  // each process's window start within the period
  size_t process = 0;
  for (auto& [pid, r] : residues) {
    ASSERT_GT(r.size(), 50u) << pid;  // ~14 windows of ~10 launches
    std::sort(r.begin(), r.end());
    // One span of at most a window, allowing for the wrap past the period's end.
    int64_t widest_gap = r.front() + 200 * kMs - r.back();
    size_t after_gap = 0;
    for (size_t i = 1; i < r.size(); ++i) {
      if (r[i] - r[i - 1] > widest_gap) {
        widest_gap = r[i] - r[i - 1];
        after_gap = i;
      }
    }
    EXPECT_GE(widest_gap, 190 * kMs) << pid;
    first[process++] = r[after_gap];
  }
  EXPECT_GT(first[0] > first[1] ? first[0] - first[1] : first[1] - first[0], 10 * kMs);
}

// One seed, three policies, the same launches: under sampled each launch also says whether it
// was in a window and those that were have the very kernel_time they have under all; under off
// none has one. process_start's config, stats' and process_end's timing_policy say the policy
// (under all, as before the option: none).
TEST(LogGenSampledTest, ThePoliciesMakeTheSameLaunchesAndDifferInTheirTimes) {
  test_support::TempDir dir;
  LogSpec spec;
  spec.launches = 120'000;  // one stats event
  spec.intern = true;       // fewer bytes to write and read; expanded, the same events
  spec.kernels = 20;
  spec.timing_window_ms = 20;
  spec.timing_period_ms = 500;
  spec.timing_phase_ns = 100 * kMs;
  spec.rotate_bytes = 0;
  LogSpec sampled = spec;
  sampled.timing = schema::TimingPolicy::kSampled;
  LogSpec off = spec;
  off.timing = schema::TimingPolicy::kOff;
  const Log a = MakeLog(dir.path() / "all", spec);
  const Log s = MakeLog(dir.path() / "sampled", sampled);
  const Log o = MakeLog(dir.path() / "off", off);

  const auto ka = EventsOf<schema::OwnedKernelEvent>(a);
  const auto ks = EventsOf<schema::OwnedKernelEvent>(s);
  const auto ko = EventsOf<schema::OwnedKernelEvent>(o);
  ASSERT_EQ(ka.size(), 120'000u);
  ASSERT_EQ(ks.size(), ka.size());
  ASSERT_EQ(ko.size(), ka.size());
  size_t in_window = 0;
  for (size_t i = 0; i < ka.size(); ++i) {
    schema::OwnedKernelEvent x = ka[i], y = ks[i], z = ko[i];
    EXPECT_FALSE(x.timing_window.has_value());
    EXPECT_FALSE(z.timing_window.has_value());
    ASSERT_TRUE(y.timing_window.has_value());
    in_window += *y.timing_window ? 1 : 0;
    x.header.seq = y.header.seq = z.header.seq = 0;  // kernel_time lines take seqs in between
    y.timing_window.reset();
    ASSERT_EQ(x, y) << i;
    ASSERT_EQ(x, z) << i;
  }
  std::map<uint64_t, schema::OwnedKernelTimeEvent> times_all;
  for (auto t : EventsOf<schema::OwnedKernelTimeEvent>(a)) {
    t.header = {};
    times_all[t.correlation_id] = t;
  }
  ASSERT_EQ(times_all.size(), 120'000u);
  const auto ts = EventsOf<schema::OwnedKernelTimeEvent>(s);
  EXPECT_EQ(ts.size(), in_window);
  for (auto t : ts) {
    t.header = {};
    EXPECT_EQ(t, times_all.at(t.correlation_id));
  }
  EXPECT_TRUE(EventsOf<schema::OwnedKernelTimeEvent>(o).empty());
  // By hand: about 2.4 s of launches (20 us apart on average): the start's window and those at
  // 100, 600, 1,100, 1,600 and 2,100 ms, 20 ms each, with the few that configurations not yet
  // timed open: some 6 x 20 ms = 120 ms of 2.4 s, 5 % of the launches.
  EXPECT_GT(in_window, 120'000u * 4 / 100);
  EXPECT_LT(in_window, 120'000u * 8 / 100);

  EXPECT_EQ(ConfigValue(a, "timing"), "absent");
  EXPECT_EQ(ConfigValue(s, "timing"), "sampled");
  EXPECT_EQ(ConfigValue(o, "timing"), "off");
  const auto stats_s = EventsOf<schema::OwnedStatsEvent>(s);
  ASSERT_EQ(stats_s.size(), 1u);
  EXPECT_EQ(stats_s[0].timing_policy, schema::TimingPolicy::kSampled);
  EXPECT_GT(stats_s[0].timing_windows, 0u);
  EXPECT_LE(stats_s[0].launches_in_window, in_window);
  EXPECT_EQ(EventsOf<schema::OwnedStatsEvent>(a).at(0).timing_policy,
            schema::TimingPolicy::kUnknown);
  EXPECT_EQ(EventsOf<schema::OwnedStatsEvent>(o).at(0).timing_policy, schema::TimingPolicy::kOff);
  EXPECT_EQ(EventsOf<schema::OwnedProcessEndEvent>(a).at(0).timing_policy,
            schema::TimingPolicy::kUnknown);
  EXPECT_EQ(EventsOf<schema::OwnedProcessEndEvent>(s).at(0).launches_in_window, in_window);
  EXPECT_EQ(EventsOf<schema::OwnedProcessEndEvent>(o).at(0).timing_policy,
            schema::TimingPolicy::kOff);
  EXPECT_EQ(EventsOf<schema::OwnedProcessEndEvent>(o).at(0).timing_windows, 0u);
}

}  // namespace
}  // namespace cuflight::bench
