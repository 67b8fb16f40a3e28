// `cuflight report PATH...`: a summary of collector logs (report/, docs/report.md).
// Turns the flags into ReportOptions and runs RunReport().
#ifndef CUFLIGHT_CLI_REPORT_COMMAND_H_
#define CUFLIGHT_CLI_REPORT_COMMAND_H_

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cuflight/report/report_options.h"
#include "filter_flags.h"

namespace cuflight::cli {

class ReportCommand {
 public:
  // Adds the `report` subcommand with its options to `parent`. CLI11 keeps pointers into this
  // object, so it must outlive parsing and cannot move.
  explicit ReportCommand(CLI::App* parent);
  ReportCommand(const ReportCommand&) = delete;
  ReportCommand& operator=(const ReportCommand&) = delete;

  // True once the parsed command line has selected `report`.
  bool Selected() const;

  // After a successful parse: the options the flags give. Throws cli::UsageError (one line) for
  // a flag value that does not parse (--sort, --since, --until, --color).
  report::ReportOptions Options(const std::ostream& out) const;

  // Runs the report: kExitOk, or kExitUsage after one line "cuflight report: <reason>" on `err`.
  // Throws cli::UsageError like Options().
  int Run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* app_ = nullptr;
  std::vector<std::string> paths_;
  int top_ = -1;
  std::string sort_ = "time";
  FilterFlags filters_;  // --kernel, --pid, --since, --until (shared with `cuflight export`)
  std::string limiter_;
  std::string retarget_;
  std::string color_ = "auto";
  std::string html_;  // --html FILE
  int review_launches_ = 5;
  bool per_process_ = false;
  int name_width_ = -1;
  bool json_ = false;
  bool csv_ = false;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_REPORT_COMMAND_H_
