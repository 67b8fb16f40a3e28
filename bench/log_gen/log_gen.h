// A generator of realistic collector logs, for the report and export benchmarks and for the tests
// that need a large log (bounded memory, density timeline).
//
// What a training job's producer sends, encoded by the schema encoder and laid out as the
// collector writes it (cuflight/schema/log_layout.h):
//  1. Per process: process_start, one device event (an H100), then `launches` kernel launches
//     round-robin over `streams` streams, with a stats event every 100,000 launches and a
//     process_end (or, with `crash` or for the first `crash_count` processes, a process_crash)
//     at the end.
//  2. Kernels: `kernels` distinct names, most of them long templated CUTLASS / PyTorch names
//     (about 1.1 KB per kernel line, as bench/bench_events.h), each with its own block size,
//     registers and occupancy, launched with a few grid shapes. The device event is the
//     calculator's h100-sxm preset, and each launch's occupancy and what-ifs are the engine's
//     for it (occupancy/engine.h), so they agree with `cuflight occupancy --device h100-sxm`.
//  3. Timing: on each stream kernels run back to back from their launch; their kernel_time lines
//     come in batches every `flush_every` launches (a CUPTI buffer flush), after the kernels. A
//     fraction `untimed_every` (every Nth launch; 0: none) gets no kernel_time (timing lost).
//     a. `timing`, the producer's CUFLIGHT_TIMING (schema/env/README.md): kAll (the default)
//        times every launch and writes the lines as before this option existed, byte for byte
//        (no config in process_start, no timing_policy in stats or process_end). kSampled writes
//        what the library writes under the fleet's policy: process_start's config (env::Describe:
//        timing sampled, the window, period and new-configuration setting), `timing_window` on
//        every launch, a kernel_time only for a launch made in a timing window (timing_schedule.h:
//        the start's window, the periodic ones from `timing_phase_ns`, or a phase drawn from the
//        process's seed, and those for configurations not yet timed, a configuration being the
//        kernel and its grid), and in stats and process_end (or process_crash) the policy, the
//        windows opened, how long they were open and the launches made in one. kOff: config.timing
//        off, no kernel_time, timing_policy off. Under kSampled and kOff every kernel still runs
//        on its stream (its duration drawn as under kAll), so the three policies make the same
//        launches from one seed, and differ only in what says their times.
//  4. Every `api_error_every` launches (0: never) a failed cuLaunchKernel, and with `stall_every`
//     (0: never) a stall event naming the stream's latest launch (the export marks it).
//  5. Files: "<dir>/<date>/<base>.<NNNNNN>.jsonl(.zst)" segments of about `rotate_bytes` each,
//     compressed with zstd when `compress` (as the collector's segment worker does), and the
//     active "<base>.jsonl" last. rotate_bytes 0: one active file.
//  6. `intern`: each launch as an interned producer sends it and the collector stores it
//     (docs/protocol.md, "Interned configurations"; schema::Split): a kernel_config per (kernel,
//     stream), with its own seq, before the first launch that names it, then one `launch` line
//     per launch, the description saying the wave the launch's figures were counted in (wave_size)
//     and the launch leaving `waves` and `tail_utilization` to the reader (waves.h), as the
//     recorder's sender thread sends it. In every later file the first launch of a configuration is preceded by its
//     description again, the same line (the collector's Redescribe), so each file reads alone.
//     Off: every launch a self-contained `kernel` line, as before. Either way the same launches:
//     expanded (schema::ConfigExpander) the interned log gives the whole one's kernel events.
// Deterministic: the same spec gives the same bytes.
#ifndef CUFLIGHT_BENCH_LOG_GEN_LOG_GEN_H_
#define CUFLIGHT_BENCH_LOG_GEN_LOG_GEN_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cuflight/env/config.h"
#include "cuflight/schema/timing_policy.h"

namespace cuflight::bench {

struct LogSpec {
  uint64_t launches = 1'000'000;  // per process
  int processes = 1;
  int streams = 4;
  int kernels = 40;
  uint64_t flush_every = 4096;
  uint64_t untimed_every = 0;
  uint64_t api_error_every = 0;
  uint64_t stall_every = 0;
  bool crash = false;
  int crash_count = 0;  // with crash false: the first crash_count processes crash, the rest end
  uint64_t rotate_bytes = 64ull << 20;
  bool compress = true;
  bool intern = false;  // 6.
  // 3a. The window and period as CUFLIGHT_TIMING_WINDOW_MS and _PERIOD_MS (ms, their ranges);
  // timing_phase_ns < 0: each process's phase drawn from its seed in [0, period).
  schema::TimingPolicy timing = schema::TimingPolicy::kAll;
  uint32_t timing_window_ms = env::kDefaultTimingWindowMs;
  uint32_t timing_period_ms = env::kDefaultTimingPeriodMs;
  bool timing_new_configs = true;
  int64_t timing_phase_ns = -1;
  int zstd_level = 1;  // the collector's default (collector/daemon/log_sink.h)
  int64_t start_ns = 1'763'700'000'000'000'000;  // 2025-11-21T04:26:40Z
  // Mean time between launches of one process, and kernel durations (uniform in [min, max]).
  int64_t launch_gap_ns = 20'000;
  int64_t min_kernel_ns = 2'000;
  int64_t max_kernel_ns = 150'000;
};

struct LogTotals {
  std::vector<std::filesystem::path> files;  // in the order written
  uint64_t bytes = 0;           // uncompressed lines written
  uint64_t launches = 0;        // kernel events (whole, or launch lines)
  uint64_t descriptions = 0;    // kernel_config lines (intern), repeats in later files included
  uint64_t timed = 0;           // of those, with a kernel_time
  uint64_t in_window = 0;       // 3a, kSampled: launches made in a timing window
  uint64_t timing_windows = 0;  // 3a, kSampled: windows opened, all processes
  uint64_t events = 0;          // every line written
  uint64_t api_errors = 0;
  uint64_t stalls = 0;
  int64_t first_ts_ns = 0;      // earliest host or GPU timestamp written
  int64_t last_ts_ns = 0;       // latest
};

// Writes the logs of `spec` under `dir` (created). False with *error on an I/O failure.
bool WriteLogs(const std::filesystem::path& dir, const LogSpec& spec, LogTotals* totals,
               std::string* error);

}  // namespace cuflight::bench

#endif  // CUFLIGHT_BENCH_LOG_GEN_LOG_GEN_H_
