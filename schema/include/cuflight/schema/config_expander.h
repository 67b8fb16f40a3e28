// Interned kernel configurations (docs/protocol.md, "Interned configurations"): a kernel event
// is sent as the kernel_config that describes its launch-invariant members, once per sequence,
// and one short `launch` per launch naming it. This header is the one definition of the split
// (what a producer sends) and of the expansion (what every reader turns a launch back into).
//
// 1. Split(kernel, id) gives the kernel_config and the launch of a kernel event; Expand(config,
//    launch) gives the kernel event back, member for member: Expand(Split(k)) == k, header
//    included (the launch's). tests/schema/config_expander_test.cc holds the two together, and
//    holds the expansion of an encoded pair to Decode of the kernel line the producer would
//    have written.
// 1a. Per-grid figures are derived, not sent. Given the wave the producer counted the launch's
//    `waves` and `tail_utilization` in (waves.h, WaveShape: what occupancy::ComputeWaves
//    returned), Split writes it in the kernel_config (`wave_size`, `wave_of_clusters`) and leaves
//    the two figures out of the launch whenever schema::WavesOf gives them back bit for bit from
//    the launch's grid (always, for a producer's own figures; the check keeps Expand(Split(k)) ==
//    k for any k). Expand takes a launch's figures when it carries them (lines written before
//    wave_size, or a kernel event whose figures no wave gives) and computes them otherwise; with
//    neither, they are 0 ("unknown", as the kernel event's).
// 2. ConfigExpander is a reader's table of one sequence (a connection, a spill file, a log
//    segment; the producer describes every configuration again at the start of each): it
//    remembers each kernel_config and turns each launch into its kernel event. What it refuses
//    it names (ExpandVerdict): a launch naming an id not described in the sequence (another
//    producer's id is one); an id described again differently; more configurations than
//    the table holds (bounded: a producer flooding the reader with descriptions costs it at most
//    max_configs of them).
// 3. A kernel_config described again identically is accepted (a producer resends its
//    descriptions with its preamble on every connection and at the start of every spill file).
// 4. Thread contract: none; one expander per sequence and thread.
#ifndef CUFLIGHT_SCHEMA_CONFIG_EXPANDER_H_
#define CUFLIGHT_SCHEMA_CONFIG_EXPANDER_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "cuflight/schema/event_fields.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/waves.h"

