#include "run_command.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string_view>
#include <system_error>

#include "app_process.h"
#include "arg_parse.h"
#include "cuflight/env/config.h"
#include "inject_locator.h"
#include "log_dir_locator.h"
#include "private_collector.h"
#include "run_summary.h"
#include "usage_error.h"

extern char** environ;

namespace cuflight::cli {
namespace {

using cli::UsageError;

// A CUFLIGHT_* variable settable with a flag (schema/env/README.md).
struct EnvFlagSpec {
  const char* flag;
  const char* variable;
  const char* type;
  const char* help;
};

const EnvFlagSpec kEnvFlags[] = {
    {"--timing", "CUFLIGHT_TIMING", "all|sampled|off",
     "Which launches get their GPU start and end (kernel_time events): all (default), those in "
     "timing windows (sampled), none (off)"},
    {"--ring-size", "CUFLIGHT_RING_SIZE", "N",
     "Launch records the in-process ring holds: a power of two, 64..4194304 (default 16384)"},
    {"--on-full", "CUFLIGHT_ON_FULL", "drop|block",
     "When the ring is full: drop the event (counted) or block the launching thread (default "
     "drop)"},
    {"--flush-ms", "CUFLIGHT_FLUSH_MS", "MS",
     "Longest time an event waits in the application before it is sent, 1..10000 (default 100)"},
    {"--stats-ms", "CUFLIGHT_STATS_MS", "MS",
     "Interval of the stats events, 100..3600000 (default 5000)"},
    {"--buffer-bytes", "CUFLIGHT_BUFFER_BYTES", "BYTES",
     "Events held while the collector is unreachable, 64K..1G (default 8M)"},
    {"--include", "CUFLIGHT_INCLUDE", "REGEX",
     "Record only kernels whose (demangled) name contains a match (ECMAScript)"},
    {"--exclude", "CUFLIGHT_EXCLUDE", "REGEX",
     "Do not record kernels whose name contains a match; applies after --include"},
    {"--sample", "CUFLIGHT_SAMPLE", "N",
     "Record every Nth launch of each kernel, 1..1000000 (default 1: all)"},
    {"--log-level", "CUFLIGHT_LOG_LEVEL", "LEVEL",
     "The injected library's own messages on stderr: trace, debug, info, warn, error, off "
     "(default warn)"},
    {"--cupti-path", "CUFLIGHT_CUPTI_PATH", "FILE",
     "libcupti to load, when it is not in the CUDA toolkit's standard places"},
    {"--stall-ms", "CUFLIGHT_STALL_MS", "MS",
     "Report a stall when launched work has not finished for MS: 0 (off) or 100..3600000 "
     "(default 10000); with --timing off, from the program's synchronising calls only"},
};
constexpr size_t kEnvFlagCount = std::size(kEnvFlags);

// The default --out, and how many cuflight-logs-N beside it a run tries when others are busy.
constexpr char kDefaultOut[] = "cuflight-logs";
constexpr int kMaxDefaultOuts = 100;

// The collector's startup line in `cuflight run`'s words: it names its own --log-dir flag, which
// run calls --out.
std::string OutLine(std::string_view line, const std::filesystem::path& dir) {
  constexpr std::string_view kFlag = "--log-dir: ";
  if (line.starts_with(kFlag)) line.remove_prefix(kFlag.size());
  return "--out " + dir.string() + ": " + std::string(line);
}

// Longest wait for the application's processes to end their streams after it exited.
constexpr int64_t kMaxDrainTimeoutMs = 3'600'000;

// "CUFLIGHT_X='v' is ...; using the default D" -> "--flag 'v' is ...".
std::string FlagLine(const EnvFlagSpec& spec, std::string_view warning) {
  std::string_view rest = warning;
  const std::string prefix = std::string(spec.variable) + "=";
  if (rest.starts_with(prefix)) rest.remove_prefix(prefix.size());
  if (const size_t cut = rest.find("; using"); cut != std::string_view::npos) {
    rest = rest.substr(0, cut);
  }
  return std::string(spec.flag) + " " + std::string(rest);
}

std::string JoinPaths(const std::vector<std::filesystem::path>& paths) {
  std::string out;
  for (const std::filesystem::path& p : paths) {
    if (!out.empty()) out += ", ";
    out += p.string();
  }
  return out;
}

}  // namespace

RunCommand::RunCommand(CLI::App* parent) : env_flags_(kEnvFlagCount) {
  app_ = parent->add_subcommand(
      "run",
      "Record an application: run it with the injected library and a private collector, then "
      "print what was recorded");
  // Everything from the first positional word on (or after "--") is the command, so the
  // application's own flags are never taken for ours.
  app_->positionals_at_end();
  app_->footer(
      "Examples:\n"
      "  cuflight run -- ./train --epochs 3\n"
      "  cuflight run --out /tmp/logs --sample 10 --include 'gemm|conv' python train.py\n"
      "  cuflight run --collector /run/cuflight/collector.sock -- ./app\n"
      "Exit status: the application's (128+N when signal N ended it); 127 when it is not found, "
      "126 when it cannot be executed; 2 on bad input; 1 when the collector cannot start.");
  constexpr const char* kRecording = "Recording";
  constexpr const char* kInjected = "Injected library settings (CUFLIGHT_* variables)";
  app_->add_option("--out", out_dir_,
                   "Log directory of the private collector (created if missing; default "
                   "./cuflight-logs, or the first free ./cuflight-logs-N while other runs write "
                   "there)")
      ->type_name("DIR")
      ->group(kRecording);
  app_->add_option("--collector", collector_,
                   "Send the events to this running collector (socket path or tcp:HOST:PORT) "
                   "instead of starting a private one")
      ->type_name("SOCKET")
      ->group(kRecording);
  app_->add_option("--inject", inject_,
                   "The injected library to use (default: libcuflight_inject.so found beside "
                   "cuflight)")
      ->type_name("FILE")
      ->group(kRecording);
  app_->add_option("--drain-timeout", drain_timeout_,
                   "After the application exits, wait at most MS for its processes' event "
                   "streams to end (default 5000)")
      ->type_name("MS")
      ->group(kRecording);
  app_->add_option("APP", command_, "The application and its arguments, run as a shell would")
      ->type_name("APP [ARGS...]");
  for (size_t i = 0; i < kEnvFlagCount; ++i) {
    env_flags_[i].option =
        app_->add_option(kEnvFlags[i].flag, env_flags_[i].value, kEnvFlags[i].help)
            ->type_name(kEnvFlags[i].type)
            ->group(kInjected);
  }
}

bool RunCommand::Selected() const { return app_->parsed(); }

uint32_t RunCommand::FlushMs() const {
  for (size_t i = 0; i < kEnvFlagCount; ++i) {
    if (env_flags_[i].Given() && std::string_view(kEnvFlags[i].flag) == "--flush-ms") {
      return static_cast<uint32_t>(std::strtoul(env_flags_[i].value.c_str(), nullptr, 10));
    }
  }
  return env::kDefaultFlushMs;
}

std::vector<std::string> RunCommand::SettingsFromFlags() const {
  std::vector<std::string> settings;
  for (size_t i = 0; i < kEnvFlagCount; ++i) {
    if (!env_flags_[i].Given()) continue;
    if (env_flags_[i].value.find('\0') != std::string::npos) {
      throw UsageError(std::string(kEnvFlags[i].flag) + " must not contain a NUL byte");
    }
    settings.push_back(std::string(kEnvFlags[i].variable) + "=" + env_flags_[i].value);
  }
  // Check the values with the injected library's own parser, which reads only these flags.
  const env::ParsedConfig parsed = env::ParseConfig(
      [this](const char* name) -> const char* {
        for (size_t i = 0; i < kEnvFlagCount; ++i) {
          if (env_flags_[i].Given() && std::string_view(kEnvFlags[i].variable) == name) {
            return env_flags_[i].value.c_str();
          }
        }
        return nullptr;
      },
      "");
  for (const std::string& warning : parsed.warnings) {
    for (const EnvFlagSpec& spec : kEnvFlags) {
      if (warning.starts_with(std::string(spec.variable) + "=")) {
        throw UsageError(FlagLine(spec, warning));
      }
    }
    throw UsageError(warning);
  }
  for (size_t i = 0; i < kEnvFlagCount; ++i) {
    if (env_flags_[i].Given() && std::string_view(kEnvFlags[i].variable) == "CUFLIGHT_CUPTI_PATH" &&
        env_flags_[i].value.empty()) {
      throw UsageError("--cupti-path must name a file");
    }
  }
  return settings;
}

int RunCommand::Run(std::ostream& err) {
  const std::vector<std::string>& command = command_;
  if (command.empty()) {
    throw UsageError("no application given: cuflight run [OPTIONS] [--] APP [ARGS...]");
  }
  const std::chrono::milliseconds drain_timeout(cli::ParseInteger(
      "--drain-timeout", drain_timeout_, {0, kMaxDrainTimeoutMs, "milliseconds"}));
  const bool private_collector = app_->count("--collector") == 0;
  if (!private_collector && collector_.empty()) {
    throw UsageError("--collector must name a socket path or tcp:HOST:PORT");
  }
  if (!private_collector && app_->count("--out") > 0) {
    throw UsageError(
        "--collector and --out exclude each other: a running collector writes to its own log "
        "directory");
  }
  std::vector<std::string> env = SettingsFromFlags();

  const bool out_given = app_->count("--out") > 0;
  if (out_given && (out_dir_.empty() || out_dir_.front() == '-')) {
    throw UsageError("--out needs a directory, not '" + out_dir_ +
                     "': cuflight run --out DIR [--] APP [ARGS...]");
  }

  std::filesystem::path inject;
  if (!inject_.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(inject_, ec)) {
      throw UsageError("--inject " + inject_ + " is not a file");
    }
    inject = std::filesystem::absolute(inject_, ec);
  } else {
    std::vector<std::filesystem::path> searched;
    inject = FindInjectLibrary({}, &searched);
    if (inject.empty()) {
      throw UsageError(std::string("cannot find ") + kInjectLibraryName + " beside cuflight (looked for " +
                       JoinPaths(searched) + "); name it with --inject");
    }
  }
  env.push_back("CUDA_INJECTION64_PATH=" + inject.string());

