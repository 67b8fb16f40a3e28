// make_log: writes a realistic collector log (log_gen.h) for the report and export benchmarks.
//
//   make_log DIR [--launches N] [--processes N] [--streams N] [--kernels N] [--flush-every N]
//                [--untimed-every N] [--api-error-every N] [--stall-every N] [--crash]
//                [--rotate-bytes N] [--plain] [--intern] [--zstd-level N]
//
// --launches is per process (default 1,000,000); --plain leaves the closed segments
// uncompressed; --intern writes each launch as a `launch` line naming its kernel_config
// (log_gen.h, 6.) instead of a whole `kernel` line; --zstd-level compresses the segments at that
// level instead of the collector's default (1). Prints what it wrote.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "log_gen.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: make_log DIR [--launches N] [--processes N] [--streams N] [--kernels N] "
               "[--flush-every N] [--untimed-every N] [--api-error-every N] [--stall-every N] "
               "[--crash] [--rotate-bytes N] [--plain] [--intern] [--zstd-level N]\n");
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
    } else {
      return Usage();
    }
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
  return 0;
}
