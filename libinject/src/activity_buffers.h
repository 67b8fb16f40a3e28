// The CUPTI activity buffer pool: every buffer is allocated once, up front. CUPTI's
// bufferRequested callback takes a free one (or none: CUPTI then drops records and counts them);
// bufferCompleted queues the buffer for the sender thread, which parses it and gives it back,
// and reads CUPTI's count of the records it dropped. Both callbacks are lock-free and
// allocation-free.
//
// Every buffer handed to CUPTI is all zero: the storage starts zeroed and the sender thread zeroes
// what CUPTI wrote when it gives a buffer back, so the library can set
// CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER and CUPTI does not zero each buffer itself on the
// thread that asked for it (cupti_activity.h: "If the user sets this to zero, a few stalls may
// appear in critical path because CUPTI will zero out the buffer in the main thread").
//
// Lost records, counted for timing_dropped: refused() requests the pool could not serve, and
// cupti_dropped() records CUPTI reported dropped (cuptiActivityGetNumDroppedRecords, which resets
// CUPTI's count on every read, so each record is counted once).
#ifndef CUFLIGHT_LIBINJECT_SRC_ACTIVITY_BUFFERS_H_
#define CUFLIGHT_LIBINJECT_SRC_ACTIVITY_BUFFERS_H_

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cuflight/inject/ring.h"
#include "cupti_api.h"

namespace cuflight::inject {

class ActivityBuffers {
 public:
  struct Completed {
    uint8_t* buffer = nullptr;
    size_t valid_size = 0;
  };

  // `count` buffers of `size` bytes each (size rounded up to 8), all zero (pages the system
  // zeroes: nothing is written until CUPTI writes). Throws std::bad_alloc.
  ActivityBuffers(size_t count, size_t size);
  ActivityBuffers(const ActivityBuffers&) = delete;
  ActivityBuffers& operator=(const ActivityBuffers&) = delete;

  // Where Complete and ReadDropped read CUPTI's dropped-record count (CuptiApi::DroppedRecords,
  // through the activity API family in use); null (the default): not read. Set it before CUPTI's
  // callbacks are registered; any thread. `cupti` outlives this object.
  void SetDroppedRecordsSource(const CuptiApi* cupti) noexcept;

  // bufferRequested: a free buffer, all zero, or *buffer = nullptr and *size = 0 when all are in
  // use (counted in refused()).
  void Request(uint8_t** buffer, size_t* size, size_t* max_records) noexcept;
  // bufferCompleted, with the context and stream CUPTI names (NULL and 0 since CUDA 6, whose
  // buffers are global): adds CUPTI's dropped-record count for them to cupti_dropped(), then
  // queues the buffer (with valid_size == 0 or buffer == nullptr there is nothing to queue; the
  // buffer is simply freed).
  void Complete(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                size_t valid_size) noexcept;
  // The same for the global queue (context NULL, stream 0).
  void Complete(uint8_t* buffer, size_t valid_size) noexcept {
    Complete(nullptr, 0, buffer, valid_size);
  }
  // Adds CUPTI's dropped-record count for `context` and `stream_id` to cupti_dropped() now, for
  // records dropped after the last completed buffer. Any thread; not from a signal handler.
  void ReadDropped(CUcontext context, uint32_t stream_id) noexcept;
  // Sender thread: the next completed buffer, oldest first.
  bool PopCompleted(Completed* out) noexcept;
  // Sender thread: the buffer may be handed to CUPTI again. Its first `used` bytes (the valid
  // size CUPTI completed it with: what it wrote) are zeroed first.
  void Release(uint8_t* buffer, size_t used) noexcept;

  // Buffer requests refused because every buffer was in use, since construction.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  // Records CUPTI reported dropped for want of buffer space, since construction.
  uint64_t cupti_dropped() const { return cupti_dropped_.load(std::memory_order_relaxed); }
  // Timing records lost for want of a buffer: CUPTI's own count includes the records it dropped
  // because a request was refused, and each refused request loses at least one record, so the
  // larger of cupti_dropped() and refused(), not their sum. Non-decreasing.
  uint64_t lost_records() const noexcept;
  size_t count() const { return count_; }
  size_t buffer_size() const { return size_; }

 private:
  int IndexOf(const uint8_t* buffer) const noexcept;

  size_t count_;
  size_t size_;
  struct Free {
    void operator()(uint8_t* p) const noexcept;
  };
  std::unique_ptr<uint8_t, Free> storage_;
  std::unique_ptr<std::atomic<bool>[]> in_use_;
  MpscRing<Completed> completed_;
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> cupti_dropped_{0};
  std::atomic<const CuptiApi*> dropped_source_{nullptr};
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_ACTIVITY_BUFFERS_H_
