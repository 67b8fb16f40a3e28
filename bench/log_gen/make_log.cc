// make_log: writes a realistic collector log (log_gen.h) for the report and export benchmarks.
//
//   make_log DIR [--launches N] [--processes N] [--streams N] [--kernels N] [--flush-every N]
//                [--untimed-every N] [--api-error-every N] [--stall-every N] [--crash]
//                [--rotate-bytes N] [--plain] [--intern] [--zstd-level N]
//                [--timing all|sampled|off] [--timing-window-ms N] [--timing-period-ms N]
//                [--timing-phase-ms N] [--timing-new-configs 0|1]
//
// --launches is per process (default 1,000,000); --plain leaves the closed segments
// uncompressed; --intern writes each launch as a `launch` line naming its kernel_config
// (log_gen.h, 6.) instead of a whole `kernel` line; --zstd-level compresses the segments at that
// level instead of the collector's default (1). --timing is the producer's CUFLIGHT_TIMING
// (log_gen.h, 3a): all (the default: every launch timed, the lines as before the option), sampled
// (the fleet's policy: timing windows, `timing_window` on every launch, kernel_time only for the
// launches made in one) or off; under sampled, --timing-window-ms, --timing-period-ms and
// --timing-new-configs are CUFLIGHT_TIMING_WINDOW_MS, _PERIOD_MS and _NEW_CONFIGS, with their
// defaults and ranges (schema/env/README.md), and --timing-phase-ms fixes the periodic windows'
// phase (default: drawn from each process's seed). Prints what it wrote.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cuflight/env/config.h"
#include "cuflight/schema/timing_policy.h"
#include "log_gen.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: make_log DIR [--launches N] [--processes N] [--streams N] [--kernels N] "
               "[--flush-every N] [--untimed-every N] [--api-error-every N] [--stall-every N] "
               "[--crash] [--rotate-bytes N] [--plain] [--intern] [--zstd-level N] "
               "[--timing all|sampled|off] [--timing-window-ms N] [--timing-period-ms N] "
               "[--timing-phase-ms N] [--timing-new-configs 0|1]\n");
  return 2;
}

bool Number(const char* text, uint64_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // DIR first; "--help" or any flag there is not a directory to make.
  if (argc < 2 || argv[1][0] == '-') return Usage();
  cuflight::bench::LogSpec spec;
  for (int i = 2; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--crash") {
      spec.crash = true;
      continue;
    }
    if (flag == "--plain") {
      spec.compress = false;
      continue;
    }
    if (flag == "--intern") {
      spec.intern = true;
      continue;
    }
    if (flag == "--timing") {
      if (i + 1 >= argc) return Usage();
      const auto policy = cuflight::schema::TimingPolicyFromName(argv[++i]);
      if (!policy) return Usage();
      spec.timing = *policy;
      continue;
    }
    uint64_t v = 0;
    if (i + 1 >= argc || !Number(argv[i + 1], &v)) return Usage();
    ++i;
    if (flag == "--launches") {
      spec.launches = v;
    } else if (flag == "--processes") {
      spec.processes = static_cast<int>(v);
    } else if (flag == "--streams") {
      spec.streams = static_cast<int>(v);
    } else if (flag == "--kernels") {
      spec.kernels = static_cast<int>(v);
    } else if (flag == "--flush-every") {
      spec.flush_every = v;
    } else if (flag == "--untimed-every") {
      spec.untimed_every = v;
    } else if (flag == "--api-error-every") {
      spec.api_error_every = v;
    } else if (flag == "--stall-every") {
      spec.stall_every = v;
    } else if (flag == "--rotate-bytes") {
      spec.rotate_bytes = v;
    } else if (flag == "--zstd-level") {
      if (v < 1 || v > 22) return Usage();  // ZSTD_maxCLevel() is 22
      spec.zstd_level = static_cast<int>(v);
    } else if (flag == "--timing-window-ms") {
      if (v < cuflight::env::kMinTimingWindowMs || v > cuflight::env::kMaxTimingWindowMs) {
        return Usage();
      }
      spec.timing_window_ms = static_cast<uint32_t>(v);
    } else if (flag == "--timing-period-ms") {
      if (v < cuflight::env::kMinTimingPeriodMs || v > cuflight::env::kMaxTimingPeriodMs) {
        return Usage();
      }
      spec.timing_period_ms = static_cast<uint32_t>(v);
    } else if (flag == "--timing-phase-ms") {
      if (v > cuflight::env::kMaxTimingPeriodMs) return Usage();
      spec.timing_phase_ns = static_cast<int64_t>(v) * 1'000'000;
    } else if (flag == "--timing-new-configs") {
      if (v > 1) return Usage();
      spec.timing_new_configs = v == 1;
    } else {
      return Usage();
    }
  }
  // As ParseConfig's rule: a window at most half its period; a phase within the period.
  if (uint64_t{spec.timing_window_ms} * 2 > spec.timing_period_ms ||
      spec.timing_phase_ns >= int64_t{spec.timing_period_ms} * 1'000'000) {
    return Usage();
  }
  if (spec.processes < 1 || spec.streams < 1 || spec.kernels < 1 || spec.flush_every < 1) {
    return Usage();
  }
  cuflight::bench::LogTotals totals;
  std::string error;
  if (!cuflight::bench::WriteLogs(argv[1], spec, &totals, &error)) {
    std::fprintf(stderr, "make_log: %s\n", error.c_str());
    return 1;
  }
  std::printf("make_log: %zu files, %llu launches (%llu timed, %llu descriptions), %llu events, "
              "%.2f GB of lines\n",
              totals.files.size(), static_cast<unsigned long long>(totals.launches),
              static_cast<unsigned long long>(totals.timed),
              static_cast<unsigned long long>(totals.descriptions),
              static_cast<unsigned long long>(totals.events),
              static_cast<double>(totals.bytes) / 1e9);
  if (spec.timing == cuflight::schema::TimingPolicy::kSampled) {
    std::printf("make_log: timing sampled: %llu windows, %llu launches in one (%.2f%%)\n",
                static_cast<unsigned long long>(totals.timing_windows),
                static_cast<unsigned long long>(totals.in_window),
                totals.launches > 0 ? 100.0 * static_cast<double>(totals.in_window) /
                                          static_cast<double>(totals.launches)
                                    : 0.0);
  }
  return 0;
}
