// The key that joins a kernel_time event to its kernel event within one producer process
// (docs/protocol.md, "Joining kernel_time to kernel"). Every reader that joins the two (the
// report and its timeline, the Perfetto export, `cuflight tail`, the collector's metrics) uses
// this one definition.
//
// A correlation id alone does not name one kernel execution:
//  - every kernel node of one cuGraphLaunch carries that launch's correlation id (CUPTI:
//    CUpti_ActivityKernel10.correlationId is the id of the API call that launched the kernel,
//    and graphNodeId tells the nodes apart), and
//  - the entries of one cuLaunchCooperativeKernelMultiDevice call share the call's correlation
//    id, one kernel per device.
// So the key is the correlation id, the graph node (0 when the kernel is not a graph node:
// cupti_activity.h documents graphNodeId as 0 then) and the device. An ordinary launch has one
// kernel on one device, so for it the key is its correlation id and device.
#ifndef CUFLIGHT_SCHEMA_JOIN_KEY_H_
#define CUFLIGHT_SCHEMA_JOIN_KEY_H_

#include <compare>
#include <cstddef>
#include <cstdint>

#include "cuflight/schema/events.h"

namespace cuflight::schema {

struct JoinKey {
  uint64_t correlation_id = 0;
  uint64_t graph_node_id = 0;  // 0: not a graph node
  int32_t device = 0;

  auto operator<=>(const JoinKey&) const = default;
};

// The join key of a kernel event / of a kernel_time event.
template <class S>
constexpr JoinKey JoinKeyOf(const BasicKernelEvent<S>& e) noexcept {
  return {e.correlation_id, e.graph_node_id.value_or(0), e.device};
}
template <class S>
constexpr JoinKey JoinKeyOf(const BasicKernelTimeEvent<S>& e) noexcept {
  return {e.correlation_id, e.graph_node_id.value_or(0), e.device};
}

// Whether a kernel_time may come for the launch, as its event says: not when it was made outside
// a timing window of CUFLIGHT_TIMING=sampled (`timing_window` false: "so none will come",
// schema/README.md). A reader that holds launches waiting for their kernel_time in a bounded
// table holds only these: under `sampled` most launches are the others, which would push the
// timed ones out before their time arrives.
template <class S>
constexpr bool ExpectsKernelTime(const BasicKernelEvent<S>& e) noexcept {
  return e.timing_window != false;
}

// A hash of the key for unordered containers (the key's three fields mixed, so that consecutive
// correlation ids and the nodes of one graph launch spread).
struct JoinKeyHash {
  size_t operator()(const JoinKey& k) const noexcept {
    uint64_t h = k.correlation_id * 0x9E3779B97F4A7C15ull;
    h ^= (k.graph_node_id + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2));
    h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.device)) + 0x85EBCA77C2B2AE63ull +
          (h << 6) + (h >> 2));
    return static_cast<size_t>(h);
  }
};

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_JOIN_KEY_H_
