// The exporter's series on the collector's /metrics (docs/metrics.md, "OTLP export"). Label
// values are a fixed set (the reasons OtlpHttpClient gives: "http_<status>" of the statuses a
// receiver answers, "connection", "timeout", "partial_success", "encode"); statuses beyond
// kMaxReasons distinct ones are counted as "other", so the series stay bounded.
#include <cstdio>
#include <string>

#include "cuflight/exporter/exporter.h"

namespace cuflight::exporter {
namespace {

constexpr size_t kMaxReasons = 24;

void Bump(std::map<std::string, uint64_t>* m, std::string_view reason, uint64_t n) {
  auto it = m->find(std::string(reason));
  if (it == m->end()) {
    it = m->size() < kMaxReasons ? m->emplace(std::string(reason), 0).first
                                 : m->emplace("other", 0).first;
  }
  it->second += n;
}

void Family(std::string* out, const char* name, const char* type, const char* help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

void Sample(std::string* out, const char* name, const std::string& labels, double value) {
  char number[64];
  std::snprintf(number, sizeof(number), "%.17g", value);
  *out += name;
  *out += labels;
  *out += ' ';
  *out += number;
  *out += '\n';
}

void Sample(std::string* out, const char* name, const std::string& labels, uint64_t value) {
  *out += name;
  *out += labels;
  *out += ' ';
  *out += std::to_string(value);
  *out += '\n';
}

}  // namespace

ExportMetrics::ExportMetrics() = default;
ExportMetrics::~ExportMetrics() = default;

void ExportMetrics::Sent(uint64_t records) {
  std::lock_guard<std::mutex> lock(mu_);
  ++s_.sent_requests;
  s_.sent_records += records;
}

void ExportMetrics::Failed(std::string_view reason, uint64_t records) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.failed_records += records;
  Bump(&s_.failed_by_reason, reason, records);
}

void ExportMetrics::Retried(std::string_view reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++s_.retries;
  Bump(&s_.retried_by_reason, reason, 1);
}

void ExportMetrics::SegmentMissed() {
  std::lock_guard<std::mutex> lock(mu_);
  ++s_.segments_missed;
}

void ExportMetrics::LineSkipped() {
  std::lock_guard<std::mutex> lock(mu_);
  ++s_.lines_skipped;
}

void ExportMetrics::SetLag(uint64_t bytes, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.lag_bytes = bytes;
  s_.lag_seconds = seconds;
}

ExportMetrics::Snapshot ExportMetrics::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_;
}

void ExportMetrics::Render(std::string* out) const {
  const Snapshot s = Get();
  Family(out, "cuflight_otlp_sent_requests_total", "counter",
         "OTLP export requests the receiver accepted.");
  Sample(out, "cuflight_otlp_sent_requests_total", "", s.sent_requests);
  Family(out, "cuflight_otlp_sent_records_total", "counter",
         "Log records in the OTLP export requests the receiver accepted (records it reported "
         "rejected included; they are also in cuflight_otlp_failed_records_total).");
  Sample(out, "cuflight_otlp_sent_records_total", "", s.sent_records);
  Family(out, "cuflight_otlp_failed_records_total", "counter",
         "Log records not delivered and not retried: a status the OTLP specification says not "
         "to retry (reason http_<status>), a partial success's rejected records, or an encoding "
         "failure.");
  if (s.failed_by_reason.empty()) Sample(out, "cuflight_otlp_failed_records_total", "", uint64_t{0});
  for (const auto& [reason, n] : s.failed_by_reason) {
    Sample(out, "cuflight_otlp_failed_records_total", "{reason=\"" + reason + "\"}", n);
  }
  Family(out, "cuflight_otlp_retries_total", "counter",
         "OTLP export requests that will be sent again: 429, 502, 503, 504, no connection, no "
         "answer within --otlp-timeout.");
  if (s.retried_by_reason.empty()) Sample(out, "cuflight_otlp_retries_total", "", uint64_t{0});
  for (const auto& [reason, n] : s.retried_by_reason) {
    Sample(out, "cuflight_otlp_retries_total", "{reason=\"" + reason + "\"}", n);
  }
  Family(out, "cuflight_otlp_lag_bytes", "gauge",
         "Bytes of the event logs not yet delivered to the OTLP receiver (compressed segments "
         "count their compressed size).");
  Sample(out, "cuflight_otlp_lag_bytes", "", s.lag_bytes);
  Family(out, "cuflight_otlp_lag_seconds", "gauge",
         "How long the oldest undelivered part of the logs has been waiting to be exported; 0 "
         "when everything is delivered.");
  Sample(out, "cuflight_otlp_lag_seconds", "", s.lag_seconds);
  Family(out, "cuflight_otlp_segments_missed_total", "counter",
         "Closed log segments retention removed before the exporter read them.");
  Sample(out, "cuflight_otlp_segments_missed_total", "", s.segments_missed);
  Family(out, "cuflight_otlp_lines_skipped_total", "counter",
         "Log lines the exporter skipped because they did not decode as events.");
  Sample(out, "cuflight_otlp_lines_skipped_total", "", s.lines_skipped);
}

}  // namespace cuflight::exporter
