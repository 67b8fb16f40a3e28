// The library's own logger: a private spdlog logger writing one line per message to stderr,
// prefixed "cuflight:", never registered in spdlog's registry (the application may use spdlog
// too). Never called on the launch hot path.
#ifndef CUFLIGHT_LIBINJECT_SRC_LOG_H_
#define CUFLIGHT_LIBINJECT_SRC_LOG_H_

#include <spdlog/logger.h>

namespace cuflight::inject {

// The logger; created on first use at level warn. Never null.
spdlog::logger& Log() noexcept;

// Sets the level from a CUFLIGHT_LOG_LEVEL name (trace, debug, info, warn, error, off).
void SetLogLevel(spdlog::level::level_enum level) noexcept;

// In a fork()ed child: makes the lock around stderr writes anew (a thread of the parent may
// have held it at the fork).
void ResetLogAfterFork() noexcept;

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_LOG_H_
