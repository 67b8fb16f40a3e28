// The `cuflight` command line: subcommand dispatch and error reporting. Subcommands: `occupancy`,
// `run`, `tail`, `report`, `export`, `demo`, each its own <name>_command.{h,cc} registered in
// app.cc, and `collect` (the collector daemon, collector/daemon/, with its own flags).
#ifndef CUFLIGHT_CLI_APP_H_
#define CUFLIGHT_CLI_APP_H_

#include <ostream>

#include "device_query.h"

namespace cuflight::cli {

// Parses argv[0..argc) (argv[0] is the program name) and runs the selected subcommand, writing
// its output and --help to `out`. Returns the process exit status: kExitOk; kExitUsage after
// exactly one line "cuflight[ <subcommand>]: <reason>" on `err` for any bad input, including
// CLI11's own parse errors; kExitFailure after one line on `err` for an unexpected exception.
// Never throws.
int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           DeviceQuery& device_query) noexcept;

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_APP_H_
