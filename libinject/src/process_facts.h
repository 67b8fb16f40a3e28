// Facts about the process for its process_start event, read once from /proc and libc.
#ifndef CUFLIGHT_LIBINJECT_SRC_PROCESS_FACTS_H_
#define CUFLIGHT_LIBINJECT_SRC_PROCESS_FACTS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cuflight::inject {

struct ProcessFacts {
  int32_t pid = 0;
  int32_t ppid = 0;
  int64_t uid = 0;
  std::string exe;  // /proc/self/exe, or "" when unreadable
  std::vector<std::string> argv;
  std::string hostname;
  int64_t start_ns = 0;  // process start, CLOCK_REALTIME ns (from /proc/self/stat and btime)
  int32_t cuda_driver_version = 0;
  int32_t cupti_version = 0;
  std::vector<std::pair<std::string, std::string>> config;
};

// pid, ppid, uid, exe, argv, hostname and start_ns of the calling process. Never throws except
// std::bad_alloc.
ProcessFacts ReadProcessFacts();

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_PROCESS_FACTS_H_
