#include "cuflight/metrics/metrics_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "server_tls.h"

namespace cuflight::collector {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";
constexpr std::string_view kIndexPage =
    "<html><head><title>cuflight collector</title></head><body>"
    "<h1>cuflight collector</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

// Longest request (request line and headers) read; a scrape request is a few hundred bytes.
constexpr size_t kMaxRequestBytes = 8 * 1024;
constexpr int kMaxConnectionsLimit = 1024;
constexpr int kAcceptsPerTurn = 64;
constexpr int kMaxEvents = 64;
constexpr int kListenBacklog = 64;
// Epoll tokens below kFirstConnectionId are the server's own descriptors.
constexpr uint64_t kTokenListener = 1;
constexpr uint64_t kTokenWake = 2;
constexpr uint64_t kFirstConnectionId = 16;

std::string Errno(int err) {
  char buf[256];
  return strerror_r(err, buf, sizeof(buf));  // GNU: returns the message
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

struct Connection {
  int fd = -1;
  SSL* ssl = nullptr;  // with TLS: the session on fd (owned)
  Clock::time_point deadline;
  std::string in;
  std::string out;
  size_t out_pos = 0;
  bool answering = false;  // a complete request was read: `out` is being written
};

std::string Response(int status, std::string_view reason, std::string_view content_type,
                     std::string_view body, bool head, std::string_view extra_header = {}) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
  out += "Content-Type: ";
  out += content_type;
  out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  out += extra_header;
  out += "Connection: close\r\n\r\n";
  if (!head) out += body;
  return out;
}

}  // namespace

struct MetricsServer::Impl {
  Impl(const Metrics& m, const MetricsServerOptions& o) : metrics(m), options(o) {
    if (!options.web_config.basic_auth_users.empty()) {
      auth = std::make_unique<BasicAuth>(options.web_config);
    }
    options.max_connections = std::clamp(options.max_connections, 1, kMaxConnectionsLimit);
    options.request_timeout = std::max(options.request_timeout, std::chrono::milliseconds(1));
  }
  ~Impl() {
    for (auto& [id, c] : connections) {
      if (c.ssl != nullptr) SSL_free(c.ssl);
      ::close(c.fd);
    }
    for (const int fd : {listen_fd, epoll_fd, wake_fd, spare_fd}) {
      if (fd >= 0) ::close(fd);
    }
  }

  bool Bind(std::string_view host, int port_wanted, std::string* error);
  void Run();
  void Accept();
  void Read(uint64_t id);
  void Answer(Connection& c);
  void Write(uint64_t id);
  void Close(uint64_t id);
  void ExpireDeadlines(Clock::time_point now);
  void Watch(const Connection& c, uint64_t id, uint32_t events);
  // With TLS: reads what the session has into c.in until the request is complete or OpenSSL
  // waits for the socket. Returns false when the connection was closed (a failed handshake).
  bool ReadTls(uint64_t id);

