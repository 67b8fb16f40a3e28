// Launches awaiting their kernel_time: (process_id, schema::JoinKey) -> a 32-bit value (the
// kernel name's series), in a fixed amount of memory. The join key (correlation_id, graph node,
// device; cuflight/schema/join_key.h) tells apart the kernel nodes of one graph launch and the
// devices of one multi-device cooperative launch, which share a correlation id.
//
// Design:
//  1. One allocation, in the constructor; Insert() and Take() never allocate.
//  2. Set-associative: a key hashes to one set of kWays entries. Insert into a full set evicts
//     the set's oldest entry (by a 32-bit insertion stamp), so the table as a whole forgets
//     roughly the oldest launches first while costing O(kWays) per operation. With at most a
//     quarter of the entries in use, a given set overflows with probability below 3e-4
//     (Poisson, mean 2 per set of 8).
//  3. Not thread-safe: one thread at a time (Metrics calls it from the ingest thread only).
#ifndef CUFLIGHT_METRICS_JOIN_TABLE_H_
#define CUFLIGHT_METRICS_JOIN_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "cuflight/schema/join_key.h"

namespace cuflight::collector {

class JoinTable {
 public:
  static constexpr size_t kWays = 8;

  // Room for `capacity` entries, rounded up to a power of two, at least 64.
  explicit JoinTable(size_t capacity);
  JoinTable(const JoinTable&) = delete;
  JoinTable& operator=(const JoinTable&) = delete;

  // Remembers key -> value (replacing the value of an equal key). Returns true when an older
  // entry was evicted to make room.
  bool Insert(uint64_t process_id, const schema::JoinKey& key, uint32_t value);
  // Starts loading the set `key` maps to into the cache (a hint; changes nothing).
  void Prefetch(uint64_t process_id, const schema::JoinKey& key) const;
  // Removes the key and returns its value; nullopt if absent.
  std::optional<uint32_t> Take(uint64_t process_id, const schema::JoinKey& key);
  // Removes every entry of `process_id`; returns how many. O(capacity).
  size_t ForgetProcess(uint64_t process_id);

  // The set `key` maps to, in [0, capacity() / kWays).
  size_t SetIndex(uint64_t process_id, const schema::JoinKey& key) const;

  size_t size() const { return size_; }
  size_t capacity() const { return mask_ + 1; }

 private:
  struct Entry {
    uint64_t process_id = 0;
    uint64_t correlation_id = 0;
    uint64_t graph_node_id = 0;
    int32_t device = 0;
    uint32_t value = 0;
    uint32_t stamp = 0;  // insertion order; 0 = empty

    bool Holds(uint64_t process, const schema::JoinKey& key) const {
      return process_id == process && correlation_id == key.correlation_id &&
             graph_node_id == key.graph_node_id && device == key.device;
    }
  };
  // 36 bytes of fields, 40 with the alignment padding: a set of kWays is 320 bytes (5 lines).
  static_assert(sizeof(Entry) == 40);

  Entry* SetOf(uint64_t process_id, const schema::JoinKey& key);
  uint32_t NextStamp();

  // One allocation aligned to 2 MiB and advised for transparent huge pages: the table is larger
  // than the caches, and its random probes would otherwise miss the TLB too.
  struct FreeEntries {
    void operator()(Entry* entries) const;
  };
  std::unique_ptr<Entry[], FreeEntries> entries_;
  size_t mask_ = 0;  // capacity - 1
  size_t size_ = 0;
  uint32_t clock_ = 0;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_METRICS_JOIN_TABLE_H_
