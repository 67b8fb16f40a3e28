// The injected library's configuration: the CUFLIGHT_* environment variables, read once at
// injection time (schema/env/README.md lists them). A bad value never stops anything: the
// variable falls back to its default and ParseConfig returns one warning line for it, which the
// caller prints. Nothing here throws, and nothing runs on the launch hot path.
#ifndef CUFLIGHT_ENV_CONFIG_H_
#define CUFLIGHT_ENV_CONFIG_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuflight/env/on_full.h"
#include "cuflight/schema/timing_policy.h"

namespace cuflight::env {

using OnFullPolicy = OnFull;
// CUFLIGHT_TIMING: all, sampled or off (kUnknown is never a Config's).
using TimingPolicy = schema::TimingPolicy;

enum class LogLevel : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// CUFLIGHT_API_ERRORS: which driver calls the injected library subscribes to, and so which failed
// calls can become api_error events (libinject/src/driver_queries.h has the lists;
// docs/crash.md, "CUDA API errors", says what each covers).
enum class ApiErrors : uint8_t {
  // "off" (also 0, false, no): the calls the library needs (launches, what changes its caches,
  // the synchronising calls); no api_error events.
  kOff,
  // "launches": the same calls; their failures are api_error events.
  kLaunches,
  // "default" (also 1, true, on, yes): every driver call but those libraries make at a high rate
  // (queries, event records and waits, capture checks, the current context, pointer and device
  // attributes, entry points).
  kDefault,
  // "all": every driver call.
  kAll,
};

// Accepted ranges (inclusive) and defaults.
inline constexpr uint32_t kDefaultRingSlots = 16384;
inline constexpr uint32_t kMinRingSlots = 64;
inline constexpr uint32_t kMaxRingSlots = uint32_t{1} << 22;
inline constexpr uint32_t kDefaultFlushMs = 100;
inline constexpr uint32_t kMinFlushMs = 1;
inline constexpr uint32_t kMaxFlushMs = 10'000;
inline constexpr uint32_t kDefaultStatsMs = 5'000;
inline constexpr uint32_t kMinStatsMs = 100;
inline constexpr uint32_t kMaxStatsMs = 3'600'000;
inline constexpr uint64_t kDefaultBufferBytes = uint64_t{8} << 20;
inline constexpr uint64_t kMinBufferBytes = uint64_t{64} << 10;
inline constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 30;
inline constexpr uint32_t kDefaultSampleEvery = 1;
inline constexpr uint32_t kMinSampleEvery = 1;
inline constexpr uint32_t kMaxSampleEvery = 1'000'000;
inline constexpr uint32_t kDefaultApiErrorHistory = 8;
inline constexpr uint32_t kMaxApiErrorHistory = 64;
inline constexpr uint64_t kDefaultSpillRotateBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMinSpillRotateBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxSpillRotateBytes = uint64_t{64} << 30;
// CUFLIGHT_SPILL_MAX_BYTES is also at least the rotation size (see Config::spill_max_bytes).
inline constexpr uint64_t kDefaultSpillMaxBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMinSpillMaxBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxSpillMaxBytes = uint64_t{64} << 40;

// CUFLIGHT_STALL_MS: 0 turns stall detection off; otherwise at least kMinStallMs (the activity
// flush that shows kernels finishing runs every few hundred ms, so a shorter threshold would call
// every kernel stalled) and at most an hour.
inline constexpr uint32_t kDefaultStallMs = 10'000;
inline constexpr uint32_t kMinStallMs = 100;
inline constexpr uint32_t kMaxStallMs = 3'600'000;

// The sampled timing policy's windows (libinject/src/timing_windows.h): CUFLIGHT_TIMING_WINDOW_MS
// is how long a window stays open, CUFLIGHT_TIMING_PERIOD_MS the period of the periodic windows
// (random phase). The defaults keep kernel activity enabled 1% of the time outside the windows
// for new kernel configurations. A window is at most half its period (ParseConfig: otherwise both
// take their defaults, with one warning).
inline constexpr uint32_t kDefaultTimingWindowMs = 100;
inline constexpr uint32_t kMinTimingWindowMs = 1;
inline constexpr uint32_t kMaxTimingWindowMs = 60'000;
inline constexpr uint32_t kDefaultTimingPeriodMs = 10'000;
inline constexpr uint32_t kMinTimingPeriodMs = 100;
inline constexpr uint32_t kMaxTimingPeriodMs = 86'400'000;

// CUFLIGHT_YIELD_MS: under CUFLIGHT_YIELD=start, how long the library stays off CUPTI before it
// first tries to subscribe (the time the application has to start its own profiler); a day at
// most (schema::kMaxYieldMs).
inline constexpr uint32_t kDefaultYieldMs = 60'000;
inline constexpr uint32_t kMaxYieldMs = 86'400'000;

// CUFLIGHT_COLLECTOR_UID: the largest uid (uid_t's all-ones value, (uid_t)-1, means "none").
inline constexpr uint64_t kMaxCollectorUid = 4294967294u;

// Every variable ParseConfig reads, in the order Describe lists them.
inline constexpr std::array<std::string_view, 27> kConfigVariables = {
    "CUFLIGHT_COLLECTOR",         "CUFLIGHT_COLLECTOR_UID",      "CUFLIGHT_TIMING",
    "CUFLIGHT_TIMING_WINDOW_MS",  "CUFLIGHT_TIMING_PERIOD_MS",   "CUFLIGHT_TIMING_NEW_CONFIGS",
    "CUFLIGHT_RING_SIZE",         "CUFLIGHT_ON_FULL",            "CUFLIGHT_FLUSH_MS",
    "CUFLIGHT_STATS_MS",          "CUFLIGHT_BUFFER_BYTES",       "CUFLIGHT_INCLUDE",
    "CUFLIGHT_EXCLUDE",           "CUFLIGHT_SAMPLE",             "CUFLIGHT_LOG_LEVEL",
    "CUFLIGHT_SPILL_DIR",         "CUFLIGHT_SPILL_ROTATE_BYTES", "CUFLIGHT_SPILL_MAX_BYTES",
    "CUFLIGHT_API_ERRORS",        "CUFLIGHT_API_ERROR_HISTORY",  "CUFLIGHT_CRASH_HANDLER",
    "CUFLIGHT_STALL_MS",          "CUFLIGHT_BLACKBOX",           "CUFLIGHT_ATTRIBUTION_ENV",
    "CUFLIGHT_YIELD",             "CUFLIGHT_YIELD_MS",           "CUFLIGHT_INTERN_CONFIGS"};

struct Config {
  // CUFLIGHT_COLLECTOR, passed to the transport unchanged; default: the transport's default path,
  // given to ParseConfig by the caller.
  std::string collector_path;
  // CUFLIGHT_COLLECTOR_UID: one more uid whose collector the producer trusts on a Unix socket,
  // besides its own (real or effective) uid and root's (cuflight/transport/peer_trust.h); -1:
  // none. For a collector that serves many users under a uid of its own.
  int64_t collector_uid = -1;
  // CUFLIGHT_TIMING: which launches also get their GPU start/end times through the CUPTI activity
  // API: all (the default), those made in timing windows (sampled), or none (off). "1", "true",
  // "on", "yes" read as all; "0", "false", "no" as off.
  TimingPolicy timing = TimingPolicy::kAll;
  // CUFLIGHT_TIMING_WINDOW_MS, CUFLIGHT_TIMING_PERIOD_MS: the sampled policy's window length and
  // period, in [kMinTimingWindowMs, kMaxTimingWindowMs] and [kMinTimingPeriodMs,
  // kMaxTimingPeriodMs], the window at most half the period.
  uint32_t timing_window_ms = kDefaultTimingWindowMs;
  uint32_t timing_period_ms = kDefaultTimingPeriodMs;
  // CUFLIGHT_TIMING_NEW_CONFIGS: under sampled, open a window when a kernel configuration
  // (function and launch configuration) not yet timed is launched.
  bool timing_new_configs = true;
  // CUFLIGHT_RING_SIZE: launch records the ring holds; a power of two in
  // [kMinRingSlots, kMaxRingSlots].
  uint32_t ring_slots = kDefaultRingSlots;
  // CUFLIGHT_ON_FULL: what a launch does when the ring is full.
  OnFull on_full = OnFull::kDrop;
  // CUFLIGHT_FLUSH_MS: longest time a record waits in the library before it is sent.
  uint32_t flush_ms = kDefaultFlushMs;
  // CUFLIGHT_STATS_MS: interval of the `stats` events.
  uint32_t stats_ms = kDefaultStatsMs;
  // CUFLIGHT_BUFFER_BYTES: encoded events kept while the collector is unreachable or has not
  // acknowledged them.
  uint64_t buffer_bytes = kDefaultBufferBytes;
  // CUFLIGHT_INCLUDE / CUFLIGHT_EXCLUDE: ECMAScript patterns searched for in the kernel name (see
  // NameFilter); empty: no filter. ParseConfig leaves only valid patterns here.
  std::string include_regex;
  std::string exclude_regex;
  // CUFLIGHT_SAMPLE: record the 1st, (N+1)th, (2N+1)th, ... launch of each function.
  uint32_t sample_every = kDefaultSampleEvery;
  // CUFLIGHT_LOG_LEVEL: the library's own messages on stderr.
  LogLevel log_level = LogLevel::kWarn;
  // CUFLIGHT_SPILL_DIR: where events that cannot reach a collector are written (docs/spill.md);
  // an absolute path, or empty (the default): no spill, such events are held up to buffer_bytes
  // and then dropped.
  std::string spill_dir;
  // CUFLIGHT_SPILL_ROTATE_BYTES: size at which a spill file is closed into a numbered segment,
  // in [kMinSpillRotateBytes, kMaxSpillRotateBytes].
  uint64_t spill_rotate_bytes = kDefaultSpillRotateBytes;
  // CUFLIGHT_SPILL_MAX_BYTES: most bytes in the process's spill files, past which events are
  // dropped; in [kMinSpillMaxBytes, kMaxSpillMaxBytes] and at least spill_rotate_bytes (a
  // smaller value given is a warning and falls back to max(kDefaultSpillMaxBytes,
  // spill_rotate_bytes); unset, it is at least spill_rotate_bytes silently).
  uint64_t spill_max_bytes = kDefaultSpillMaxBytes;
  // CUFLIGHT_API_ERRORS: which driver calls are subscribed to, and whether their failures are
  // recorded as api_error events (every subscribed call's exit goes through the CUPTI callback).
  ApiErrors api_errors = ApiErrors::kDefault;
  // CUFLIGHT_API_ERROR_HISTORY: correlation ids of the latest launches on the failing call's
  // context carried by an api_error event, in [0, kMaxApiErrorHistory].
  uint32_t api_error_history = kDefaultApiErrorHistory;
  // CUFLIGHT_CRASH_HANDLER: handle SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT to send what is
  // pending and a process_crash event before the signal takes its course.
  bool crash_handler = true;
  // CUFLIGHT_STALL_MS: report a stall (docs/crash.md, "GPU hangs") when launched work has not
  // finished for this long; 0: off. 0 or in [kMinStallMs, kMaxStallMs]. Launches made without
  // kernel timing (timing off, or outside a window under sampled) are judged from the
  // application's synchronising calls only.
  uint32_t stall_ms = kDefaultStallMs;
  // CUFLIGHT_BLACKBOX: keep the launch ring and what the collector needs to make its events in a
  // memfd passed to the collector, which reads it if the process dies without a word (SIGKILL,
  // the OOM killer): docs/crash.md. Off: the ring in the process's own memory.
  bool blackbox = true;
  // CUFLIGHT_ATTRIBUTION_ENV: more environment variables for process_start's attribution, after
  // the defaults (cuflight/env/attribution.h): names separated by commas or blanks, each
  // IsAttributionName, at most kMaxAttributionExtraNames, in the order given, repeats and
  // default names left out. A bad name or too many is a warning and none added.
  std::vector<std::string> attribution_env;
  // CUFLIGHT_YIELD: taking turns with a CUPTI tool the process starts itself (torch.profiler:
  // docs/profilers.md). Empty ("off", the default): the library subscribes to CUPTI when CUDA
  // loads it and yields only when asked (`cuflight yield`). "start": it does not subscribe then,
  // and tries yield_ms later (again, with backoff, while another tool holds CUPTI). An absolute
  // path: a trigger file, polled by the sender thread; while it exists the library stays off
  // CUPTI, and once it is gone it subscribes again (with backoff). Anything else is a warning and
  // off.
  std::string yield;
  // CUFLIGHT_YIELD_MS: see kDefaultYieldMs; in [0, kMaxYieldMs].
  uint32_t yield_ms = kDefaultYieldMs;
  // CUFLIGHT_INTERN_CONFIGS: send kernel launches as interned configurations (docs/protocol.md,
  // "Interned configurations"): a kernel_config once per (function, launch configuration, device)
  // in a stream and a short `launch` line per launch (the default). Off: a whole `kernel` event
  // per launch, as before interning.
  bool intern_configs = true;

