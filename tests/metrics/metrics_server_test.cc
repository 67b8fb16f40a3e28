// MetricsServer: GET /metrics over a real loopback socket, bind failures, stop; and the bounds
// that keep scrape clients from starving anything: idle or trickling connections neither delay
// a scrape nor hold more than the server's share of descriptors, and are closed at a deadline.
#include "cuflight/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/metrics/metrics.h"
#include "exposition_parser.h"
#include "http_get.h"

namespace cuflight::collector {
namespace {

using testing::HttpGet;
using testing::HttpResponse;

TEST(MetricsServerTest, ServesTheRenderedMetrics) {
  Metrics m;
  m.Kernel(1, 1, "gemm", 0, "registers", 0.5);
  m.BytesWritten(4096);
  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_GT(server->port(), 0);

  const HttpResponse r = HttpGet(server->port(), "/metrics");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.body, m.Render());
  testing::Exposition e;
  ASSERT_TRUE(testing::ParseExposition(r.body, &e, &error)) << error;
  EXPECT_EQ(e.Value("cuflight_log_written_bytes_total"), 4096);

  // Served live: a later update shows in the next scrape.
  m.BytesWritten(1);
  const HttpResponse again = HttpGet(server->port(), "/metrics");
  ASSERT_TRUE(testing::ParseExposition(again.body, &e, &error)) << error;
  EXPECT_EQ(e.Value("cuflight_log_written_bytes_total"), 4097);
}

TEST(MetricsServerTest, IndexLinksToMetricsAndOtherPathsAre404) {
  Metrics m;
  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error);
  ASSERT_NE(server, nullptr) << error;
  const HttpResponse index = HttpGet(server->port(), "/");
  ASSERT_EQ(index.status, 200) << index.error;
  EXPECT_NE(index.body.find("href=\"/metrics\""), std::string::npos) << index.body;
  EXPECT_EQ(HttpGet(server->port(), "/nothing-here").status, 404);
}

TEST(MetricsServerTest, ManySequentialScrapes) {
  Metrics m;
  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error);
  ASSERT_NE(server, nullptr) << error;
  for (int i = 0; i < 50; ++i) {
    m.Lost(1);
    const HttpResponse r = HttpGet(server->port(), "/metrics");
    ASSERT_EQ(r.status, 200) << r.error;
    testing::Exposition e;
    ASSERT_TRUE(testing::ParseExposition(r.body, &e, &error)) << error;
    EXPECT_EQ(e.Value("cuflight_events_lost_total"), i + 1);
  }
}

TEST(MetricsServerTest, PortInUseFailsWithAnError) {
  Metrics m;
  std::string error;
  auto first = MetricsServer::Start(m, "127.0.0.1", 0, &error);
  ASSERT_NE(first, nullptr) << error;
  error.clear();
  auto second = MetricsServer::Start(m, "127.0.0.1", first->port(), &error);
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(error.find("127.0.0.1:" + std::to_string(first->port())), std::string::npos) << error;
  EXPECT_NE(error.find("Address already in use"), std::string::npos) << error;
  // The first server is unaffected.
  EXPECT_EQ(HttpGet(first->port(), "/metrics").status, 200);
}

TEST(MetricsServerTest, UnusableAddressesFailWithAnError) {
  Metrics m;
  for (int port : {-1, 65536}) {
    std::string error;
    EXPECT_EQ(MetricsServer::Start(m, "127.0.0.1", port, &error), nullptr) << port;
    EXPECT_NE(error, "") << port;
  }
  std::string error;
  // TEST-NET-1 (RFC 5737): a valid address that no local interface has.
  EXPECT_EQ(MetricsServer::Start(m, "192.0.2.1", 0, &error), nullptr);
  EXPECT_NE(error, "");
  // A null error pointer is allowed.
  EXPECT_EQ(MetricsServer::Start(m, "192.0.2.1", 0, nullptr), nullptr);
}

TEST(MetricsServerTest, BracketedHostIsAccepted) {
  Metrics m;
  std::string error;
  auto server = MetricsServer::Start(m, "[127.0.0.1]", 0, &error);
  ASSERT_NE(server, nullptr) << error;
  EXPECT_EQ(HttpGet(server->port(), "/metrics").status, 200);
}

TEST(MetricsServerTest, StopRightAfterStartReturnsAndClosesThePort) {
  Metrics m;
  for (int i = 0; i < 20; ++i) {
    std::string error;
    auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error);
    ASSERT_NE(server, nullptr) << error;
    const int port = server->port();
    server->Stop();
    server->Stop();  // idempotent
    const HttpResponse r = HttpGet(port, "/metrics");
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.error.find("connect"), std::string::npos) << r.error;
  }
}

