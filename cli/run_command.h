// `cuflight run [flags] [--] APP [ARGS...]`: records one application. Finds the injected library
// beside cuflight, starts a private collector (private_collector.h) unless --collector names one,
// runs the application with CUDA_INJECTION64_PATH, CUFLIGHT_COLLECTOR and the CUFLIGHT_* settings
// given as flags, passes signals on to it (app_process.h), waits for its processes' events to be
// stored, and prints the run's summary on stderr. Exits with the application's status.
#ifndef CUFLIGHT_CLI_RUN_COMMAND_H_
#define CUFLIGHT_CLI_RUN_COMMAND_H_

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace cuflight::cli {

class RunCommand {
 public:
  // Adds the `run` subcommand and its flags to `parent`. CLI11 keeps pointers into this object,
  // so it must outlive parsing and cannot move.
  explicit RunCommand(CLI::App* parent);
  RunCommand(const RunCommand&) = delete;
  RunCommand& operator=(const RunCommand&) = delete;

  // True once the parsed command line has selected `run`.
  bool Selected() const;

  // After a successful parse: runs the application and returns its exit status (128 + N when
  // signal N ended it; 127 when it was not found and 126 when it could not be executed, after one
  // line on `err`). Throws cli::UsageError (one line; exit 2) for a bad flag value (also --out
  // without a value, or naming a directory another run or collector is writing), no
  // application, or no injected library to be found (the line names the places searched).
  // Without --out, records to ./cuflight-logs, or the first free ./cuflight-logs-N while others
  // write there (one line on `err` says so), and remembers the directory (RememberLastRun).
  // Returns 1 after one line on `err` when the private collector cannot start. The summary
  // goes to `err`; the application's own output is not touched. Blocks signals in the calling
  // thread while it runs: call it from the main thread of a process with no other threads.
  int Run(std::ostream& err);

  // The CUFLIGHT_* assignments ("NAME=value") the flags given ask for, checked the way the
  // injected library checks them. Throws cli::UsageError naming the flag for a value the library
  // would reject.
  std::vector<std::string> SettingsFromFlags() const;

 private:
  // The injected library's flush interval the flags ask for (checked by SettingsFromFlags).
  uint32_t FlushMs() const;

  struct EnvFlag {
    std::string value;
    CLI::Option* option = nullptr;
    bool Given() const { return option != nullptr && option->count() > 0; }
  };

  CLI::App* app_ = nullptr;
  std::string out_dir_ = "cuflight-logs";  // kDefaultOut
  std::string collector_;
  std::string inject_;
  std::string drain_timeout_ = "5000";
  std::vector<EnvFlag> env_flags_;  // parallel to the flag table in the .cc
  std::vector<std::string> command_;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_RUN_COMMAND_H_