  // Before any thread exists: the private collector's threads must inherit the block.
  SignalForwarder signals;
  std::unique_ptr<PrivateCollector> collector;
  std::filesystem::path log_dir;
  LogFileSizes before;
  if (private_collector) {
    // Like nsys's report1, report2: a run that finds the default directory being written by
    // another run records next to it, in the first free cuflight-logs-N.
    std::error_code ec;
    const std::filesystem::path first = std::filesystem::absolute(out_dir_, ec);
    for (int n = 1; !collector; ++n) {
      log_dir = n == 1 ? first : std::filesystem::path(first.string() + "-" + std::to_string(n));
      before = SnapshotLogFiles(log_dir);
      collector::StartupError startup;
      collector = PrivateCollector::Start(log_dir, &startup);
      if (collector) break;
      if (!startup.log_dir_in_use) {
        err << "cuflight run: cannot start the collector: " << OutLine(startup.line, log_dir)
            << '\n';
        return startup.exit_code;
      }
      if (out_given) {
        throw UsageError("--out " + out_dir_ +
                         " is being written by another cuflight run or collector: give another "
                         "--out, or none to record in a free ./" +
                         std::string(kDefaultOut) + "-N");
      }
      if (n == kMaxDefaultOuts) {
        err << "cuflight run: " << first.string() << " and " << kMaxDefaultOuts - 1
            << " more directories beside it are being written by other runs; give --out DIR\n";
        return cli::kExitFailure;
      }
    }
    if (log_dir != first) {
      err << "cuflight run: " << first.string() << " is being written by another run; recording "
          << "to " << log_dir.string() << '\n';
    }
    RememberLastRun(log_dir);
    env.push_back("CUFLIGHT_COLLECTOR=" + collector->socket_path().string());
  } else {
    env.push_back("CUFLIGHT_COLLECTOR=" + collector_);
  }

