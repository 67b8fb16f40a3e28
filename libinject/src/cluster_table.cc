#include "cluster_table.h"

#include <bit>

#include "mix64.h"

namespace cuflight::inject {
namespace {

// Folds the next field into the running hash.
uint64_t Mix(uint64_t h, uint64_t v) noexcept {
  return Mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

}  // namespace

ClusterTable::ClusterTable(size_t capacity) {
  const size_t n = std::bit_ceil(capacity < 64 ? size_t{64} : capacity);
  entries_ = std::make_unique<Entry[]>(n);
  mask_ = n - 1;
}

uint64_t ClusterTable::Key(const ClusterConfig& c) noexcept {
  uint64_t h = Mix(0, c.function);
  h = Mix(h, static_cast<uint32_t>(c.device));
  for (int i = 0; i < 3; ++i) h = Mix(h, (uint64_t{c.block[i]} << 32) | c.cluster[i]);
  h = Mix(h, (uint64_t{c.dyn_smem} << 32) | static_cast<uint32_t>(c.carveout));
  return h == 0 ? 1 : h;  // 0 marks an empty entry
}

std::optional<int32_t> ClusterTable::Find(const ClusterConfig& config) const noexcept {
  const uint64_t key = Key(config);
  size_t index = key & mask_;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) & mask_) {
    const Entry& e = entries_[index];
    const uint64_t k = e.key.load(std::memory_order_acquire);
    if (k == 0) return std::nullopt;
    if (k == key) {
      const int32_t v = e.value.load(std::memory_order_acquire);
      if (v < 0) return std::nullopt;
      return v;
    }
  }
  return std::nullopt;
}

void ClusterTable::Insert(const ClusterConfig& config, int32_t max_active_clusters) noexcept {
  if (max_active_clusters < 0) return;
  const uint64_t key = Key(config);
  size_t index = key & mask_;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) & mask_) {
    Entry& e = entries_[index];
    uint64_t k = e.key.load(std::memory_order_acquire);
    if (k == 0 && e.key.compare_exchange_strong(k, key, std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
      e.value.store(max_active_clusters, std::memory_order_release);
      return;
    }
    if (k == key) {
      e.value.store(max_active_clusters, std::memory_order_release);
      return;
    }
  }
}

}  // namespace cuflight::inject
