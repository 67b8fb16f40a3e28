// MetricsServer: GET /metrics over a real loopback socket, bind failures, stop.
#include "cuflight/metrics/metrics_server.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace cuflight::collector
