#include "crash_handler.h"

#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>

#include "cuflight/base/clock.h"

namespace cuflight::inject {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr size_t kSignalCount = sizeof(kSignals) / sizeof(kSignals[0]);

// Written before the handler is installed, read by it.
struct sigaction g_previous[kSignalCount];
bool g_installed[kSignalCount] = {};
// True while the previous disposition is the application's handler, to be called first; false
// when it is the default action (from the start, or since the application's handler gave the
// signal back to it).
std::atomic<bool> g_chain[kSignalCount] = {};
// The application's handler gave the signal back to the default action (reported as
// app_handler).
std::atomic<bool> g_app_gave_up[kSignalCount] = {};

std::atomic<bool> g_install_done{false};
std::atomic<CrashReporter> g_reporter{nullptr};
std::atomic<int64_t> g_wait_ns{0};
std::atomic<int> g_reports{0};    // crashes reported (or being reported) in this process
std::atomic<int> g_reporting{0};  // 1 while a thread is inside the reporter

void OnFatalSignal(int signal, siginfo_t* info, void* ucontext);

int IndexOf(int signal) {
  for (size_t i = 0; i < kSignalCount; ++i) {
    if (kSignals[i] == signal) return static_cast<int>(i);
  }
  return -1;
}

bool IsFunction(const struct sigaction& action) {
  if (action.sa_flags & SA_SIGINFO) return action.sa_sigaction != nullptr;
  return action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN;
}

void SleepBriefly() {
  timespec ts{0, 1000000};  // 1 ms
  nanosleep(&ts, nullptr);
}

uint64_t FaultAddress(int signal, const siginfo_t* info) {
  if (info == nullptr) return 0;
  if (signal == SIGSEGV || signal == SIGBUS || signal == SIGFPE || signal == SIGILL) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(info->si_addr));
  }
  return 0;
}

void Report(int signal, const siginfo_t* info, bool app_handler) {
  const CrashReporter reporter = g_reporter.load(std::memory_order_acquire);
  if (reporter == nullptr) return;
  if (g_reports.fetch_add(1, std::memory_order_acq_rel) >= kMaxCrashReports) return;
  const int64_t wait_ns = g_wait_ns.load(std::memory_order_relaxed);
  // One report at a time: a thread that crashes while another reports waits for that report
  // (which carries everything pending) and does not send its own.
  int idle = 0;
  if (!g_reporting.compare_exchange_strong(idle, 1, std::memory_order_acq_rel)) {
    const int64_t deadline = base::MonotonicNs() + wait_ns;
    while (g_reporting.load(std::memory_order_acquire) != 0 && base::MonotonicNs() < deadline) {
      SleepBriefly();
    }
    return;
  }
  CrashInfo crash;
  crash.signal = signal;
  crash.code = info != nullptr ? info->si_code : 0;
  crash.addr = FaultAddress(signal, info);
  crash.tid = static_cast<int32_t>(syscall(SYS_gettid));
  crash.app_handler = app_handler;
  reporter(crash, wait_ns);
  g_reporting.store(0, std::memory_order_release);
}

// Calls the application's handler as the kernel would have called it. A handler that longjmps
// or exits never comes back here, and nothing of cuflight's is left held when it does not.
void CallPrevious(int signal, siginfo_t* info, void* ucontext, const struct sigaction& previous) {
  if (previous.sa_flags & SA_RESETHAND) {
    // The kernel would have reset the disposition before calling the handler.
    struct sigaction reset{};
    reset.sa_handler = SIG_DFL;
    sigemptyset(&reset.sa_mask);
    sigaction(signal, &reset, nullptr);
  }
  // The mask the kernel would have set for that handler: its sa_mask, plus the signal itself
  // unless SA_NODEFER.
  sigset_t mask;
  sigset_t saved;
  sigprocmask(SIG_BLOCK, nullptr, &saved);
  mask = saved;
  for (int s = 1; s < NSIG; ++s) {
    if (sigismember(&previous.sa_mask, s) == 1) sigaddset(&mask, s);
  }
  if (previous.sa_flags & SA_NODEFER) {
    sigdelset(&mask, signal);
  } else {
    sigaddset(&mask, signal);
  }
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  if (previous.sa_flags & SA_SIGINFO) {
    previous.sa_sigaction(signal, info, ucontext);
  } else {
    previous.sa_handler(signal);
  }
  // Back to the mask of this handler: the signal stays blocked until it returns, so one the
  // application's handler raised again is delivered only then, under whatever disposition the
  // signal has by that time.
  sigprocmask(SIG_SETMASK, &saved, nullptr);
}

bool IsDefault(const struct sigaction& action) {
  return !(action.sa_flags & SA_SIGINFO) && action.sa_handler == SIG_DFL;
}

bool IsOurs(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) && action.sa_sigaction == &OnFatalSignal;
}

struct sigaction OurAction() {
  struct sigaction ours{};
  ours.sa_sigaction = &OnFatalSignal;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&ours.sa_mask);
  return ours;
}

