#include "collector_options.h"

#include <grp.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

namespace cuflight::collector {
namespace {

// sockaddr_un::sun_path holds 108 bytes including the terminating NUL.
constexpr size_t kMaxSocketPathBytes = sizeof(sockaddr_un::sun_path) - 1;
// Bytes settings stop well below 2^63 so sums of them cannot overflow.
constexpr uint64_t kMaxBytes = uint64_t{1} << 50;
constexpr int64_t kMaxMillis = int64_t{24} * 3600 * 1000;

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string Quote(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 64)) out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  if (text.size() > 64) out += "...";
  out += "'";
  return out;
}

std::optional<uint64_t> ParseUnsigned(std::string_view text) {
  uint64_t value = 0;
  if (text.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A byte count: digits with an optional binary suffix K, M, G, T (also KiB, MiB, ...).
bool ParseByteCount(std::string_view text, uint64_t min, uint64_t max, uint64_t* out,
                    std::string* why) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view suffix = text.substr(digits);
  int shift = 0;
  if (suffix.size() == 3 && suffix.substr(1) == "iB") suffix = suffix.substr(0, 1);
  if (suffix == "K" || suffix == "k") {
    shift = 10;
  } else if (suffix == "M" || suffix == "m") {
    shift = 20;
  } else if (suffix == "G" || suffix == "g") {
    shift = 30;
  } else if (suffix == "T" || suffix == "t") {
    shift = 40;
  } else if (!suffix.empty()) {
    digits = 0;  // reported below as not a byte count
  }
  const std::optional<uint64_t> value =
      digits > 0 ? ParseUnsigned(text.substr(0, digits)) : std::nullopt;
  if (!value) {
    *why = Quote(text) + " is not a byte count (an integer with an optional K, M, G or T suffix)";
    return false;
  }
  if (*value > (max >> shift) || (*value << shift) < min || (*value << shift) > max) {
    *why = Quote(text) + " is out of range: allowed " + std::to_string(min) + ".." +
           std::to_string(max) + " bytes";
    return false;
  }
  *out = *value << shift;
  return true;
}

bool ParseIntInRange(std::string_view text, int64_t min, int64_t max, std::string_view unit,
                     int64_t* out, std::string* why) {
  const std::optional<uint64_t> value = ParseUnsigned(text);
  if (!value) {
    *why = Quote(text) + " is not a non-negative integer";
    return false;
  }
  if (*value > static_cast<uint64_t>(max) || static_cast<int64_t>(*value) < min) {
    *why = Quote(text) + " is out of range: allowed " + std::to_string(min) + ".." +
           std::to_string(max) + " " + std::string(unit);
    return false;
  }
  *out = static_cast<int64_t>(*value);
  return true;
}

// "host:port", "[v6]:port"; the host may not be empty.
bool ParseHostPort(std::string_view text, HostPort* out, std::string* why) {
  if (text.empty()) {
    *out = HostPort{};
    return true;
  }
  const std::string expected =
      " is not HOST:PORT (e.g. 127.0.0.1:9464 or [::1]:9464, port 0..65535)";
  std::string_view host;
  std::string_view port;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      *why = Quote(text) + expected;
      return false;
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) {
      *why = Quote(text) + expected;
      return false;
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  const std::optional<uint64_t> port_value = ParseUnsigned(port);
  if (host.empty() || !port_value || *port_value > 65535) {
    *why = Quote(text) + expected;
    return false;
  }
  out->host = std::string(host);
  out->port = static_cast<int>(*port_value);
  return true;
}

// A group name (resolved through NSS: /etc/group, LDAP, ...) or a numeric gid; empty: none.
bool ParseGroup(std::string_view text, CollectorOptions* out, std::string* why) {
  if (text.empty()) {
    out->socket_group.reset();
    out->socket_group_name.clear();
    return true;
  }
  const std::string name(text);
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  int rc = 0;
  while ((rc = getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found)) == ERANGE &&
         buffer.size() < (1u << 22)) {
    buffer.resize(buffer.size() * 4);
  }
  if (found != nullptr) {
    out->socket_group = entry.gr_gid;
  } else if (const std::optional<uint64_t> gid = ParseUnsigned(text);
             gid && *gid < std::numeric_limits<gid_t>::max()) {
    out->socket_group = static_cast<gid_t>(*gid);  // (gid_t)-1 means "no change" to chown(2)
  } else {
    *why = Quote(text) + " is neither a known group name nor a numeric gid";
    return false;
  }
  out->socket_group_name = name;
  return true;
}

