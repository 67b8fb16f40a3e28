#include "otlp_receiver.h"

#include <google/protobuf/util/json_util.h>
#include <httplib.h>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"

namespace cuflight::exporter::testing {
namespace {

namespace common = opentelemetry::proto::common::v1;
using opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest;
using opentelemetry::proto::collector::logs::v1::ExportLogsServiceResponse;

std::string Text(const common::AnyValue& v) {
  switch (v.value_case()) {
    case common::AnyValue::kStringValue:
      return v.string_value();
    case common::AnyValue::kIntValue:
      return std::to_string(v.int_value());
    case common::AnyValue::kBoolValue:
      return v.bool_value() ? "true" : "false";
    case common::AnyValue::kDoubleValue:
      return std::to_string(v.double_value());
    case common::AnyValue::kArrayValue: {
      std::string out;
      for (const common::AnyValue& e : v.array_value().values()) {
        out += (out.empty() ? "" : " ") + Text(e);
      }
      return out;
    }
    default:
      return "<" + std::to_string(v.value_case()) + ">";
  }
}

std::map<std::string, std::string> Attributes(
    const google::protobuf::RepeatedPtrField<common::KeyValue>& kvs) {
  std::map<std::string, std::string> out;
  for (const common::KeyValue& kv : kvs) out[kv.key()] = Text(kv.value());
  return out;
}

}  // namespace

std::string ReceivedRecord::stream() const {
  const auto it = attributes.find("cuflight.stream");
  return it == attributes.end() ? "" : it->second;
}

uint64_t ReceivedRecord::seq() const {
  const auto it = attributes.find("cuflight.seq");
  return it == attributes.end() ? UINT64_MAX : std::stoull(it->second);
}

struct OtlpReceiver::Server {
  httplib::Server http;
};

OtlpReceiver::OtlpReceiver() {
  server_ = std::make_unique<Server>();
  port_ = server_->http.bind_to_any_port("127.0.0.1");
  Listen();
}

OtlpReceiver::~OtlpReceiver() { Stop(); }

std::string OtlpReceiver::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

void OtlpReceiver::Script(std::vector<Reply> replies) {
  std::lock_guard<std::mutex> lock(mu_);
  script_.assign(replies.begin(), replies.end());
}

void OtlpReceiver::Listen() {
  server_->http.Post("/v1/logs", [this](const httplib::Request& req, httplib::Response& res) {
    ExportLogsServiceRequest request;
    const std::string type = req.get_header_value("Content-Type");
    bool ok = false;
    if (type == "application/json") {
      ok = google::protobuf::util::JsonStringToMessage(req.body, &request).ok();
    } else if (type == "application/x-protobuf") {
      ok = request.ParseFromString(req.body);
    }
    std::vector<ReceivedRecord> records;
    for (const auto& rl : request.resource_logs()) {
      const auto resource = Attributes(rl.resource().attributes());
      for (const auto& sl : rl.scope_logs()) {
        for (const auto& lr : sl.log_records()) {
          ReceivedRecord r;
          r.resource = resource;
          r.attributes = Attributes(lr.attributes());
          r.event_name = lr.event_name();
          r.body = lr.body().string_value();
          r.time_unix_nano = lr.time_unix_nano();
          r.severity_number = lr.severity_number();
          records.push_back(std::move(r));
        }
      }
    }
    Reply reply;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++requests_;
      last_headers_.clear();
      for (const auto& [k, v] : req.headers) last_headers_[k] = v;
      if (!ok) undecodable_.push_back(type + ": " + req.body.substr(0, 200));
      if (!script_.empty()) {
        reply = script_.front();
        script_.pop_front();
      }
      auto& into = reply.status >= 200 && reply.status < 300 ? accepted_ : refused_;
      into.insert(into.end(), records.begin(), records.end());
    }
    if (reply.delay.count() > 0) std::this_thread::sleep_for(reply.delay);
    res.status = reply.status;
    if (!reply.retry_after.empty()) res.set_header("Retry-After", reply.retry_after);
    if (reply.status >= 200 && reply.status < 300) {
      ExportLogsServiceResponse response;
      if (type == "application/json") {
        std::string json;
        (void)google::protobuf::util::MessageToJsonString(response, &json);
        res.set_content(json, "application/json");
      } else {
        res.set_content(response.SerializeAsString(), "application/x-protobuf");
      }
    }
  });
  thread_ = std::thread([this] { server_->http.listen_after_bind(); });
}

void OtlpReceiver::Stop() {
  if (!thread_.joinable()) return;
  server_->http.stop();
  thread_.join();
}

void OtlpReceiver::Restart() {
  Stop();
  server_ = std::make_unique<Server>();
  for (int i = 0; i < 100 && !server_->http.bind_to_port("127.0.0.1", port_); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Listen();
}

std::vector<ReceivedRecord> OtlpReceiver::Accepted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}

std::vector<ReceivedRecord> OtlpReceiver::Refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

int OtlpReceiver::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::vector<std::string> OtlpReceiver::Undecodable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return undecodable_;
}

std::map<std::string, std::string> OtlpReceiver::last_headers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_headers_;
}

}  // namespace cuflight::exporter::testing
