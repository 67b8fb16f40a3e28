// `cuflight yield`: asks the collector to make a recorded process hand CUPTI over for a while, so
// that the user can profile it with torch.profiler or another CUPTI tool on a CUDA older than 13.3
// (one CUPTI subscriber per process); docs/profilers.md.
//
//   cuflight yield --pid 4242 [--for 10m] [--socket PATH]
//   cuflight yield --job 81723 --resume
//
// The request goes to the collector's Unix socket (cuflight/schema/control.h), which forwards it
// down the connection of every live producer it names that the caller may ask (root, or the
// process's own user: the collector's SO_PEERCRED check, collector/daemon/yield_control.h).
// --pid names a process as the caller sees it; the command reads its pid namespace and its pid
// there (/proc/<pid>/ns/pid, the last NSpid of /proc/<pid>/status), which is what the process's
// process_start reports, so the right process is named whether it runs in a container or not.
#ifndef CUFLIGHT_CLI_YIELD_COMMAND_H_
#define CUFLIGHT_CLI_YIELD_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>

namespace cuflight::cli {

class YieldCommand {
 public:
  // Adds the `yield` subcommand and its flags to `parent`. Must outlive parsing; cannot move.
  explicit YieldCommand(CLI::App* parent);
  YieldCommand(const YieldCommand&) = delete;
  YieldCommand& operator=(const YieldCommand&) = delete;

  bool Selected() const;

  // Sends the request and prints one line per process the collector matched to `out`. Returns
  // kExitOk when at least one process was asked; kExitFailure (one line on `err`) when none was
  // (no match, all refused, the collector unreachable or answering with an error). Throws
  // UsageError for bad flags (neither or both of --pid and --job, a bad duration, --for with
  // --resume, a pid that names no process).
  int Run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* app_ = nullptr;
  std::string pid_;
  std::string job_;
  std::string for_ = "60s";
  bool resume_ = false;
  std::string socket_;
};

// "500ms", "90", "90s", "10m", "2h" (a bare number is seconds) as milliseconds in
// [1, schema::kMaxYieldMs]. Throws UsageError naming `flag`.
uint64_t ParseYieldDuration(std::string_view flag, std::string_view text);

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_YIELD_COMMAND_H_
