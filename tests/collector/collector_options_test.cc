// Flags and the JSON config file of the collector: defaults, every setting from both sources,
// precedence, and one line naming the flag or key for every bad value.
#include "collector_options.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "collector_test_util.h"

namespace cuflight::collector {
namespace {

struct Parsed {
  ParseStatus status;
  CollectorOptions options;
  std::string out;
  std::string error;
};

Parsed Parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv = {"cuflight-collector"};
  argv.insert(argv.end(), args.begin(), args.end());
  Parsed p;
  std::ostringstream out;
  p.status =
      ParseCollectorArgs(static_cast<int>(argv.size()), argv.data(), &p.options, out, &p.error);
  p.out = out.str();
  return p;
}

TEST(CollectorOptionsTest, DefaultsFollowTheProtocol) {
  const Parsed p = Parse({});
  ASSERT_EQ(p.status, ParseStatus::kRun) << p.error;
  EXPECT_EQ(p.options.socket, DefaultSocketPath());
  EXPECT_EQ(p.options.rotate_bytes, 64ull << 20);
  EXPECT_EQ(p.options.retain_bytes, 0u);
  EXPECT_EQ(p.options.retain_days, 0);
  EXPECT_TRUE(p.options.metrics.host.empty());
  EXPECT_TRUE(p.options.tcp.host.empty());
  EXPECT_FALSE(p.options.tcp_allow_remote);
  EXPECT_FALSE(p.options.tcp_trust_identity);  // each TCP connection writes its own log
  EXPECT_EQ(p.options.fsync_interval.count(), 1000);
  EXPECT_EQ(p.options.max_connections, 1024);
  EXPECT_EQ(p.options.max_line_bytes, 65536u);
  EXPECT_FALSE(p.options.socket_group.has_value());  // nobody else may connect by default
}

// --socket-group takes a group name (through NSS, as /etc/group has it) or a numeric gid. Every
// Linux system has group "root" with gid 0 (group(5), the LSB's required groups).
TEST(CollectorOptionsTest, SocketGroupTakesANameOrAGid) {
  const Parsed by_name = Parse({"--socket-group", "root"});
  ASSERT_EQ(by_name.status, ParseStatus::kRun) << by_name.error;
  EXPECT_EQ(by_name.options.socket_group, gid_t{0});
  EXPECT_EQ(by_name.options.socket_group_name, "root");
  const Parsed by_gid = Parse({"--socket-group", "54360"});
  ASSERT_EQ(by_gid.status, ParseStatus::kRun) << by_gid.error;
  EXPECT_EQ(by_gid.options.socket_group, gid_t{54360});
  const Parsed unknown = Parse({"--socket-group", "no-such-group-here"});
  EXPECT_EQ(unknown.status, ParseStatus::kExitUsage);
  EXPECT_NE(unknown.error.find("--socket-group: 'no-such-group-here' is neither a known group "
                               "name nor a numeric gid"),
            std::string::npos)
      << unknown.error;
  // (gid_t)-1 is "no change" to chown(2), never a group.
  EXPECT_EQ(Parse({"--socket-group", "4294967295"}).status, ParseStatus::kExitUsage);
}

TEST(CollectorOptionsTest, DefaultSocketPathUsesTheEnvironmentInProtocolOrder) {
  const char* saved_collector = std::getenv("CUFLIGHT_COLLECTOR");
  const char* saved_runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::string keep_collector = saved_collector ? saved_collector : "";
  const std::string keep_runtime = saved_runtime ? saved_runtime : "";

  setenv("CUFLIGHT_COLLECTOR", "/run/x/explicit.sock", 1);
  setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
  EXPECT_EQ(DefaultSocketPath(), "/run/x/explicit.sock");
  unsetenv("CUFLIGHT_COLLECTOR");
  EXPECT_EQ(DefaultSocketPath(), "/run/user/1234/cuflight/collector.sock");
  unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(DefaultSocketPath(), "/tmp/cuflight-" + std::to_string(getuid()) + "/collector.sock");

  if (saved_collector) setenv("CUFLIGHT_COLLECTOR", keep_collector.c_str(), 1);
  if (saved_runtime) setenv("XDG_RUNTIME_DIR", keep_runtime.c_str(), 1);
}

TEST(CollectorOptionsTest, EveryFlagIsApplied) {
  const Parsed p = Parse({"--socket",
                          "/run/c/s.sock",
                          "--log-dir",
                          "/var/tmp/logs",
                          "--rotate-bytes",
                          "8M",
                          "--retain-bytes",
                          "1G",
                          "--retain-days",
                          "7",
                          "--metrics",
                          "127.0.0.1:9464",
                          "--web-config",
                          "/etc/cuflight/web.yml",
                          "--tcp",
                          "[::1]:7000",
                          "--tcp-allow-remote",
                          "--tcp-trust-identity",
                          "--fsync-interval",
                          "250",
                          "--max-connections",
                          "16",
                          "--max-line-bytes",
                          "4K",
                          "--handshake-timeout",
                          "500",
                          "--reconnect-grace",
                          "0",
                          "--log-level",
                          "debug",
                          "--max-connections-per-uid",
                          "5",
                          "--idle-timeout",
                          "30000",
                          "--max-pending-bytes",
                          "1M",
                          "--retention-interval",
                          "60000",
                          "--socket-group",
                          "54361"});
  ASSERT_EQ(p.status, ParseStatus::kRun) << p.error;
  EXPECT_EQ(p.options.socket, "/run/c/s.sock");
  EXPECT_EQ(p.options.log_dir, "/var/tmp/logs");
  EXPECT_EQ(p.options.rotate_bytes, 8ull << 20);
  EXPECT_EQ(p.options.retain_bytes, 1ull << 30);
  EXPECT_EQ(p.options.retain_days, 7);
  EXPECT_EQ(p.options.metrics, (HostPort{"127.0.0.1", 9464}));
  EXPECT_EQ(p.options.web_config, "/etc/cuflight/web.yml");
  EXPECT_EQ(p.options.tcp, (HostPort{"::1", 7000}));
  EXPECT_TRUE(p.options.tcp_allow_remote);
  EXPECT_TRUE(p.options.tcp_trust_identity);
  EXPECT_EQ(p.options.fsync_interval.count(), 250);
  EXPECT_EQ(p.options.max_connections, 16);
  EXPECT_EQ(p.options.max_line_bytes, 4096u);
  EXPECT_EQ(p.options.handshake_timeout.count(), 500);
  EXPECT_EQ(p.options.reconnect_grace.count(), 0);
  EXPECT_EQ(p.options.log_level, "debug");
  EXPECT_EQ(p.options.max_connections_per_uid, 5);
  EXPECT_EQ(p.options.idle_timeout.count(), 30000);
  EXPECT_EQ(p.options.max_pending_bytes, 1ull << 20);
  EXPECT_EQ(p.options.retention_interval.count(), 60000);
  EXPECT_EQ(p.options.socket_group, gid_t{54361});
}

TEST(CollectorOptionsTest, ServiceLimitsHaveDefaults) {
  const Parsed p = Parse({});
  ASSERT_EQ(p.status, ParseStatus::kRun) << p.error;
  EXPECT_EQ(p.options.max_connections_per_uid, 0);  // a quarter of --max-connections
  // 12 of the injector's stats heartbeats (CUFLIGHT_STATS_MS defaults to 5000).
  EXPECT_EQ(p.options.idle_timeout.count(), 60000);
  EXPECT_EQ(p.options.max_pending_bytes, 128ull << 20);
  EXPECT_EQ(p.options.retention_interval.count(), 10000);
}

TEST(CollectorOptionsTest, ConfigFileSetsValuesAndFlagsWin) {
  testing::TempDir dir;
  const auto file = dir.path() / "collector.json";
  std::ofstream(file) << R"({"socket": "/run/cfg.sock", "rotate-bytes": 1048576,
                              "retain-days": "3", "tcp": "127.0.0.1:0", "tcp-allow-remote": true,
                              "tcp-trust-identity": true, "max-connections": 8,
                              "socket-group": 54362})";
  const Parsed p = Parse({"--config", file.c_str(), "--max-connections", "99"});
  ASSERT_EQ(p.status, ParseStatus::kRun) << p.error;
  EXPECT_EQ(p.options.socket, "/run/cfg.sock");
  EXPECT_EQ(p.options.rotate_bytes, 1048576u);
  EXPECT_EQ(p.options.retain_days, 3);
  EXPECT_EQ(p.options.tcp, (HostPort{"127.0.0.1", 0}));
  EXPECT_TRUE(p.options.tcp_allow_remote);
  EXPECT_TRUE(p.options.tcp_trust_identity);
  EXPECT_EQ(p.options.max_connections, 99);
  EXPECT_EQ(p.options.socket_group, gid_t{54362});
}

