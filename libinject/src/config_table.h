// The kernel configurations this process has described (docs/protocol.md, "Interned
// configurations"): the sender thread's tables from a configuration to the id its kernel_config
// gave it, so that each later launch of it goes out as a short `launch` line.
//
// 1. Sender thread only; nothing here is on the launch hot path.
// 2. Two levels. A launch record is looked up first by what the record itself says
//    (RecordConfigs, points 5-8): a hit gives the id and the few figures the sender needs
//    besides, and the launch line is made from the record with no kernel event built and no
//    occupancy computed. Only a miss builds the kernel event as before and looks its
//    description up by content (ConfigTable), describing it when new.
// 3. ConfigTable is keyed by content: every member of the kernel_config (schema::SameConfig),
//    strings copied in (a FunctionInfo's names are freed once the function is retired; an id
//    stays valid for the life of the process, so a later function with the same names and
//    figures reuses it). It stays as the second level for that reason: two record keys of equal
//    content (a module unloaded and loaded again, a new FunctionInfo for the same code) share one
//    description; and graph kernel nodes, which have no launch record, use it alone.
// 4. Bounded (kMaxConfigs): past the bound, and for a configuration whose description the
//    transport refused (its preamble storage full), Find gives kSendWhole and the launch goes out
//    as a self-contained kernel event, as before interning. Every description is part of the
//    transport's preamble (transport/sender.h, point 5): it goes out again on every new
//    connection and at the start of every spill file, before the first launch that names it
//    there, so each sequence is readable alone.
// 5. RecordConfigs' key is every member of a launch record the kernel event's
//    launch-invariant members are made of (blackbox::KernelEventBuilder::BuildFrom; what
//    schema::Split puts in the kernel_config): the function's FunctionInfo::id (never reused, so
//    a function retired and another loaded at the same handle or address has another key:
//    function_table.h, point 5), device, context, stream, launch API, cooperative flag, block,
//    cluster, dynamic shared memory, the launch's and the function's carveout, the function's
//    dynamic shared memory limit, and the driver's answers the record carries (resident blocks,
//    active clusters, largest cluster) and the context's SMs. A FunctionInfo never changes and
//    a device's DeviceInfo is published once (device_table.h), so equal keys give equal
//    descriptions. The grid, the correlation id, the thread, the time and the other launch
//    flags (timing window, programmatic serialization) are the launch's.
// 6. An entry keeps the configuration's id and what the sender needs of the kernel event
//    besides the record: the occupancy figure (for the stall tracker) and whether the driver's
//    resident blocks differed from the engine's (counted per launch, as occupancy_disagreements).
//    The names come from the record's FunctionInfo, alive while its record is handled. The
//    launch's waves are left for the reader to derive from the grid and the description's
//    wave_size (schema::Split, config_expander.h point 1a): the wave does not depend on the grid
//    (occupancy::WaveShapeOf), and an entry is made only from a launch whose Split left them out.
// 7. Only ids a description was sent for are entered: a configuration that goes out whole (past
//    the bound, or refused) misses here every time and takes the path of point 2, which gives
//    kSendWhole again.
// 8. A fixed table (kSlots of 104 bytes, 832 KiB, open addressing, allocated at the first entry):
//    a lookup tries the slot found last, then hashes the key and compares it; nothing is
//    allocated on a hit nor after the first entry. Past kMaxEntries (half the slots) a new key
//    is not entered, and its launches take the path of point 2.
#ifndef CUFLIGHT_LIBINJECT_SRC_CONFIG_TABLE_H_
#define CUFLIGHT_LIBINJECT_SRC_CONFIG_TABLE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "cuflight/blackbox/launch_record.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/events.h"
#include "mix64.h"

namespace cuflight::inject {

class ConfigTable {
 public:
  // The bound: schema::kMaxConfigsPerSequence, the collector's bound on one producer's sequence.
  static constexpr size_t kMaxConfigs = schema::kMaxConfigsPerSequence;
  // Find's answer for a configuration that goes out whole.
  static constexpr uint64_t kSendWhole = ~uint64_t{0};

  // The id given to `config` (its own header and id ignored); 0 when it was never seen.
  uint64_t Find(const schema::KernelConfigEvent& config) const noexcept {
    // Launches come in runs of one configuration: the last one found first, no hash.
    if (last_ != nullptr && schema::SameConfig(last_->config, config)) return last_->id;
    const auto [first, last] = entries_.equal_range(HashOf(config));
    for (auto it = first; it != last; ++it) {
      if (schema::SameConfig(it->second.config, config)) {
        last_ = &it->second;
        return it->second.id;
      }
    }
    return 0;
  }

  bool full() const noexcept { return entries_.size() >= kMaxConfigs; }

  // Remembers `config` under `id` (kSendWhole: a configuration that goes out whole from now on).
  // May throw std::bad_alloc.
  void Add(const schema::KernelConfigEvent& config, uint64_t id) {
    Entry entry{id, {}};
    schema::CopyConfig(config, &entry.config);
    last_ = &entries_.emplace(HashOf(config), std::move(entry))->second;
  }

  size_t size() const noexcept { return entries_.size(); }

 private:
  struct Entry {
    uint64_t id;
    schema::OwnedKernelConfigEvent config;
  };

