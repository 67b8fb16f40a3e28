// The key that joins a kernel_time to its kernel event: (process index, correlation_id). Shared
// by the report's model builder and its timeline.
#ifndef CUFLIGHT_COLLECTOR_REPORT_JOIN_KEY_H_
#define CUFLIGHT_COLLECTOR_REPORT_JOIN_KEY_H_

#include <cstddef>
#include <cstdint>
#include <functional>

namespace cuflight::report {

struct JoinKey {
  size_t process;
  uint64_t correlation_id;
  bool operator==(const JoinKey&) const = default;
};

struct JoinKeyHash {
  size_t operator()(const JoinKey& k) const {
    return std::hash<uint64_t>()(k.correlation_id * 0x9E3779B97F4A7C15ull ^ k.process);
  }
};

}  // namespace cuflight::report

#endif  // CUFLIGHT_COLLECTOR_REPORT_JOIN_KEY_H_
