#include "segment_error_log.h"

#include <spdlog/spdlog.h>

#include <cstring>

namespace cuflight::logstore {

RateLimitedLog::RateLimitedLog(std::chrono::steady_clock::duration period) : period_(period) {}

void RateLimitedLog::Warn(std::string_view kind, std::string_view message) {
  const auto now = std::chrono::steady_clock::now();
  uint64_t suppressed = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    KindState* state = nullptr;
    for (KindState& s : kinds_) {
      if (s.kind == kind) {
        state = &s;
        break;
      }
    }
    if (state == nullptr) {
      state = &kinds_.emplace_back();
      state->kind = std::string(kind);
    }
    if (state->logged && now - state->last < period_) {
      ++state->suppressed;
      return;
    }
    state->logged = true;
    state->last = now;
    suppressed = state->suppressed;
    state->suppressed = 0;
  }
  if (suppressed == 0) {
    spdlog::warn("log sink: {}", message);
  } else {
    spdlog::warn("log sink: {} ({} similar messages suppressed)", message, suppressed);
  }
}

std::string RateLimitedLog::Describe(std::string_view what, std::string_view path, int err) {
  std::string text(what);
  text += ' ';
  text += path;
  text += ": ";
  char buf[256];
  // GNU strerror_r returns the message (possibly not in buf); thread-safe unlike strerror.
  text += strerror_r(err, buf, sizeof(buf));
  return text;
}

}  // namespace cuflight::logstore
