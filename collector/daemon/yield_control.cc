#include "yield_control.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

#include "cuflight/schema/control.h"
#include "cuflight/schema/decoder.h"

namespace cuflight::collector {
namespace {

constexpr size_t kMaxJobBytes = 256;
constexpr size_t kMaxListed = 64;

}  // namespace

bool LooksLikeYieldRequest(std::string_view line) noexcept {
  // The exact opening (control.h): a process_start whose argv names "yield_request" is still a
  // process_start (the encoder writes its type first).
  return line.starts_with(schema::kYieldRequestOpening);
}

bool ParseYieldRequest(std::string_view line, YieldRequest* request, std::string* error) noexcept {
  try {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      *error = "not a JSON object";
      return false;
    }
    const auto type = j.find("type");
    if (type == j.end() || !type->is_string() ||
        type->get_ref<const std::string&>() != schema::kYieldRequestType) {
      *error = "type is not yield_request";
      return false;
    }
    const auto version = j.find("version");
    if (version == j.end() || !version->is_number_unsigned() || *version != 1) {
      *error = "version is not 1";
      return false;
    }
    *request = {};
    const auto pid = j.find("pid");
    const auto job = j.find("job");
    if ((pid == j.end()) == (job == j.end())) {
      *error = "give either pid or job";
      return false;
    }
    if (pid != j.end()) {
      if (!pid->is_number_unsigned() || *pid < 1 ||
          *pid > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        *error = "pid is not a process id (1..2147483647)";
        return false;
      }
      request->pid = pid->get<int32_t>();
      if (const auto ns = j.find("pid_ns"); ns != j.end()) {
        if (!ns->is_number_unsigned()) {
          *error = "pid_ns is not an unsigned integer";
          return false;
        }
        request->pid_ns = ns->get<uint64_t>();
      }
    } else {
      if (!job->is_string() || job->get_ref<const std::string&>().empty() ||
          job->get_ref<const std::string&>().size() > kMaxJobBytes) {
        *error = "job is not a string of 1..256 bytes";
        return false;
      }
      request->job = job->get<std::string>();
    }
    const auto for_ms = j.find("for_ms");
    if (for_ms == j.end() || !for_ms->is_number_unsigned() || *for_ms > schema::kMaxYieldMs) {
      *error = "for_ms is not a number of milliseconds in [0, 86400000]";
      return false;
    }
    request->for_ms = for_ms->get<uint64_t>();
    return true;
  } catch (...) {
    *error = "cannot read the request";
    return false;
  }
}

bool MayYield(uid_t requester, bool producer_is_unix, uid_t producer_uid) noexcept {
  if (requester == 0) return true;
  return producer_is_unix && producer_uid == requester;
}

std::string EncodeYieldReply(const std::vector<YieldTarget>& targets, std::string_view error) {
  nlohmann::json j;
  j["type"] = std::string(schema::kYieldReplyType);
  j["version"] = 1;
  if (!error.empty()) {
    j["error"] = std::string(error);
  } else {
    const auto asked = static_cast<uint64_t>(
        std::count_if(targets.begin(), targets.end(), [](const YieldTarget& t) { return t.asked; }));
    j["matched"] = targets.size();
    j["asked"] = asked;
    j["refused"] = targets.size() - asked;
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < targets.size() && i < kMaxListed; ++i) {
      const YieldTarget& t = targets[i];
      nlohmann::json p = {{"pid", t.pid}, {"exe", t.exe}, {"uid", t.uid}, {"asked", t.asked}};
      if (!t.why.empty()) p["why"] = t.why;
      list.push_back(std::move(p));
    }
    j["processes"] = std::move(list);
  }
  // Producer-chosen text (exe) may hold anything: replaced, never thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string JobOfProcessStart(std::string_view line) noexcept {
  try {
    const schema::DecodeResult d = schema::Decode(line);
    const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&d.event);
    if (!d.ok() || start == nullptr) return {};
    for (const auto& [key, value] : start->attribution) {
      if (key == "job") return value;
    }
  } catch (...) {
  }
  return {};
}

}  // namespace cuflight::collector
