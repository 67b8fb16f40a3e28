// The oldest glibc the injected library loads with: 2.28 (RHEL 8; Ubuntu 20.04 has 2.31, 22.04
// 2.35). The library is built against the build machine's glibc (2.36 on Debian 12), whose
// linker would bind every call to the newest version of each symbol and so make the library
// refuse to load ("version `GLIBC_2.34' not found") in most production containers: the driver
// then records nothing, silently. This file holds, in one place, what binds it to 2.28 instead.
//
// Design notes
// 1. Pinned, not rewritten. A function whose older version the build's libc still exports
//    (glibc keeps every version it ever exported) is bound to that version: a hidden function of
//    ours with the symbol's name tail-jumps to `name@GLIBC_2.2.5`. Every reference in the
//    library, ours and those of the static libstdc++ and libgcc alike, binds to the hidden
//    function, so the pin holds for code we did not compile. A tail jump keeps the caller's
//    return address, which dlopen and dlsym read to find the calling object.
// 2. What glibc 2.34 moved into libc (pthread_create, dlopen, ...) lived in libpthread.so.0 and
//    libdl.so.2 before; the library names both as needed (libinject/src/CMakeLists.txt), so an
//    older loader finds the 2.2.5 versions there. Later glibcs keep both files as empty stubs.
// 3. Where no older version exists, a small definition of our own stands in: stat and its
//    kin call the 2.2.5 `__xstat` family they replaced in 2.33; `__libc_single_threaded` (2.32)
//    is a constant 0, "maybe multi-threaded", so libstdc++ always uses atomic reference counts;
//    `arc4random` (2.36; reached only through std::random_device, which the library does not
//    use) reads getrandom(2); `strerrorname_np` (2.32) is Linux's errno names; and
//    `_dl_find_object` (2.35), which GCC 12's unwinder calls to find a frame's unwind table and
//    which has no fallback there, is answered from dl_iterate_phdr, as unwinders did before.
// 4. The test that keeps it so is Injection.NeedsNoGlibcNewerThan228 (readelf's list of the
//    versions the library needs); OldUserland.* loads the library and records launches in a
//    Debian 11 root (glibc 2.31). A new call into glibc that fails the first test gets a pin
//    here. x86_64 only: on other architectures this file is empty and the test does not run.
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GLIBC__)

// Note 1: `name` becomes a hidden function that jumps to `name@version` through the PLT.
#define CUFLIGHT_PIN(name, version)                                  \
  __asm__(".pushsection .text\n"                                     \
          ".symver cuflight_pinned_" #name ", " #name "@" version "\n" \
          ".globl " #name "\n"                                       \
          ".hidden " #name "\n"                                      \
          ".type " #name ", @function\n"                             \
          ".p2align 4\n" #name ":\n"                                 \
          "  endbr64\n"                                              \
          "  jmp cuflight_pinned_" #name "@PLT\n"                    \
          ".size " #name ", . - " #name "\n"                         \
          ".popsection\n");

// In libpthread.so.0 before glibc 2.34 (pthread_sigmask: re-versioned 2.32).
CUFLIGHT_PIN(pthread_create, "GLIBC_2.2.5")
CUFLIGHT_PIN(pthread_detach, "GLIBC_2.2.5")
CUFLIGHT_PIN(pthread_join, "GLIBC_2.2.5")
CUFLIGHT_PIN(pthread_once, "GLIBC_2.2.5")
CUFLIGHT_PIN(__pthread_key_create, "GLIBC_2.2.5")
CUFLIGHT_PIN(pthread_sigmask, "GLIBC_2.2.5")
// In libdl.so.2 before glibc 2.34.
CUFLIGHT_PIN(dlopen, "GLIBC_2.2.5")
CUFLIGHT_PIN(dlsym, "GLIBC_2.2.5")
CUFLIGHT_PIN(dlclose, "GLIBC_2.2.5")
CUFLIGHT_PIN(dlerror, "GLIBC_2.2.5")

#define CUFLIGHT_HIDDEN extern "C" __attribute__((visibility("hidden")))

// Note 3: stat, fstat and lstat became functions of their own in glibc 2.33; before, the
// headers turned them into __xstat(_STAT_VER, ...), _STAT_VER_LINUX being 1 on x86_64
// (glibc sysdeps/unix/sysv/linux/x86/xstatver.h). The struct is only passed through.
struct stat;
extern "C" int cuflight_xstat(int, const char*, struct stat*);
extern "C" int cuflight_fxstat(int, int, struct stat*);
extern "C" int cuflight_lxstat(int, const char*, struct stat*);
__asm__(".symver cuflight_xstat, __xstat@GLIBC_2.2.5");
__asm__(".symver cuflight_fxstat, __fxstat@GLIBC_2.2.5");
__asm__(".symver cuflight_lxstat, __lxstat@GLIBC_2.2.5");
constexpr int kStatVerLinux = 1;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"  // the function stat beside struct stat, as in C
CUFLIGHT_HIDDEN int stat(const char* path, struct stat* buf) {
  return cuflight_xstat(kStatVerLinux, path, buf);
}
#pragma GCC diagnostic pop
CUFLIGHT_HIDDEN int fstat(int fd, struct stat* buf) {
  return cuflight_fxstat(kStatVerLinux, fd, buf);
}
CUFLIGHT_HIDDEN int lstat(const char* path, struct stat* buf) {
  return cuflight_lxstat(kStatVerLinux, path, buf);
}

// Note 3: 0 means "the process may have other threads" (glibc's <sys/single_threaded.h>).
extern "C" {
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
}

