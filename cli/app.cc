#include "app.h"

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "collector_main.h"
#include "demo_command.h"
#include "cuflight/report/text_format.h"
#include "occupancy_command.h"
#include "report_command.h"
#include "export_command.h"
#include "run_command.h"
#include "tail_command.h"
#include "usage_error.h"
#include "yield_command.h"

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

// "; did you mean --threads?" for the first unknown flag in a CLI11 "not expected" message
// that is a likely typo of a flag of the command given; "" otherwise.
std::string SuggestFlag(const CLI::App& app, const std::string& message) {
  std::vector<std::string> flags;
  for (const CLI::App* sub : app.get_subcommands()) {
    for (const CLI::Option* opt : sub->get_options()) {
      for (const std::string& name : opt->get_lnames()) flags.push_back("--" + name);
    }
  }
  std::istringstream words(message.substr(message.find(':') + 1));
  for (std::string word; words >> word;) {
    if (!word.starts_with("--")) continue;
    word = word.substr(0, word.find('='));
    if (std::string hint = OccupancyCommand::HintForUnknownFlag(word); !hint.empty()) return hint;
    if (std::string hint = report::DidYouMean(word, flags); !hint.empty()) return hint;
  }
  return "";
}

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           DeviceQuery& device_query) noexcept {
  std::string prefix = "cuflight";
  try {
    // `cuflight collect ...` is the collector daemon with its own flags (cuflight-collector).
    if (argc > 1 && std::string_view(argv[1]) == "collect") {
      std::vector<const char*> collect_argv = {"cuflight collect"};
      for (int i = 2; i < argc; ++i) collect_argv.push_back(argv[i]);
      return collector::RunCollectorMain(static_cast<int>(collect_argv.size()), collect_argv.data(),
                                         "cuflight collect", out, err);
    }
    CLI::App app("cuflight: flight recorder for CUDA kernels", "cuflight");
    app.set_version_flag("--version", "cuflight " CUFLIGHT_VERSION);
    app.require_subcommand(1);
    OccupancyCommand occupancy(&app);
    cli::RunCommand run_command(&app);
    cli::TailCommand tail_command(&app);
    cli::ExportCommand export_command(&app);
    ReportCommand report_command(&app);
    DemoCommand demo_command(&app);
    cli::YieldCommand yield_command(&app);
    // Listed for --help only: dispatched above, before parsing.
    app.add_subcommand("collect",
                       "Run the collector daemon in the foreground (cuflight collect --help)");
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
        return app.exit(e, out, err);  // --help, --version
      }
      if (occupancy.Selected()) prefix += " occupancy";
      if (run_command.Selected()) prefix += " run";
      if (tail_command.Selected()) prefix += " tail";
      if (export_command.Selected()) prefix += " export";
      if (report_command.Selected()) prefix += " report";
      if (demo_command.Selected()) prefix += " demo";
      if (yield_command.Selected()) prefix += " yield";
      std::string line = OneLine(e.what());
      if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) line += SuggestFlag(app, line);
      if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !occupancy.Selected() &&
          !report_command.Selected() && !export_command.Selected() &&
          !demo_command.Selected() && !yield_command.Selected()) {
        // require_subcommand reports an unknown command word as a missing subcommand.
        line = argc > 1 && argv[1][0] != '-'
                   ? std::string("unknown command '") + argv[1] +
                         "' (commands: occupancy, run, tail, report, export, demo, collect, yield" +
                         report::DidYouMean(argv[1], {"occupancy", "run", "tail", "report",
                                                      "export", "demo", "collect", "yield"}) +
                         ")"
                   : std::string(
                         "a command is required (commands: occupancy, run, tail, report, "
                         "export, demo, collect, yield)");
        line += "; see cuflight --help";
      }
      err << prefix << ": " << line << '\n';
      return kExitUsage;
    }
    if (occupancy.Selected()) {
      prefix += " occupancy";
      return occupancy.Run(device_query, std::cin, out);
    }
    if (run_command.Selected()) {
      prefix += " run";
      return run_command.Run(err);
    }
    if (tail_command.Selected()) {
      prefix += " tail";
      return tail_command.Run(out, err);
    }
    if (export_command.Selected()) {
      prefix += " export";
      return export_command.Run(out, err);
    }
    if (report_command.Selected()) {
      prefix += " report";
      return report_command.Run(out, err);
    }
    if (demo_command.Selected()) {
      prefix += " demo";
      return demo_command.Run(out, err, device_query);
    }
    if (yield_command.Selected()) {
      prefix += " yield";
      return yield_command.Run(out, err);
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
