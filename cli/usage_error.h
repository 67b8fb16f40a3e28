// How a cuflight command reports bad input: it throws UsageError with one line naming the flag
// and what is allowed; the dispatcher (app.cc) prints "cuflight <command>: <line>" on stderr and
// exits with kExitUsage.
#ifndef CUFLIGHT_CLI_USAGE_ERROR_H_
#define CUFLIGHT_CLI_USAGE_ERROR_H_

#include <stdexcept>
#include <string>

namespace cuflight::cli {

inline constexpr int kExitOk = 0;
// Internal failure that is not the user's input (an unexpected exception).
inline constexpr int kExitFailure = 1;
// Bad command line, unusable device or launch: nothing was computed.
inline constexpr int kExitUsage = 2;

// `what()` is a single line without the "cuflight <command>: " prefix and without a newline.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& line) : std::runtime_error(line) {}
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_USAGE_ERROR_H_
