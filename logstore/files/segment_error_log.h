// Rate-limited warnings for the log sink's I/O errors: a full disk fails every write, and one
// line per failure would flood the collector's own log. Thread-safe (the daemon thread and the
// segment worker both report).
#ifndef CUFLIGHT_LOGSTORE_FILES_SEGMENT_ERROR_LOG_H_
#define CUFLIGHT_LOGSTORE_FILES_SEGMENT_ERROR_LOG_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace cuflight::logstore {

class RateLimitedLog {
 public:
  // At most one line per `kind` per `period`.
  explicit RateLimitedLog(std::chrono::steady_clock::duration period = std::chrono::seconds(10));

  // Logs "log sink: <message>" with spdlog at warn level unless a message of the same `kind` was
  // logged less than `period` ago; those are counted, and the count is added to the next line
  // logged for that kind.
  void Warn(std::string_view kind, std::string_view message);

  // "<what> <path>: <strerror(err)>", for messages about a failed system call.
  static std::string Describe(std::string_view what, std::string_view path, int err);

 private:
  struct KindState {
    std::string kind;
    std::chrono::steady_clock::time_point last{};
    uint64_t suppressed = 0;
    bool logged = false;
  };
  const std::chrono::steady_clock::duration period_;
  std::mutex mu_;
  std::vector<KindState> kinds_;  // a handful of kinds: a linear search is cheapest
};

}  // namespace cuflight::logstore

#endif  // CUFLIGHT_LOGSTORE_FILES_SEGMENT_ERROR_LOG_H_
