// One identity per stream and context across all events: the ids CUPTI's activity records use
// (CUpti_ActivityKernel10.contextId and .streamId), looked up for the handles a launch callback
// carries with cuptiGetContextId and cuptiGetStreamIdEx (cupti_activity.h), so that a stream's
// launch-callback events, graph-node events and kernel_time events name the same stream.
//
// Stream ids are unique within a context ("The stream ID is unique within a context",
// cuptiGetStreamIdEx), so an event names a stream by (context id, stream id). Special handles:
//  - the legacy NULL stream (handle 0, or CU_STREAM_LEGACY) is one stream per context: its id is
//    asked with the launch's context;
//  - the per-thread default stream (CU_STREAM_PER_THREAD, or handle 0 from a _ptsz entry point)
//    is one stream per thread and context: asked with perThreadStream = 1 from the launching
//    thread, and remembered per thread.
//
// Design: a direct-mapped table of (handle, packed ids) entries, read lock-free with a
// seqlock-style check (key, value, key again) and written under a mutex on the slow path, once
// per stream; a thread-local table for per-thread streams. cuStreamDestroy forgets a handle (its
// address may come back for another stream); a context teardown forgets everything (a
// generation number makes the thread-local tables stale too).
#ifndef CUFLIGHT_LIBINJECT_SRC_STREAM_IDS_H_
#define CUFLIGHT_LIBINJECT_SRC_STREAM_IDS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "cupti_api.h"

namespace cuflight::inject {

// The NULL stream in its three spellings: 0, CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD
// (0x2) (cuda.h:440, 450): the launch's current context's, not a stream of its own.
inline bool IsNullStream(uint64_t stream) noexcept { return stream <= 0x2; }

struct StreamIdentity {
  // CUPTI's ids; CUPTI_INVALID_CONTEXT_ID / CUPTI_INVALID_STREAM_ID (0xffffffff) when CUPTI could
  // not say.
  uint32_t context = 0xffffffffu;
  uint32_t stream = 0xffffffffu;
};

class StreamIds {
 public:
  // Room for `capacity` streams (rounded up to a power of two, at least 64); a stream whose entry
  // another took is asked about again.
  StreamIds(const CuptiApi* cupti, size_t capacity);
  StreamIds(const StreamIds&) = delete;
  StreamIds& operator=(const StreamIds&) = delete;

  // The ids of `stream` (a CUstream handle as the launch gave it; 0 is the legacy stream, or the
  // per-thread one when `per_thread_default` says a _ptsz entry point made the launch) in
  // `context` (the launch's CUcontext). Lock-free and allocation-free once the stream is known;
  // the first launch on a stream asks CUPTI. Call from the launching thread.
  StreamIdentity Lookup(uint64_t context, uint64_t stream, bool per_thread_default) noexcept;

  // cuStreamDestroy of `stream` succeeded.
  void Forget(uint64_t stream) noexcept;
  // A context was destroyed or reset: its handle and its streams' may be reused.
  void ForgetAll() noexcept;

 private:
  struct Entry {
    std::atomic<uint64_t> key{0};
    std::atomic<uint64_t> value{0};
  };
  static uint64_t Pack(StreamIdentity ids) noexcept {
    return (uint64_t{ids.context} << 32) | ids.stream;
  }
  static StreamIdentity Unpack(uint64_t v) noexcept {
    return {static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
  }
  StreamIdentity Ask(uint64_t context, uint64_t stream, bool per_thread) noexcept;
  StreamIdentity PerThread(uint64_t context) noexcept;

  const CuptiApi* cupti_;
  std::unique_ptr<Entry[]> entries_;
  size_t mask_ = 0;
  std::mutex write_mu_;
  std::atomic<uint64_t> generation_{1};
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_STREAM_IDS_H_
