// The context each stream belongs to (cuStreamGetCtx), remembered for the launches of CUkernels:
// "the context to launch the kernel on will either be taken from the specified stream hStream or
// the current context in case of NULL stream" (cuda.h, cuLaunchKernel). A CUfunction's launch
// runs in its own context, which is current; only CUkernel launches on their own streams look
// here.
//
// Design: open addressing over a fixed array (kCapacity entries, no allocation). A stream keeps
// its entry for the life of the table; destroying it clears the context (the handle may come back
// for a stream of another context, and then reuses the entry). Lookups are lock-free: an acquire
// load of the key, then a relaxed load of the context. Writers take a mutex (slow path: the first
// CUkernel launch on a stream, a stream or context teardown). When the table is full, the driver
// is asked at every such launch.
#ifndef CUFLIGHT_LIBINJECT_SRC_STREAM_TABLE_H_
#define CUFLIGHT_LIBINJECT_SRC_STREAM_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace cuflight::inject {

class StreamTable {
 public:
  static constexpr size_t kCapacity = 4096;
  static constexpr int kMaxProbe = 32;

  StreamTable() = default;
  StreamTable(const StreamTable&) = delete;
  StreamTable& operator=(const StreamTable&) = delete;

  // The remembered context of `stream`; 0 when not known. Lock-free, allocation-free.
  uint64_t ContextOf(uint64_t stream) const noexcept;
  // Remembers `context` for `stream` (ignored when the table is full). Takes the mutex.
  void Remember(uint64_t stream, uint64_t context) noexcept;
  // The stream was destroyed. Takes the mutex.
  void Forget(uint64_t stream) noexcept;
  // A context was destroyed, and its streams with it. Takes the mutex.
  void ForgetAll() noexcept;

 private:
  struct Entry {
    std::atomic<uint64_t> stream{0};
    std::atomic<uint64_t> context{0};
  };
  const Entry* FindEntry(uint64_t stream) const noexcept;

  Entry entries_[kCapacity];
  std::mutex mu_;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_STREAM_TABLE_H_
