// An "application" for the injection tests: loads libcuflight_inject.so as the driver would
// (dlopen + InitializeInjection), then fires launch callbacks through the fake CUPTI and exits
// normally. Usage: fake_app <libcuflight_inject.so> <launches> [mode [ignored arguments...]]
//   "" (empty): exits normally (the extra arguments only make argv long)
//   fork:      after its launches, fork()s a child that fires as many launches itself and exits
//   forkexec:  after its launches, fork()s a child that only execs /bin/true
//   fork-storm [forks]: after its launches, starts 3 threads that keep launching (two) and
//              destroying and relaunching in the context (one, fake_cupti_churn), and meanwhile
//              fork()s `forks` (default 500) children one after another; each child fires the
//              launches itself and exits normally. A child not ended 10 s after its fork is
//              killed and counted hung. Prints "forks=N ok=K hung=H" and exits normally
//   fork-sleep [ms]: after its launches (and `ms` milliseconds, default 0), fork()s 2 children
//              that each fire the launches, print nothing (their stdout and stderr go to
//              /dev/null) and exit normally after 4 s; prints "children=P1,P2", waits 300 ms and
//              kills itself with SIGKILL
//   sigwait:   after its launches (so the injector's thread exists), blocks SIGUSR1 in its own
//              thread, sends SIGUSR1 to the process, starts a thread that takes it with sigwait(),
//              prints "sigwait=<signal>" when that thread got it and exits normally (the POSIX
//              way to take signals in one thread of the application)
//   exec:      after its launches, waits 300 ms (its events reach the collector) and exec()s
//              itself as "fake_app <so> <launches>": the same pid, start time and exe, a new
//              image that loads the injector again and exits normally
//   segv, bus, fpe, ill, abrt, kill:
//              after its launches, dies by that signal the way real programs do (a null store,
//              a read past the end of a truncated mapping, an integer division by zero, an
//              undefined instruction, abort(), raise(SIGKILL))
//   sticky-kill: after its launches, a cuCtxSynchronize fails with CUDA_ERROR_ILLEGAL_ADDRESS
//              (a sticky error), then the process kills itself with SIGKILL
//   sticky-exit: the same failure, then exit(3), as a CUDA program that reports the fault does
//   calls [cbid:code ...]: after its launches, prints "enabled=<id>,<id>,..." (the driver
//              callback ids the fake CUPTI has enabled, ascending), then for each argument makes
//              the driver call `cbid` return `code` through the fake CUPTI (fake_cupti_call) and
//              prints "called <cbid>=1" when it was called back, "=0" when not; exits normally
//   sync-hang [ms]: after its launches, waits `ms` (default 1500) milliseconds inside a
//              cuStreamSynchronize of their stream (fake_cupti_synchronize) and exits normally: a
//              program whose synchronize waits for a kernel that does not end meanwhile
//   sleep [ms]: after its launches, sleeps `ms` (default 1500) milliseconds and exits normally: a
//              program waiting on kernels that do not finish meanwhile (with FAKE_CUPTI_TIMING,
//              their records come only with the exit's forced flush)
//   stream-kill: fires one launch every ~100 us for 300 ms, prints "fired=N kill_ns=T" (T the
//              CLOCK_REALTIME of the kill) and kills itself with SIGKILL
//   handler-before-segv: installs its own SIGSEGV handler (which prints "app handler" and
//              _exits 42) before the injector loads, then faults
//   handler-after-segv: the same, with the handler installed after the injector loaded (it
//              replaces the injector's; exit 43)
// Application SIGSEGV handlers installed before the injector loads, as runtimes install theirs:
//   handler-resume-segv: an SA_SIGINFO handler that fixes the fault and resumes (as a JVM's or a
//              garbage collector's does with a protected page): 20 stores to a PROT_NONE page,
//              each unprotected by the handler; prints "faults=N fault_ns=T" (T the time the 20
//              stores took) and exits 0
//   handler-longjmp-segv: a plain handler that siglongjmps out of 20 null stores; prints the
//              same and exits 0
//   handler-giveup-segv: an SA_SIGINFO handler that prints "app handler", restores SIG_DFL and
//              returns (the store faults again and ends the process)
//   handler-resethand-segv: a plain handler with SA_RESETHAND that prints and returns
//   handler-reraise-segv: a handler that restores SIG_DFL and raise()s SIGSEGV again (blocked
//              until it returns), as crash reporters do
//   handler-abort-segv: a handler that prints and calls abort()
//   handler-returns-abrt: a SIGABRT handler that prints and returns, then abort() (which then
//              restores the default action itself and raises SIGABRT again)
//   phases <ms> <grid>...: after its launches, for each grid in turn, launches kernels of that
//              grid (one configuration each, fake_cupti_launch_grid) one every ~1 ms for `ms`
//              milliseconds, and exits normally: a program whose kernel configurations change
//              over time (the sampled timing policy's new-configuration windows)
//   shapes <grid>:<block>:<dyn smem>...: after its launches, for each shape in turn, fires as
//              many launches of that grid, block and dynamic shared memory
//              (fake_cupti_launch_shape) and exits normally: a program with several launch
//              configurations of one function. Prints "shapes=N" (the launches fired)
//   late <delay ms> <every ms> <for ms> [sync|sleep <ms>]: after its launches, waits `delay`
//              milliseconds, then fires one launch every `every` ms for `for` ms (fake_cupti_launch:
//              the NULL stream), then waits `ms` inside a cuStreamSynchronize of that stream
//              (sync, fake_cupti_synchronize) or asleep (sleep), and exits normally: launches made
//              when the sampled timing policy's start window has closed (or, with a long window,
//              inside it) on a stream that makes no progress. Prints "late=N" (the launches fired)
//   yield <trigger|-> [launches after]: taking turns with another CUPTI client (docs/profilers.md).
//              After its launches: creates the file `trigger` (unless "-": then the test asks
//              through the collector), waits (at most 20 s) until the fake CUPTI has no
//              subscriber (the library handed it over) and prints "released=1"; then, as torch.
//              profiler would, subscribes itself from a thread of its own ("other_subscribe=R",
//              R the CUptiResult) and enables the launch callback, fires 7 launches (its callback
//              counts them: "other_saw=7"), removes `trigger`, waits until a subscription was
//              refused for it (at most 20 s: the library tried to take CUPTI back too early;
//              "refused=1"), unsubscribes, waits until the library subscribed again and enabled
//              its launch callback (at most 30 s; "retaken=1", "off_ns=T" the time from seeing it
//              hand over to seeing it back), fires `launches after` (default 5) launches and exits
//              normally. Also prints "app_thread_subscribe_calls=N": subscriptions and
//              unsubscriptions made on this (the launching) thread.
// Every mode prints "launch_ns=T", the time its launches took, and "launch_cpu_ns=C", the CPU
// time the launching thread spent in them (CLOCK_THREAD_CPUTIME_ID); the sticky modes print
// "fail_ns=T", the time the failing call's callback took.
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <algorithm>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