// One setting: its flag name (without dashes; also its config key), help, and how its text
// applies to the options. `apply` returns false with *why set for a bad value.
struct Setting {
  const char* name;
  const char* value_name;  // nullptr: a boolean flag
  const char* help;
  std::function<bool(std::string_view, CollectorOptions*, std::string*)> apply;
};

bool ApplyMillis(std::string_view text, int64_t min, std::chrono::milliseconds* out,
                 std::string* why) {
  int64_t value = 0;
  if (!ParseIntInRange(text, min, kMaxMillis, "ms", &value, why)) return false;
  *out = std::chrono::milliseconds(value);
  return true;
}

bool ApplyBool(std::string_view text, bool* out, std::string* why) {
  if (text == "true" || text == "1" || text.empty()) {
    *out = true;
  } else if (text == "false" || text == "0") {
    *out = false;
  } else {
    *why = Quote(text) + " is not true or false";
    return false;
  }
  return true;
}

std::vector<Setting> Settings() {
  std::vector<Setting> s;
  s.push_back({"socket", "PATH", "Unix domain socket for producers (default: the protocol's path)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 if (t.empty()) {
                   *why = "the socket path may not be empty";
                   return false;
                 }
                 if (t.size() > kMaxSocketPathBytes) {
                   *why = "path is " + std::to_string(t.size()) +
                          " bytes; a Unix socket path allows at most " +
                          std::to_string(kMaxSocketPathBytes);
                   return false;
                 }
                 o->socket = std::filesystem::path(std::string(t));
                 return true;
               }});
  s.push_back({"socket-group", "GROUP",
               "Also let processes of this group's members connect to the socket (a group name or "
               "gid); default: only the collector's user and root",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ParseGroup(t, o, why);
               }});
  s.push_back({"log-dir", "DIR",
               "Directory of the event logs (default: /var/log/cuflight for root, else "
               "$XDG_STATE_HOME/cuflight/logs or ~/.local/state/cuflight/logs)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 if (t.empty()) {
                   *why = "the log directory may not be empty";
                   return false;
                 }
                 o->log_dir = std::filesystem::path(std::string(t));
                 return true;
               }});
  s.push_back({"rotate-bytes", "N",
               "Start a new log segment after N bytes; K, M, G suffixes (default 64M)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ParseByteCount(t, 4096, kMaxBytes, &o->rotate_bytes, why);
               }});
  s.push_back({"retain-bytes", "N",
               "Remove the oldest closed segments beyond N bytes in all; 0: no limit (default 0)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ParseByteCount(t, 0, kMaxBytes, &o->retain_bytes, why);
               }});
  s.push_back({"retain-days", "N",
               "Remove closed segments older than N days; 0: no limit (default 0)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 int64_t v = 0;
                 if (!ParseIntInRange(t, 0, 36500, "days", &v, why)) return false;
                 o->retain_days = static_cast<int>(v);
                 return true;
               }});
  s.push_back({"metrics", "HOST:PORT",
               "Serve Prometheus metrics at http://HOST:PORT/metrics; empty: off (default)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ParseHostPort(t, &o->metrics, why);
               }});
  s.push_back({"web-config", "FILE",
               "Require HTTP basic auth at --metrics: a Prometheus web config file "
               "(basic_auth_users: USER: BCRYPT-HASH); default: none",
               [](std::string_view t, CollectorOptions* o, std::string*) {
                 o->web_config = std::string(t);
                 return true;
               }});
  s.push_back({"tcp", "HOST:PORT",
               "Also accept producers over TCP, loopback only unless --tcp-allow-remote; empty: "
               "off (default)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ParseHostPort(t, &o->tcp, why);
               }});
  s.push_back({"tcp-allow-remote", nullptr, "Allow --tcp on a non-loopback address",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyBool(t, &o->tcp_allow_remote, why);
               }});
  s.push_back({"tcp-trust-identity", nullptr,
               "Let a TCP connection continue the log of an earlier TCP connection that named "
               "the same process (no authentication: any TCP client can write any TCP "
               "process's log); default: each TCP connection writes a log of its own",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyBool(t, &o->tcp_trust_identity, why);
               }});
  s.push_back({"fsync-interval", "MS",
               "fsync the logs every MS milliseconds; 0: at every tick (default 1000)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyMillis(t, 0, &o->fsync_interval, why);
               }});
  s.push_back({"max-connections", "N", "Most simultaneous producer connections (default 1024)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 int64_t v = 0;
                 if (!ParseIntInRange(t, 1, 1000000, "connections", &v, why)) return false;
                 o->max_connections = static_cast<int>(v);
                 return true;
               }});
  s.push_back({"max-connections-per-uid", "N",
               "Most simultaneous connections of one user (all TCP peers count as one); "
               "default: a quarter of --max-connections",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 int64_t v = 0;
                 if (!ParseIntInRange(t, 1, 1000000, "connections", &v, why)) return false;
                 o->max_connections_per_uid = static_cast<int>(v);
                 return true;
               }});
  s.push_back({"idle-timeout", "MS",
               "Close an identified connection that sends nothing for MS; 0: never (default "
               "60000)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyMillis(t, 0, &o->idle_timeout, why);
               }});
  s.push_back({"max-pending-bytes", "N",
               "Most event bytes held while the disk refuses writes, all logs together; K, M, G "
               "suffixes (default 128M)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ParseByteCount(t, 64 << 10, kMaxBytes, &o->max_pending_bytes, why);
               }});
  s.push_back({"retention-interval", "MS",
               "Scan the log directory for retention every MS (default 10000)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyMillis(t, 100, &o->retention_interval, why);
               }});
  s.push_back(
      {"max-line-bytes", "N",
       "Longest accepted event line in bytes, without its newline; K, M suffixes (default 64K)",
       [](std::string_view t, CollectorOptions* o, std::string* why) {
         uint64_t v = 0;
         if (!ParseByteCount(t, 1024, 16 << 20, &v, why)) return false;
         o->max_line_bytes = static_cast<size_t>(v);
         return true;
       }});
  s.push_back({"handshake-timeout", "MS",
               "Close a connection that sends no valid process_start within MS (default 10000)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyMillis(t, 1, &o->handshake_timeout, why);
               }});
  s.push_back(
      {"reconnect-grace", "MS",
       "Wait MS for a disconnected process to reconnect before logging process_lost (default 2000)",
       [](std::string_view t, CollectorOptions* o, std::string* why) {
         return ApplyMillis(t, 0, &o->reconnect_grace, why);
       }});
  // The OTLP export (docs/fleet.md, "Export to an OpenTelemetry pipeline"); the values are
  // parsed by the exporter (cuflight/exporter/exporter.h).
  s.push_back({"otlp-endpoint", "URL",
               "Export events over OTLP/HTTP to this receiver (e.g. http://otel-collector:4318; "
               "/v1/logs when no path); empty: off (default)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return exporter::ParseEndpoint(t, &o->otlp.endpoint, why);
               }});
  s.push_back({"otlp-protocol", "PROTOCOL",
               "http/protobuf (default) or http/json",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return exporter::ParseEncoding(t, &o->otlp.encoding, why);
               }});
  s.push_back({"otlp-headers", "K=V,...",
               "Extra request headers, as OTEL_EXPORTER_OTLP_HEADERS writes them",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return exporter::ParseHeaders(t, &o->otlp.headers, why);
               }});
  s.push_back({"otlp-bearer-token-file", "FILE",
               "Send 'Authorization: Bearer <the file's content>' (read before every request)",
               [](std::string_view t, CollectorOptions* o, std::string*) {
                 o->otlp.bearer_token_file = std::string(t);
                 return true;
               }});
  s.push_back({"otlp-ca-file", "FILE", "PEM CA bundle that verifies an https:// receiver",
               [](std::string_view t, CollectorOptions* o, std::string*) {
                 o->otlp.ca_file = std::string(t);
                 return true;
               }});
  s.push_back({"otlp-client-cert", "FILE", "PEM client certificate for mutual TLS",
               [](std::string_view t, CollectorOptions* o, std::string*) {
                 o->otlp.client_cert_file = std::string(t);
                 return true;
               }});
  s.push_back({"otlp-client-key", "FILE", "PEM key of --otlp-client-cert",
               [](std::string_view t, CollectorOptions* o, std::string*) {
                 o->otlp.client_key_file = std::string(t);
                 return true;
               }});
  s.push_back({"otlp-timeout", "MS", "Per request: connect, send, answer (default 10000)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyMillis(t, 1, &o->otlp.timeout, why);
               }});
  s.push_back({"otlp-cursor", "FILE",
               "Where the export's position is kept (default <log-dir>/otlp-cursor.json)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 if (t.empty()) {
                   *why = "the cursor file may not be empty";
                   return false;
                 }
                 o->otlp.cursor_file = std::string(t);
                 return true;
               }});
  s.push_back({"otlp-every-launch", nullptr,
               "Export every kernel and kernel_time event (default: roll-ups and the last "
               "launches of a stream that crashed, stalled or was lost)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyBool(t, &o->otlp.every_launch, why);
               }});
  s.push_back({"otlp-rollup-interval", "MS",
               "A roll-up record per kernel every MS of event time; 0: none (default 60000)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyMillis(t, 0, &o->otlp.rollup_interval, why);
               }});
  s.push_back({"otlp-last-launches", "N",
               "Launches exported before a crash, stall or loss, per stream (default 16)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 int64_t v = 0;
                 if (!ParseIntInRange(t, 0, 4096, "launches", &v, why)) return false;
                 o->otlp.last_launches = static_cast<int>(v);
                 return true;
               }});
  s.push_back({"otlp-scan-interval", "MS",
               "Look for new events every MS once everything is sent (default 1000)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyMillis(t, 10, &o->otlp.scan_interval, why);
               }});
  s.push_back({"otlp-retry-initial", "MS",
               "First wait before a retry; waits grow 1.5x with jitter (default 1000)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyMillis(t, 1, &o->otlp.retry_initial, why);
               }});
  s.push_back({"otlp-retry-max", "MS", "Longest wait between retries (default 30000)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 return ApplyMillis(t, 1, &o->otlp.retry_max, why);
               }});
  s.push_back({"otlp-batch-records", "N", "Most log records in one request (default 1024)",
               [](std::string_view t, CollectorOptions* o, std::string* why) {
                 int64_t v = 0;
                 if (!ParseIntInRange(t, 1, 1000000, "records", &v, why)) return false;
                 o->otlp.max_batch_records = static_cast<int>(v);
                 return true;
               }});
  s.push_back(
      {"log-level", "LEVEL",
       "Log level on stderr: trace, debug, info, warn, error, critical or off (default info)",
       [](std::string_view t, CollectorOptions* o, std::string* why) {
         static constexpr std::array<std::string_view, 7> kLevels = {
             "trace", "debug", "info", "warn", "error", "critical", "off"};
         for (std::string_view level : kLevels) {
           if (t == level) {
             o->log_level = std::string(t);
             return true;
           }
         }
         *why = Quote(t) + " is not one of trace, debug, info, warn, error, critical, off";
         return false;
       }});
  return s;
}

