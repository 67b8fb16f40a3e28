// For a program built to the injected library's glibc floor (fake_app_floor, for
// old_userland_test.cc): the start-up call its crt1 makes. libinject/src/glibc_baseline.cc pins
// what the library calls; a program also calls __libc_start_main, which glibc 2.34 re-versioned
// when it moved running the program's constructors from the program's own start files
// (__libc_csu_init, passed as `init`) into libc: the 2.34 start files pass no `init`. The 2.2.5
// version, which every glibc has, is given an `init` that does what __libc_csu_init did for a
// dynamically linked program (glibc 2.31 csu/elf-init.c: _init, then the init array; the dynamic
// loader runs the preinit array itself). glibc 2.34 and later call a given `init` as 2.31 did
// (csu/libc-start.c: "a legacy program which supports ELF constructors"), so the program starts
// alike under both.
#include <features.h>  // __GLIBC__

#if defined(__x86_64__) && defined(__GLIBC__)

extern "C" {
using Initializer = void (*)(int, char**, char**);
extern Initializer __init_array_start[] __attribute__((visibility("hidden")));
extern Initializer __init_array_end[] __attribute__((visibility("hidden")));
void _init(void);

using Main = int (*)(int, char**, char**);
int cuflight_libc_start_main(Main main, int argc, char** argv, Initializer init, void (*fini)(),
                             void (*rtld_fini)(), void* stack_end);
}
__asm__(".symver cuflight_libc_start_main, __libc_start_main@GLIBC_2.2.5");

namespace {
void RunInitializers(int argc, char** argv, char** envp) {
  _init();
  for (Initializer* f = __init_array_start; f < __init_array_end; ++f) (*f)(argc, argv, envp);
}
}  // namespace

extern "C" __attribute__((visibility("hidden"))) int __libc_start_main(
    Main main, int argc, char** argv, Initializer, void (*)(), void (*rtld_fini)(),
    void* stack_end) {
  return cuflight_libc_start_main(main, argc, argv, RunInitializers, nullptr, rtld_fini,
                                  stack_end);
}

#endif  // __x86_64__ && __GLIBC__
