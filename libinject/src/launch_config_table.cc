#include "launch_config_table.h"

#include <bit>

#include "mix64.h"

namespace cuflight::inject {
namespace {

constexpr uint64_t kPublished = uint64_t{1} << 63;

// Folds the next field into the running hash.
uint64_t Mix(uint64_t h, uint64_t v) noexcept {
  return Mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

uint64_t Field(int64_t value, int bits) noexcept {
  const int64_t limit = (int64_t{1} << bits) - 1;
  return value < 0 || value > limit ? 0 : static_cast<uint64_t>(value);
}

}  // namespace

uint64_t DriverOccupancy::Pack() const noexcept {
  const uint64_t blocks = max_active_blocks < 0 ? 0 : Field(int64_t{max_active_blocks} + 1, 16);
  return kPublished | blocks | Field(max_active_clusters, 24) << 16 |
         Field(max_cluster_size, 16) << 40;
}

DriverOccupancy DriverOccupancy::Unpack(uint64_t word) noexcept {
  DriverOccupancy out;
  out.max_active_blocks = static_cast<int32_t>(word & 0xffff) - 1;
  out.max_active_clusters = static_cast<int32_t>((word >> 16) & 0xffffff);
  out.max_cluster_size = static_cast<int32_t>((word >> 40) & 0xffff);
  return out;
}

LaunchConfigTable::LaunchConfigTable(size_t capacity) {
  const size_t n = std::bit_ceil(capacity < 64 ? size_t{64} : capacity);
  entries_ = std::make_unique<Entry[]>(n);
  mask_ = n - 1;
}

uint64_t LaunchConfigTable::Key(const LaunchConfigKey& c) noexcept {
  // Every field in its own bits of two words when it fits (blocks of up to 2047 x 2047 x 127,
  // clusters of up to 63 per dimension, 256 devices): two multiplies and one finaliser, which
  // the launch path pays at every launch. Anything larger is folded in field by field.
  const uint64_t carveout = static_cast<uint64_t>(static_cast<uint8_t>(c.carveout + 1));
  const uint64_t device = static_cast<uint64_t>(static_cast<uint32_t>(c.device));
  const bool fits = c.block[0] < 2048 && c.block[1] < 2048 && c.block[2] < 128 &&
                    c.cluster[0] < 64 && c.cluster[1] < 64 && c.cluster[2] < 64 && device < 256 &&
                    c.carveout >= -1 && c.carveout < 255;
  uint64_t h;
  if (fits) {
    const uint64_t shape = uint64_t{c.block[0]} | uint64_t{c.block[1]} << 11 |
                           uint64_t{c.block[2]} << 22 | carveout << 29 | device << 37 |
                           uint64_t{c.cluster[0]} << 45 | uint64_t{c.cluster[1]} << 51 |
                           uint64_t{c.cluster[2]} << 57;
    h = Mix64((c.function ^ shape * 0x9e3779b97f4a7c15ULL) +
              uint64_t{c.dyn_smem} * 0xc2b2ae3d27d4eb4fULL);
  } else {
    h = Mix(c.function, (device << 32) | static_cast<uint32_t>(c.carveout));
    h = Mix(h, (uint64_t{c.block[0]} << 32) | c.block[1]);
    h = Mix(h, (uint64_t{c.block[2]} << 32) | c.dyn_smem);
    h = Mix(h, (uint64_t{c.cluster[0]} << 42) ^ (uint64_t{c.cluster[1]} << 21) ^ c.cluster[2]);
    h = Mix(h, 1);  // apart from every key of the packed form
  }
  return h == 0 ? 1 : h;  // 0 marks an empty entry
}

std::optional<DriverOccupancy> LaunchConfigTable::Find(const LaunchConfigKey& config) const noexcept {
  const uint64_t key = Key(config);
  size_t index = key & mask_;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) & mask_) {
    const Entry& e = entries_[index];
    const uint64_t k = e.key.load(std::memory_order_acquire);
    if (k == 0) return std::nullopt;
    if (k == key) {
      const uint64_t v = e.value.load(std::memory_order_acquire);
      if ((v & kPublished) == 0) return std::nullopt;
      return DriverOccupancy::Unpack(v);
    }
  }
  return std::nullopt;
}

void LaunchConfigTable::Insert(const LaunchConfigKey& config,
                               const DriverOccupancy& answer) noexcept {
  const uint64_t key = Key(config);
  const uint64_t value = answer.Pack();
  size_t index = key & mask_;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) & mask_) {
    Entry& e = entries_[index];
    uint64_t k = e.key.load(std::memory_order_acquire);
    if (k == 0 && e.key.compare_exchange_strong(k, key, std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
      e.value.store(value, std::memory_order_release);
      return;
    }
    if (k == key) {
      e.value.store(value, std::memory_order_release);
      return;
    }
  }
}

}  // namespace cuflight::inject
