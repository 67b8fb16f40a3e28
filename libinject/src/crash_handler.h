// Fatal signals in the application: SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT.
//
// The handler is async-signal-safe: it touches only atomics and plain memory, and calls only
// sigaction, sigprocmask, clock_gettime, nanosleep, getpid and tgkill. A report asks the sender
// thread, through the function given to InstallCrashHandlers, to send what is pending and a
// process_crash event, and waits for that at most `wait`. It reports only a signal after which
// the process ends; the signal then takes the course it would have taken without cuflight.
//
// What cuflight found when it installed its handler decides:
//   - the default disposition: cuflight reports, restores the default and lets the signal happen
//     again under it (a fault the kernel raised re-executes the faulting instruction; a signal
//     sent by kill, raise or abort is raised again for this thread), so the process terminates
//     and dumps core exactly as before;
//   - the application's own handler (a function): that handler runs FIRST, at once, as the kernel
//     would have called it (its siginfo, its context, its sa_mask, SA_NODEFER and SA_RESETHAND
//     honoured, SA_SIGINFO or not). Nothing is reported and nothing waits before it. When it
//     returns, cuflight reads the disposition (one sigaction call) and:
//       * SIGABRT that this process sent itself (si_code <= 0, si_pid its own pid, as abort()
//         does), and the disposition is cuflight's or the default: reported now, with
//         app_handler = true, because abort() restores the default action itself and raises
//         again once the handler returns (a raise(SIGABRT) that the application meant to
//         survive is reported too: the one report that may not be followed by the end);
//       * it is still cuflight's handler: the handler dealt with the signal (a JVM, Mono or a
//         garbage collector fixed the fault and resumes). Nothing is reported;
//       * it is the default (the handler restored SIG_DFL, or had SA_RESETHAND): the handler gave
//         up. cuflight takes the signal back with the default as the previous disposition and
//         returns: a fault the handler did not fix happens again, and a signal it raised again
//         is delivered (it stays blocked until cuflight's handler returns); either way cuflight
//         is called again, reports with app_handler = true, and the default action ends the
//         process. A handler that did fix the fault is not reported; the next such signal is
//         (the application left the default action in place);
//       * anything else (the handler installed another handler): left alone, not reported.
//     A handler that longjmps out, or ends the process itself (_exit, exit, kill), never returns
//     to cuflight: nothing is reported (exit() still sends process_end; otherwise the collector
//     shows process_lost). A handler that calls abort() is reported as the SIGABRT it raises. A
//     handler with SA_NODEFER that restores SIG_DFL and raises again dies inside the handler,
//     unreported. A handler that returns to a fault it did not fix, and leaves cuflight in place,
//     faults forever as without cuflight, unreported;
//   - a signal the application ignores (SIG_IGN when cuflight loads) gets no handler at all.
// A handler the application installs after cuflight's simply replaces it: cuflight then sees
// nothing of that signal. One that saves cuflight's as its previous and chains to it works too
// (cuflight then acts on what it found, as above).
//
// Only the first few crashes of a process are reported (kMaxCrashReports). A crash on a thread
// that is inside the reporting (the sender thread itself) is not reported.
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
  // The application's own handler ran first and gave the signal back to the default action (or
  // returned from a SIGABRT that abort() sent): the process ends next.
  bool app_handler = false;
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
