// `cuflight tail`: follows a collector's log directory live and prints one line per new event
// (human-readable, or the stored JSON line with --json), filtered like `cuflight report`, until
// SIGINT or SIGTERM (exit 0).
#ifndef CUFLIGHT_CLI_TAIL_COMMAND_H_
#define CUFLIGHT_CLI_TAIL_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace cuflight::cli {

class TailCommand {
 public:
  // Adds the `tail` subcommand and its flags to `parent`. Must outlive parsing; cannot move.
  explicit TailCommand(CLI::App* parent);
  TailCommand(const TailCommand&) = delete;
  TailCommand& operator=(const TailCommand&) = delete;

  bool Selected() const;

  // Follows the directory, writing events to `out` (flushed after each poll that found some),
  // one line "cuflight tail: following DIR ..." to `err` once the files present at the start
  // have been looked at, and a note per line that did not decode, until SIGINT or SIGTERM; returns
  // kExitOk then. Throws cli::UsageError for a bad filter or a log directory that does not exist.
  // Blocks SIGINT and SIGTERM in the calling thread while it runs (call it from the main thread).
  int Run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* app_ = nullptr;
  std::string log_dir_;
  std::string kernel_;
  std::vector<int32_t> pids_;
  std::string limiter_;
  bool json_ = false;
  bool from_start_ = false;
  std::string interval_ = "200";
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_TAIL_COMMAND_H_