TEST(CollectorOptionsTest, BadFlagValuesNameTheFlagOnOneLine) {
  const std::vector<std::pair<std::vector<const char*>, std::string>> cases = {
      {{"--rotate-bytes", "12x"}, "--rotate-bytes: '12x' is not a byte count"},
      {{"--rotate-bytes", "10"}, "--rotate-bytes: '10' is out of range"},
      {{"--retain-bytes", "-1"}, "--retain-bytes: '-1' is not a byte count"},
      {{"--retain-days", "forever"}, "--retain-days: 'forever' is not a non-negative integer"},
      {{"--metrics", "localhost"}, "--metrics: 'localhost' is not HOST:PORT"},
      {{"--tcp", "127.0.0.1:70000"}, "--tcp: '127.0.0.1:70000' is not HOST:PORT"},
      {{"--fsync-interval", "1.5"}, "--fsync-interval: '1.5' is not a non-negative integer"},
      {{"--max-connections", "0"}, "--max-connections: '0' is out of range"},
      {{"--max-line-bytes", "100"}, "--max-line-bytes: '100' is out of range"},
      {{"--log-level", "loud"}, "--log-level: 'loud' is not one of"},
      {{"--max-connections-per-uid", "0"}, "--max-connections-per-uid: '0' is out of range"},
      {{"--idle-timeout", "soon"}, "--idle-timeout: 'soon' is not a non-negative integer"},
      {{"--max-pending-bytes", "1K"}, "--max-pending-bytes: '1K' is out of range"},
      {{"--retention-interval", "10"}, "--retention-interval: '10' is out of range"},
      {{"--socket", ""}, "--socket: the socket path may not be empty"},
      {{"--no-such-flag"}, "--no-such-flag"},
  };
  for (const auto& [args, expected] : cases) {
    std::vector<const char*> argv = {"cuflight-collector"};
    argv.insert(argv.end(), args.begin(), args.end());
    CollectorOptions options;
    std::ostringstream out;
    std::string error;
    EXPECT_EQ(ParseCollectorArgs(static_cast<int>(argv.size()), argv.data(), &options, out, &error),
              ParseStatus::kExitUsage)
        << expected;
    EXPECT_NE(error.find(expected), std::string::npos) << "got: " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

TEST(CollectorOptionsTest, SocketPathTooLongForSunPathIsRefused) {
  const std::string path = "/tmp/" + std::string(120, 'a') + ".sock";
  const Parsed p = Parse({"--socket", path.c_str()});
  EXPECT_EQ(p.status, ParseStatus::kExitUsage);
  EXPECT_NE(p.error.find("--socket: path is 130 bytes; a Unix socket path allows at most 107"),
            std::string::npos)
      << p.error;
}

TEST(CollectorOptionsTest, BadConfigFilesNameTheFileAndKey) {
  testing::TempDir dir;
  const auto write = [&](const std::string& name, const std::string& text) {
    const auto file = dir.path() / name;
    std::ofstream(file) << text;
    return file.string();
  };
  const std::string unknown = write("unknown.json", R"({"rotate_bytes": 5})");
  const std::string bad_value = write("bad.json", R"({"retain-days": -3})");
  const std::string bad_type = write("type.json", R"({"log-dir": ["a"]})");
  const std::string not_json = write("broken.json", "{\"socket\": ");
  const std::string bool_for_number = write("bool.json", R"({"max-connections": true})");

  struct Case {
    std::string file;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {unknown, "unknown key 'rotate_bytes' (keys: socket, socket-group, log-dir"},
      {bad_value, "key 'retain-days': '-3' is not a non-negative integer"},
      {bad_type, "key 'log-dir' must be a string or an integer"},
      {not_json, "not a JSON object"},
      {bool_for_number, "key 'max-connections' must be a string or an integer"},
      {(dir.path() / "missing.json").string(), "--config: cannot read"},
  };
  for (const Case& c : cases) {
    const Parsed p = Parse({"--config", c.file.c_str()});
    EXPECT_EQ(p.status, ParseStatus::kExitUsage) << c.file;
    EXPECT_NE(p.error.find(c.expected), std::string::npos) << "got: " << p.error;
    EXPECT_EQ(p.error.find('\n'), std::string::npos);
  }
}

// The OTLP exporter's standard variables (OpenTelemetry specification, protocol/exporter.md):
// each set here for one test and then cleared, since the test process may have its own.
class OtlpEnvironmentTest : public ::testing::Test {
 protected:
  static constexpr std::array<const char*, 8> kNames = {
      "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
      "OTEL_EXPORTER_OTLP_HEADERS",  "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
      "OTEL_EXPORTER_OTLP_TIMEOUT",  "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT",
      "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"};
  void SetUp() override {
    for (const char* name : kNames) {
      if (const char* v = std::getenv(name)) saved_.emplace_back(name, v);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kNames) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(OtlpEnvironmentTest, NothingSetLeavesTheExportOff) {
  const Parsed p = Parse({});
  ASSERT_EQ(p.status, ParseStatus::kRun) << p.error;
  EXPECT_EQ(p.options.otlp.endpoint, "");
}

TEST_F(OtlpEnvironmentTest, EndpointsFollowTheSpecification) {
  // The general variable is a base URL: v1/logs relative to its path (the specification's
  // examples: http://collector:4318 -> http://collector:4318/v1/logs, .../mycollector/ ->
  // .../mycollector/v1/logs).
  const std::vector<std::pair<const char*, const char*>> general = {
      {"http://collector:4318", "http://collector:4318/v1/logs"},
      {"http://collector:4318/", "http://collector:4318/v1/logs"},
      {"https://collector:4318/mycollector/", "https://collector:4318/mycollector/v1/logs"},
      {"https://collector:4318/mycollector", "https://collector:4318/mycollector/v1/logs"},
  };
  for (const auto& [value, expected] : general) {
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", value, 1);
    const Parsed p = Parse({});
    ASSERT_EQ(p.status, ParseStatus::kRun) << p.error;
    EXPECT_EQ(p.options.otlp.endpoint, expected) << value;
  }
  // The logs' own variable is used as-is, with the root path / when it names none, and wins.
  setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://logs:4318/ingest/otlp", 1);
  EXPECT_EQ(Parse({}).options.otlp.endpoint, "http://logs:4318/ingest/otlp");
  setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://logs:4318", 1);
  EXPECT_EQ(Parse({}).options.otlp.endpoint, "http://logs:4318/");
}

TEST_F(OtlpEnvironmentTest, HeadersTimeoutAndProtocol) {
  setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
  setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-Scope-OrgID=gpu-fleet,api-key=a%20b", 1);
  setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500", 1);
  setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", 1);
  Parsed p = Parse({});
  ASSERT_EQ(p.status, ParseStatus::kRun) << p.error;
  using Headers = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(p.options.otlp.headers, (Headers{{"X-Scope-OrgID", "gpu-fleet"}, {"api-key", "a b"}}));
  EXPECT_EQ(p.options.otlp.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(p.options.otlp.encoding, exporter::Encoding::kJson);
  // The LOGS_ variables win over the general ones.
  setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "X-Tenant=logs", 1);
  setenv("OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "700", 1);
  p = Parse({});
  ASSERT_EQ(p.status, ParseStatus::kRun) << p.error;
  EXPECT_EQ(p.options.otlp.headers, (Headers{{"X-Tenant", "logs"}}));
  EXPECT_EQ(p.options.otlp.timeout, std::chrono::milliseconds(700));
}

TEST_F(OtlpEnvironmentTest, FlagsAndTheConfigFileWin) {
  setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://from-env:4318", 1);
  setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "not a number", 1);  // never read: the flag is given
  setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-From=env", 1);
  const Parsed p = Parse({"--otlp-endpoint", "http://from-flag:4318", "--otlp-timeout", "100"});
  ASSERT_EQ(p.status, ParseStatus::kRun) << p.error;
  EXPECT_EQ(p.options.otlp.endpoint, "http://from-flag:4318/v1/logs");
  EXPECT_EQ(p.options.otlp.timeout, std::chrono::milliseconds(100));
  EXPECT_EQ(p.options.otlp.headers,
            (std::vector<std::pair<std::string, std::string>>{{"X-From", "env"}}));
  unsetenv("OTEL_EXPORTER_OTLP_TIMEOUT");
  // An empty flag keeps the export off whatever the environment says.
  const Parsed off = Parse({"--otlp-endpoint", ""});
  ASSERT_EQ(off.status, ParseStatus::kRun) << off.error;
  EXPECT_EQ(off.options.otlp.endpoint, "");
  testing::TempDir dir;
  const auto file = dir.path() / "collector.json";
  std::ofstream(file) << R"({"otlp-endpoint": "http://from-config:4318"})";
  const Parsed config = Parse({"--config", file.c_str()});
  ASSERT_EQ(config.status, ParseStatus::kRun) << config.error;
  EXPECT_EQ(config.options.otlp.endpoint, "http://from-config:4318/v1/logs");
}

TEST_F(OtlpEnvironmentTest, BadValuesAreUsageErrorsNamingTheVariable) {
  const std::vector<std::pair<std::pair<const char*, const char*>, std::string>> cases = {
      {{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT: "},
      {{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "ftp://x"}, "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: "},
      {{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"}, "OTEL_EXPORTER_OTLP_TIMEOUT: "},
      {{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc'"},
      {{"OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign"}, "OTEL_EXPORTER_OTLP_HEADERS: "},
      // A hostile or broken environment (exporter_unit_test's OtlpOptions.Hostile* hold each
      // rule): header injection, the request's own framing, a key twice, control characters.
      {{"OTEL_EXPORTER_OTLP_HEADERS", "k=v\r\nX-Injected: 1"}, "OTEL_EXPORTER_OTLP_HEADERS: "},
      {{"OTEL_EXPORTER_OTLP_LOGS_HEADERS", "Content-Length=0"},
       "OTEL_EXPORTER_OTLP_LOGS_HEADERS: 'Content-Length=0': the exporter writes Content-Length "
       "itself"},
      {{"OTEL_EXPORTER_OTLP_HEADERS", "a=1,A=2"}, "OTEL_EXPORTER_OTLP_HEADERS: 'A=2': A is given"},
      {{"OTEL_EXPORTER_OTLP_HEADERS", "k=%01"}, "OTEL_EXPORTER_OTLP_HEADERS: "},
      {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/\x01\n"}, "OTEL_EXPORTER_OTLP_ENDPOINT: "},
      {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:99999999999"}, "OTEL_EXPORTER_OTLP_ENDPOINT: "},
  };
  // Over-long values: refused in one line that does not echo them.
  const std::string huge_endpoint = "http://c:4318/" + std::string(1 << 20, 'a');
  const std::string huge_headers = "k=" + std::string(1 << 20, 'a');
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string*>{"OTEL_EXPORTER_OTLP_ENDPOINT", &huge_endpoint},
        {"OTEL_EXPORTER_OTLP_HEADERS", &huge_headers}}) {
    setenv(name, value->c_str(), 1);
    const Parsed p = Parse({});
    EXPECT_EQ(p.status, ParseStatus::kExitUsage) << name;
    EXPECT_EQ(p.error.rfind(std::string(name) + ": ", 0), 0u) << p.error.substr(0, 200);
    EXPECT_LT(p.error.size(), 300u);
    unsetenv(name);
  }
  for (const auto& [variable, expected] : cases) {
    setenv(variable.first, variable.second, 1);
    const Parsed p = Parse({});
    EXPECT_EQ(p.status, ParseStatus::kExitUsage) << variable.first;
    EXPECT_EQ(p.error.rfind(expected, 0), 0u) << "got: " << p.error;
    EXPECT_EQ(p.error.find('\n'), std::string::npos) << p.error;
    unsetenv(variable.first);
  }
}

TEST(CollectorOptionsTest, HelpAndVersionExitZero) {
  const Parsed help = Parse({"--help"});
  EXPECT_EQ(help.status, ParseStatus::kExitOk);
  EXPECT_NE(help.out.find("--rotate-bytes"), std::string::npos);
  EXPECT_NE(help.out.find("--fsync-interval"), std::string::npos);
  const Parsed version = Parse({"--version"});
  EXPECT_EQ(version.status, ParseStatus::kExitOk);
  EXPECT_NE(version.out.find("cuflight-collector"), std::string::npos);
}

}  // namespace
}  // namespace cuflight::collector
