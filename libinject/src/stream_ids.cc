#include "stream_ids.h"

#include <bit>

#include "mix64.h"

namespace cuflight::inject {
namespace {

constexpr uint64_t kLegacy = 0x1;     // CU_STREAM_LEGACY
constexpr uint64_t kPerThread = 0x2;  // CU_STREAM_PER_THREAD

// The legacy stream of a context is keyed by the context's handle with its low bit set: handles
// are aligned pointers, so no stream handle is ever equal to it.
uint64_t LegacyKey(uint64_t context) noexcept { return context | 1; }

struct PerThreadEntry {
  const StreamIds* owner = nullptr;  // a fork()ed child's recorder has its own table
  uint64_t context = 0;
  uint64_t generation = 0;
  StreamIdentity ids;
};
constexpr int kPerThreadEntries = 4;
thread_local PerThreadEntry t_per_thread[kPerThreadEntries];
thread_local unsigned t_per_thread_next = 0;

}  // namespace

StreamIds::StreamIds(const CuptiApi* cupti, size_t capacity) : cupti_(cupti) {
  const size_t n = std::bit_ceil(capacity < 64 ? size_t{64} : capacity);
  entries_ = std::make_unique<Entry[]>(n);
  mask_ = n - 1;
}

StreamIdentity StreamIds::Ask(uint64_t context, uint64_t stream, bool per_thread) noexcept {
  StreamIdentity ids;
  const auto ctx = reinterpret_cast<CUcontext>(context);
  uint32_t id = 0;
  if (cupti_->GetContextId != nullptr && context != 0 &&
      cupti_->GetContextId(ctx, &id) == CUPTI_SUCCESS) {
    ids.context = id;
  }
  // cuptiGetStreamIdEx: "context: If non-NULL then the stream is checked to ensure that it
  // belongs to this context. Typically this parameter should be null." The NULL stream needs its
  // context to say which one it is.
  const bool null_stream = IsNullStream(stream);
  if (cupti_->GetStreamIdEx != nullptr &&
      cupti_->GetStreamIdEx(null_stream ? ctx : nullptr,
                            null_stream ? nullptr : reinterpret_cast<CUstream>(stream),
                            per_thread ? 1 : 0, &id) == CUPTI_SUCCESS) {
    ids.stream = id;
  }
  return ids;
}

StreamIdentity StreamIds::PerThread(uint64_t context) noexcept {
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  for (PerThreadEntry& e : t_per_thread) {
    if (e.owner == this && e.context == context && e.generation == generation) return e.ids;
  }
  const StreamIdentity ids = Ask(context, 0, /*per_thread=*/true);
  PerThreadEntry& slot = t_per_thread[t_per_thread_next++ % kPerThreadEntries];
  slot = {this, context, generation, ids};
  return ids;
}

StreamIdentity StreamIds::Lookup(uint64_t context, uint64_t stream,
                                 bool per_thread_default) noexcept {
  if (stream == kPerThread || (stream == 0 && per_thread_default)) return PerThread(context);
  const uint64_t key = stream == 0 || stream == kLegacy ? LegacyKey(context) : stream;
  Entry& e = entries_[Mix64(key) & mask_];
  // A writer clears the key, stores the value, then the key: a value read between two equal
  // reads of the key belongs to that key.
  if (e.key.load(std::memory_order_acquire) == key) {
    const uint64_t value = e.value.load(std::memory_order_acquire);
    if (e.key.load(std::memory_order_relaxed) == key) return Unpack(value);
  }
  const StreamIdentity ids = Ask(context, stream == kLegacy ? 0 : stream, /*per_thread=*/false);
  try {
    std::lock_guard<std::mutex> lock(write_mu_);
    e.key.store(0, std::memory_order_relaxed);
    e.value.store(Pack(ids), std::memory_order_release);
    e.key.store(key, std::memory_order_release);
  } catch (...) {  // std::system_error from the mutex: answer without remembering
  }
  return ids;
}

void StreamIds::Forget(uint64_t stream) noexcept {
  if (IsNullStream(stream)) return;
  Entry& e = entries_[Mix64(stream) & mask_];
  try {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (e.key.load(std::memory_order_relaxed) == stream) e.key.store(0, std::memory_order_release);
  } catch (...) {
  }
}

void StreamIds::ForgetAll() noexcept {
  try {
    std::lock_guard<std::mutex> lock(write_mu_);
    for (size_t i = 0; i <= mask_; ++i) entries_[i].key.store(0, std::memory_order_release);
  } catch (...) {
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace cuflight::inject
