// One OTLP/HTTP request and what its answer means (opentelemetry-proto docs/specification.md,
// "OTLP/HTTP"): POST of an ExportLogsServiceRequest to the endpoint, protobuf or JSON, with the
// configured headers and bearer token, over http or https (cpp-httplib with OpenSSL).
#ifndef CUFLIGHT_EXPORTER_OTLP_HTTP_H_
#define CUFLIGHT_EXPORTER_OTLP_HTTP_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "cuflight/exporter/exporter.h"

namespace cuflight::exporter {

struct SendResult {
  enum class Kind {
    kOk,         // 2xx: delivered (rejected > 0: a partial success, those records refused)
    kRetry,      // 429, 502, 503, 504, no connection, no answer in time: send it again
    kPermanent,  // any other status: the spec forbids sending it again
  };
  Kind kind = Kind::kOk;
  int status = 0;        // HTTP status; 0 without an answer
  std::string reason;    // for metrics: "http_<status>", "connection", "timeout"
  std::optional<std::chrono::milliseconds> retry_after;
  int64_t rejected = 0;  // partial_success.rejected_log_records
  std::string message;   // one line for the log
};

// Retry-After's value (RFC 9110 10.2.3): delay-seconds, or an HTTP-date (IMF-fixdate) taken
// relative to `now`, as a delay clamped to [0, kMaxRetryAfter]; nullopt when it is neither.
std::optional<std::chrono::milliseconds> ParseRetryAfter(
    std::string_view value, std::chrono::system_clock::time_point now);

// Exponential back-off with random jitter: the n-th wait is initial x 1.5^n, at most `max`, and
// then drawn uniformly from [0.5, 1.5) times that (the OTel Collector's exporterhelper defaults:
// multiplier 1.5, randomization factor 0.5).
class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max);
  std::chrono::milliseconds Next();
  void Reset() { attempt_ = 0; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  int attempt_ = 0;
  std::mt19937_64 rng_;
};

class OtlpHttpClient {
 public:
  // `options.endpoint` parsed by ParseEndpoint. Never throws on a bad endpoint: Post then fails
  // for good.
  explicit OtlpHttpClient(const ExportOptions& options);
  ~OtlpHttpClient();
  OtlpHttpClient(const OtlpHttpClient&) = delete;
  OtlpHttpClient& operator=(const OtlpHttpClient&) = delete;

  // Sends `body` (an encoded ExportLogsServiceRequest) once and classifies the answer. The
  // exporter's thread only.
  SendResult Post(const std::string& body);
  // Makes a Post in progress return (as a connection failure) and later ones fail at once. Any
  // thread.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuflight::exporter

#endif  // CUFLIGHT_EXPORTER_OTLP_HTTP_H_
