// The option texts of ExportOptions (exporter.h), as the collector's flags and config file give
// them. The names and forms follow the OTLP exporter configuration
// (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, _PROTOCOL, _HEADERS, _CERTIFICATE, _CLIENT_CERTIFICATE,
// _CLIENT_KEY, _TIMEOUT).
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "cuflight/exporter/exporter.h"

namespace cuflight::exporter {
namespace {

// A value as an error line shows it: its first 64 bytes, printable ASCII only (a control
// character, DEL or a byte of another encoding shows as '?', so that a hostile value cannot
// break the line or the log it goes to).
std::string Quote(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7f) ? '?' : c;
  }
  if (text.size() > 64) out += "...";
  return out + "'";
}

// Bounds on what the environment or a flag may give (an over-long value is a broken environment,
// refused in one line, never sent). The headers: the W3C Baggage limits, whose format
// OTEL_EXPORTER_OTLP_HEADERS takes (specification/protocol/exporter.md, "Specifying headers via
// environment variables"; W3C Baggage, "Limits": at most 180 list-members and 8192 bytes).
constexpr size_t kMaxEndpointBytes = 4096;
constexpr size_t kMaxHeadersBytes = 8192;
constexpr size_t kMaxHeaders = 180;

// Headers the HTTP client writes itself, from the request: the message's framing (RFC 9112 6:
// Content-Length, Transfer-Encoding), its target and connection (Host, Connection and the
// hop-by-hop fields, RFC 9110 7.6.1) and its body's type and coding (Content-Type,
// Content-Encoding). One given as an extra header would contradict the request (a
// Content-Length that is not the body's splits a kept-alive connection's requests differently
// at the receiver), so none may be.
constexpr std::string_view kOwnHeaders[] = {"host",         "content-length",   "transfer-encoding",
                                            "content-type", "content-encoding", "connection",
                                            "keep-alive",   "proxy-connection", "te",
                                            "trailer",      "upgrade",          "expect"};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// An HTTP field value (RFC 9110 5.5): no control character but HTAB, no DEL. Bytes above 0x7f
// (obs-text: UTF-8 or not) are sent as given.
bool IsFieldValue(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986 percent-decoding, as the OTEL_EXPORTER_OTLP_HEADERS values are written.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = HexValue(in[i + 1]);
    const int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

// An HTTP field name (RFC 9110 5.1: a token).
bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) == 0 && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string::npos) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool ParseEndpoint(std::string_view text, std::string* endpoint, std::string* why) {
  if (text.empty()) {
    endpoint->clear();
    return true;
  }
  const bool http = text.rfind("http://", 0) == 0;
  const bool https = text.rfind("https://", 0) == 0;
  const std::string expected =
      " is not an http:// or https:// URL (e.g. http://otel-collector:4318 or "
      "https://otel.example:4318/v1/logs)";
  if (!http && !https) {
    *why = Quote(text) + expected;
    return false;
  }
  if (text.size() > kMaxEndpointBytes) {
    *why = Quote(text) + " is longer than " + std::to_string(kMaxEndpointBytes) + " bytes";
    return false;
  }
  // A URL is printable ASCII (RFC 3986 2: other bytes are percent-encoded); a control character
  // or a byte of another encoding in the request line would break it.
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      *why = Quote(text) + " has a byte that is not printable ASCII (a URL percent-encodes it)";
      return false;
    }
  }
  const std::string_view rest = text.substr(http ? 7 : 8);
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  if (authority.empty() || authority.find('@') != std::string_view::npos ||
      rest.find_first_of("?#") != std::string_view::npos) {
    *why = Quote(text) + expected;
    return false;
  }
  // The port, when given (RFC 3986 3.2.3, after the host or an IPv6 literal's ']'): 1 to 65535.
  const size_t bracket = authority.rfind(']');
  const size_t colon = authority.find(':', bracket == std::string_view::npos ? 0 : bracket);
  if ((authority.front() == '[' && bracket == std::string_view::npos) ||
      (bracket != std::string_view::npos && bracket + 1 < authority.size() &&
       authority[bracket + 1] != ':')) {
    *why = Quote(text) + expected;
    return false;
  }
  if (colon != std::string_view::npos) {
    const std::string_view port = authority.substr(colon + 1);
    uint32_t value = 0;
    bool ok = !port.empty() && port.size() <= 5 && colon > 0;
    for (char c : port) {
      if (c < '0' || c > '9') ok = false;
      value = value * 10 + static_cast<uint32_t>(c - '0');
    }
    if (!ok || value == 0 || value > 65535) {
      *why = Quote(text) + ": the port is not a number from 1 to 65535";
      return false;
    }
  }
  std::string result(text);
  // OTLP's default path for logs when the URL names none.
  if (slash == std::string_view::npos) {
    result += "/v1/logs";
  } else if (rest.substr(slash) == "/") {
    result += "v1/logs";
  }
  *endpoint = result;
  return true;
}

