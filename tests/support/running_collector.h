// The real collector (collector/daemon's Collector) running in the test's process: the one
// collector the tests store through, de-duplicate with and take acknowledgements from.
#ifndef CUFLIGHT_TESTS_SUPPORT_RUNNING_COLLECTOR_H_
#define CUFLIGHT_TESTS_SUPPORT_RUNNING_COLLECTOR_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collector.h"
#include "collector_options.h"
#include "cuflight/schema/events.h"
#include "temp_dir.h"

namespace spdlog {
class logger;
}

namespace cuflight::test_support {

// Options for a test collector under `dir`: socket dir/run/collector.sock, logs in dir/logs,
// process_lost at once on disconnect (reconnect_grace 0), no rotation.
collector::CollectorOptions TestOptions(const std::filesystem::path& dir);

// A spdlog logger whose lines are kept in memory (for asserting what the collector logged).
class StringSink;
class CapturedLog {
 public:
  CapturedLog();
  std::shared_ptr<spdlog::logger> logger() const { return logger_; }
  // Everything logged so far, one "<level> <message>" line per entry. Any thread.
  std::string text() const;

 private:
  std::shared_ptr<StringSink> sink_;
  std::shared_ptr<spdlog::logger> logger_;
};

// A Collector running Run() on its own thread.
class RunningCollector {
 public:
  // Fails the test (and leaves collector() null) when Create fails.
  explicit RunningCollector(const collector::CollectorOptions& options,
                            collector::Metrics* metrics = nullptr,
                            std::shared_ptr<spdlog::logger> logger = nullptr);
  ~RunningCollector();  // Stop()s
  RunningCollector(const RunningCollector&) = delete;
  RunningCollector& operator=(const RunningCollector&) = delete;

  collector::Collector* collector() const { return collector_.get(); }
  collector::IngestStats stats() const { return collector_->stats(); }
  // Requests a stop and joins; returns Run()'s status (-1 if already stopped).
  int Stop();

 private:
  std::unique_ptr<collector::Collector> collector_;
  std::thread thread_;
  int status_ = -1;
  bool running_ = false;
};

// A RunningCollector listening on a given Unix socket path, its logs in a directory of its own,
// read back as what it stored. For producer tests (the injector's sender, the transport's
// Sender): what a producer delivered is what the collector's log holds.
class StoringCollector {
 public:
  // Listens on `socket_path` (whose directory must be private to this user: TempSocketPath);
  // TestOptions otherwise. `reconnect_grace` > 0 keeps a disconnected process's stream open for
  // a producer that reconnects (TestOptions' 0 closes it with process_lost at once).
  explicit StoringCollector(
      const std::string& socket_path,
      std::chrono::milliseconds reconnect_grace = std::chrono::milliseconds(0));
  // Logs in `log_dir` (which may hold a previous collector's logs: a restart recovers from them).
  StoringCollector(const std::string& socket_path, const std::filesystem::path& log_dir,
                   std::chrono::milliseconds reconnect_grace);
  StoringCollector(const StoringCollector&) = delete;
  StoringCollector& operator=(const StoringCollector&) = delete;

  // Every line stored so far (without the '\n'), log file by log file, each in stored order;
  // includes what the collector writes itself (process_lost).
  std::vector<std::string> Lines() const;
  // Lines() as a reader gives them: launches expanded into kernel events (ExpandedLines).
  std::vector<std::string> ExpandedLines() const;
  // Waits until `predicate(Lines())` holds or `timeout`; returns whether it held.
  bool WaitFor(const std::function<bool(const std::vector<std::string>&)>& predicate,
               std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  // Lines(), each decoded with the schema's decoder (fails the test on one that does not decode).
  std::vector<schema::OwnedEvent> Events() const;
  // The seqs stored for process `pid` (process_lost left out), in stored order.
  std::vector<uint64_t> StoredSeqs(int64_t pid) const;

  const std::filesystem::path& log_dir() const { return log_dir_; }
  // The collector publishes its counts at the end of a loop turn, after that turn's acks: read
  // them after Stop() for counts that cover everything it acknowledged.
  collector::IngestStats stats() const { return running_->stats(); }
  // Stops the collector (draining what producers sent; process_lost for those still connected).
  void Stop() { running_->Stop(); }

 private:
  TempDir dir_;
  std::filesystem::path log_dir_;
  std::unique_ptr<RunningCollector> running_;
};

// Whether any of `lines` (StoringCollector::Lines) is a process_end: for WaitFor, once a
// producer finished its stream.
bool HasProcessEnd(const std::vector<std::string>& lines);

}  // namespace cuflight::test_support

#endif  // CUFLIGHT_TESTS_SUPPORT_RUNNING_COLLECTOR_H_
