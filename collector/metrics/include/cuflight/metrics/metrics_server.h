// The HTTP endpoint Prometheus scrapes: GET /metrics returns Metrics::Render() as
// text/plain; version=0.0.4; GET / returns a page linking to it; GET /healthz returns "ok" (for
// a liveness probe: it tells nothing about the node). Any other path is 404, any other method
// 405. With a web config (web_config.h) that names users, every path but /healthz needs HTTP
// basic authentication: 401 without it or with wrong credentials, 429 while password checks are
// throttled; with one that turns TLS on, the endpoint speaks only HTTPS (design note 5).
//
// Design (the daemon serves producers of many users; no scrape client may take anything from
// ingestion, which runs on other threads and needs descriptors):
//  1. One thread, one epoll set, non-blocking sockets, no request threads: a request is read,
//     rendered and answered on that thread. Responses close the connection (no keep-alive), so
//     a connection holds nothing between scrapes.
//  2. Bounded: at most max_connections connections at a time (their descriptors are the
//     server's whole share, plus the listener and two of its own). When a connection arrives
//     with every slot taken, the oldest one that has not yet sent a complete request is closed
//     to make room (an idle or trickling client cannot keep a scraper out); if all of them are
//     being answered, the new one is closed instead. Out of descriptors (EMFILE), a pending
//     connection is accepted into a reserved one and closed, instead of spinning.
//  3. Each connection has one deadline, request_timeout from its accept, for reading the whole
//     request and writing the whole response; past it, it is closed. Requests are capped at
//     8 KiB (431 beyond).
//  4. Nothing thrown while rendering leaves the thread: the answer is 500. Writes use
//     MSG_NOSIGNAL, so a client that hangs up mid-response raises no SIGPIPE.
//  5. TLS runs on the same thread and the same bounds: a connection's handshake counts against
//     its deadline and its slot like the request it precedes; OpenSSL's reads and writes are
//     non-blocking, and the connection waits for whichever direction OpenSSL asks for. A failed
//     handshake (a plain-HTTP client, an unverified client certificate) closes the connection.
#ifndef CUFLIGHT_METRICS_METRICS_SERVER_H_
#define CUFLIGHT_METRICS_METRICS_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cuflight/metrics/metrics.h"
#include "cuflight/metrics/web_config.h"

namespace cuflight::collector {

struct MetricsServerOptions {
  // Simultaneous HTTP connections (see the design note), clamped to [1, 1024].
  int max_connections = 16;
  // Time from accept to the end of the response, clamped to at least 1 ms.
  std::chrono::milliseconds request_timeout{5000};
  // Users allowed in by HTTP basic authentication; empty: no authentication.
  WebConfig web_config;
  // Appends more families to /metrics after Metrics::Render() (the OTLP exporter's); called on
  // the server's thread for every scrape; may be empty.
  std::function<void(std::string*)> more_metrics;
};

// What the server did with connections, since Start. Any thread.
struct MetricsServerStats {
  uint64_t accepted = 0;
  uint64_t answered = 0;   // responses written completely
  uint64_t evicted = 0;    // closed to make room for a newer connection
  uint64_t refused = 0;    // closed at once: every slot was being answered, or no descriptor left
  uint64_t timed_out = 0;  // closed at the deadline
  uint64_t open = 0;       // connections open now
  uint64_t unauthorized = 0;  // answered 401: no or wrong credentials
  uint64_t throttled = 0;     // answered 429: credentials not checked (web_config.h, note 2c)
  uint64_t tls_failed = 0;    // closed: the TLS handshake or a TLS read failed
};

class MetricsServer {
 public:
  // Binds `host`:`port` and starts serving `metrics`, which must outlive the server.
  // `host`: a name or numeric address ("127.0.0.1", "::1", "[::1]", "localhost"); "" or "*"
  // means every IPv4 address (0.0.0.0). `port`: 0 picks a free port (see port()); otherwise
  // 1..65535. Returns nullptr and sets *error (when error is not null) if the address cannot be
  // resolved or bound. Never throws.
  static std::unique_ptr<MetricsServer> Start(const Metrics& metrics, std::string_view host,
                                              int port, std::string* error,
                                              const MetricsServerOptions& options = {});
  // Stops the server (see Stop).
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port (the one chosen when 0 was given).
  int port() const;
  MetricsServerStats stats() const;
  // Closes the listening socket and every connection and returns once the server's thread has
  // exited. Idempotent; any thread but the server's own.
  void Stop();

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_METRICS_METRICS_SERVER_H_