TEST(MetricsServerTest, PortCanBeReboundAfterStop) {
  Metrics m;
  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error);
  ASSERT_NE(server, nullptr) << error;
  const int port = server->port();
  ASSERT_EQ(HttpGet(port, "/metrics").status, 200);  // leaves a connection in TIME_WAIT
  server.reset();
  auto again = MetricsServer::Start(m, "127.0.0.1", port, &error);
  ASSERT_NE(again, nullptr) << error;
  EXPECT_EQ(HttpGet(port, "/metrics").status, 200);
}

// A loopback TCP connection to `port` that sends nothing; -1 on failure.
int ConnectIdle(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// Reads until EOF or `timeout`; true on EOF (the server closed the connection).
bool ClosedByServerWithin(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[256];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
}

// Two silent connections took both request threads of the server this one replaced, and a
// scrape waited for their read timeout (5 s): here it is answered at once.
TEST(MetricsServerTest, IdleConnectionsDoNotDelayAScrape) {
  Metrics m;
  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error);
  ASSERT_NE(server, nullptr) << error;
  std::vector<int> idle;
  for (int i = 0; i < 2; ++i) idle.push_back(ConnectIdle(server->port()));
  ASSERT_TRUE(WaitFor([&] { return server->stats().open == 2; }, std::chrono::seconds(5)));
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse r = HttpGet(server->port(), "/metrics");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_LT(took, std::chrono::seconds(2));  // the idle ones' deadline is 5 s
  for (const int fd : idle) close(fd);
}

// ~1,000 idle connections exhausted the daemon's descriptors: the server holds at most its
// max_connections, closing the oldest idle one for each newcomer, and a scrape still gets in.
TEST(MetricsServerTest, ManyIdleConnectionsHoldABoundedShareOfDescriptors) {
  Metrics m;
  MetricsServerOptions options;
  options.max_connections = 8;
  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error, options);
  ASSERT_NE(server, nullptr) << error;
  const size_t before = OpenDescriptors();
  constexpr int kClients = 300;
  std::vector<int> clients;
  for (int i = 0; i < kClients; ++i) {
    const int fd = ConnectIdle(server->port());
    ASSERT_GE(fd, 0) << i;
    clients.push_back(fd);
    // Paced so the listen backlog never overflows (a dropped SYN is retried only after 1 s).
    if (i % 32 == 31) {
      ASSERT_TRUE(WaitFor([&] { return server->stats().accepted == clients.size(); },
                          std::chrono::seconds(10)));
    }
  }
  ASSERT_TRUE(
      WaitFor([&] { return server->stats().accepted == kClients; }, std::chrono::seconds(10)));
  const size_t held_by_server = OpenDescriptors() - before - clients.size();
  EXPECT_LE(held_by_server, 8u);
  EXPECT_EQ(server->stats().open, 8u);
  EXPECT_EQ(server->stats().evicted, kClients - 8u);
  const HttpResponse r = HttpGet(server->port(), "/metrics");
  EXPECT_EQ(r.status, 200) << r.error;
  for (const int fd : clients) close(fd);
}

TEST(MetricsServerTest, SilentAndTricklingClientsAreClosedAtTheDeadline) {
  Metrics m;
  MetricsServerOptions options;
  options.request_timeout = std::chrono::milliseconds(300);
  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error, options);
  ASSERT_NE(server, nullptr) << error;
  const int silent = ConnectIdle(server->port());
  const int trickle = ConnectIdle(server->port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(trickle, 0);
  // An incomplete request, a byte at a time: the deadline counts from the accept, not the bytes.
  std::thread writer([trickle] {
    const std::string part = "GET /metrics HTTP/1.1\r\n";
    for (char c : part) {
      if (send(trickle, &c, 1, MSG_NOSIGNAL) != 1) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  });
  EXPECT_TRUE(ClosedByServerWithin(silent, std::chrono::seconds(5)));
  EXPECT_TRUE(ClosedByServerWithin(trickle, std::chrono::seconds(5)));
  writer.join();
  EXPECT_EQ(server->stats().timed_out, 2u);
  EXPECT_EQ(server->stats().open, 0u);
  close(silent);
  close(trickle);
}

TEST(MetricsServerTest, HeadHasNoBodyAndOtherMethodsAre405) {
  Metrics m;
  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error);
  ASSERT_NE(server, nullptr) << error;
  auto exchange = [&](const std::string& request) {
    const int fd = ConnectIdle(server->port());
    EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    std::string out;
    char buf[4096];
    ssize_t n = 0;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
    close(fd);
    return out;
  };
  const std::string head = exchange("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\n")) << head;
  EXPECT_NE(head.find("Content-Length: " + std::to_string(m.Render().size()) + "\r\n"),
            std::string::npos)
      << head;
  EXPECT_TRUE(head.ends_with("\r\n\r\n")) << head;  // headers only
  const std::string post = exchange("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_TRUE(post.starts_with("HTTP/1.1 405 ")) << post;
  const std::string garbage = exchange("hello\r\n\r\n");
  EXPECT_TRUE(garbage.starts_with("HTTP/1.1 400 ")) << garbage;
}

}  // namespace
}  // namespace cuflight::collector
