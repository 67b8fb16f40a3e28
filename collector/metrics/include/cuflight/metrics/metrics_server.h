// The HTTP endpoint Prometheus scrapes: GET /metrics returns Metrics::Render() as
// text/plain; version=0.0.4; GET / returns a page linking to it. Any other path is 404.
//
// Design:
//  1. cpp-httplib (Debian's libcpp-httplib) serves on one listener thread plus a pool of two
//     request threads: scrapes are rare and cheap, and the pool bounds the threads a burst of
//     connections can take from the daemon.
//  2. Nothing thrown in a request handler leaves the server's threads: a failed render answers
//     500. cpp-httplib's Server constructor sets SIGPIPE to SIG_IGN for the whole process, so a
//     scraper that hangs up mid-response cannot kill the daemon.
//  3. Reads and writes time out after 5 s and request bodies are capped, so a stuck or hostile
//     client holds a request thread for a bounded time only.
#ifndef CUFLIGHT_METRICS_METRICS_SERVER_H_
#define CUFLIGHT_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <string_view>

#include "cuflight/metrics/metrics.h"

namespace cuflight::collector {

class MetricsServer {
 public:
  // Binds `host`:`port` and starts serving `metrics`, which must outlive the server.
  // `host`: a name or numeric address ("127.0.0.1", "::1", "[::1]", "localhost"); "" or "*"
  // means every IPv4 address (0.0.0.0). `port`: 0 picks a free port (see port()); otherwise
  // 1..65535. Returns nullptr and sets *error (when error is not null) if the address cannot be
  // resolved or bound. Never throws.
  static std::unique_ptr<MetricsServer> Start(const Metrics& metrics, std::string_view host,
                                              int port, std::string* error);
  // Stops the server (see Stop).
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port (the one chosen when 0 was given).
  int port() const;
  // Closes the listening socket and returns once the server's threads have exited (requests in
  // progress finish first). Idempotent; any thread but the server's own.
  void Stop();

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_METRICS_METRICS_SERVER_H_