  bool operator==(const Config&) const = default;
};

struct ParsedConfig {
  Config config;
  // One line per rejected or adjusted variable, naming the variable, the value given and the value
  // used instead; no prefix and no newline.
  std::vector<std::string> warnings;
};

// Reads every CUFLIGHT_* variable through `getenv_fn` (which returns nullptr for an unset
// variable). An unset variable, or one set to an empty or all-blank value, takes its default
// silently; surrounding blanks are ignored. Never throws: should memory run out, returns the
// defaults (collector_path = default_collector_path) with at most one warning saying so.
ParsedConfig ParseConfig(const std::function<const char*(const char*)>& getenv_fn,
                         std::string default_collector_path) noexcept;

// The effective configuration as (key, value) pairs for process_start's `config` object, in
// kConfigVariables order. Keys are the variable names without "CUFLIGHT_", in lower case
// ("collector", "collector_uid" (empty when none), "timing" ("all", "sampled" or "off"),
// "timing_window_ms", "timing_period_ms", "timing_new_configs", "ring_size", ..., "spill_dir",
// "spill_rotate_bytes", "spill_max_bytes", "api_errors", "api_error_history", "crash_handler",
// "stall_ms", "blackbox", "attribution_env" (the names joined by ','), "yield" ("off", "start" or
// the trigger file), "yield_ms", "intern_configs");
// each value, given back to ParseConfig as the variable's value, yields the same Config. Returns
// an empty vector if memory runs out.
std::vector<std::pair<std::string, std::string>> Describe(const Config& config) noexcept;

// "trace", "debug", "info", "warn", "error", "off".
std::string_view LogLevelName(LogLevel level) noexcept;
// "drop", "block".
std::string_view OnFullName(OnFull on_full) noexcept;
// "off", "launches", "default", "all".
std::string_view ApiErrorsName(ApiErrors api_errors) noexcept;

// The include/exclude kernel-name filter, compiled once. A name is accepted when it contains a
// match of the include pattern (or there is none) and no match of the exclude pattern: patterns
// are searched for anywhere in the name (anchor with ^ and $ for a whole-name match), in the
// ECMAScript grammar without back-references. Matching time is linear in the name's length (the
// patterns run on libstdc++'s breadth-first matcher, which neither recurses per character nor
// backtracks exponentially). Immutable after Make: Accept may be called from any thread.
class NameFilter {
 public:
  // Inactive: accepts every name.
  NameFilter() = default;

  // Compiles config.include_regex and config.exclude_regex. A pattern that does not compile (or
  // memory running out) appends one warning line to *warnings (when not null) and leaves that side
  // without a filter.
  static NameFilter Make(const Config& config, std::vector<std::string>* warnings) noexcept;

  // Applies the filter to `demangled`, or to `mangled` when `demangled` is empty (demangling
  // failed). Allocates (the regex engine's state); meant to run once per function, with the result
  // cached by the caller. Should matching fail (memory, regex engine limits), accepts.
  bool Accept(std::string_view demangled, std::string_view mangled) const noexcept;

  // True when at least one pattern is in force.
  bool active() const noexcept { return include_ != nullptr || exclude_ != nullptr; }

 private:
  struct Pattern;
  std::shared_ptr<const Pattern> include_;
  std::shared_ptr<const Pattern> exclude_;
};

}  // namespace cuflight::env

#endif  // CUFLIGHT_ENV_CONFIG_H_
