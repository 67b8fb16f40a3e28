// The SMs a launch may use, per context: a green context ("distinct spatial partitions of the
// GPU", cuda.h) or an MPS client may have fewer than its device's
// CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, and waves and tail_utilization count over the SMs the
// launch may use.
//
// Design:
//  1. Asked once per context, in the launch callback that first meets it (the slow path, with the
//     device and function reads): cuStreamGetGreenCtx on the launch's stream and, for a green
//     context's stream, cuGreenCtxGetDevResource; otherwise cuCtxGetDevResource on the context,
//     both with CU_DEV_RESOURCE_TYPE_SM (cuda.h: "Get the type resources available to the
//     context"; CUdevSmResource.smCount: "The amount of streaming multiprocessors available in
//     this resource"). A driver without these entry points (before CUDA 12.4) or a refusal gives
//     0: the device's count.
//  2. The key is the launch's context as the recorder resolves it: a non-NULL stream's own context
//     (cuStreamGetCtx: for a stream of cuGreenCtxStreamCreate "equivalent to the one returned by
//     cuCtxFromGreenCtx() on the green context", so each green context is its own key), else the
//     current one.
//  3. A direct-mapped table of (context, count) entries, read lock-free with the key, value, key
//     check StreamIds uses and written under a mutex once per context; a context teardown forgets
//     everything (a handle may come back for another partition).
#ifndef CUFLIGHT_LIBINJECT_SRC_CONTEXT_SMS_H_
#define CUFLIGHT_LIBINJECT_SRC_CONTEXT_SMS_H_

#include <atomic>
#include <cstdint>
#include <mutex>

namespace cuflight::inject {

struct DriverApi;

class ContextSms {
 public:
  static constexpr int kSlots = 256;  // power of two; a context whose slot another took asks again

  // The SMs of `context` (a CUcontext handle) for a launch on `stream` (a CUstream handle, 0 or
  // CU_STREAM_LEGACY/PER_THREAD for the NULL stream), or 0 when the driver cannot say. Lock-free
  // and allocation-free once the context is known; the first launch asks the driver (inside the
  // launch's callback, under the recorder's OwnCalls scope). Any launching thread.
  int Of(const DriverApi& driver, uint64_t context, uint64_t stream) noexcept;

  // A context was destroyed or reset.
  void ForgetAll() noexcept;

  // What the driver says, uncached (tests; Of on a miss).
  static int Ask(const DriverApi& driver, uint64_t context, uint64_t stream) noexcept;

 private:
  struct Entry {
    std::atomic<uint64_t> key{0};
    std::atomic<int32_t> value{0};
  };
  Entry entries_[kSlots];
  std::mutex write_mu_;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CONTEXT_SMS_H_