int g_app_exit = 0;

void AppHandler(int) {
  static const char kText[] = "app handler\n";
  (void)!write(STDOUT_FILENO, kText, sizeof(kText) - 1);
  _exit(g_app_exit);
}

void InstallAppHandler(int exit_code) {
  g_app_exit = exit_code;
  struct sigaction action {};
  action.sa_handler = &AppHandler;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);
}

long long MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

long long ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void Say(const char* text) { (void)!write(STDOUT_FILENO, text, std::strlen(text)); }

char* g_page = nullptr;
sigjmp_buf g_jump;

void ResumeHandler(int, siginfo_t* info, void*) {
  char* addr = static_cast<char*>(info->si_addr);
  if (addr < g_page || addr >= g_page + 4096) _exit(93);  // not the fault this app expects
  mprotect(g_page, 4096, PROT_READ | PROT_WRITE);
}
void LongjmpHandler(int) { siglongjmp(g_jump, 1); }
void GiveUpHandler(int, siginfo_t*, void*) {
  Say("app handler\n");
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(SIGSEGV, &fallback, nullptr);
}
void ResetHandHandler(int) { Say("app handler\n"); }
void ReraiseHandler(int signal) {
  Say("app handler\n");
  ::signal(signal, SIG_DFL);
  raise(signal);
}
void AbortHandler(int) {
  Say("app handler\n");
  std::abort();
}

