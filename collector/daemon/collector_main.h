// The collector as a program: flags and config, logging to stderr, the metrics endpoint, signal
// handling, then the event loop until SIGTERM/SIGINT. Shared by `cuflight-collector` and
// `cuflight collect`.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_COLLECTOR_MAIN_H_
#define CUFLIGHT_COLLECTOR_DAEMON_COLLECTOR_MAIN_H_

#include <ostream>
#include <string_view>

namespace cuflight::collector {

// Runs the collector in the foreground with argv[1..argc) as its flags. `program` prefixes error
// lines ("cuflight-collector", "cuflight collect"); --help and --version go to `out`.
// Returns the exit status: 0 after --help/--version or a clean stop (SIGTERM, SIGINT: stop
// accepting, drain, flush); 2 after one line "<program>: <reason>" on `err` for a bad flag or
// config value; 1 after one line when the collector cannot start or its loop fails.
// Installs handlers for SIGTERM, SIGINT and SIGHUP (reopen the log files) while it runs and
// ignores SIGPIPE. Call from the main thread, at most one at a time per process. Never throws.
int RunCollectorMain(int argc, const char* const* argv, std::string_view program, std::ostream& out,
                     std::ostream& err) noexcept;

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_COLLECTOR_MAIN_H_
