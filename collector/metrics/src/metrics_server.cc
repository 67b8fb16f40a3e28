#include "cuflight/metrics/metrics_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

namespace cuflight::collector {

namespace {

constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";
constexpr int kRequestThreads = 2;
constexpr time_t kIoTimeoutSeconds = 5;
constexpr size_t kMaxRequestBody = size_t{64} * 1024;

constexpr std::string_view kIndexPage =
    "<html><head><title>cuflight collector</title></head><body>"
    "<h1>cuflight collector</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

// Replaces cpp-httplib's default (SO_REUSEPORT, which would let a second collector bind the
// same port and take half of the scrapes): SO_REUSEADDR only, so a restart can rebind while old
// connections sit in TIME_WAIT, and close-on-exec on the listening socket.
void ListenSocketOptions(socket_t sock) {
  const int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  const int flags = fcntl(sock, F_GETFD);
  if (flags != -1) fcntl(sock, F_SETFD, flags | FD_CLOEXEC);
}

std::string NormalizeHost(std::string_view host) {
  if (host.empty() || host == "*") return "0.0.0.0";
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::string(host);
}

void SetError(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
}

}  // namespace

struct MetricsServer::Impl {
  explicit Impl(const Metrics& m) : metrics(m) {}

  const Metrics& metrics;
  httplib::Server server;
  std::thread thread;
  int port = 0;

  std::mutex stop_mu;  // serialises Stop()
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;  // the listener thread has left listen_after_bind()
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { Stop(); }

int MetricsServer::port() const { return impl_->port; }

std::unique_ptr<MetricsServer> MetricsServer::Start(const Metrics& metrics, std::string_view host,
                                                    int port, std::string* error) {
  if (port < 0 || port > 65535) {
    SetError(error, "metrics port out of range: " + std::to_string(port));
    return nullptr;
  }
  try {
    auto impl = std::make_unique<Impl>(metrics);
    httplib::Server& server = impl->server;
    server.new_task_queue = [] { return new httplib::ThreadPool(kRequestThreads); };
    server.set_socket_options(ListenSocketOptions);
    server.set_read_timeout(kIoTimeoutSeconds, 0);
    server.set_write_timeout(kIoTimeoutSeconds, 0);
    server.set_keep_alive_timeout(kIoTimeoutSeconds);
    server.set_payload_max_length(kMaxRequestBody);
    server.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          res.status = 500;
          res.set_content("internal error\n", "text/plain");
        });

    const Metrics* m = &metrics;
    server.Get("/metrics", [m](const httplib::Request&, httplib::Response& res) {
      try {
        res.set_content(m->Render(), std::string(kContentType));
      } catch (const std::exception&) {
        res.status = 500;
        res.set_content("cannot render metrics\n", "text/plain");
      }
    });
    server.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(kIndexPage), "text/html; charset=utf-8");
    });

    const std::string bind_host = NormalizeHost(host);
    errno = 0;
    int bound = -1;
    if (port == 0) {
      bound = server.bind_to_any_port(bind_host);
    } else if (server.bind_to_port(bind_host, port)) {
      bound = port;
    }
    if (bound <= 0) {
      const int err = errno;
      std::string message = "cannot listen on " + std::string(host) + ":" + std::to_string(port);
      if (err != 0) message += std::string(": ") + std::strerror(err);
      SetError(error, std::move(message));
      return nullptr;
    }
    impl->port = bound;

    Impl* raw = impl.get();
    impl->thread = std::thread([raw] {
      try {
        raw->server.listen_after_bind();
      } catch (...) {
        // The accept loop stops; the daemon goes on without its metrics endpoint.
      }
      std::lock_guard<std::mutex> lock(raw->done_mu);
      raw->done = true;
      raw->done_cv.notify_all();
    });
    return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
  } catch (const std::exception& e) {
    SetError(error, std::string("cannot start the metrics server: ") + e.what());
    return nullptr;
  }
}

void MetricsServer::Stop() {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> stop_lock(impl.stop_mu);
  if (!impl.thread.joinable()) return;
  std::unique_lock<std::mutex> lock(impl.done_mu);
  while (!impl.done) {
    // httplib::Server::stop() does nothing until the listener thread has entered its accept
    // loop, so a Stop() right after Start() repeats it until the thread has left the loop.
    lock.unlock();
    impl.server.stop();
    lock.lock();
    impl.done_cv.wait_for(lock, std::chrono::milliseconds(10), [&] { return impl.done; });
  }
  lock.unlock();
  impl.thread.join();
}

}  // namespace cuflight::collector
