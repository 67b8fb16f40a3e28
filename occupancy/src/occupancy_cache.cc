#include "cuflight/occupancy/occupancy_cache.h"

#include <bit>
#include <cstring>

namespace cuflight::occupancy {

OccupancyCache::OccupancyCache(size_t capacity) {
  const size_t n = std::bit_ceil(capacity < 64 ? size_t{64} : capacity);
  slots_ = std::make_unique<Slot[]>(n);
  mask_ = n - 1;
}

uint32_t OccupancyCache::Hash(const CacheKey& key) noexcept {
  // Multiply-xor over the key's six 8-byte words, one final fold: a handful of cycles, and the
  // high bits of function handles (which differ little) still reach the low bits used as index.
  uint64_t words[sizeof(CacheKey) / 8];
  std::memcpy(words, &key, sizeof(key));
  uint64_t h = 0;
  for (uint64_t w : words) h = (h ^ w) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  return static_cast<uint32_t>(h ^ (h >> 32));
}

bool OccupancyCache::Lookup(const CacheKey& key, schema::OccupancyFields* out) const noexcept {
  const uint32_t h = Hash(key);
  for (int i = 0; i < kMaxProbe; ++i) {
    const Slot& slot = slots_[(h + static_cast<size_t>(i)) & mask_];
    const uint32_t state = slot.state.load(std::memory_order_acquire);
    if (state == kEmpty) return false;
    if (state == kReady && slot.hash == h && std::memcmp(&slot.key, &key, sizeof(key)) == 0) {
      *out = slot.fields;
      return true;
    }
  }
  return false;
}

bool OccupancyCache::Insert(const CacheKey& key, const schema::OccupancyFields& fields) noexcept {
  const uint32_t h = Hash(key);
  for (int i = 0; i < kMaxProbe; ++i) {
    Slot& slot = slots_[(h + static_cast<size_t>(i)) & mask_];
    uint32_t state = slot.state.load(std::memory_order_acquire);
    if (state == kReady && slot.hash == h && slot.key == key) return true;
    if (state != kEmpty) continue;
    if (!slot.state.compare_exchange_strong(state, kWriting, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
      continue;
    }
    slot.hash = h;
    slot.key = key;
    slot.fields = fields;
    slot.state.store(kReady, std::memory_order_release);
    return true;
  }
  return false;
}

}  // namespace cuflight::occupancy
