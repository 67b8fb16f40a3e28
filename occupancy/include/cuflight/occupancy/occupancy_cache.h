// Fixed-capacity, lock-free cache of occupancy results, keyed by what the per-SM result depends
// on: (function, device, block, dynamic smem, carveout, cluster). The grid is not in the key:
// waves are recomputed per launch with ComputeWaves().
//
// Design:
//  1. One allocation, in the constructor; Lookup() and Insert() never allocate, lock or block.
//  2. Open addressing with bounded linear probing; entries are never removed or overwritten, so
//     a reader that sees a slot's state as kReady (acquire) reads an immutable key and value.
//  3. A slot is claimed by CAS kEmpty -> kWriting and published by a release store of kReady.
//     Readers skip slots being written; a concurrent first insert of one key may store it twice
//     (both copies equal), which costs one slot and nothing else.
//  4. When the probe window is full, Insert() fails and the caller uses the uncached result:
//     correctness never depends on the cache.
#ifndef CUFLIGHT_OCCUPANCY_OCCUPANCY_CACHE_H_
#define CUFLIGHT_OCCUPANCY_OCCUPANCY_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cuflight/schema/occupancy_fields.h"

namespace cuflight::occupancy {

struct CacheKey {
  uint64_t function = 0;  // CUfunction handle (or any stable per-function id)
  uint32_t device = 0;
  uint32_t block_x = 0, block_y = 0, block_z = 0;
  uint32_t dyn_smem = 0;
  int32_t carveout = -1;
  uint32_t cluster_x = 0, cluster_y = 0, cluster_z = 0;
  int32_t func_max_dyn_smem = -1;  // the function's dynamic shared memory limit; -1: default
  int32_t max_active_clusters = 0;
  int32_t max_cluster_size = 0;  // the driver's largest cluster for the function; 0: unknown

  bool operator==(const CacheKey&) const = default;
};
static_assert(sizeof(CacheKey) == 56, "CacheKey must have no padding");

class OccupancyCache {
 public:
  // Room for about `capacity` entries (rounded up to a power of two, at least 64).
  explicit OccupancyCache(size_t capacity);
  OccupancyCache(const OccupancyCache&) = delete;
  OccupancyCache& operator=(const OccupancyCache&) = delete;

  // Copies the cached fields for `key` into *out and returns true; false on a miss.
  // Any thread, wait-free (at most kMaxProbe slots inspected).
  bool Lookup(const CacheKey& key, schema::OccupancyFields* out) const noexcept;

  // Stores `fields` for `key`. Returns false when the key's probe window is full.
  // Any thread, lock-free.
  bool Insert(const CacheKey& key, const schema::OccupancyFields& fields) noexcept;

  size_t capacity() const { return mask_ + 1; }

  static constexpr int kMaxProbe = 16;

 private:
  enum : uint32_t { kEmpty = 0, kWriting = 1, kReady = 2 };
  struct alignas(64) Slot {
    std::atomic<uint32_t> state{kEmpty};
    uint32_t hash = 0;
    CacheKey key;
    schema::OccupancyFields fields;
  };
  static uint32_t Hash(const CacheKey& key) noexcept;

  std::unique_ptr<Slot[]> slots_;
  size_t mask_ = 0;
};

}  // namespace cuflight::occupancy

#endif  // CUFLIGHT_OCCUPANCY_OCCUPANCY_CACHE_H_
