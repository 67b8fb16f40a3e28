// Where logs are when the user names none: the directory the latest `cuflight run` wrote (it
// records it in a small state file), the local collector's default log directory, and
// /var/log/cuflight (a system collector's). `cuflight tail` with no --log-dir follows the one a
// collector is writing now, else the latest run's.
#ifndef CUFLIGHT_CLI_LOG_DIR_LOCATOR_H_
#define CUFLIGHT_CLI_LOG_DIR_LOCATOR_H_

#include <filesystem>
#include <string>

namespace cuflight::cli {

// $XDG_STATE_HOME/cuflight/last-run, else $HOME/.local/state/cuflight/last-run; empty when
// neither variable is set.
std::filesystem::path LastRunFile();

// Records `log_dir` (made absolute) as the latest run's: the file is written beside and renamed
// over, so a reader never sees half of it. False when it cannot be written (the run goes on).
bool RememberLastRun(const std::filesystem::path& log_dir);

// The directory the latest run recorded; empty when none is recorded.
std::filesystem::path LastRunDir();

// True when a process holds the flock(2) a collector keeps on `dir`'s lock file
// (kLogDirLockFileName), as /proc/locks lists it: a collector is writing `dir` now. Reads only;
// takes no lock, so it never gets in a starting collector's way. False when it cannot tell.
bool LogDirInUse(const std::filesystem::path& dir);

struct LocatedLogDir {
  std::filesystem::path dir;  // empty: none found
  std::string why;            // e.g. "the latest cuflight run's output", or, when none was
                              // found, the places looked at
};

// The directory `cuflight tail` follows when no --log-dir is given: among the latest run's
// output, the collector's default log directory (collector::DefaultLogDir()) and
// /var/log/cuflight, in that order, the first one a collector is writing now (LogDirInUse); else
// the first that exists.
LocatedLogDir LocateLogDir();

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_LOG_DIR_LOCATOR_H_
