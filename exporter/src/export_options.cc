// The option texts of ExportOptions (exporter.h), as the collector's flags and config file give
// them. The names and forms follow the OTLP exporter configuration
// (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, _PROTOCOL, _HEADERS, _CERTIFICATE, _CLIENT_CERTIFICATE,
// _CLIENT_KEY, _TIMEOUT).
#include <unistd.h>

#include <cctype>
#include <string>

#include "cuflight/exporter/exporter.h"

namespace cuflight::exporter {
namespace {

std::string Quote(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 64)) out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  if (text.size() > 64) out += "...";
  return out + "'";
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
  const std::string_view rest = text.substr(http ? 7 : 8);
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  if (authority.empty() || authority.find('@') != std::string_view::npos ||
      rest.find_first_of(" \t\r\n?#") != std::string_view::npos) {
    *why = Quote(text) + expected;
    return false;
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
    if (!PercentDecode(TrimSpaces(item.substr(eq + 1)), &value) ||
        value.find_first_of("\r\n") != std::string::npos || value.find('\0') != std::string::npos) {
      *why = Quote(item) + ": the value is not percent-encoded text";
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
