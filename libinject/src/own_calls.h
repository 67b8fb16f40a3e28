// Marks the driver calls the library makes itself. CUPTI raises callbacks for them as for the
// application's own calls; the recorder ignores every callback raised while its thread is inside
// an OwnCalls scope, so that, say, a cuFuncGetAttribute that fails while probing a CUkernel
// handle is not reported as the application's api_error, and the library never re-enters itself.
//
// The recorder opens a scope for the whole of each callback it handles; the sender thread opens
// one for its whole life.
//
// The scope's depth lives in ThisThread, the one thread_local a launch's callback touches, beside
// the thread's id. In libcuflight_inject.so, which the driver dlopens after the program started,
// each access to a thread_local is a call to __tls_get_addr (the global-dynamic TLS model of a
// position-independent library; the initial-exec model, a plain %fs-relative load, would need
// static TLS that a library loaded late may not get, and dlopen would then fail with "cannot
// allocate memory in static TLS block"). So the recorder finds ThisThread once per callback and
// hands it on: one __tls_get_addr per launch instead of one per access (three before).
//
// ThisThread also holds the thread's launch place (launch_place.h): what its last launch's
// context and stream resolved to, so that a thread launching on the same stream again skips the
// shared tables.
#ifndef CUFLIGHT_LIBINJECT_SRC_OWN_CALLS_H_
#define CUFLIGHT_LIBINJECT_SRC_OWN_CALLS_H_

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "launch_place.h"

namespace cuflight::inject {

// What the library keeps per thread for its callbacks. Get() once per callback.
class ThisThread {
 public:
  static ThisThread& Get() noexcept;

  // The thread's id (gettid, a system call, made once per thread).
  int32_t Tid() noexcept {
    if (tid_ == 0) tid_ = static_cast<int32_t>(syscall(SYS_gettid));
    return tid_;
  }
  // In a fork()ed child, on its one thread: the id cached is the parent thread's.
  // The place is forgotten too (the child's recorder is another one anyway).
  static void AfterForkInChild() noexcept {
    ThisThread& self = Get();
    self.tid_ = 0;
    self.launch_place = LaunchPlace{};
  }
  // True while the thread is inside an OwnCalls scope.
  bool InOwnCalls() const noexcept { return own_calls_ != 0; }

  // The thread's last launch place (launch_place.h); the recorder's, read and written only by
  // this thread's callbacks.
  LaunchPlace launch_place;

 private:
  friend class OwnCalls;
  int own_calls_ = 0;
  int32_t tid_ = 0;
};

namespace internal {
inline thread_local ThisThread t_this_thread;
}  // namespace internal

inline ThisThread& ThisThread::Get() noexcept {
  ThisThread* self = &internal::t_this_thread;
  // An opaque copy: GCC otherwise computes a thread_local's address again (another
  // __tls_get_addr) at each use rather than keep it in a register across calls.
  asm("" : "+r"(self));
  return *self;
}

class OwnCalls {
 public:
  OwnCalls() noexcept : OwnCalls(ThisThread::Get()) {}
  explicit OwnCalls(ThisThread& thread) noexcept : thread_(thread) { ++thread_.own_calls_; }
  ~OwnCalls() { --thread_.own_calls_; }
  OwnCalls(const OwnCalls&) = delete;
  OwnCalls& operator=(const OwnCalls&) = delete;

  // True on a thread inside a scope.
  static bool Active() noexcept { return ThisThread::Get().InOwnCalls(); }

 private:
  ThisThread& thread_;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_OWN_CALLS_H_
