// An "application" for the injection tests: loads libcuflight_inject.so as the driver would
// (dlopen + InitializeInjection), then fires launch callbacks through the fake CUPTI and exits
// normally. Usage: fake_app <libcuflight_inject.so> <launches> [fork|forkexec]
//   fork:     after its launches, fork()s a child that fires as many launches itself and exits
//   forkexec: after its launches, fork()s a child that only execs /bin/true
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 2;
  const char* mode = argc == 4 ? argv[3] : "";
  void* inject = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (inject == nullptr) {
    std::fprintf(stdout, "dlopen failed: %s\n", dlerror());
    return 3;
  }
  using Init = int (*)();
  auto init = reinterpret_cast<Init>(dlsym(inject, "InitializeInjection"));
  if (init == nullptr) return 4;
  std::fprintf(stdout, "init=%d\n", init());
  const char* cupti_path = std::getenv("CUFLIGHT_CUPTI_PATH");
  void* cupti = cupti_path != nullptr ? dlopen(cupti_path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  int fired = 0;
  if (cupti != nullptr) {
    using Launch = int (*)(int);
    auto launch = reinterpret_cast<Launch>(dlsym(cupti, "fake_cupti_launch"));
    if (launch != nullptr) fired = launch(std::atoi(argv[2]));
  }
  std::fprintf(stdout, "fired=%d\n", fired);
  std::fflush(stdout);
  if (std::strcmp(mode, "fork") == 0 || std::strcmp(mode, "forkexec") == 0) {
    const pid_t child = fork();
    if (child == 0) {
      if (std::strcmp(mode, "forkexec") == 0) {
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
  }
  return 0;  // exit() runs the injector's atexit flush
}
