#include "activity_buffers.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

namespace cuflight::inject {
namespace {

constexpr size_t kAlign = 8;  // CUPTI requires 8-byte aligned activity buffers

uint8_t* ZeroedStorage(size_t bytes) {
  // calloc: for a large size, fresh pages the system zeroes when first touched.
  auto* p = static_cast<uint8_t*>(std::calloc(bytes, 1));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void ActivityBuffers::Free::operator()(uint8_t* p) const noexcept { std::free(p); }

ActivityBuffers::ActivityBuffers(size_t count, size_t size)
    : count_(count == 0 ? 1 : count),
      size_((size + kAlign - 1) / kAlign * kAlign),
      storage_(ZeroedStorage(count_ * size_ + kAlign)),
      in_use_(new std::atomic<bool>[count_]),
      completed_(std::bit_ceil(count_ < 2 ? size_t{2} : count_)) {
  for (size_t i = 0; i < count_; ++i) in_use_[i].store(false, std::memory_order_relaxed);
}

int ActivityBuffers::IndexOf(const uint8_t* buffer) const noexcept {
  const uint8_t* base = storage_.get();
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(base) + kAlign - 1) / kAlign * kAlign;
  const auto offset = reinterpret_cast<uintptr_t>(buffer) - aligned;
  if (reinterpret_cast<uintptr_t>(buffer) < aligned || offset % size_ != 0) return -1;
  const size_t index = offset / size_;
  return index < count_ ? static_cast<int>(index) : -1;
}

void ActivityBuffers::Request(uint8_t** buffer, size_t* size, size_t* max_records) noexcept {
  *max_records = 0;  // as many as fit
  const uintptr_t aligned =
      (reinterpret_cast<uintptr_t>(storage_.get()) + kAlign - 1) / kAlign * kAlign;
  for (size_t i = 0; i < count_; ++i) {
    bool expected = false;
    if (in_use_[i].compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      *buffer = reinterpret_cast<uint8_t*>(aligned + i * size_);
      *size = size_;
      return;
    }
  }
  refused_.fetch_add(1, std::memory_order_relaxed);
  *buffer = nullptr;
  *size = 0;
}

void ActivityBuffers::SetDroppedRecordsSource(const CuptiApi* cupti) noexcept {
  dropped_source_.store(cupti, std::memory_order_release);
}

void ActivityBuffers::ReadDropped(CUcontext context, uint32_t stream_id) noexcept {
  const CuptiApi* cupti = dropped_source_.load(std::memory_order_acquire);
  if (cupti == nullptr) return;
  size_t dropped = 0;
  if (cupti->DroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS && dropped != 0) {
    cupti_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  }
}

void ActivityBuffers::Complete(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                               size_t valid_size) noexcept {
  // Read before the buffer is queued, so that a sender thread that has parsed the buffer also
  // sees the records dropped before it was handed over.
  ReadDropped(context, stream_id);
  if (buffer == nullptr) return;
  if (valid_size == 0 || !completed_.TryPush(Completed{buffer, valid_size})) {
    // Nothing to parse, or (impossible: the queue holds every buffer) no room: free it. (Any
    // thread: with nothing written, nothing to zero; the impossible case zeroes on this one.)
    Release(buffer, valid_size);
  }
}

uint64_t ActivityBuffers::lost_records() const noexcept {
  return std::max(cupti_dropped_.load(std::memory_order_relaxed),
                  refused_.load(std::memory_order_relaxed));
}

bool ActivityBuffers::PopCompleted(Completed* out) noexcept { return completed_.TryPop(out); }

void ActivityBuffers::Release(uint8_t* buffer, size_t used) noexcept {
  const int index = IndexOf(buffer);
  if (index < 0) return;
  std::memset(buffer, 0, std::min(used, size_));
  in_use_[index].store(false, std::memory_order_release);
}

}  // namespace cuflight::inject
