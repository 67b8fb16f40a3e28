#include "app_process.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string_view>

namespace cuflight::cli {
namespace {

// How long one sigtimedwait sleeps before the child is checked again. The SIGCHLD in the wait set
// normally wakes it first; the timeout only bounds a missed wake-up (a SIGCHLD of another child
// coalesced with ours).
constexpr std::chrono::milliseconds kWaitSlice{100};

timespec ToTimespec(std::chrono::nanoseconds d) {
  if (d.count() < 0) d = std::chrono::nanoseconds(0);
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(d.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(d.count() % 1'000'000'000);
  return ts;
}

bool StopsWaiting(int signo) {
  return signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT;
}

std::string_view NameOf(std::string_view assignment) {
  return assignment.substr(0, assignment.find('='));
}

}  // namespace

SignalForwarder::SignalForwarder() {
  sigemptyset(&waited_);
  for (const int signo : kForwardedSignals) sigaddset(&waited_, signo);
  sigaddset(&waited_, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &waited_, &original_mask_);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGCHLD, &dfl, &original_chld_);
}

SignalForwarder::~SignalForwarder() {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  const timespec zero{};
  while (sigtimedwait(&chld, nullptr, &zero) == SIGCHLD) {
  }
  sigaction(SIGCHLD, &original_chld_, nullptr);
  pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
}

int SignalForwarder::WaitForChild(pid_t pid, int* term_signal) {
  if (term_signal != nullptr) *term_signal = 0;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) {
        if (term_signal != nullptr) *term_signal = WTERMSIG(status);
        return 128 + WTERMSIG(status);
      }
      continue;  // stopped or continued: not an end
    }
    if (done < 0 && errno != EINTR) return -1;
    siginfo_t info{};
    const timespec slice = ToTimespec(kWaitSlice);
    const int signo = sigtimedwait(&waited_, &info, &slice);
    if (signo <= 0 || signo == SIGCHLD) continue;
    if (info.si_code == SI_KERNEL) continue;  // the terminal already signalled the whole group
    if ((info.si_code == SI_USER || info.si_code == SI_QUEUE) && info.si_pid == pid) continue;
    if (kill(pid, signo) == 0) ++forwarded_;
  }
}

bool SignalForwarder::Pause(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) return true;
    const timespec slice = ToTimespec(left);
    const int signo = sigtimedwait(&waited_, nullptr, &slice);
    if (signo > 0 && StopsWaiting(signo)) return false;
    if (signo < 0 && errno == EAGAIN) return true;
  }
}

pid_t SpawnApp(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               const sigset_t& mask, SpawnError* error) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), nullptr, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc == 0) return pid;

  error->error = rc;
  const bool searched = argv[0].find('/') == std::string::npos;
  error->exit_code = rc == ENOENT || rc == ENOTDIR ? 127 : 126;
  error->line = argv[0] + ": " +
                (rc == ENOENT && searched ? std::string("command not found") : std::strerror(rc));
  return -1;
}

std::vector<std::string> MergeEnvironment(char* const* environment,
                                          const std::vector<std::string>& replace) {
  std::vector<std::string> out;
  for (char* const* e = environment; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    bool replaced = false;
    for (const std::string& r : replace) {
      if (NameOf(r) == NameOf(entry)) {
        replaced = true;
        break;
      }
    }
    if (!replaced) out.emplace_back(entry);
  }
  out.insert(out.end(), replace.begin(), replace.end());
  return out;
}

}  // namespace cuflight::cli
