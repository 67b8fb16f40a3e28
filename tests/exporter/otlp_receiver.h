// An OTLP/HTTP logs receiver of the tests' own: an HTTP server on a free loopback port that
// decodes every request body as an ExportLogsServiceRequest with the classes protoc generated
// from the vendored opentelemetry-proto (exporter/proto/), protobuf or JSON by Content-Type, and
// answers as a script says: statuses the OTLP specification names (200, 429 and 503 with
// Retry-After, 500), a stall longer than the client waits, and, between calls of the test,
// stopping and starting again on the same port.
#ifndef CUFLIGHT_TESTS_EXPORTER_OTLP_RECEIVER_H_
#define CUFLIGHT_TESTS_EXPORTER_OTLP_RECEIVER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cuflight::exporter::testing {

// One decoded LogRecord with its Resource; attribute values as text (ints in decimal, arrays
// as their values joined by ' ').
struct ReceivedRecord {
  std::map<std::string, std::string> resource;
  std::map<std::string, std::string> attributes;
  std::string event_name;
  std::string body;
  uint64_t time_unix_nano = 0;
  int severity_number = 0;
  std::string stream() const;
  uint64_t seq() const;
};

struct Reply {
  int status = 200;
  std::string retry_after;             // sent as Retry-After when not empty
  std::chrono::milliseconds delay{0};  // before answering (a stalled receiver)
};

class OtlpReceiver {
 public:
  OtlpReceiver();
  ~OtlpReceiver();
  OtlpReceiver(const OtlpReceiver&) = delete;
  OtlpReceiver& operator=(const OtlpReceiver&) = delete;

  int port() const { return port_; }
  std::string endpoint() const;  // "http://127.0.0.1:<port>"
  // The replies for the next requests, in order; after them, 200.
  void Script(std::vector<Reply> replies);
  // Stops listening (connections are refused) / listens again on the same port.
  void Stop();
  void Restart();

  // Records of requests answered 2xx / answered otherwise (decoded all the same).
  std::vector<ReceivedRecord> Accepted() const;
  std::vector<ReceivedRecord> Refused() const;
  int requests() const;
  // Bodies that did not decode, with the Content-Type: must stay empty.
  std::vector<std::string> Undecodable() const;
  std::map<std::string, std::string> last_headers() const;

 private:
  struct Server;
  void Listen();

  int port_ = 0;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::deque<Reply> script_;
  std::vector<ReceivedRecord> accepted_;
  std::vector<ReceivedRecord> refused_;
  std::vector<std::string> undecodable_;
  std::map<std::string, std::string> last_headers_;
  int requests_ = 0;
};

}  // namespace cuflight::exporter::testing

#endif  // CUFLIGHT_TESTS_EXPORTER_OTLP_RECEIVER_H_