bool ParseEncoding(std::string_view text, Encoding* out, std::string* why) {
  if (text == "http/protobuf") {
    *out = Encoding::kProtobuf;
  } else if (text == "http/json") {
    *out = Encoding::kJson;
  } else {
    *why = Quote(text) + " is not http/protobuf or http/json";
    return false;
  }
  return true;
}

bool ParseHeaders(std::string_view text, std::vector<std::pair<std::string, std::string>>* out,
                  std::string* why) {
  out->clear();
  if (text.size() > kMaxHeadersBytes) {
    *why = Quote(text) + " is longer than " + std::to_string(kMaxHeadersBytes) +
           " bytes (W3C Baggage's limit)";
    return false;
  }
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = TrimSpaces(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string_view key = eq == std::string_view::npos ? item : TrimSpaces(item.substr(0, eq));
    if (eq == std::string_view::npos || !IsToken(key)) {
      *why = Quote(item) + " is not KEY=VALUE with an HTTP header name as KEY";
      return false;
    }
    std::string value;
    if (!PercentDecode(TrimSpaces(item.substr(eq + 1)), &value) || !IsFieldValue(value)) {
      *why =
          Quote(item) + ": the value is not percent-encoded text (no control character but a tab)";
      return false;
    }
    const std::string name = Lower(key);
    for (std::string_view own : kOwnHeaders) {
      if (name == own) {
        *why = Quote(item) + ": the exporter writes " + std::string(key) + " itself";
        return false;
      }
    }
    for (const auto& [k, v] : *out) {
      if (Lower(k) == name) {
        *why = Quote(item) + ": " + std::string(key) + " is given twice";
        return false;
      }
    }
    if (out->size() == kMaxHeaders) {
      *why = "more than " + std::to_string(kMaxHeaders) + " headers (W3C Baggage's limit)";
      return false;
    }
    out->emplace_back(std::string(key), std::move(value));
  }
  return true;
}

bool CheckOptions(const ExportOptions& options, std::string* why) {
  if (options.endpoint.empty()) return true;
  const bool https = options.endpoint.rfind("https://", 0) == 0;
  if (!https && (!options.ca_file.empty() || !options.client_cert_file.empty() ||
                 !options.client_key_file.empty())) {
    *why = "--otlp-ca-file, --otlp-client-cert and --otlp-client-key need an https:// endpoint";
    return false;
  }
  if (!options.bearer_token_file.empty()) {
    for (const auto& [key, value] : options.headers) {
      if (Lower(key) == "authorization") {
        *why = "--otlp-headers gives Authorization and --otlp-bearer-token-file too: give one";
        return false;
      }
    }
  }
  if (options.client_cert_file.empty() != options.client_key_file.empty()) {
    *why = "--otlp-client-cert and --otlp-client-key go together";
    return false;
  }
  for (const std::string* file : {&options.ca_file, &options.client_cert_file,
                                  &options.client_key_file, &options.bearer_token_file}) {
    if (!file->empty() && ::access(file->c_str(), R_OK) != 0) {
      *why = "cannot read " + Quote(*file);
      return false;
    }
  }
  return true;
}

}  // namespace cuflight::exporter
