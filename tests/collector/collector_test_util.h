// Test helpers for the collector: a temporary directory, a collector running in a thread, raw
// producer sockets, encoded event lines, and readers of the log files.
#ifndef CUFLIGHT_TESTS_COLLECTOR_COLLECTOR_TEST_UTIL_H_
#define CUFLIGHT_TESTS_COLLECTOR_COLLECTOR_TEST_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "collector.h"
#include "collector_options.h"

namespace spdlog {
class logger;
}

namespace cuflight::collector::testing {

// A fresh directory (mode 0700) under /tmp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Options for a test collector under `dir`: socket dir/run/collector.sock, logs in dir/logs,
// process_lost at once on disconnect (reconnect_grace 0), no rotation.
CollectorOptions TestOptions(const std::filesystem::path& dir);

// Waits, polling every millisecond, until `condition` holds or `timeout` passes; returns whether
// it held. The polling is the synchronisation: the condition reads published state.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout = std::chrono::seconds(20));

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
  explicit RunningCollector(const CollectorOptions& options, Metrics* metrics = nullptr,
                            std::shared_ptr<spdlog::logger> logger = nullptr);
  ~RunningCollector();  // Stop()s
  RunningCollector(const RunningCollector&) = delete;
  RunningCollector& operator=(const RunningCollector&) = delete;

  Collector* collector() const { return collector_.get(); }
  IngestStats stats() const { return collector_->stats(); }
  // Requests a stop and joins; returns Run()'s status (-1 if already stopped).
  int Stop();

 private:
  std::unique_ptr<Collector> collector_;
  std::thread thread_;
  int status_ = -1;
  bool running_ = false;
};

// A producer socket driven by hand, for exact and hostile byte streams.
class RawClient {
 public:
  static RawClient Unix(const std::filesystem::path& path);
  static RawClient Tcp(int port);
  RawClient() = default;
  ~RawClient();
  RawClient(RawClient&& other) noexcept;
  RawClient& operator=(RawClient&& other) noexcept;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Writes all of `bytes` (blocking). False on a write error.
  bool Send(std::string_view bytes);
  // Reads acks until one covers `seq` (returns it) or the deadline passes (nullopt). Later
  // acks read on the way are remembered in last_ack().
  std::optional<uint64_t> WaitAck(uint64_t seq,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(20));
  std::optional<uint64_t> last_ack() const { return last_ack_; }
  // Waits until the collector closes the connection (EOF or reset). Acks read are kept.
  bool WaitClosedByPeer(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  void Close();

 private:
  explicit RawClient(int fd) : fd_(fd) {}
  // Reads what is there within `wait`; false on EOF/error.
  bool ReadSome(std::chrono::milliseconds wait);

  int fd_ = -1;
  std::string in_;
  std::optional<uint64_t> last_ack_;
};

// Encoded event lines (each ends in '\n'), as an injected process would send them.
struct ProducerIdentity {
  int32_t pid = 0;
  std::string hostname = "testhost";
  std::string exe = "/opt/app/bin/trainer";
  int64_t start_ns = 1732000000000000000;
  uint64_t instance_id = 0;  // 0: a producer older than instance ids (none in the line)
  uint64_t pid_ns = 0;
};
std::string ProcessStartLine(const ProducerIdentity& id, uint64_t seq);
// A process_crash (SIGSEGV) as the producer's signal handler sends it.
std::string ProcessCrashLine(const ProducerIdentity& id, uint64_t seq);
// An api_error of cuCtxSynchronize failing with `error_name` (CUresult `code`).
std::string ApiErrorLine(const ProducerIdentity& id, uint64_t seq, std::string_view error_name,
                         int32_t code);
std::string DeviceLine(const ProducerIdentity& id, uint64_t seq, int32_t device);
std::string KernelLine(const ProducerIdentity& id, uint64_t seq, uint64_t correlation_id);
std::string KernelTimeLine(const ProducerIdentity& id, uint64_t seq, uint64_t correlation_id);
// stats and process_end: `dropped` all ring_full.
std::string StatsLine(const ProducerIdentity& id, uint64_t seq, uint64_t emitted, uint64_t dropped,
                      uint64_t timing_dropped = 0);
std::string ProcessEndLine(const ProducerIdentity& id, uint64_t seq, uint64_t emitted,
                           uint64_t dropped, uint64_t timing_dropped = 0);

// One line of a log file, parsed.
struct LoggedLine {
  std::string type;
  int64_t pid = 0;
  uint64_t seq = 0;
  std::string text;  // the line without its '\n'
};

// Every *.jsonl file under `log_dir` (recursively), sorted by path.
std::vector<std::filesystem::path> LogFiles(const std::filesystem::path& log_dir);

// The lines of one log file, parsed with nlohmann_json (fails the test on a line that is not a
// JSON object with type, pid and seq, or on an unterminated last line).
std::vector<LoggedLine> ReadLog(const std::filesystem::path& file);

// The log file of the process with this exe basename and pid; empty path if there is not
// exactly one.
std::filesystem::path FindLog(const std::filesystem::path& log_dir, std::string_view exe_base,
                              int32_t pid);

// This process's peak resident set (VmHWM) of process `pid`, bytes; 0 if unknown.
uint64_t PeakRssBytes(pid_t pid);

}  // namespace cuflight::collector::testing

#endif  // CUFLIGHT_TESTS_COLLECTOR_COLLECTOR_TEST_UTIL_H_
