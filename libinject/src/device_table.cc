#include "device_table.h"

#include <new>

namespace cuflight::inject {
namespace {

size_t ContextHash(uint64_t context) {
  context ^= context >> 33;
  context *= 0xff51afd7ed558ccdULL;
  context ^= context >> 33;
  return static_cast<size_t>(context);
}

}  // namespace

const DeviceInfo* DeviceTable::Get(int ordinal) const noexcept {
  if (ordinal < 0 || ordinal >= kMaxDevices) return nullptr;
  return devices_[ordinal].load(std::memory_order_acquire);
}

const DeviceInfo* DeviceTable::Publish(std::unique_ptr<DeviceInfo> info) {
  const int ordinal = info->ordinal;
  if (ordinal < 0 || ordinal >= kMaxDevices) return nullptr;
  const DeviceInfo* raw = info.get();
  {
    std::lock_guard<std::mutex> lock(owned_mu_);
    owned_.push_back(std::move(info));
  }
  const DeviceInfo* expected = nullptr;
  if (devices_[ordinal].compare_exchange_strong(expected, raw, std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
    return raw;
  }
  return expected;
}

int DeviceTable::DeviceOf(uint64_t context) const noexcept {
  if (context == 0) return -1;
  size_t index = ContextHash(context) % kContextSlots;
  for (int probe = 0; probe < kContextSlots; ++probe, index = (index + 1) % kContextSlots) {
    const ContextSlot& slot = contexts_[index];
    const uint64_t key = slot.context.load(std::memory_order_acquire);
    if (key == context) return slot.ordinal.load(std::memory_order_acquire);
    if (key == 0) return -1;
  }
  return -1;
}

void DeviceTable::RememberContext(uint64_t context, int ordinal) noexcept {
  if (context == 0) return;
  std::lock_guard<std::mutex> lock(contexts_mu_);
  size_t index = ContextHash(context) % kContextSlots;
  for (int probe = 0; probe < kContextSlots; ++probe, index = (index + 1) % kContextSlots) {
    ContextSlot& slot = contexts_[index];
    const uint64_t key = slot.context.load(std::memory_order_relaxed);
    if (key == context) return;
    if (key == 0) {
      // The ordinal first, then the key (release): a reader that sees the key sees the ordinal.
      slot.ordinal.store(ordinal, std::memory_order_relaxed);
      slot.context.store(context, std::memory_order_release);
      return;
    }
  }
}

void DeviceTable::ForgetContexts() noexcept {
  std::lock_guard<std::mutex> lock(contexts_mu_);
  for (ContextSlot& slot : contexts_) {
    slot.context.store(0, std::memory_order_release);
    slot.ordinal.store(-1, std::memory_order_release);
  }
}

void DeviceTable::BeforeFork() noexcept {
  contexts_mu_.lock();
  owned_mu_.lock();
}

void DeviceTable::AfterForkInParent() noexcept {
  owned_mu_.unlock();
  contexts_mu_.unlock();
}

void DeviceTable::AfterForkInChild() noexcept {
  new (&contexts_mu_) std::mutex();
  new (&owned_mu_) std::mutex();
  ForgetContexts();
}

}  // namespace cuflight::inject
