// `cuflight export --perfetto FILE PATH...`: collector logs -> a Chrome trace-event JSON file for
// the Perfetto UI (perfetto_trace.h has the layout).
#ifndef CUFLIGHT_COLLECTOR_RUN_EXPORT_COMMAND_H_
#define CUFLIGHT_COLLECTOR_RUN_EXPORT_COMMAND_H_

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace cuflight::run {

class ExportCommand {
 public:
  // Adds the `export` subcommand and its flags to `parent`. Must outlive parsing; cannot move.
  explicit ExportCommand(CLI::App* parent);
  ExportCommand(const ExportCommand&) = delete;
  ExportCommand& operator=(const ExportCommand&) = delete;

  bool Selected() const;

  // Reads the logs and writes the trace to the --perfetto file ("-": `out`), then one line on
  // `err` saying what was written and the read notes (torn or rejected lines), each prefixed
  // "note: ". Returns kExitOk. Throws cli::UsageError (one line) when a path is missing or holds
  // no log, a file is not a log, or the output file cannot be written.
  int Run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* app_ = nullptr;
  std::string perfetto_;
  std::vector<std::string> paths_;
};

}  // namespace cuflight::run

#endif  // CUFLIGHT_COLLECTOR_RUN_EXPORT_COMMAND_H_
