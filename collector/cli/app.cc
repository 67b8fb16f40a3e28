#include "app.h"

#include <CLI/CLI.hpp>
#include <exception>
#include <string>

#include "occupancy_command.h"
#include "usage_error.h"

namespace cuflight::cli {
namespace {

// CLI11 messages may span lines (e.g. "Exactly 1 of the following options..."); keep one.
std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           DeviceQuery& device_query) noexcept {
  std::string prefix = "cuflight";
  try {
    CLI::App app("cuflight: flight recorder for CUDA kernels", "cuflight");
    app.set_version_flag("--version", "cuflight " CUFLIGHT_VERSION);
    app.require_subcommand(1);
    OccupancyCommand occupancy(&app);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
        return app.exit(e, out, err);  // --help, --version
      }
      if (occupancy.Selected()) prefix += " occupancy";
      std::string line = OneLine(e.what());
      if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !occupancy.Selected()) {
        // require_subcommand reports an unknown command word as a missing subcommand.
        line = argc > 1 && argv[1][0] != '-'
                   ? std::string("unknown command '") + argv[1] + "' (commands: occupancy)"
                   : std::string("a command is required (commands: occupancy)");
        line += "; see cuflight --help";
      }
      err << prefix << ": " << line << '\n';
      return kExitUsage;
    }
    if (occupancy.Selected()) {
      prefix += " occupancy";
      return occupancy.Run(device_query, out);
    }
    err << prefix << ": no subcommand given (see cuflight --help)\n";
    return kExitUsage;
  } catch (const UsageError& e) {
    err << prefix << ": " << OneLine(e.what()) << '\n';
    return kExitUsage;
  } catch (const std::exception& e) {
    err << prefix << ": internal error: " << OneLine(e.what()) << '\n';
    return kExitFailure;
  } catch (...) {
    err << prefix << ": internal error\n";
    return kExitFailure;
  }
}

}  // namespace cuflight::cli
