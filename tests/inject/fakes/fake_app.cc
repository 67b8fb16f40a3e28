// An "application" for the injection tests: loads libcuflight_inject.so as the driver would
// (dlopen + InitializeInjection), then fires launch callbacks through the fake CUPTI and exits
// normally. Usage: fake_app <libcuflight_inject.so> <launches>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
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
  return 0;  // exit() runs the injector's atexit flush
}
