// What the CUDA driver says about one launch configuration, asked once per configuration in the
// launching thread and remembered:
//  - cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags: the resident blocks per SM, which the
//    kernel event reports (the driver is the authority; the engine explains it);
//  - for cluster launches, cuOccupancyMaxActiveClusters (cluster placement across GPCs, exposed
//    no other way) and cuOccupancyMaxPotentialClusterSize (the largest cluster the function may
//    have, which replaces the device's portable maximum).
//
// Design: open addressing over a fixed array allocated once; a configuration is keyed by a 64-bit
// hash of (function, device, block, dynamic smem, cluster, effective carveout). An entry is
// claimed by CAS on its key and its answer, packed into one 64-bit word, is published after with
// a release store; a reader that finds the key before the answer asks the driver itself (the same
// answer, a little later). Lock-free and allocation-free after construction. When the table is
// full, every launch of a new configuration asks the driver.
#ifndef CUFLIGHT_LIBINJECT_SRC_LAUNCH_CONFIG_TABLE_H_
#define CUFLIGHT_LIBINJECT_SRC_LAUNCH_CONFIG_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace cuflight::inject {

struct LaunchConfigKey {
  uint64_t function = 0;  // a never-reused id of the function (its FunctionInfo)
  int32_t device = 0;
  uint32_t block[3] = {1, 1, 1};
  uint32_t dyn_smem = 0;
  uint32_t cluster[3] = {0, 0, 0};
  int32_t carveout = -1;  // the launch's, else the function's, preference; -1: none
};

// The driver's answers for one configuration. Each is "unknown" when the driver could not say.
struct DriverOccupancy {
  int32_t max_active_blocks = -1;   // blocks per SM; -1: unknown
  int32_t max_active_clusters = 0;  // cluster launches; 0: unknown
  int32_t max_cluster_size = 0;     // cluster launches; 0: unknown

  // One word: bit 63 set; bits 0-15 max_active_blocks + 1; 16-39 max_active_clusters;
  // 40-55 max_cluster_size. Values beyond their bits are stored as unknown.
  uint64_t Pack() const noexcept;
  static DriverOccupancy Unpack(uint64_t word) noexcept;
  bool operator==(const DriverOccupancy&) const = default;
};

class LaunchConfigTable {
 public:
  // Room for `capacity` configurations (rounded up to a power of two, at least 64).
  explicit LaunchConfigTable(size_t capacity);
  LaunchConfigTable(const LaunchConfigTable&) = delete;
  LaunchConfigTable& operator=(const LaunchConfigTable&) = delete;

  // The remembered answer for `config`, or nullopt. Any thread; lock-free, allocation-free.
  std::optional<DriverOccupancy> Find(const LaunchConfigKey& config) const noexcept;
  // Remembers `answer` for `config` (ignored when kMaxProbe entries are taken).
  void Insert(const LaunchConfigKey& config, const DriverOccupancy& answer) noexcept;

  static constexpr int kMaxProbe = 32;

 private:
  struct Entry {
    std::atomic<uint64_t> key{0};
    std::atomic<uint64_t> value{0};  // 0: claimed, not yet published
  };
  static uint64_t Key(const LaunchConfigKey& config) noexcept;

  std::unique_ptr<Entry[]> entries_;
  size_t mask_ = 0;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_LAUNCH_CONFIG_TABLE_H_