// The application's handler returned. Decides whether the process is now going to end, without
// waiting for anything in the cases where it is not.
void AfterApplicationHandler(int signal, int index, const siginfo_t* info) {
  struct sigaction current{};
  if (sigaction(signal, nullptr, &current) != 0) return;
  if (signal == SIGABRT && info != nullptr && info->si_code <= 0 && info->si_pid == getpid() &&
      (IsOurs(current) || IsDefault(current))) {
    // Sent by this process, as abort() does: once the handler returned, abort() restores the
    // default action itself (out of cuflight's sight) and raises SIGABRT again; a handler that
    // restored the default and raised again ends the process the same way.
    Report(signal, info, /*app_handler=*/true);
    return;
  }
  if (IsDefault(current)) {
    // The handler gave the signal back to the default action (it restored SIG_DFL, or it had
    // SA_RESETHAND): the fault it did not fix happens again when this returns, or the signal it
    // raised again is delivered then, and the process ends. cuflight takes the signal back with
    // the default action as the previous disposition, so that it reports exactly then, and the
    // default action follows. A handler that did fix the fault sees no difference: the signal
    // does not come again, and when it does, cuflight reports and the default action (what the
    // application asked for) ends the process.
    g_app_gave_up[index].store(true, std::memory_order_relaxed);
    g_chain[index].store(false, std::memory_order_release);
    const struct sigaction ours = OurAction();
    struct sigaction replaced{};
    if (sigaction(signal, &ours, &replaced) == 0 && !IsDefault(replaced)) {
      sigaction(signal, &replaced, nullptr);  // another thread installed something meanwhile
    }
  }
}

void OnFatalSignal(int signal, siginfo_t* info, void* ucontext) {
  const int saved_errno = errno;
  const int index = IndexOf(signal);
  if (index < 0) return;
  if (g_chain[index].load(std::memory_order_acquire)) {
    // The application's handler first, at once: a fault it handles (a JVM's or a garbage
    // collector's) is neither reported nor slowed.
    CallPrevious(signal, info, ucontext, g_previous[index]);
    AfterApplicationHandler(signal, index, info);
    errno = saved_errno;
    return;
  }
  // The default action follows: the process ends. Report first.
  Report(signal, info, g_app_gave_up[index].load(std::memory_order_relaxed));
  struct sigaction fallback{};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  if (info == nullptr || info->si_code <= 0 || signal == SIGABRT) {
    // Sent by kill/raise/abort: send it again to this thread; it is blocked until this handler
    // returns, then the default action runs.
    syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), signal);
  }
  // A fault raised by the kernel: returning re-executes the faulting instruction, which faults
  // again under the default action with the same siginfo.
  errno = saved_errno;
}

}  // namespace

std::string_view FatalSignalName(int signal) noexcept {
  switch (signal) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    default:
      return "";
  }
}

bool InstallCrashHandlers(CrashReporter reporter, int64_t wait_ns) noexcept {
  g_wait_ns.store(wait_ns, std::memory_order_relaxed);
  g_reporter.store(reporter, std::memory_order_release);
  bool expected = false;
  if (!g_install_done.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    return true;
  }
  bool any = false;
  for (size_t i = 0; i < kSignalCount; ++i) {
    struct sigaction current{};
    if (sigaction(kSignals[i], nullptr, &current) != 0) continue;
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) continue;
    g_previous[i] = current;
    g_chain[i].store(IsFunction(current), std::memory_order_release);
    const struct sigaction ours = OurAction();
    // Another thread may have changed the disposition since the read above: keep what the
    // exchange returns as the previous one.
    struct sigaction replaced{};
    if (sigaction(kSignals[i], &ours, &replaced) != 0) continue;
    g_previous[i] = replaced;
    g_chain[i].store(IsFunction(replaced), std::memory_order_release);
    g_app_gave_up[i].store(false, std::memory_order_relaxed);
    g_installed[i] = true;
    any = true;
  }
  return any;
}

void UninstallCrashHandlers() noexcept {
  g_reporter.store(nullptr, std::memory_order_release);
  for (size_t i = 0; i < kSignalCount; ++i) {
    if (!g_installed[i]) continue;
    struct sigaction current{};
    if (sigaction(kSignals[i], nullptr, &current) != 0) continue;
    if (IsOurs(current)) {
      if (g_app_gave_up[i].load(std::memory_order_relaxed)) {
        struct sigaction fallback{};
        fallback.sa_handler = SIG_DFL;
        sigemptyset(&fallback.sa_mask);
        sigaction(kSignals[i], &fallback, nullptr);  // what the application's handler left
      } else {
        sigaction(kSignals[i], &g_previous[i], nullptr);
      }
    }
    g_installed[i] = false;
  }
  g_install_done.store(false, std::memory_order_release);
}

void ResetCrashStateAfterFork() noexcept {
  g_reports.store(0, std::memory_order_relaxed);
  g_reporting.store(0, std::memory_order_relaxed);
}

bool PreviousCrashDisposition(int signal, struct sigaction* out) noexcept {
  const int index = IndexOf(signal);
  if (index < 0 || !g_installed[index]) return false;
  *out = g_previous[index];
  return true;
}

}  // namespace cuflight::inject
