#include "otlp_http.h"

#include <httplib.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"
#include <google/protobuf/util/json_util.h>

namespace cuflight::exporter {
namespace {

using opentelemetry::proto::collector::logs::v1::ExportLogsServiceResponse;

std::string Trim(std::string text) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!text.empty() && space(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t i = 0;
  while (i < text.size() && space(static_cast<unsigned char>(text[i]))) ++i;
  return text.substr(i);
}

// scheme://host:port and the path of an endpoint ParseEndpoint accepted.
void SplitEndpoint(const std::string& endpoint, std::string* origin, std::string* path) {
  const size_t scheme_end = endpoint.find("://");
  const size_t path_start =
      scheme_end == std::string::npos ? std::string::npos : endpoint.find('/', scheme_end + 3);
  *origin = endpoint.substr(0, path_start);
  *path = path_start == std::string::npos ? "/v1/logs" : endpoint.substr(path_start);
}

bool Retryable(int status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

}  // namespace

std::optional<std::chrono::milliseconds> ParseRetryAfter(
    std::string_view value, std::chrono::system_clock::time_point now) {
  const std::string v = Trim(std::string(value));
  if (v.empty()) return std::nullopt;
  const auto clamp = [](std::chrono::milliseconds d) {
    return std::clamp<std::chrono::milliseconds>(d, std::chrono::milliseconds(0), kMaxRetryAfter);
  };
  if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (v.size() > 9) return clamp(kMaxRetryAfter);
    return clamp(std::chrono::seconds(std::stoll(v)));
  }
  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
  struct tm tm {};
  const char* end = strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  const time_t at = timegm(&tm);
  const auto delay = std::chrono::system_clock::from_time_t(at) - now;
  return clamp(std::chrono::duration_cast<std::chrono::milliseconds>(delay));
}

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max)
    : initial_(initial), max_(std::max(max, initial)), rng_(std::random_device{}()) {}

std::chrono::milliseconds Backoff::Next() {
  const double base = std::min(static_cast<double>(initial_.count()) *
                                   std::pow(1.5, static_cast<double>(attempt_)),
                               static_cast<double>(max_.count()));
  if (attempt_ < 64) ++attempt_;
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  return std::chrono::milliseconds(static_cast<int64_t>(base * jitter(rng_)));
}

struct OtlpHttpClient::Impl {
  ExportOptions options;
  std::string path;
  std::mutex mu;  // guards client against Stop from another thread
  std::unique_ptr<httplib::Client> client;
  std::atomic<bool> stopped{false};
};

OtlpHttpClient::OtlpHttpClient(const ExportOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  std::string origin;
  SplitEndpoint(options.endpoint, &origin, &impl_->path);
  if (!options.client_cert_file.empty()) {
    impl_->client = std::make_unique<httplib::Client>(origin, options.client_cert_file,
                                                      options.client_key_file);
  } else {
    impl_->client = std::make_unique<httplib::Client>(origin);
  }
  httplib::Client& c = *impl_->client;
  const auto seconds = options.timeout.count() / 1000;
  const auto usec = (options.timeout.count() % 1000) * 1000;
  c.set_connection_timeout(seconds, usec);
  c.set_read_timeout(seconds, usec);
  c.set_write_timeout(seconds, usec);
  c.set_keep_alive(true);  // the spec: "The client SHOULD keep the connection alive"
  if (origin.rfind("https://", 0) == 0) {
    c.enable_server_certificate_verification(true);
    if (!options.ca_file.empty()) c.set_ca_cert_path(options.ca_file);
  }
}

OtlpHttpClient::~OtlpHttpClient() = default;

void OtlpHttpClient::Stop() {
  impl_->stopped.store(true);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->client->stop();
}

SendResult OtlpHttpClient::Post(const std::string& body) {
  SendResult r;
  if (impl_->stopped.load()) {
    r.kind = SendResult::Kind::kRetry;
    r.reason = "connection";
    r.message = "stopping";
    return r;
  }
  httplib::Headers headers;
  for (const auto& [k, v] : impl_->options.headers) headers.emplace(k, v);
  if (!impl_->options.bearer_token_file.empty()) {
    std::ifstream in(impl_->options.bearer_token_file);
    std::stringstream token;
    token << in.rdbuf();
    if (!in) {
      // A token that cannot be read now (being rotated) is tried again, not sent without it.
      r.kind = SendResult::Kind::kRetry;
      r.reason = "connection";
      r.message = "cannot read the bearer token file " + impl_->options.bearer_token_file;
      return r;
    }
    headers.emplace("Authorization", "Bearer " + Trim(token.str()));
  }
  const bool json = impl_->options.encoding == Encoding::kJson;
  const char* content_type = json ? "application/json" : "application/x-protobuf";
  httplib::Result res = impl_->client->Post(impl_->path, headers, body, content_type);
  if (!res) {
    r.kind = SendResult::Kind::kRetry;
    r.reason = res.error() == httplib::Error::Read ? "timeout" : "connection";
    r.message = httplib::to_string(res.error());
    return r;
  }
  r.status = res->status;
  if (res->status >= 200 && res->status < 300) {
    ExportLogsServiceResponse response;
    bool parsed = false;
    if (json) {
      parsed = google::protobuf::util::JsonStringToMessage(res->body, &response).ok();
    } else {
      parsed = response.ParseFromString(res->body);
    }
    if (parsed && response.has_partial_success()) {
      r.rejected = response.partial_success().rejected_log_records();
      r.message = response.partial_success().error_message();
    }
    return r;
  }
  r.reason = "http_" + std::to_string(res->status);
  r.message = "HTTP " + std::to_string(res->status);
  if (Retryable(res->status)) {
    r.kind = SendResult::Kind::kRetry;
    if (res->has_header("Retry-After")) {
      r.retry_after =
          ParseRetryAfter(res->get_header_value("Retry-After"), std::chrono::system_clock::now());
    }
  } else {
    r.kind = SendResult::Kind::kPermanent;
  }
  return r;
}

}  // namespace cuflight::exporter
