// The collector `cuflight run` starts for one run: the collector library in this process, on its
// own thread, listening on a socket in a fresh private directory and writing to the run's log
// directory. In process rather than a `cuflight collect` child, so the run reads its counters
// directly (to know when every producer is done) and the socket exists before the application
// starts, with nothing to find, wait for or clean up after a crash of a second process.
#ifndef CUFLIGHT_CLI_PRIVATE_COLLECTOR_H_
#define CUFLIGHT_CLI_PRIVATE_COLLECTOR_H_

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "collector.h"
#include "ingest_stats.h"

namespace cuflight::cli {

class PrivateCollector {
 public:
  // Creates a fresh 0700 directory under $TMPDIR (when set and short enough for a socket path),
  // else /tmp, and starts a collector on <dir>/collector.sock writing to `log_dir` (created if
  // missing), logging its own warnings and errors to stderr. Returns nullptr and fills *error
  // (one line, and 1 or 2 as the exit status) when it cannot start. Block the signals the caller
  // waits for (SignalForwarder) before calling: the collector's threads inherit the mask.
  static std::unique_ptr<PrivateCollector> Start(const std::filesystem::path& log_dir,
                                                 collector::StartupError* error);
  // Stop()s.
  ~PrivateCollector();
  PrivateCollector(const PrivateCollector&) = delete;
  PrivateCollector& operator=(const PrivateCollector&) = delete;

  const std::filesystem::path& socket_path() const { return socket_path_; }

  // Waits until every producer connection is closed: first until the collector has finished a
  // loop turn begun after this call (so a connection made before the call, still waiting to be
  // accepted, has been accepted), then until no connection is open. `pause(d)` sleeps up to d and
  // returns false to give up early. Returns true when no connection is open, false on timeout or
  // when `pause` gave up.
  bool WaitForProducers(std::chrono::milliseconds timeout,
                        const std::function<bool(std::chrono::milliseconds)>& pause);

  // Stops the collector (it stores what connected producers already sent and writes
  // process_lost for processes that did not end), joins its thread and removes the socket
  // directory. Returns the collector's exit status (0 on a clean stop). Idempotent.
  int Stop();

  // The collector's counters (after Stop: the final ones).
  collector::IngestStats stats() const;

 private:
  PrivateCollector() = default;

  std::filesystem::path socket_dir_;
  std::filesystem::path socket_path_;
  std::unique_ptr<collector::Collector> collector_;
  std::thread thread_;
  int status_ = 0;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_PRIVATE_COLLECTOR_H_
