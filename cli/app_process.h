// The application under `cuflight run`: started like a shell starts a command, supervised until it
// ends, with the signals sent to cuflight passed on to it.
//
// Design:
//  1. The forwarded signals and SIGCHLD are blocked in the calling thread before any other thread
//     exists (SignalForwarder), so every thread inherits the block and the signals stay pending
//     until the supervising thread takes them with sigtimedwait: no handler runs, and cuflight
//     itself is never stopped by them while the application runs.
//  2. The application is started with posix_spawnp (no fork of this multi-threaded process; a
//     failed exec is reported to the caller as an errno), with the signal mask cuflight had before
//     the block, the environment given, and cuflight's stdin, stdout and stderr. It stays in
//     cuflight's process group, so it remains in the terminal's foreground.
//  3. A forwarded signal is passed on unless the kernel generated it (si_code SI_KERNEL: a
//     terminal's Ctrl-C, Ctrl-\ or hangup, which the kernel already delivered to the whole
//     foreground process group, the application included) or the application itself sent it
//     (a kill(0, ...) of its own group), so the application does not receive it twice.
#ifndef CUFLIGHT_CLI_APP_PROCESS_H_
#define CUFLIGHT_CLI_APP_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <string>
#include <vector>

namespace cuflight::cli {

// Signals sent to `cuflight run` that are passed on to the application.
inline constexpr std::array<int, 6> kForwardedSignals = {SIGINT,  SIGTERM, SIGHUP,
                                                         SIGQUIT, SIGUSR1, SIGUSR2};

class SignalForwarder {
 public:
  // Blocks kForwardedSignals and SIGCHLD in the calling thread, and sets SIGCHLD to its default
  // action (so children can be waited for). Create it before starting any thread.
  SignalForwarder();
  // Restores the calling thread's signal mask. Signals still pending are then delivered with
  // their normal action; the destructor first discards pending SIGCHLD.
  ~SignalForwarder();
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;

  // The mask before the block: what the application starts with.
  const sigset_t& original_mask() const { return original_mask_; }

  // Waits until process `pid` (a child) ends, passing on forwarded signals as the design block
  // says. Returns its exit status, or 128 + the signal number when a signal ended it (then
  // *term_signal, when given, is that signal; else 0); -1 if it cannot be waited for. Call from
  // the thread that created this object.
  int WaitForChild(pid_t pid, int* term_signal = nullptr);

  // Sleeps up to `timeout`, consuming signals that arrive meanwhile. Returns false as soon as
  // SIGINT, SIGTERM, SIGHUP or SIGQUIT arrives (the user wants to stop waiting), true otherwise.
  bool Pause(std::chrono::milliseconds timeout);

  // Signals passed on to the application so far.
  int forwarded() const { return forwarded_; }

 private:
  sigset_t original_mask_{};
  sigset_t waited_{};
  struct sigaction original_chld_ {};
  int forwarded_ = 0;
};

// Why the application could not be started: errno from the exec.
struct SpawnError {
  int error = 0;
  // The shell's status for it: 127 when the program was not found, 126 when it was found but
  // could not be run (permissions, not an executable).
  int exit_code = 0;
  // One line without a prefix, as a shell says it: "NAME: command not found" (a name without a
  // '/' not found in PATH), else "NAME: <strerror>".
  std::string line;
};

// Starts argv[0] (searched in PATH as execvp does when it contains no '/') with `argv`, `env`
// ("NAME=value" strings) and the signal mask `mask`. Returns the child's pid, or -1 and fills
// *error. `argv` must not be empty.
pid_t SpawnApp(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               const sigset_t& mask, SpawnError* error);

// This process's environment with every variable named in `replace` removed, then `replace`
// appended ("NAME=value" strings).
std::vector<std::string> MergeEnvironment(char* const* environment,
                                          const std::vector<std::string>& replace);

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_APP_PROCESS_H_
