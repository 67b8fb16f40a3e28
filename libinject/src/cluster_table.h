// The driver's answer to "how many clusters of this launch can be resident at once"
// (cuOccupancyMaxActiveClusters), remembered per launch configuration so that only the first
// cluster launch of a configuration asks the driver. Cluster placement across GPCs is not
// exposed any other way, and it is what makes `cluster` the limiting resource.
//
// Design: open addressing over a fixed array allocated once; a configuration is keyed by a
// 64-bit hash of (FunctionInfo::id, device, block, dynamic smem, cluster, carveout). An entry is
// claimed by CAS on its key and its value is published after; a reader that finds the key before
// the value asks the driver itself (the same answer, a little later). Lock-free and
// allocation-free after construction. When the table is full, every launch of a new
// configuration asks the driver.
#ifndef CUFLIGHT_LIBINJECT_SRC_CLUSTER_TABLE_H_
#define CUFLIGHT_LIBINJECT_SRC_CLUSTER_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace cuflight::inject {

struct ClusterConfig {
  uint64_t function = 0;  // FunctionInfo::id (never reused, unlike its address)
  int32_t device = 0;
  uint32_t block[3] = {1, 1, 1};
  uint32_t dyn_smem = 0;
  uint32_t cluster[3] = {1, 1, 1};
  int32_t carveout = -1;
};

class ClusterTable {
 public:
  // Room for `capacity` configurations (rounded up to a power of two, at least 64).
  explicit ClusterTable(size_t capacity);
  ClusterTable(const ClusterTable&) = delete;
  ClusterTable& operator=(const ClusterTable&) = delete;

  // The remembered answer for `config`, or nullopt.
  std::optional<int32_t> Find(const ClusterConfig& config) const noexcept;
  // Remembers `max_active_clusters` for `config` (ignored when the table is full).
  void Insert(const ClusterConfig& config, int32_t max_active_clusters) noexcept;

  static constexpr int kMaxProbe = 32;

 private:
  struct Entry {
    std::atomic<uint64_t> key{0};
    std::atomic<int32_t> value{-1};  // -1: claimed, not yet published
  };
  static uint64_t Key(const ClusterConfig& config) noexcept;

  std::unique_ptr<Entry[]> entries_;
  size_t mask_ = 0;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CLUSTER_TABLE_H_