CUFLIGHT_HIDDEN uint32_t arc4random(void) {
  uint32_t value = 0;
  if (syscall(SYS_getrandom, &value, sizeof(value), 0) == static_cast<long>(sizeof(value))) {
    return value;
  }
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = read(fd, &value, sizeof(value));
    close(fd);
    if (n == static_cast<ssize_t>(sizeof(value))) return value;
  }
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(&value)) ^
         static_cast<uint32_t>(getpid());
}

// Note 3: Linux's errno names, 0..133 (include/uapi/asm-generic/errno-base.h and errno.h);
// nullptr where Linux defines none, as glibc's strerrorname_np answers.
CUFLIGHT_HIDDEN const char* strerrorname_np(int err) {
  static const char* const kNames[] = {
      nullptr, "EPERM", "ENOENT", "ESRCH", "EINTR", "EIO", "ENXIO", "E2BIG", "ENOEXEC",
      "EBADF", "ECHILD", "EAGAIN", "ENOMEM", "EACCES", "EFAULT", "ENOTBLK", "EBUSY", "EEXIST",
      "EXDEV", "ENODEV", "ENOTDIR", "EISDIR", "EINVAL", "ENFILE", "EMFILE", "ENOTTY", "ETXTBSY",
      "EFBIG", "ENOSPC", "ESPIPE", "EROFS", "EMLINK", "EPIPE", "EDOM", "ERANGE", "EDEADLK",
      "ENAMETOOLONG", "ENOLCK", "ENOSYS", "ENOTEMPTY", "ELOOP", nullptr, "ENOMSG", "EIDRM",
      "ECHRNG", "EL2NSYNC", "EL3HLT", "EL3RST", "ELNRNG", "EUNATCH", "ENOCSI", "EL2HLT", "EBADE",
      "EBADR", "EXFULL", "ENOANO", "EBADRQC", "EBADSLT", nullptr, "EBFONT", "ENOSTR", "ENODATA",
      "ETIME", "ENOSR", "ENONET", "ENOPKG", "EREMOTE", "ENOLINK", "EADV", "ESRMNT", "ECOMM",
      "EPROTO", "EMULTIHOP", "EDOTDOT", "EBADMSG", "EOVERFLOW", "ENOTUNIQ", "EBADFD", "EREMCHG",
      "ELIBACC", "ELIBBAD", "ELIBSCN", "ELIBMAX", "ELIBEXEC", "EILSEQ", "ERESTART", "ESTRPIPE",
      "EUSERS", "ENOTSOCK", "EDESTADDRREQ", "EMSGSIZE", "EPROTOTYPE", "ENOPROTOOPT",
      "EPROTONOSUPPORT", "ESOCKTNOSUPPORT", "EOPNOTSUPP", "EPFNOSUPPORT", "EAFNOSUPPORT",
      "EADDRINUSE", "EADDRNOTAVAIL", "ENETDOWN", "ENETUNREACH", "ENETRESET", "ECONNABORTED",
      "ECONNRESET", "ENOBUFS", "EISCONN", "ENOTCONN", "ESHUTDOWN", "ETOOMANYREFS", "ETIMEDOUT",
      "ECONNREFUSED", "EHOSTDOWN", "EHOSTUNREACH", "EALREADY", "EINPROGRESS", "ESTALE",
      "EUCLEAN", "ENOTNAM", "ENAVAIL", "EISNAM", "EREMOTEIO", "EDQUOT", "ENOMEDIUM",
      "EMEDIUMTYPE", "ECANCELED", "ENOKEY", "EKEYEXPIRED", "EKEYREVOKED", "EKEYREJECTED",
      "EOWNERDEAD", "ENOTRECOVERABLE", "ERFKILL", "EHWPOISON"};
  constexpr int kCount = static_cast<int>(sizeof(kNames) / sizeof(kNames[0]));
  return err >= 0 && err < kCount ? kNames[err] : nullptr;
}

// Note 3: what glibc 2.35's _dl_find_object answers (dlfcn.h), from the program headers: the
// object's mapped range and its PT_GNU_EH_FRAME (.eh_frame_hdr), which is what the unwinder
// reads (x86_64 has no dlfo_eh_dbase). dlfo_link_map is left null; the unwinder does not read
// it. Returns -1 for an address in no object, as glibc does.
namespace {
struct FindObject {
  uintptr_t pc;
  struct dl_find_object* out;
  bool found;
};

int FindObjectCallback(struct dl_phdr_info* info, size_t, void* data) {
  auto* find = static_cast<FindObject*>(data);
  uintptr_t low = UINTPTR_MAX;
  uintptr_t high = 0;
  bool contains = false;
  const void* eh_frame = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD) {
      const uintptr_t end = start + ph.p_memsz;
      if (start < low) low = start;
      if (end > high) high = end;
      if (find->pc >= start && find->pc < end) contains = true;
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      eh_frame = reinterpret_cast<const void*>(start);
    }
  }
  if (!contains) return 0;
  find->out->dlfo_flags = 0;
  find->out->dlfo_map_start = reinterpret_cast<void*>(low);
  find->out->dlfo_map_end = reinterpret_cast<void*>(high);
  find->out->dlfo_link_map = nullptr;
  find->out->dlfo_eh_frame = const_cast<void*>(eh_frame);
  find->found = true;
  return 1;
}
}  // namespace

CUFLIGHT_HIDDEN int _dl_find_object(void* pc, struct dl_find_object* result) noexcept {
  FindObject find{reinterpret_cast<uintptr_t>(pc), result, false};
  dl_iterate_phdr(FindObjectCallback, &find);
  return find.found ? 0 : -1;
}

#endif  // __x86_64__ && __GLIBC__
