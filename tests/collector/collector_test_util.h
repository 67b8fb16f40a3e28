// Test helpers for the collector: raw producer sockets and encoded event lines, with the shared
// support (a temporary directory, the collector running in a thread, readers of its log files).
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
#include "log_files.h"
#include "running_collector.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace cuflight::collector::testing {

// The shared test support (tests/support), under the names these tests have always used.
using test_support::CapturedLog;
using test_support::FindLog;
using test_support::LogFiles;
using test_support::LoggedLine;
using test_support::Range;
using test_support::ReadLog;
using test_support::RunningCollector;
using test_support::StoredSeqs;
using test_support::TempDir;
using test_support::TestOptions;
using test_support::WaitUntil;

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
  // process_start's attribution and config (sorted by key; none when empty).
  std::vector<std::pair<std::string, std::string>> attribution;
  std::vector<std::pair<std::string, std::string>> config;
};
// This process (getpid()) named /opt/bin/<exe>, started at `start_ns`.
ProducerIdentity Identity(const std::string& exe, int64_t start_ns);
std::string ProcessStartLine(const ProducerIdentity& id, uint64_t seq);
// A process_crash (SIGSEGV) as the producer's signal handler sends it.
std::string ProcessCrashLine(const ProducerIdentity& id, uint64_t seq);
// An api_error of cuCtxSynchronize failing with `error_name` (CUresult `code`).
std::string ApiErrorLine(const ProducerIdentity& id, uint64_t seq, std::string_view error_name,
                         int32_t code);
std::string DeviceLine(const ProducerIdentity& id, uint64_t seq, int32_t device);
// A device event naming GPU `uuid` ("GPU-..." or "MIG-...") at `pci_bus_id` ("" leaves it out).
std::string DeviceLine(const ProducerIdentity& id, uint64_t seq, int32_t device,
                       std::string_view uuid, std::string_view pci_bus_id);
std::string KernelLine(const ProducerIdentity& id, uint64_t seq, uint64_t correlation_id);
std::string KernelTimeLine(const ProducerIdentity& id, uint64_t seq, uint64_t correlation_id);
// stats and process_end: `dropped` all ring_full.
std::string StatsLine(const ProducerIdentity& id, uint64_t seq, uint64_t emitted, uint64_t dropped,
                      uint64_t timing_dropped = 0);
std::string ProcessEndLine(const ProducerIdentity& id, uint64_t seq, uint64_t emitted,
                           uint64_t dropped, uint64_t timing_dropped = 0);

// This process's peak resident set (VmHWM) of process `pid`, bytes; 0 if unknown.
uint64_t PeakRssBytes(pid_t pid);

}  // namespace cuflight::collector::testing

#endif  // CUFLIGHT_TESTS_COLLECTOR_COLLECTOR_TEST_UTIL_H_
