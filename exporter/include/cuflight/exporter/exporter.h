// The collector's OTLP exporter: the events of the logs the collector wrote, sent to an
// OpenTelemetry receiver (the OTel Collector, Grafana Alloy, Fluent Bit, ...) over OTLP/HTTP.
// docs/fleet.md, "Export to an OpenTelemetry pipeline", names every record and attribute.
//
// Design:
//  1. It reads the durable log, never the ingest path: a thread of its own lists the log
//     directory, reads each stream's files (logstore/files' layout: closed segments, plain or
//     zstd, then the active file) from a saved position, and sends. A receiver that is down,
//     slow or refusing only makes it fall behind (the lag gauges); the daemon and its producers
//     never wait for it, and nothing is lost while the files are there (retention removes them
//     after --retain-bytes / --retain-days, exported or not: missed segments are counted).
//  2. The cursor: for every stream, the segment and byte offset up to which its events have been
//     delivered, in one file replaced atomically (write, fsync, rename, fsync of the directory)
//     after each delivered request. A restart resumes there; what was sent after the last save
//     is sent again, so duplicates happen only across a crash (or a kill), and every record
//     carries `cuflight.stream` and `cuflight.seq` for a sink to drop them. A segment is one
//     sequence of interned configurations (docs/protocol.md): a position inside a segment is
//     resumed by first reading that segment's kernel_config descriptions before it again
//     (nothing else, nothing exported twice), so every launch after it is exported expanded.
//     The cursor is the collector's own: a file that is not its regular file, or not a cursor,
//     is refused at Start (cursor.h); a position its stream never had (a segment past the
//     stream's end, an offset past a closed segment's) is read again from there with a warning:
//     duplicates, never a silent loss (docs/fleet.md, "Hostile or broken values").
//  3. One request at a time, of at most max_batch_records records and about max_batch_bytes of
//     event text; what is held besides is per stream and bounded (the Resource, a roll-up table
//     of at most kMaxRollupKernels kernels, the last launches ring, a launch join table), so
//     memory is bounded whatever the backlog.
//  4. Retries as the OTLP specification asks (docs/specification.md of opentelemetry-proto,
//     "Failures", "OTLP/HTTP Throttling", "OTLP/HTTP Connection"): 429, 502, 503, 504, a
//     connection that fails or a response that does not come within the timeout are retried
//     with exponential back-off and random jitter, honouring Retry-After; every other 4xx and 5xx
//     and a partial success are not retried: those records are counted failed and the cursor
//     moves on. Retryable failures are retried for as long as it takes: the log is the buffer.
//  5. Volume: by default the lifecycle (process_start, process_end), process_crash,
//     process_lost, stall, api_error and device events; a roll-up per kernel (name, limiting
//     resource, device) every rollup_interval; and the last `last_launches` launches of a
//     stream that crashes, stalls or is lost. Every kernel and kernel_time event only with
//     every_launch.
//  6. Threads: Start and Stop from one thread (the collector's main thread); the exporter's own
//     thread does everything else. ExportMetrics may be read from any thread.
#ifndef CUFLIGHT_EXPORTER_EXPORTER_H_
#define CUFLIGHT_EXPORTER_EXPORTER_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/logger.h>