  // Cheap and good enough to spread the configurations: the numbers that differ between them
  // and the ends of the mangled name (collisions are compared in full).
  static uint64_t HashOf(const schema::KernelConfigEvent& c) noexcept {
    uint64_t h = 0x9E3779B97F4A7C15u;
    const auto mix = [&h](uint64_t v) {
      h ^= v + 0x9E3779B97F4A7C15u + (h << 6) + (h >> 2);
    };
    mix(c.stream);
    mix(c.context);
    mix(static_cast<uint64_t>(c.device));
    mix(c.block.x | uint64_t{c.block.y} << 32);
    mix(c.block.z | static_cast<uint64_t>(c.dyn_shared_bytes) << 20);
    mix(static_cast<uint64_t>(c.carveout + 1) | uint64_t{c.cooperative} << 8 |
        uint64_t{c.cluster.has_value()} << 9);
    mix(c.name.size() | c.api.size() << 24);
    uint64_t head = 0;
    uint64_t tail = 0;
    const size_t n = std::min<size_t>(c.name.size(), 8);
    if (n != 0) {
      std::memcpy(&head, c.name.data(), n);
      std::memcpy(&tail, c.name.data() + c.name.size() - n, n);
    }
    mix(head);
    mix(tail);
    return h;
  }

  std::unordered_multimap<uint64_t, Entry> entries_;
  // The entry Find or Add saw last (a node's address stays valid across rehashing).
  mutable const Entry* last_ = nullptr;
};


// The first level (points 5-8): a configuration by what its launch record says.
class RecordConfigs {
 public:
  static constexpr size_t kSlots = 2 * ConfigTable::kMaxConfigs;  // a power of 2
  static constexpr size_t kMaxEntries = ConfigTable::kMaxConfigs;  // at most half full
  static_assert((kSlots & (kSlots - 1)) == 0);

  // The members of point 5, packed into words: built in registers and compared a word at a time
  // (a key stored field by field and read back in wider words would stall store forwarding).
  struct Key {
    static constexpr int kWords = 10;
    uint64_t w[kWords] = {};

    bool operator==(const Key& other) const noexcept {
      uint64_t differ = 0;
      for (int i = 0; i < kWords; ++i) differ |= w[i] ^ other.w[i];
      return differ == 0;
    }

    // The key of a launch record whose function is `function_id`.
    template <typename R>
    static Key Of(const R& r, uint64_t function_id) noexcept {
      const auto u32 = [](int32_t v) { return uint64_t{static_cast<uint32_t>(v)}; };
      Key k;
      k.w[0] = function_id;
      k.w[1] = r.context;
      k.w[2] = r.stream;
      k.w[3] = r.block[0] | uint64_t{r.block[1]} << 32;
      k.w[4] = r.block[2] | uint64_t{r.cluster[0]} << 32;
      k.w[5] = r.cluster[1] | uint64_t{r.cluster[2]} << 32;
      k.w[6] = r.dyn_smem | u32(r.carveout) << 32;
      k.w[7] = u32(r.func_max_dyn_smem) | u32(r.func_carveout) << 32;
      k.w[8] = u32(r.max_active_clusters) |
               uint64_t{static_cast<uint16_t>(r.driver_max_active_blocks)} << 32 |
               uint64_t{r.max_cluster_size} << 48;
      k.w[9] = r.sm_count | uint64_t{static_cast<uint8_t>(r.device)} << 16 |
               uint64_t{static_cast<uint8_t>(r.api)} << 24 |
               uint64_t{(r.launch_flags & blackbox::kLaunchCooperative) != 0} << 32;
      return k;
    }
  };

  struct Entry {
    uint64_t id = 0;  // 0: an empty slot
    double occupancy = 0;  // the kernel event's occupancy.occupancy
    bool disagreement = false;  // engine_max_active_blocks was set
  };

  // The entry of `key`, or nullptr.
  const Entry* Find(const Key& key) const noexcept {
    // Launches come in runs of one configuration: the last one found first, no hash.
    if (last_ != nullptr && last_->key == key) return &last_->entry;
    if (slots_ == nullptr) return nullptr;
    for (size_t i = HashOf(key) & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Slot& s = slots_[i];
      if (s.entry.id == 0) return nullptr;
      if (s.key == key) {
        last_ = &s;
        return &s.entry;
      }
    }
  }

  // Enters `entry` (id != 0 and not ConfigTable::kSendWhole) under `key`; false when the table is
  // at kMaxEntries or its storage cannot be allocated (the launches then take point 2's path).
  bool Add(const Key& key, const Entry& entry) noexcept {
    if (size_ >= kMaxEntries) return false;
    if (slots_ == nullptr) {
      slots_.reset(new (std::nothrow) Slot[kSlots]);
      if (slots_ == nullptr) return false;
    }
    for (size_t i = HashOf(key) & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      Slot& s = slots_[i];
      if (s.entry.id != 0 && !(s.key == key)) continue;
      if (s.entry.id == 0) ++size_;
      s.key = key;
      s.entry = entry;
      last_ = &s;
      return true;
    }
  }

  size_t size() const noexcept { return size_; }

 private:
  struct Slot {
    Key key;
    Entry entry;
  };
  static_assert(sizeof(Slot) == 104);

  static uint64_t HashOf(const Key& k) noexcept {
    uint64_t h = 0;
    for (int i = 0; i < Key::kWords; ++i) h = (h ^ k.w[i]) * 0x9E3779B97F4A7C15u;
    return Mix64(h);
  }

  std::unique_ptr<Slot[]> slots_;
  size_t size_ = 0;
  mutable const Slot* last_ = nullptr;  // the slot Find or Add saw last
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CONFIG_TABLE_H_