  SpawnError spawn_error;
  int term_signal = 0;
  const pid_t pid =
      SpawnApp(command, MergeEnvironment(environ, env), signals.original_mask(), &spawn_error);
  int status = 0;
  if (pid < 0) {
    err << "cuflight run: " << spawn_error.line << '\n';
    status = spawn_error.exit_code;
  } else {
    status = signals.WaitForChild(pid, &term_signal);
    if (status < 0) {
      err << "cuflight run: lost track of the application (pid " << pid << ")\n";
      status = cli::kExitFailure;
    }
  }

  if (!collector) {
    if (pid >= 0) err << "cuflight run: events went to the collector at " << collector_ << '\n';
    return status;
  }
  if (pid >= 0 &&
      !collector->WaitForProducers(drain_timeout, [&signals](std::chrono::milliseconds d) {
        return signals.Pause(d);
      })) {
    err << "cuflight run: " << collector->stats().connections_open
        << " recorded process(es) still connected; their logs end with process_lost\n";
  }
  collector->Stop();
  if (pid >= 0) {
    RunSummaryInput summary;
    summary.log_dir = log_dir;
    summary.files = WrittenFiles(before, SnapshotLogFiles(log_dir));
    summary.collector = collector->stats();
    summary.exit_code = status;
    summary.term_signal = term_signal;
    summary.flush_ms = FlushMs();
    PrintRunSummary(summary, err);
  }
  return status;
}

}  // namespace cuflight::cli
