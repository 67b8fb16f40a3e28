// The real cuflight-collector binary as a child process (posix_spawn), for tests that signal or
// kill it.
#ifndef CUFLIGHT_TESTS_COLLECTOR_COLLECTOR_PROCESS_H_
#define CUFLIGHT_TESTS_COLLECTOR_COLLECTOR_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cuflight::collector::testing {

class ChildProcess {
 public:
  // Starts `binary` with `args` (argv[1..]), stdin from /dev/null, stdout and stderr appended to
  // `output`. running() is false if it could not be started.
  ChildProcess(const std::string& binary, const std::vector<std::string>& args,
               const std::filesystem::path& output);
  // Kills (SIGKILL) and reaps the child if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool running() const { return pid_ > 0 && !status_; }
  pid_t pid() const { return pid_; }
  void Signal(int signo) const;
  // Waits for the child to exit: its exit status, or 128 + the signal that ended it; nullopt when
  // it is still running at the deadline.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // What the child wrote so far.
  std::string Output() const;
  // Waits until the output contains `text` (or the child exits, or the deadline passes).
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::filesystem::path output_;
};

// Waits until a Unix socket at `path` accepts a connection.
bool WaitForSocket(const std::filesystem::path& path, std::chrono::milliseconds timeout);

}  // namespace cuflight::collector::testing

#endif  // CUFLIGHT_TESTS_COLLECTOR_COLLECTOR_PROCESS_H_
