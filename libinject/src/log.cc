#include "log.h"

#include <spdlog/details/console_globals.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <memory>
#include <mutex>
#include <new>

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

void ResetLogAfterFork() noexcept {
  // stderr_sink_mt writes under spdlog's console mutex (spdlog/details/console_globals.h); this
  // library's copy of spdlog is private to it.
  new (&spdlog::details::console_mutex::mutex()) spdlog::details::console_mutex::mutex_t();
}

}  // namespace cuflight::inject
