// The kernel configurations this process has described (docs/protocol.md, "Interned
// configurations"): the sender thread's table from a configuration to the id its kernel_config
// gave it, so that each later launch of it goes out as a short `launch` line.
//
// 1. Sender thread only; nothing here is on the launch hot path (the thread builds the kernel
//    event from the ring record as before, then looks its configuration up here).
// 2. Keyed by content: every member of the kernel_config (schema::SameConfig), strings copied in
//    (a FunctionInfo's names are freed once the function is retired; an id stays valid for the
//    life of the process, so a later function with the same names and figures reuses it).
// 3. Bounded (kMaxConfigs): past the bound, and for a configuration whose description the
//    transport refused (its preamble storage full), Find gives kSendWhole and the launch goes out
//    as a self-contained kernel event, as before interning.
// 4. Every description is part of the transport's preamble (transport/sender.h, point 5): it goes
//    out again on every new connection and at the start of every spill file, before the first
//    launch that names it there, so each sequence is readable alone.
#ifndef CUFLIGHT_LIBINJECT_SRC_CONFIG_TABLE_H_
#define CUFLIGHT_LIBINJECT_SRC_CONFIG_TABLE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/events.h"

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

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CONFIG_TABLE_H_