// A JSON config value as the text a flag would carry.
bool ConfigText(const nlohmann::json& value, bool boolean, std::string* text) {
  if (value.is_string()) {
    *text = value.get<std::string>();
    return true;
  }
  if (value.is_number_unsigned()) {
    *text = std::to_string(value.get<uint64_t>());
    return true;
  }
  if (value.is_number_integer()) {
    *text = std::to_string(value.get<int64_t>());
    return true;
  }
  if (value.is_boolean() && boolean) {
    *text = value.get<bool>() ? "true" : "false";
    return true;
  }
  return false;
}

// Applies the config file's keys whose flag was not given. Returns false with *error set.
bool ApplyConfigFile(const std::string& file, const std::vector<Setting>& settings,
                     const std::vector<bool>& given_on_command_line, CollectorOptions* options,
                     std::string* error) {
  std::ifstream in(file);
  if (!in) {
    *error = "--config: cannot read " + Quote(file);
    return false;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(buffer.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    *error = "--config " + Quote(file) + ": not a JSON object";
    return false;
  }
  for (const auto& [key, value] : doc.items()) {
    size_t i = 0;
    while (i < settings.size() && key != settings[i].name) ++i;
    if (i == settings.size()) {
      std::string known;
      for (const Setting& s : settings) known += (known.empty() ? "" : ", ") + std::string(s.name);
      *error = "--config " + Quote(file) + ": unknown key " + Quote(key) + " (keys: " + known + ")";
      return false;
    }
    if (given_on_command_line[i]) continue;
    std::string text;
    if (!ConfigText(value, settings[i].value_name == nullptr, &text)) {
      *error = "--config " + Quote(file) + ": key " + Quote(key) + " must be " +
               (settings[i].value_name == nullptr ? "a boolean" : "a string or an integer");
      return false;
    }
    std::string why;
    if (!settings[i].apply(text, options, &why)) {
      *error = "--config " + Quote(file) + ": key " + Quote(key) + ": " + why;
      return false;
    }
  }
  return true;
}

const char* EnvOrNull(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read at startup
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

// The OTLP exporter's standard environment variables (OpenTelemetry specification,
// specification/protocol/exporter.md, "Configuration Options"): each stands in for an --otlp-*
// setting that the command line does not give; a --config file's key and the flag override it.
// The logs' own variable (OTEL_EXPORTER_OTLP_LOGS_*) wins over the general one. Endpoints, as
// "Endpoint URLs for OTLP/HTTP" says: the general OTEL_EXPORTER_OTLP_ENDPOINT is a base URL to
// which v1/logs is appended relative to its path (http://c:4318/base/ -> http://c:4318/base/
// v1/logs); OTEL_EXPORTER_OTLP_LOGS_ENDPOINT is used as-is, the root path / when it has none.
// OTEL_EXPORTER_OTLP_TIMEOUT is in milliseconds, *_HEADERS is the form --otlp-headers takes,
// *_PROTOCOL is http/protobuf or http/json (grpc is refused: no gRPC client here).
bool ApplyOtlpEnvironment(const std::vector<Setting>& settings, const std::vector<bool>& given,
                          CollectorOptions* options, std::string* error) {
  struct Variable {
    const char* logs_name;
    const char* general_name;
    const char* setting;
  };
  static constexpr std::array<Variable, 4> kVariables = {{
      {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "otlp-endpoint"},
      {"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL", "otlp-protocol"},
      {"OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS", "otlp-headers"},
      {"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT", "otlp-timeout"},
  }};
  for (const Variable& v : kVariables) {
    size_t index = 0;
    while (index < settings.size() && std::string_view(settings[index].name) != v.setting) ++index;
    if (index == settings.size() || given[index]) continue;
    const char* name = v.logs_name;
    const char* value = EnvOrNull(name);
    if (value == nullptr) {
      name = v.general_name;
      value = EnvOrNull(name);
    }
    if (value == nullptr) continue;
    std::string why;
    if (!settings[index].apply(value, options, &why)) {
      *error = std::string(name) + ": " + OneLine(why);
      return false;
    }
    if (std::string_view(v.setting) == "otlp-endpoint") {
      // The setting checked the URL; the path is the specification's, not --otlp-endpoint's.
      std::string url(value);
      const bool has_path = url.find('/', url.find("://") + 3) != std::string::npos;
      if (name == v.general_name) {
        if (url.back() != '/') url += '/';
        url += "v1/logs";
      } else if (!has_path) {
        url += '/';
      }
      options->otlp.endpoint = url;
    }
  }
  return true;
}

}  // namespace

std::filesystem::path DefaultSocketPath() {
  if (const char* explicit_path = EnvOrNull("CUFLIGHT_COLLECTOR")) return explicit_path;
  if (const char* runtime = EnvOrNull("XDG_RUNTIME_DIR")) {
    return std::filesystem::path(runtime) / "cuflight" / "collector.sock";
  }
  return std::filesystem::path("/tmp") / ("cuflight-" + std::to_string(getuid())) /
         "collector.sock";
}

std::filesystem::path DefaultLogDir() {
  if (geteuid() == 0) return "/var/log/cuflight";
  if (const char* state = EnvOrNull("XDG_STATE_HOME")) {
    return std::filesystem::path(state) / "cuflight" / "logs";
  }
  if (const char* home = EnvOrNull("HOME")) {
    return std::filesystem::path(home) / ".local" / "state" / "cuflight" / "logs";
  }
  return "cuflight-logs";
}

ParseStatus ParseCollectorArgs(int argc, const char* const* argv, CollectorOptions* options,
                               std::ostream& out, std::string* error) noexcept {
  try {
    const std::vector<Setting> settings = Settings();
    const std::string program = argc > 0 && argv[0] != nullptr ? argv[0] : "cuflight-collector";
    CLI::App app(
        "cuflight collector: receives events from injected processes and writes them to logs",
        program);
    app.set_version_flag("--version", "cuflight-collector " CUFLIGHT_VERSION);
    std::string config_file;
    app.add_option("--config", config_file,
                   "JSON file with any of the settings below, keyed by flag name");
    std::vector<std::string> texts(settings.size());
    std::vector<bool> flags(settings.size(), false);
    std::vector<CLI::Option*> cli_options(settings.size(), nullptr);
    for (size_t i = 0; i < settings.size(); ++i) {
      const std::string flag = std::string("--") + settings[i].name;
      if (settings[i].value_name == nullptr) {
        cli_options[i] = app.add_flag(flag, settings[i].help);
      } else {
        cli_options[i] =
            app.add_option(flag, texts[i], settings[i].help)->type_name(settings[i].value_name);
      }
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
        std::ostringstream ignored;
        app.exit(e, out, ignored);
        return ParseStatus::kExitOk;
      }
      *error = OneLine(e.what());
      return ParseStatus::kExitUsage;
    }

    CollectorOptions result;
    result.socket = DefaultSocketPath();
    result.log_dir = DefaultLogDir();
    std::vector<bool> given(settings.size(), false);
    for (size_t i = 0; i < settings.size(); ++i) given[i] = cli_options[i]->count() > 0;
    if (!ApplyOtlpEnvironment(settings, given, &result, error)) return ParseStatus::kExitUsage;
    if (!config_file.empty() && !ApplyConfigFile(config_file, settings, given, &result, error)) {
      return ParseStatus::kExitUsage;
    }
    for (size_t i = 0; i < settings.size(); ++i) {
      if (!given[i]) continue;
      std::string why;
      const std::string text = settings[i].value_name == nullptr ? "true" : texts[i];
      if (!settings[i].apply(text, &result, &why)) {
        *error = std::string("--") + settings[i].name + ": " + why;
        return ParseStatus::kExitUsage;
      }
    }
    std::string why;
    if (!exporter::CheckOptions(result.otlp, &why)) {
      *error = why;
      return ParseStatus::kExitUsage;
    }
    *options = std::move(result);
    return ParseStatus::kRun;
  } catch (const std::exception& e) {
    *error = "internal error while parsing flags: " + OneLine(e.what());
    return ParseStatus::kExitUsage;
  }
}

}  // namespace cuflight::collector
