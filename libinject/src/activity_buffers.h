// The CUPTI activity buffer pool: every buffer is allocated once, up front. CUPTI's
// bufferRequested callback takes a free one (or none: CUPTI then drops records and counts them);
// bufferCompleted only queues the buffer for the sender thread, which parses it and gives it
// back. Both callbacks are lock-free and allocation-free.
#ifndef CUFLIGHT_LIBINJECT_SRC_ACTIVITY_BUFFERS_H_
#define CUFLIGHT_LIBINJECT_SRC_ACTIVITY_BUFFERS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cuflight/inject/ring.h"

namespace cuflight::inject {

class ActivityBuffers {
 public:
  struct Completed {
    uint8_t* buffer = nullptr;
    size_t valid_size = 0;
  };

  // `count` buffers of `size` bytes each (size rounded up to 8).
  ActivityBuffers(size_t count, size_t size);
  ActivityBuffers(const ActivityBuffers&) = delete;
  ActivityBuffers& operator=(const ActivityBuffers&) = delete;

  // bufferRequested: a free buffer, or *buffer = nullptr and *size = 0 when all are in use.
  void Request(uint8_t** buffer, size_t* size, size_t* max_records) noexcept;
  // bufferCompleted: queues the buffer (with valid_size == 0 it is simply freed).
  void Complete(uint8_t* buffer, size_t valid_size) noexcept;
  // Sender thread: the next completed buffer, oldest first.
  bool PopCompleted(Completed* out) noexcept;
  // Sender thread: the buffer may be handed to CUPTI again.
  void Release(uint8_t* buffer) noexcept;

  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  size_t count() const { return count_; }
  size_t buffer_size() const { return size_; }

 private:
  int IndexOf(const uint8_t* buffer) const noexcept;

  size_t count_;
  size_t size_;
  std::unique_ptr<uint8_t[]> storage_;
  std::unique_ptr<std::atomic<bool>[]> in_use_;
  MpscRing<Completed> completed_;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_ACTIVITY_BUFFERS_H_