  const Metrics& metrics;
  MetricsServerOptions options;
  std::unique_ptr<BasicAuth> auth;  // null: no authentication
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  // Held in reserve: when accept(2) fails for lack of descriptors, closing it makes room to
  // accept and close the pending connection, instead of spinning on a ready listener.
  int spare_fd = -1;
  int port = 0;
  std::map<uint64_t, Connection> connections;  // by id: the oldest first
  uint64_t next_id = kFirstConnectionId;

  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> answered{0};
  std::atomic<uint64_t> evicted{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> timed_out{0};
  std::atomic<uint64_t> open{0};
  std::atomic<uint64_t> unauthorized{0};
  std::atomic<uint64_t> throttled{0};
  std::atomic<uint64_t> tls_failed{0};

  std::atomic<bool> stop{false};
  std::mutex stop_mu;  // serialises Stop()
  std::thread thread;
};

bool MetricsServer::Impl::Bind(std::string_view host, int port_wanted, std::string* error) {
  const std::string bind_host = NormalizeHost(host);
  const std::string where = std::string(host) + ":" + std::to_string(port_wanted);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc =
      ::getaddrinfo(bind_host.c_str(), std::to_string(port_wanted).c_str(), &hints, &found);
  if (rc != 0) {
    SetError(error, "cannot listen on " + where + ": " + ::gai_strerror(rc));
    return false;
  }
  int err = 0;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // SO_REUSEADDR only (not SO_REUSEPORT, which would let a second collector bind the same port
    // and take half of the scrapes): a restart can rebind while old connections sit in TIME_WAIT.
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, kListenBacklog) == 0) {
      listen_fd = fd;
      break;
    }
    err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (listen_fd < 0) {
    SetError(error, "cannot listen on " + where + (err != 0 ? ": " + Errno(err) : std::string()));
    return false;
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    if (addr.ss_family == AF_INET) {
      port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
    }
  }
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (epoll_fd < 0 || wake_fd < 0) {
    SetError(error, "cannot create the metrics server's event loop: " + Errno(errno));
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTokenListener;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev) != 0) {
    SetError(error, "cannot watch the metrics listener: " + Errno(errno));
    return false;
  }
  ev.data.u64 = kTokenWake;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) {
    SetError(error, "cannot watch the metrics server's wake-up: " + Errno(errno));
    return false;
  }
  return true;
}

void MetricsServer::Impl::Run() {
  std::array<epoll_event, kMaxEvents> events{};
  while (!stop.load(std::memory_order_acquire)) {
    Clock::time_point now = Clock::now();
    int64_t wait_ms = 1000;
    for (const auto& [id, c] : connections) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(c.deadline - now).count();
      wait_ms = std::min<int64_t>(wait_ms, std::max<int64_t>(left, 0));
    }
    const int n = ::epoll_wait(epoll_fd, events.data(), kMaxEvents, static_cast<int>(wait_ms));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      const epoll_event& ev = events[static_cast<size_t>(i)];
      const uint64_t token = ev.data.u64;
      if (token == kTokenListener) {
        Accept();
      } else if (token == kTokenWake) {
        uint64_t value = 0;
        [[maybe_unused]] const ssize_t ignored = ::read(wake_fd, &value, sizeof(value));
      } else if (connections.count(token) != 0) {
        if ((ev.events & (EPOLLERR | EPOLLHUP)) != 0 && (ev.events & EPOLLIN) == 0) {
          Close(token);
        } else if (connections.at(token).answering) {
          Write(token);
        } else {
          Read(token);
        }
      }
    }
    ExpireDeadlines(Clock::now());
  }
  while (!connections.empty()) Close(connections.begin()->first);
}

void MetricsServer::Impl::Accept() {
  for (int i = 0; i < kAcceptsPerTurn; ++i) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
        ::close(spare_fd);
        const int victim = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (victim >= 0) ::close(victim);
        spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        refused.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      return;  // EAGAIN: all taken; anything else: tried again at the next readiness
    }
    accepted.fetch_add(1, std::memory_order_relaxed);
    if (connections.size() >= static_cast<size_t>(options.max_connections)) {
      auto oldest = std::find_if(connections.begin(), connections.end(),
                                 [](const auto& entry) { return !entry.second.answering; });
      if (oldest == connections.end()) {
        ::close(fd);
        refused.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      Close(oldest->first);
      evicted.fetch_add(1, std::memory_order_relaxed);
    }
    const uint64_t id = next_id++;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      refused.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    SSL* ssl = nullptr;
    if (options.web_config.tls != nullptr) {
      ssl = options.web_config.tls->NewSession(fd);
      if (ssl == nullptr) {
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
        ::close(fd);
        refused.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
    }
    Connection& c = connections[id];
    c.fd = fd;
    c.ssl = ssl;
    c.deadline = Clock::now() + options.request_timeout;
    open.store(connections.size(), std::memory_order_relaxed);
  }
}

void MetricsServer::Impl::Watch(const Connection& c, uint64_t id, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.fd, &ev);
}

