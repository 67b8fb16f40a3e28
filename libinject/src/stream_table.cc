#include "stream_table.h"

#include "mix64.h"

namespace cuflight::inject {

const StreamTable::Entry* StreamTable::FindEntry(uint64_t stream) const noexcept {
  size_t index = Mix64(stream) % kCapacity;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) % kCapacity) {
    const uint64_t key = entries_[index].stream.load(std::memory_order_acquire);
    if (key == stream) return &entries_[index];
    if (key == 0) return nullptr;
  }
  return nullptr;
}

uint64_t StreamTable::ContextOf(uint64_t stream) const noexcept {
  if (stream == 0) return 0;
  const Entry* entry = FindEntry(stream);
  return entry != nullptr ? entry->context.load(std::memory_order_relaxed) : 0;
}

void StreamTable::Remember(uint64_t stream, uint64_t context) noexcept {
  if (stream == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  size_t index = Mix64(stream) % kCapacity;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) % kCapacity) {
    Entry& entry = entries_[index];
    const uint64_t key = entry.stream.load(std::memory_order_relaxed);
    if (key == stream || key == 0) {
      // The context first, then the key (release): a reader that sees the key sees the context.
      entry.context.store(context, std::memory_order_relaxed);
      if (key == 0) entry.stream.store(stream, std::memory_order_release);
      return;
    }
  }
}

void StreamTable::Forget(uint64_t stream) noexcept {
  if (stream == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (const Entry* entry = FindEntry(stream); entry != nullptr) {
    const_cast<Entry*>(entry)->context.store(0, std::memory_order_relaxed);
  }
}

void StreamTable::ForgetAll() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& entry : entries_) entry.context.store(0, std::memory_order_relaxed);
}

}  // namespace cuflight::inject
