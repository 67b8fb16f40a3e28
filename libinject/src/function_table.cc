#include "function_table.h"

#include <bit>

#include "mix64.h"

namespace cuflight::inject {

FunctionTable::FunctionTable(size_t capacity) {
  size_t n = std::bit_ceil(capacity < 64 ? size_t{64} : capacity);
  slots_ = std::make_unique<Slot[]>(n);
  mask_ = n - 1;
  owned_.reserve(256);
}

uint64_t FunctionTable::Hash(uint64_t handle) noexcept { return Mix64(handle); }

FunctionTable::Slot* FunctionTable::FindOrClaim(uint64_t handle) noexcept {
  if (handle == 0) return nullptr;
  size_t index = Hash(handle) & mask_;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) & mask_) {
    Slot& slot = slots_[index];
    uint64_t key = slot.key.load(std::memory_order_acquire);
    if (key == handle) return &slot;
    if (key == 0) {
      if (slot.key.compare_exchange_strong(key, handle, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
        return &slot;
      }
      if (key == handle) return &slot;  // another thread claimed it for the same handle
    }
  }
  return nullptr;
}

FunctionTable::Slot* FunctionTable::Find(uint64_t handle) noexcept {
  if (handle == 0) return nullptr;
  size_t index = Hash(handle) & mask_;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) & mask_) {
    Slot& slot = slots_[index];
    const uint64_t key = slot.key.load(std::memory_order_acquire);
    if (key == handle) return &slot;
    if (key == 0) return nullptr;
  }
  return nullptr;
}

const FunctionInfo* FunctionTable::Publish(Slot* slot, std::unique_ptr<FunctionInfo> info) {
  const FunctionInfo* raw = info.get();
  {
    std::lock_guard<std::mutex> lock(owned_mu_);
    owned_.push_back(std::move(info));
  }
  const FunctionInfo* expected = nullptr;
  if (slot->info.compare_exchange_strong(expected, raw, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
    return raw;
  }
  return expected;  // another thread published first; both copies describe the same function
}

void FunctionTable::Invalidate(uint64_t handle) noexcept {
  if (Slot* slot = Find(handle); slot != nullptr) {
    slot->info.store(nullptr, std::memory_order_release);
  }
}

void FunctionTable::InvalidateAll() noexcept {
  for (size_t i = 0; i <= mask_; ++i) slots_[i].info.store(nullptr, std::memory_order_release);
}

uint64_t FunctionTable::TotalLaunches() const noexcept {
  uint64_t total = 0;
  for (size_t i = 0; i <= mask_; ++i) total += slots_[i].launches.load(std::memory_order_relaxed);
  return total;
}

uint64_t FunctionTable::TotalFiltered() const noexcept {
  uint64_t total = 0;
  for (size_t i = 0; i <= mask_; ++i) total += slots_[i].filtered.load(std::memory_order_relaxed);
  return total;
}

}  // namespace cuflight::inject