bool MetricsServer::Impl::ReadTls(uint64_t id) {
  Connection& c = connections.at(id);
  char buf[4096];
  while (c.in.find("\r\n\r\n") == std::string::npos && c.in.size() < kMaxRequestBytes) {
    ERR_clear_error();
    const int n = SSL_read(c.ssl, buf, sizeof(buf));
    if (n > 0) {
      c.in.append(buf, std::min(kMaxRequestBytes - c.in.size(), static_cast<size_t>(n)));
      continue;
    }
    const int err = SSL_get_error(c.ssl, n);
    if (err == SSL_ERROR_WANT_READ) {
      Watch(c, id, EPOLLIN);
      return true;
    }
    if (err == SSL_ERROR_WANT_WRITE) {  // the handshake's answer waits for room
      Watch(c, id, EPOLLOUT);
      return true;
    }
    if (err != SSL_ERROR_ZERO_RETURN) tls_failed.fetch_add(1, std::memory_order_relaxed);
    ERR_clear_error();
    Close(id);
    return false;
  }
  return true;
}

void MetricsServer::Impl::Read(uint64_t id) {
  Connection& c = connections.at(id);
  if (c.ssl != nullptr) {
    if (!ReadTls(id)) return;
  } else {
    char buf[4096];
    const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {
      Close(id);
      return;
    }
    const size_t room = kMaxRequestBytes - c.in.size();
    c.in.append(buf, std::min(room, static_cast<size_t>(n)));
  }
  if (c.in.find("\r\n\r\n") != std::string::npos) {
    Answer(c);
  } else if (c.in.size() >= kMaxRequestBytes) {
    c.out = Response(431, "Request Header Fields Too Large", "text/plain", "request too large\n",
                     false);
    c.answering = true;
  } else {
    return;
  }
  Watch(c, id, EPOLLOUT);
  Write(id);
}

void MetricsServer::Impl::Answer(Connection& c) {
  c.answering = true;
  const size_t line_end = c.in.find("\r\n");
  const std::string_view line(c.in.data(), line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || !line.substr(sp2 + 1).starts_with("HTTP/1.")) {
    c.out = Response(400, "Bad Request", "text/plain", "bad request\n", false);
    return;
  }
  const std::string_view method = line.substr(0, sp1);
  std::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    c.out = Response(405, "Method Not Allowed", "text/plain", "only GET and HEAD\n", false,
                     "Allow: GET, HEAD\r\n");
    return;
  }
  if (path == "/healthz") {
    c.out = Response(200, "OK", "text/plain", "ok\n", head);
    return;
  }
  if (auth != nullptr) {
    switch (auth->Check(std::string_view(c.in), Clock::now())) {
      case BasicAuth::Verdict::kAllowed:
        break;
      case BasicAuth::Verdict::kDenied:
        unauthorized.fetch_add(1, std::memory_order_relaxed);
        c.out = Response(401, "Unauthorized", "text/plain", "unauthorized\n", head,
                         "WWW-Authenticate: Basic realm=\"cuflight\", charset=\"UTF-8\"\r\n");
        return;
      case BasicAuth::Verdict::kThrottled:
        throttled.fetch_add(1, std::memory_order_relaxed);
        c.out = Response(429, "Too Many Requests", "text/plain", "too many password checks\n", head,
                         "Retry-After: 1\r\n");
        return;
    }
  }
  if (path == "/metrics") {
    try {
      std::string text = metrics.Render();
      if (options.more_metrics) options.more_metrics(&text);
      c.out = Response(200, "OK", kContentType, text, head);
    } catch (const std::exception&) {
      c.out = Response(500, "Internal Server Error", "text/plain", "cannot render metrics\n", head);
    }
  } else if (path == "/") {
    c.out = Response(200, "OK", "text/html; charset=utf-8", kIndexPage, head);
  } else {
    c.out = Response(404, "Not Found", "text/plain", "not found\n", head);
  }
}