// Installs the handler of a handler-*-segv mode; false for other modes.
bool InstallRuntimeHandler(std::string_view mode) {
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  if (mode == "handler-resume-segv") {
    action.sa_sigaction = &ResumeHandler;
    action.sa_flags = SA_SIGINFO;
  } else if (mode == "handler-longjmp-segv") {
    action.sa_handler = &LongjmpHandler;
  } else if (mode == "handler-giveup-segv") {
    action.sa_sigaction = &GiveUpHandler;
    action.sa_flags = SA_SIGINFO;
  } else if (mode == "handler-resethand-segv") {
    action.sa_handler = &ResetHandHandler;
    action.sa_flags = SA_RESETHAND;
  } else if (mode == "handler-reraise-segv") {
    action.sa_handler = &ReraiseHandler;
  } else if (mode == "handler-abort-segv") {
    action.sa_handler = &AbortHandler;
  } else if (mode == "handler-returns-abrt") {
    action.sa_handler = &ResetHandHandler;  // prints and returns
    sigaction(SIGABRT, &action, nullptr);
    return true;
  } else {
    return false;
  }
  sigaction(SIGSEGV, &action, nullptr);
  return true;
}

[[gnu::noinline]] void NullStore() {
  volatile int* volatile p = nullptr;
  *p = 1;
}

void Die(std::string_view how) {
  std::fflush(stdout);
  if (how == "segv") {
    NullStore();
  } else if (how == "bus") {
    char path[] = "/tmp/fake_app_busXXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, 4096) != 0) _exit(90);
    void* map = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
    unlink(path);
    if (map == MAP_FAILED || ftruncate(fd, 0) != 0) _exit(91);
    volatile const char* byte = static_cast<const char*>(map);
    std::printf("%d\n", *byte);  // past the end of the file now
  } else if (how == "fpe") {
    volatile int zero = 0;
    volatile int one = 1;
    std::printf("%d\n", one / zero);
  } else if (how == "ill") {
    __builtin_trap();
  } else if (how == "abrt") {
    std::abort();
  } else if (how == "kill") {
    raise(SIGKILL);
  }
  _exit(92);  // not reached
}

// The "other tool" of the yield mode: counts the launches it is called back for, at their exit.
std::atomic<int> g_other_saw{0};
void CUPTIAPI OtherCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  if (static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_EXIT) ++g_other_saw;
}