namespace cuflight::schema {

// True when two doubles are the same bits (-0 is not 0): what a line would write.
constexpr bool SameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// The waves of a launch of `grid` described by `config`, one wave being its wave_size (0 and 0
// when the description does not say: a reader then needs the launch's own).
template <class S>
GridWaves WavesOfLaunch(const BasicKernelConfigEvent<S>& config, const Dim3& grid) {
  if (!config.wave_size) return {};
  const uint64_t cluster_blocks =
      config.cluster ? DimCount(config.cluster->x, config.cluster->y, config.cluster->z) : 1;
  return WavesOf(DimCount(grid.x, grid.y, grid.z), cluster_blocks,
                 {*config.wave_size, config.wave_of_clusters});
}

// The kernel_config and the launch a kernel event is sent as, the configuration's id being `id`
// and `wave` the wave its figures were counted in (point 1a; nullopt: not said, the launch
// carries them). The config's header is the kernel event's; strings are views into the kernel
// event's (View) or copies (Owned).
template <class S>
void Split(const BasicKernelEvent<S>& k, uint64_t id, BasicKernelConfigEvent<S>* config,
           BasicLaunchEvent<S>* launch, std::optional<WaveShape> wave = std::nullopt) {
  config->header = k.header;
  config->config = id;
  config->device = k.device;
  config->context = k.context;
  config->stream = k.stream;
  config->api = k.api;
  config->name = k.name;
  config->demangled = k.demangled;
  config->block = k.block;
  config->cluster = k.cluster;
  config->num_regs = k.num_regs;
  config->static_shared_bytes = k.static_shared_bytes;
  config->dyn_shared_bytes = k.dyn_shared_bytes;
  config->local_bytes = k.local_bytes;
  config->const_bytes = k.const_bytes;
  config->max_threads_per_block = k.max_threads_per_block;
  config->carveout = k.carveout;
  config->cooperative = k.cooperative;
  config->occupancy = k.occupancy;
  config->occupancy.waves = 0;  // per launch
  config->occupancy.tail_utilization = 0;
  config->occupancy_source = k.occupancy_source;
  config->engine_max_active_blocks = k.engine_max_active_blocks;
  config->sm_count = k.sm_count;
  config->wave_size.reset();
  config->wave_of_clusters = false;
  if (wave) {
    config->wave_size = wave->size;
    config->wave_of_clusters = wave->clusters;
  }
  launch->header = k.header;
  launch->tid = k.tid;
  launch->correlation_id = k.correlation_id;
  launch->config = id;
  launch->grid = k.grid;
  launch->graph_id = k.graph_id;
  launch->graph_node_id = k.graph_node_id;
  const GridWaves derived = WavesOfLaunch(*config, k.grid);
  if (wave && SameBits(derived.waves, k.occupancy.waves) &&
      SameBits(derived.tail_utilization, k.occupancy.tail_utilization)) {
    launch->waves.reset();
    launch->tail_utilization.reset();
  } else {
    launch->waves = k.occupancy.waves;
    launch->tail_utilization = k.occupancy.tail_utilization;
  }
  launch->recovered = k.recovered;
  launch->timing_window = k.timing_window;
}

// The members of the kernel event `launch` stands for that the launch gives (header, ids, grid,
// graph ids, its waves, recovered, timing_window), its configuration being `config` (the caller
// checked that launch.config names it): what Expand writes after the configuration's members. A
// reader that keeps one kernel event per configuration, fully expanded once, calls this for the
// configuration's later launches: the description of an id never changes within its sequence
// (ConfigExpander refuses a different one), so the configuration's members are already there.
// Allocation-free.
template <class S, class T>
void ExpandLaunch(const BasicKernelConfigEvent<S>& config, const BasicLaunchEvent<S>& launch,
                  BasicKernelEvent<T>* out) {
  out->header = launch.header;
  out->tid = launch.tid;
  out->correlation_id = launch.correlation_id;
  out->grid = launch.grid;
  out->graph_id = launch.graph_id;
  out->graph_node_id = launch.graph_node_id;
  if (launch.waves && launch.tail_utilization) {
    out->occupancy.waves = *launch.waves;
    out->occupancy.tail_utilization = *launch.tail_utilization;
  } else {
    const GridWaves derived = WavesOfLaunch(config, launch.grid);
    out->occupancy.waves = launch.waves.value_or(derived.waves);
    out->occupancy.tail_utilization = launch.tail_utilization.value_or(derived.tail_utilization);
  }
  out->recovered = launch.recovered;
  out->timing_window = launch.timing_window;
}

// The kernel event `launch` stands for, its configuration being `config` (the caller checked
// that launch.config names it): the configuration's members, then the launch's (ExpandLaunch).
// Reuses *out's string storage.
template <class S, class T>
void Expand(const BasicKernelConfigEvent<S>& config, const BasicLaunchEvent<S>& launch,
            BasicKernelEvent<T>* out) {
  out->device = config.device;
  out->context = config.context;
  out->stream = config.stream;
  out->api = config.api;
  out->name = config.name;
  out->demangled = config.demangled;
  out->block = config.block;
  out->cluster = config.cluster;
  out->num_regs = config.num_regs;
  out->static_shared_bytes = config.static_shared_bytes;
  out->dyn_shared_bytes = config.dyn_shared_bytes;
  out->local_bytes = config.local_bytes;
  out->const_bytes = config.const_bytes;
  out->max_threads_per_block = config.max_threads_per_block;
  out->carveout = config.carveout;
  out->cooperative = config.cooperative;
  out->occupancy = config.occupancy;
  out->occupancy_source = config.occupancy_source;
  out->engine_max_active_blocks = config.engine_max_active_blocks;
  out->sm_count = config.sm_count;
  ExpandLaunch(config, launch, out);
}

// *to = from, in either storage, header and id included.
#define CUFLIGHT_COPY_MEMBER(kind, name, member, ...) to->member = from.member;
#define CUFLIGHT_COPY_NO_RULE(name, trigger)
template <class S, class T>
void CopyConfig(const BasicKernelConfigEvent<S>& from, BasicKernelConfigEvent<T>* to) {
  to->header = from.header;
  to->occupancy = from.occupancy;  // has_cluster and the zeroed per-grid figures too
  CUFLIGHT_SCHEMA_KERNEL_CONFIG(CUFLIGHT_COPY_MEMBER, CUFLIGHT_COPY_NO_RULE)
}
#undef CUFLIGHT_COPY_MEMBER
#undef CUFLIGHT_COPY_NO_RULE

// True when two descriptions describe the same configuration, their headers and ids aside: every
// member of the kernel_config table (event_fields.h) compared, in either storage.
#define CUFLIGHT_SAME_MEMBER(kind, name, member, ...) \
  &&(std::string_view(#name) == "config" || a.member == b.member)
#define CUFLIGHT_SAME_NO_RULE(name, trigger)
template <class S, class T>
bool SameConfig(const BasicKernelConfigEvent<S>& a, const BasicKernelConfigEvent<T>& b) {
  return a.occupancy.has_cluster == b.occupancy.has_cluster
      CUFLIGHT_SCHEMA_KERNEL_CONFIG(CUFLIGHT_SAME_MEMBER, CUFLIGHT_SAME_NO_RULE);
}
#undef CUFLIGHT_SAME_MEMBER
#undef CUFLIGHT_SAME_NO_RULE

// What ConfigExpander::Feed did with an event.
enum class ExpandVerdict : uint8_t {
  kPassed = 0,       // neither a kernel_config nor a launch: left as it is
  kDescribed,        // a kernel_config, remembered (or the same description again); left as is
  kExpanded,         // a launch, replaced by its kernel event
  kUnknownConfig,    // a launch naming an id not described in the sequence (or by another
                     // producer); left as it is
  kConfigRedefined,  // a kernel_config for a described id, describing something else; ignored
  kConfigFlood,      // a kernel_config beyond the table's bound; ignored
};
inline constexpr int kExpandVerdictCount = 6;

// Stable snake_case names, for metrics and messages: "passed", "described", "expanded",
// "unknown_config", "config_redefined", "config_flood".
constexpr std::string_view ExpandVerdictName(ExpandVerdict verdict) {
  constexpr std::string_view kNames[kExpandVerdictCount] = {
      "passed", "described", "expanded", "unknown_config", "config_redefined", "config_flood"};
  const auto i = static_cast<size_t>(verdict);
  return i < kExpandVerdictCount ? kNames[i] : "unknown";
}

// True for the verdicts that refuse the event.
constexpr bool Refused(ExpandVerdict verdict) {
  return verdict >= ExpandVerdict::kUnknownConfig;
}

// The most configurations one sequence describes before its descriptions are refused as a flood.
// A producer sends full kernel events for configurations beyond its own table (the same bound).
inline constexpr size_t kMaxConfigsPerSequence = 4096;

class ConfigExpander {
 public:
  explicit ConfigExpander(size_t max_configs = kMaxConfigsPerSequence)
      : max_configs_(max_configs) {}

  // Remembers a kernel_config, expands a launch in place into its kernel event (reusing the
  // kernel event storage of `scratch_` across calls), passes any other event. May throw
  // std::bad_alloc.
  ExpandVerdict Feed(OwnedEvent* event);

  // Remembers one description; as Feed for a kernel_config.
  ExpandVerdict Describe(const OwnedKernelConfigEvent& config);

  // The description of `id`, or nullptr.
  const OwnedKernelConfigEvent* Find(uint64_t id) const {
    const auto it = configs_.find(id);
    return it == configs_.end() ? nullptr : &it->second;
  }

  // Forgets every description: a new sequence starts.
  void Reset() { configs_.clear(); }

  size_t size() const { return configs_.size(); }

 private:
  size_t max_configs_;
  std::unordered_map<uint64_t, OwnedKernelConfigEvent> configs_;
};

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_CONFIG_EXPANDER_H_
