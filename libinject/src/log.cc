#include "log.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <memory>

namespace cuflight::inject {

spdlog::logger& Log() noexcept {
  // Leaked on purpose: usable from atexit handlers and threads that outlive static destructors.
  static spdlog::logger* logger = [] {
    auto* l = new spdlog::logger("cuflight", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("cuflight: %l: %v");
    l->set_level(spdlog::level::warn);
    l->flush_on(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

void SetLogLevel(spdlog::level::level_enum level) noexcept { Log().set_level(level); }

}  // namespace cuflight::inject