void MetricsServer::Impl::Write(uint64_t id) {
  Connection& c = connections.at(id);
  while (c.out_pos < c.out.size()) {
    if (c.ssl != nullptr) {
      ERR_clear_error();
      const size_t left = std::min<size_t>(c.out.size() - c.out_pos, 1 << 30);
      const int n = SSL_write(c.ssl, c.out.data() + c.out_pos, static_cast<int>(left));
      if (n > 0) {
        c.out_pos += static_cast<size_t>(n);
        continue;
      }
      const int err = SSL_get_error(c.ssl, n);
      if (err == SSL_ERROR_WANT_WRITE) return;  // EPOLLOUT brings us back
      if (err == SSL_ERROR_WANT_READ) {         // a TLS 1.3 key update: wait to read
        Watch(c, id, EPOLLIN);
        return;
      }
      ERR_clear_error();
      Close(id);
      return;
    }
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT brings us back
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Close(id);
      return;
    }
    c.out_pos += static_cast<size_t>(n);
  }
  answered.fetch_add(1, std::memory_order_relaxed);
  if (c.ssl != nullptr) {
    ERR_clear_error();
    SSL_shutdown(c.ssl);  // close_notify, not waiting for the client's
    ERR_clear_error();
  }
  ::shutdown(c.fd, SHUT_WR);
  Close(id);
}

void MetricsServer::Impl::Close(uint64_t id) {
  const auto it = connections.find(id);
  if (it == connections.end()) return;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, it->second.fd, nullptr);
  if (it->second.ssl != nullptr) SSL_free(it->second.ssl);
  ::close(it->second.fd);
  connections.erase(it);
  open.store(connections.size(), std::memory_order_relaxed);
}

void MetricsServer::Impl::ExpireDeadlines(Clock::time_point now) {
  for (auto it = connections.begin(); it != connections.end();) {
    const uint64_t id = it->first;
    const bool expired = it->second.deadline <= now;
    ++it;
    if (expired) {
      Close(id);
      timed_out.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { Stop(); }

int MetricsServer::port() const { return impl_->port; }

MetricsServerStats MetricsServer::stats() const {
  const Impl& i = *impl_;
  MetricsServerStats s;
  s.accepted = i.accepted.load(std::memory_order_relaxed);
  s.answered = i.answered.load(std::memory_order_relaxed);
  s.evicted = i.evicted.load(std::memory_order_relaxed);
  s.refused = i.refused.load(std::memory_order_relaxed);
  s.timed_out = i.timed_out.load(std::memory_order_relaxed);
  s.open = i.open.load(std::memory_order_relaxed);
  s.unauthorized = i.unauthorized.load(std::memory_order_relaxed);
  s.throttled = i.throttled.load(std::memory_order_relaxed);
  s.tls_failed = i.tls_failed.load(std::memory_order_relaxed);
  return s;
}

std::unique_ptr<MetricsServer> MetricsServer::Start(const Metrics& metrics, std::string_view host,
                                                    int port, std::string* error,
                                                    const MetricsServerOptions& options) {
  if (port < 0 || port > 65535) {
    SetError(error, "metrics port out of range: " + std::to_string(port));
    return nullptr;
  }
  try {
    auto impl = std::make_unique<Impl>(metrics, options);
    if (!impl->Bind(host, port, error)) return nullptr;
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] {
      // OpenSSL writes to the socket with write(2), which raises SIGPIPE when the client has
      // hung up; blocked on this thread it stays pending and the write fails with EPIPE (plain
      // HTTP uses MSG_NOSIGNAL instead).
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      try {
        raw->Run();
      } catch (...) {
        // The loop stops; the daemon goes on without its metrics endpoint.
      }
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
  impl.stop.store(true, std::memory_order_release);
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t ignored = ::write(impl.wake_fd, &one, sizeof(one));
  impl.thread.join();
  // The listener closes with the object; close it now so that the port is free after Stop.
  ::close(impl.listen_fd);
  impl.listen_fd = -1;
}

}  // namespace cuflight::collector
