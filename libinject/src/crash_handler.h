// Fatal signals in the application: SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT.
//
// The handler is async-signal-safe: it touches only atomics and plain memory, and calls only
// sigaction, sigprocmask, clock_gettime, nanosleep, getpid and tgkill. It asks the sender
// thread, through the function given to InstallCrashHandlers, to send what is pending and a
// process_crash event, waits for that at most `wait`, and then lets the signal take the course
// it would have taken without cuflight:
//   - the application had its own handler before cuflight's (the previous disposition is a
//     function): that handler is called as the kernel would have called it (its siginfo, its
//     context, its sa_mask), and cuflight's stays installed;
//   - the previous disposition was the default: it is restored and the signal happens again
//     under it (a fault the kernel raised re-executes the faulting instruction; a signal sent by
//     kill, raise or abort is raised again for this thread), so the process terminates and dumps
//     core exactly as before;
//   - a signal the application ignores (SIG_IGN when cuflight loads) gets no handler at all.
// A handler the application installs after cuflight's simply replaces it: cuflight then sees
// nothing of that signal. One that saves cuflight's as its previous and chains to it works too.
//
// Only the first few crashes of a process are reported (kMaxCrashReports): an application
// handler that returns to a fault it did not fix would otherwise report the same fault forever.
// A crash on a thread that is inside the reporting (the sender thread itself) is not reported.
#ifndef CUFLIGHT_LIBINJECT_SRC_CRASH_HANDLER_H_
#define CUFLIGHT_LIBINJECT_SRC_CRASH_HANDLER_H_

#include <signal.h>

#include <cstdint>
#include <string_view>

namespace cuflight::inject {

struct CrashInfo {
  int signal = 0;
  int code = 0;       // si_code
  uint64_t addr = 0;  // si_addr for the fault signals, 0 otherwise
  int32_t tid = 0;
  bool app_handler = false;  // the application's own handler runs next
};

// Called from the signal handler: must be async-signal-safe. Sends what is pending plus a
// process_crash event and returns within about `wait_ns`; true when that was done.
using CrashReporter = bool (*)(const CrashInfo& info, int64_t wait_ns);

inline constexpr int kMaxCrashReports = 4;

// "SIGSEGV" for SIGSEGV, ...; "SIG<n>" style names are not produced: "" for a signal outside the
// five handled ones.
std::string_view FatalSignalName(int signal) noexcept;

// Installs the handlers (once per process; later calls only replace `reporter` and `wait_ns`).
// False when sigaction failed for every signal.
bool InstallCrashHandlers(CrashReporter reporter, int64_t wait_ns) noexcept;

// Puts back the dispositions that were in place before InstallCrashHandlers, for the signals
// whose disposition is still cuflight's handler (for tests and for a library being unloaded).
void UninstallCrashHandlers() noexcept;

// For a fork()ed child: the crash count starts over.
void ResetCrashStateAfterFork() noexcept;

// The disposition cuflight found for `signal` when it installed its handler (tests).
bool PreviousCrashDisposition(int signal, struct sigaction* out) noexcept;

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CRASH_HANDLER_H_
