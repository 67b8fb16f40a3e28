// `cuflight demo`: the review of a realistic recording, on any machine, GPU or not. Writes the
// logs of a generated 4-rank training job on H100s (bench/log_gen: CUTLASS GEMMs and PyTorch
// elementwise kernels, failed launches, a stall, one rank that crashed; occupancy and what-ifs
// from the occupancy engine, as the recorder computes them) to a directory, then prints
// `cuflight report` of it and writes its HTML page next to the logs, with the commands to try next.
#ifndef CUFLIGHT_CLI_DEMO_COMMAND_H_
#define CUFLIGHT_CLI_DEMO_COMMAND_H_

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

#include "device_query.h"

namespace cuflight::cli {

class DemoCommand {
 public:
  // Adds the `demo` subcommand to `parent`; must outlive parsing and cannot move.
  explicit DemoCommand(CLI::App* parent);
  DemoCommand(const DemoCommand&) = delete;
  DemoCommand& operator=(const DemoCommand&) = delete;

  bool Selected() const;

  // Writes the recording (to --dir, else a new directory under $TMPDIR or /tmp), prints the
  // report to `out` and what was written and what to run next, and returns kExitOk. Returns
  // kExitFailure after one line on `err` when the directory cannot be made or written; a --dir
  // that exists and is not empty is kExitUsage (the demo never mixes its logs with others).
  int Run(std::ostream& out, std::ostream& err, DeviceQuery& device_query) const;

 private:
  CLI::App* app_ = nullptr;
  std::string dir_;
  bool html_only_ = false;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_DEMO_COMMAND_H_