namespace cuflight::exporter {

enum class Encoding : uint8_t {
  kProtobuf,  // "http/protobuf": Content-Type application/x-protobuf (the default)
  kJson,      // "http/json": the protobuf JSON mapping with OTLP's deviations
};

struct ExportOptions {
  // The receiver's URL, "http://host:port/path" or "https://..."; empty: no export. A URL
  // without a path (or "/") gets OTLP's default path for logs, /v1/logs.
  std::string endpoint;
  Encoding encoding = Encoding::kProtobuf;
  // Extra request headers (OTEL_EXPORTER_OTLP_HEADERS' form: "k1=v1,k2=v2", values
  // percent-decoded), in order.
  std::vector<std::pair<std::string, std::string>> headers;
  // A file whose content (trimmed of surrounding white space) is sent as "Authorization: Bearer
  // <content>"; read before every request, so a rotated token is picked up. Empty: none.
  std::string bearer_token_file;
  // PEM files for https: the CA bundle that verifies the receiver (empty: the system's), and a
  // client certificate and key for mutual TLS (both or neither).
  std::string ca_file;
  std::string client_cert_file;
  std::string client_key_file;
  // Per request: connecting, sending and waiting for the response (OTEL_EXPORTER_OTLP_TIMEOUT's
  // default, 10 s).
  std::chrono::milliseconds timeout{10000};
  // The cursor file (design note 2); empty: "<log-dir>/otlp-cursor.json".
  std::filesystem::path cursor_file;
  // How often the log directory is looked at for new events once everything is sent.
  std::chrono::milliseconds scan_interval{1000};
  // Back-off: the first wait, the most any wait grows to (Retry-After is honoured up to
  // kMaxRetryAfter).
  std::chrono::milliseconds retry_initial{1000};
  std::chrono::milliseconds retry_max{30000};
  // Volume (design note 5).
  bool every_launch = false;
  std::chrono::milliseconds rollup_interval{60000};  // 0: no roll-ups
  int last_launches = 16;                            // 0: none
  // A request holds at most this many records and about this many bytes of event text.
  int max_batch_records = 1024;
  uint64_t max_batch_bytes = 1 << 20;
  // A stream whose process_start has been read but no device event yet waits this long for one
  // before its records go out without a GPU in their Resource.
  std::chrono::milliseconds resource_wait{10000};
};

inline constexpr std::chrono::seconds kMaxRetryAfter{300};
// Kernels (name, limiter, device) a stream's roll-up window counts separately; the others are
// counted under the name "other".
inline constexpr size_t kMaxRollupKernels = 256;

// Parses the option texts of ExportOptions as the collector's flags give them. Each returns
// false with *why (one line, without the flag's name) for a bad value.
bool ParseEndpoint(std::string_view text, std::string* endpoint, std::string* why);
bool ParseEncoding(std::string_view text, Encoding* out, std::string* why);
bool ParseHeaders(std::string_view text, std::vector<std::pair<std::string, std::string>>* out,
                  std::string* why);
// Checks the options together (TLS files with an http:// endpoint, a client certificate
// without its key, readable files). False with *why.
bool CheckOptions(const ExportOptions& options, std::string* why);

// The exporter's counters and gauges, rendered on the collector's /metrics (docs/metrics.md,
// "OTLP export"). Updated by the exporter's thread; Render from any thread.
class ExportMetrics {
 public:
  ExportMetrics();
  ~ExportMetrics();
  ExportMetrics(const ExportMetrics&) = delete;
  ExportMetrics& operator=(const ExportMetrics&) = delete;

  // A request the receiver accepted, with `records` log records.
  void Sent(uint64_t records);
  // Records the receiver refused for good (`reason`: "http_<status>" or "partial_success") or
  // that could not be encoded ("encode").
  void Failed(std::string_view reason, uint64_t records);
  // A request that will be sent again (`reason`: "http_429", "http_502", "http_503",
  // "http_504", "connection", "timeout").
  void Retried(std::string_view reason);
  // A closed segment retention removed before the exporter read it.
  void SegmentMissed();
  // A line of the log that did not decode (skipped).
  void LineSkipped();
  // The backlog: bytes of the logs not yet delivered, and how long the oldest of it has been
  // waiting (0 when there is none).
  void SetLag(uint64_t bytes, double seconds);

  struct Snapshot {
    uint64_t sent_requests = 0;
    uint64_t sent_records = 0;
    uint64_t failed_records = 0;
    uint64_t retries = 0;
    uint64_t segments_missed = 0;
    uint64_t lines_skipped = 0;
    uint64_t lag_bytes = 0;
    double lag_seconds = 0;
    std::map<std::string, uint64_t> failed_by_reason;
    std::map<std::string, uint64_t> retried_by_reason;
  };
  Snapshot Get() const;
  // Prometheus text exposition 0.0.4 of the families above (HELP, TYPE, samples), appended to
  // *out.
  void Render(std::string* out) const;

 private:
  mutable std::mutex mu_;
  Snapshot s_;
};

class Exporter {
 public:
  // Starts exporting the logs under `log_dir` (the collector's, already trusted: log_dir.h) with
  // `options` (endpoint set, CheckOptions passed). Loads the cursor first: nullptr with *error
  // (one line) when it cannot be read or is not a cursor, or the directory cannot be opened.
  // `metrics` and `logger` must outlive the exporter.
  static std::unique_ptr<Exporter> Start(const ExportOptions& options,
                                         const std::filesystem::path& log_dir,
                                         std::optional<gid_t> socket_group, ExportMetrics* metrics,
                                         std::shared_ptr<spdlog::logger> logger,
                                         std::string* error);
  // Stops (see Stop).
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Sends what has been read and the open roll-ups for at most `drain` (a receiver that answers),
  // saves the cursor, and returns once the thread has ended; a request in flight is abandoned
  // (sent again after a restart). Idempotent.
  void Stop(std::chrono::milliseconds drain = std::chrono::milliseconds(5000));

 private:
  struct Impl;
  explicit Exporter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuflight::exporter

#endif  // CUFLIGHT_EXPORTER_EXPORTER_H_