bool WaitFor(const std::function<bool()>& done, int ms) {
  for (int waited = 0; waited < ms; ++waited) {
    if (done()) return true;
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  return done();
}

int YieldMode(void* cupti, const char* trigger, int launches_after) {
  using IntFn = int (*)();
  using Launch = int (*)(int);
  using Subscribe = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
  using Unsubscribe = CUptiResult (*)(CUpti_SubscriberHandle);
  using EnableCallback =
      CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
  using Enabled = int (*)(int);
  auto subscribed = reinterpret_cast<IntFn>(dlsym(cupti, "fake_cupti_subscribed"));
  auto refused = reinterpret_cast<IntFn>(dlsym(cupti, "fake_cupti_refused_subscribes"));
  auto app_calls = reinterpret_cast<IntFn>(dlsym(cupti, "fake_cupti_app_thread_subscribe_calls"));
  auto launch = reinterpret_cast<Launch>(dlsym(cupti, "fake_cupti_launch"));
  auto subscribe = reinterpret_cast<Subscribe>(dlsym(cupti, "cuptiSubscribe"));
  auto unsubscribe = reinterpret_cast<Unsubscribe>(dlsym(cupti, "cuptiUnsubscribe"));
  auto enable = reinterpret_cast<EnableCallback>(dlsym(cupti, "cuptiEnableCallback"));
  auto enabled = reinterpret_cast<Enabled>(dlsym(cupti, "fake_cupti_enabled"));
  if (subscribed == nullptr || refused == nullptr || app_calls == nullptr || launch == nullptr ||
      subscribe == nullptr || unsubscribe == nullptr || enable == nullptr || enabled == nullptr) {
    return 9;
  }
  const std::string trigger_path = trigger;
  if (trigger_path != "-") {
    const int fd = open(trigger, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return 10;
    close(fd);
  }
  const bool released = WaitFor([&] { return subscribed() == 0; }, 20000);
  const long long released_at = MonotonicNs();
  std::fprintf(stdout, "released=%d\n", released ? 1 : 0);
  std::fflush(stdout);
  if (!released) return 11;
  CUpti_SubscriberHandle other = nullptr;
  CUptiResult other_result = CUPTI_ERROR_UNKNOWN;
  std::thread([&] {
    other_result = subscribe(&other, &OtherCallback, nullptr);
    if (other_result == CUPTI_SUCCESS) {
      enable(1, other, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
    }
  }).join();
  std::fprintf(stdout, "other_subscribe=%d\n", static_cast<int>(other_result));
  if (other_result != CUPTI_SUCCESS) return 12;
  launch(7);
  std::fprintf(stdout, "other_saw=%d\n", g_other_saw.load());
  if (trigger_path != "-") unlink(trigger);
  const int refused_before = refused();
  const bool was_refused = WaitFor([&] { return refused() > refused_before; }, 20000);
  std::fprintf(stdout, "refused=%d\n", was_refused ? 1 : 0);
  std::thread([&] { unsubscribe(other); }).join();
  const bool retaken = WaitFor(
      [&] { return subscribed() == 1 && enabled(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) == 1; },
      30000);
  std::fprintf(stdout, "retaken=%d\noff_ns=%lld\n", retaken ? 1 : 0, MonotonicNs() - released_at);
  launch(launches_after);
  std::fprintf(stdout, "app_thread_subscribe_calls=%d\n", app_calls());
  std::fflush(stdout);
  return retaken ? 0 : 13;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string_view mode = argc >= 4 ? argv[3] : "";
  if (mode == "handler-before-segv") InstallAppHandler(42);
  const bool runtime_handler = InstallRuntimeHandler(mode);
  void* inject = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (inject == nullptr) {
    std::fprintf(stdout, "dlopen failed: %s\n", dlerror());
    return 3;
  }
  using Init = int (*)();
  auto init = reinterpret_cast<Init>(dlsym(inject, "InitializeInjection"));
  if (init == nullptr) return 4;
  std::fprintf(stdout, "init=%d\n", init());
  if (mode == "handler-after-segv") InstallAppHandler(43);
  const char* cupti_path = std::getenv("CUFLIGHT_CUPTI_PATH");
  void* cupti = cupti_path != nullptr ? dlopen(cupti_path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  int fired = 0;
  if (cupti != nullptr) {
    using Launch = int (*)(int);
    auto launch = reinterpret_cast<Launch>(dlsym(cupti, "fake_cupti_launch"));
    const long long start = MonotonicNs();
    const long long start_cpu = ThreadCpuNs();
    if (launch != nullptr) fired = launch(std::atoi(argv[2]));
    const long long cpu = ThreadCpuNs() - start_cpu;
    std::fprintf(stdout, "launch_ns=%lld\n", MonotonicNs() - start);
    std::fprintf(stdout, "launch_cpu_ns=%lld\n", cpu);
  }
  std::fprintf(stdout, "fired=%d\n", fired);
  std::fflush(stdout);
  if (mode == "fork" || mode == "forkexec") {
    const pid_t child = fork();
    if (child == 0) {
      if (mode == "forkexec") {
        execl("/bin/true", "true", static_cast<char*>(nullptr));
        _exit(127);
      }
      using Launch = int (*)(int);
      auto launch = reinterpret_cast<Launch>(dlsym(cupti, "fake_cupti_launch"));
      std::fprintf(stdout, "child=%d fired=%d\n", static_cast<int>(getpid()),
                   launch != nullptr ? launch(std::atoi(argv[2])) : 0);
      std::fflush(stdout);
      exit(0);  // runs the child's atexit flush
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 5;
  } else if (mode == "fork-storm") {
    using Launch = int (*)(int);
    auto launch = reinterpret_cast<Launch>(dlsym(cupti, "fake_cupti_launch"));
    auto churn = reinterpret_cast<Launch>(dlsym(cupti, "fake_cupti_churn"));
    if (launch == nullptr || churn == nullptr) return 6;
    const int forks = argc >= 5 ? std::atoi(argv[4]) : 500;
    const int launches = std::atoi(argv[2]);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
      threads.emplace_back([&, i] {
        while (!stop.load()) (i == 2 ? churn : launch)(1);
      });
    }
    int ok = 0;
    int hung = 0;
    for (int i = 0; i < forks; ++i) {
      const pid_t child = fork();
      if (child < 0) break;
      if (child == 0) {
        launch(launches);
        exit(0);  // the child's atexit flush
      }
      const long long deadline = MonotonicNs() + 10'000'000'000LL;
      int status = 0;
      pid_t done = 0;
      while ((done = waitpid(child, &status, WNOHANG)) == 0 && MonotonicNs() < deadline) {
        timespec pause{0, 200000};
        nanosleep(&pause, nullptr);
      }
      if (done == 0) {
        ++hung;
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        ++ok;
      }
    }
    stop.store(true);
    for (std::thread& t : threads) t.join();
    std::fprintf(stdout, "forks=%d ok=%d hung=%d\n", forks, ok, hung);
  } else if (mode == "fork-sleep") {
    using Launch = int (*)(int);
    auto launch = reinterpret_cast<Launch>(dlsym(cupti, "fake_cupti_launch"));
    if (launch == nullptr) return 6;
    const long before_ms = argc >= 5 ? std::atol(argv[4]) : 0;
    timespec before{before_ms / 1000, (before_ms % 1000) * 1000000};
    nanosleep(&before, nullptr);
    pid_t children[2] = {};
    for (pid_t& child : children) {
      child = fork();
      if (child == 0) {
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        launch(std::atoi(argv[2]));
        timespec pause{4, 0};
        nanosleep(&pause, nullptr);
        exit(0);
      }
    }
    char line[64];
    const int n = std::snprintf(line, sizeof(line), "children=%d,%d\n",
                                static_cast<int>(children[0]), static_cast<int>(children[1]));
    (void)!write(STDOUT_FILENO, line, static_cast<size_t>(n));
    timespec pause{0, 300000000};
    nanosleep(&pause, nullptr);
    raise(SIGKILL);
  } else if (mode == "sigwait") {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
    // Sent before the waiting thread exists: no thread of the application takes it yet, so it
    // stays pending for sigwait() unless another thread takes it.
    kill(getpid(), SIGUSR1);
    int got = 0;
    std::thread waiter([&usr1, &got] { sigwait(&usr1, &got); });  // inherits the blocked mask
    waiter.join();
    std::fprintf(stdout, "sigwait=%d\n", got);
  } else if (mode == "exec") {
    timespec pause{0, 300000000};
    nanosleep(&pause, nullptr);
    execl("/proc/self/exe", argv[0], argv[1], argv[2], static_cast<char*>(nullptr));
    return 7;
  } else if (mode == "stream-kill") {
    using Launch = int (*)(int);
    auto launch = reinterpret_cast<Launch>(dlsym(cupti, "fake_cupti_launch"));
    if (launch == nullptr) return 6;
    timespec start{};
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    long streamed = 0;
    do {
      streamed += launch(1);
      timespec pause{0, 100000};
      nanosleep(&pause, nullptr);
      clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) <
             300000000L);
    timespec wall{};
    clock_gettime(CLOCK_REALTIME, &wall);
    char line[128];
    const int n = std::snprintf(line, sizeof(line), "streamed=%ld kill_ns=%lld\n", streamed,
                                static_cast<long long>(wall.tv_sec) * 1000000000LL + wall.tv_nsec);
    (void)!write(STDOUT_FILENO, line, static_cast<size_t>(n));
    raise(SIGKILL);
  } else if (mode == "sticky-kill" || mode == "sticky-exit") {
    using Fail = int (*)(int);
    auto fail = reinterpret_cast<Fail>(dlsym(cupti, "fake_cupti_fail"));
    const long long start = MonotonicNs();
    const int failed = fail != nullptr ? fail(700) : 0;
    std::fprintf(stdout, "failed=%d fail_ns=%lld\n", failed, MonotonicNs() - start);
    if (mode == "sticky-exit") {
      std::fflush(stdout);
      exit(3);  // runs the injector's atexit flush
    }
    Die("kill");
  } else if (mode == "calls") {
    using Enabled = int (*)(int);
    using Call = int (*)(int, int);
    auto enabled = reinterpret_cast<Enabled>(dlsym(cupti, "fake_cupti_enabled"));
    auto call = reinterpret_cast<Call>(dlsym(cupti, "fake_cupti_call"));
    if (enabled == nullptr || call == nullptr) return 6;
    std::string ids;
    for (int cbid = 1; cbid < 1024; ++cbid) {
      if (enabled(cbid) == 0) continue;
      if (!ids.empty()) ids += ',';
      ids += std::to_string(cbid);
    }
    std::fprintf(stdout, "enabled=%s\n", ids.c_str());
    for (int i = 4; i < argc; ++i) {
      int cbid = 0;
      int code = 0;
      if (std::sscanf(argv[i], "%d:%d", &cbid, &code) != 2) return 8;
      std::fprintf(stdout, "called %d=%d\n", cbid, call(cbid, code));
    }
  } else if (mode == "phases" && cupti != nullptr) {
    using LaunchGrid = int (*)(int, unsigned);
    auto launch_grid = reinterpret_cast<LaunchGrid>(dlsym(cupti, "fake_cupti_launch_grid"));
    const long ms = argc >= 5 ? std::atol(argv[4]) : 100;
    for (int i = 5; launch_grid != nullptr && i < argc; ++i) {
      const unsigned grid = static_cast<unsigned>(std::strtoul(argv[i], nullptr, 10));
      const long long until = MonotonicNs() + ms * 1000000LL;
      while (MonotonicNs() < until) {
        launch_grid(1, grid);
        timespec pause{0, 1000000};
        nanosleep(&pause, nullptr);
      }
    }
  } else if (mode == "shapes" && cupti != nullptr) {
    using LaunchShape = int (*)(int, unsigned, unsigned, unsigned);
    auto launch_shape = reinterpret_cast<LaunchShape>(dlsym(cupti, "fake_cupti_launch_shape"));
    if (launch_shape == nullptr) return 6;
    int shapes = 0;
    for (int i = 4; i < argc; ++i) {
      unsigned grid = 0, block = 0, smem = 0;
      if (std::sscanf(argv[i], "%u:%u:%u", &grid, &block, &smem) != 3) return 8;
      shapes += launch_shape(std::atoi(argv[2]), grid, block, smem);
    }
    std::fprintf(stdout, "shapes=%d\n", shapes);
  } else if (mode == "late" && cupti != nullptr) {
    using Launch = int (*)(int);
    using Sync = int (*)(int);
    auto launch = reinterpret_cast<Launch>(dlsym(cupti, "fake_cupti_launch"));
    auto sync = reinterpret_cast<Sync>(dlsym(cupti, "fake_cupti_synchronize"));
    if (launch == nullptr || sync == nullptr || argc < 7) return 6;
    const auto sleep_ms = [](long ms) {
      timespec pause{ms / 1000, (ms % 1000) * 1'000'000L};
      while (nanosleep(&pause, &pause) != 0) {
      }
    };
    sleep_ms(std::atol(argv[4]));
    const long every = std::max(1L, std::atol(argv[5]));
    const long long until = MonotonicNs() + std::atol(argv[6]) * 1000000LL;
    int late = 0;
    while (MonotonicNs() < until) {
      late += launch(1);
      sleep_ms(every);
    }
    std::fprintf(stdout, "late=%d\n", late);
    const std::string then = argc >= 8 ? argv[7] : "";
    const long then_ms = argc >= 9 ? std::atol(argv[8]) : 0;
    if (then == "sync") {
      std::fprintf(stdout, "synchronized=%d\n", sync(static_cast<int>(then_ms)));
    } else if (then == "sleep") {
      sleep_ms(then_ms);
    }
  } else if (mode == "sync-hang") {
    using Sync = int (*)(int);
    auto sync = reinterpret_cast<Sync>(dlsym(cupti, "fake_cupti_synchronize"));
    const int ms = argc >= 5 ? std::atoi(argv[4]) : 1500;
    std::fprintf(stdout, "synchronized=%d\n", sync != nullptr ? sync(ms) : 0);
  } else if (mode == "yield") {
    return YieldMode(cupti, argc >= 5 ? argv[4] : "-", argc >= 6 ? std::atoi(argv[5]) : 5);
  } else if (mode == "sleep") {
    const long ms = argc >= 5 ? std::atol(argv[4]) : 1500;
    timespec pause{ms / 1000, (ms % 1000) * 1'000'000L};
    while (nanosleep(&pause, &pause) != 0) {
    }
  } else if (mode == "handler-before-segv" || mode == "handler-after-segv") {
    Die("segv");
  } else if (mode == "handler-resume-segv" || mode == "handler-longjmp-segv") {
    g_page = static_cast<char*>(
        mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (g_page == MAP_FAILED) return 7;
    int faults = 0;
    const long long start = MonotonicNs();
    for (int i = 0; i < 20; ++i) {
      if (mode == "handler-resume-segv") {
        mprotect(g_page, 4096, PROT_NONE);
        *reinterpret_cast<volatile char*>(g_page + i) = 1;  // faults; the handler unprotects
        faults += g_page[i] == 1;
      } else if (sigsetjmp(g_jump, 1) == 0) {
        NullStore();
      } else {
        ++faults;
      }
    }
    std::fprintf(stdout, "faults=%d fault_ns=%lld\n", faults, MonotonicNs() - start);
  } else if (mode == "handler-returns-abrt") {
    Die("abrt");
  } else if (runtime_handler) {
    Die("segv");
  } else if (!mode.empty()) {
    Die(mode);
  }
  return 0;  // exit() runs the injector's atexit flush
}
