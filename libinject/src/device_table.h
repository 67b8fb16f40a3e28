// Per-device facts read once from the driver (limits for the occupancy engine, name, UUID), and
// the context -> device mapping used on every launch. Lock-free readers; the first launch on a
// device or context takes the slow path that fills them.
#ifndef CUFLIGHT_LIBINJECT_SRC_DEVICE_TABLE_H_
#define CUFLIGHT_LIBINJECT_SRC_DEVICE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cuflight/blackbox/region_layout.h"
#include "cuflight/occupancy/device_limits.h"
#include "cuflight/occupancy/engine.h"

namespace cuflight::inject {

struct DeviceInfo {
  int32_t ordinal = 0;
  std::string name;
  std::string uuid;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" ("MIG-..."), or "" when unknown
  std::string pci_bus_id;  // "00000000:19:00.0" (device_identity.h), or "" when unknown
  occupancy::DeviceLimits limits;
  // The engine's view of the device; nullopt when the limits could not be read or the compute
  // capability is unknown to the occupancy calculator (`problem` then says why).
  std::optional<occupancy::DeviceContext> engine;
  std::string problem;
};

class DeviceTable {
 public:
  // Launch records carry the ordinal in 8 bits, and the black box describes this many.
  static constexpr int kMaxDevices = 64;
  static constexpr int kContextSlots = 256;

  DeviceTable() = default;
  DeviceTable(const DeviceTable&) = delete;
  DeviceTable& operator=(const DeviceTable&) = delete;

  // The published info of `ordinal`, or nullptr if not read yet (or out of range).
  const DeviceInfo* Get(int ordinal) const noexcept;
  // Publishes `info` unless one is already there; returns the published one.
  const DeviceInfo* Publish(std::unique_ptr<DeviceInfo> info);

  // Device ordinal of a context, -1 when not cached. Lock-free, allocation-free.
  int DeviceOf(uint64_t context) const noexcept;
  // Caches context -> ordinal (slow path: takes a mutex, writers only); silently does nothing when the cache is full (callers then ask
  // the driver again next time).
  void RememberContext(uint64_t context, int ordinal) noexcept;
  // A context was destroyed (its handle may be reused for another device).
  void ForgetContexts() noexcept;
  // fork() around the table, as FunctionTable's: BeforeFork takes both mutexes (contexts, then
  // owned devices), AfterForkInParent releases them, AfterForkInChild makes them anew without
  // taking them and forgets every context (the child has none of the parent's).
  void BeforeFork() noexcept;
  void AfterForkInParent() noexcept;
  void AfterForkInChild() noexcept;

 private:
  struct ContextSlot {
    std::atomic<uint64_t> context{0};
    std::atomic<int32_t> ordinal{-1};
  };
  std::atomic<const DeviceInfo*> devices_[kMaxDevices] = {};
  ContextSlot contexts_[kContextSlots];
  std::mutex contexts_mu_;
  std::mutex owned_mu_;
  std::vector<std::unique_ptr<DeviceInfo>> owned_;
};
static_assert(DeviceTable::kMaxDevices <= 127 &&
              DeviceTable::kMaxDevices == static_cast<int>(blackbox::kMaxDevices));

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_DEVICE_TABLE_H_
