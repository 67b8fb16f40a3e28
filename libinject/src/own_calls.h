// Marks the driver calls the library makes itself. CUPTI raises callbacks for them as for the
// application's own calls; the recorder ignores every callback raised while its thread is inside
// an OwnCalls scope, so that, say, a cuFuncGetAttribute that fails while probing a CUkernel
// handle is not reported as the application's api_error, and the library never re-enters itself.
//
// The recorder opens a scope for the whole of each callback it handles; the sender thread opens
// one for its whole life.
#ifndef CUFLIGHT_LIBINJECT_SRC_OWN_CALLS_H_
#define CUFLIGHT_LIBINJECT_SRC_OWN_CALLS_H_

namespace cuflight::inject {

class OwnCalls {
 public:
  OwnCalls() noexcept { ++depth_; }
  ~OwnCalls() { --depth_; }
  OwnCalls(const OwnCalls&) = delete;
  OwnCalls& operator=(const OwnCalls&) = delete;

  // True on a thread inside a scope.
  static bool Active() noexcept { return depth_ != 0; }

 private:
  static inline thread_local int depth_ = 0;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_OWN_CALLS_H_
