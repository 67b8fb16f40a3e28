#include "event_builder.h"

#include <algorithm>

namespace cuflight::inject {
namespace {

uint32_t Clamp32(int32_t v) { return v < 0 ? 0u : static_cast<uint32_t>(v); }

}  // namespace

blackbox::FunctionFacts EventBuilder::FactsOf(const FunctionInfo& f) noexcept {
  blackbox::FunctionFacts facts;
  // The FunctionInfo's id, not the handle or the address: a handle reused after an unload gets a
  // new FunctionInfo, and a freed FunctionInfo's address may come back for another function.
  facts.key = f.id;
  facts.attributes_ok = f.attributes_ok;
  facts.num_regs = f.num_regs;
  facts.static_smem = f.static_smem;
  facts.local_bytes = f.local_bytes;
  facts.const_bytes = f.const_bytes;
  facts.max_threads_per_block = f.max_threads_per_block;
  facts.non_portable_cluster_allowed = f.non_portable_cluster_allowed;
  facts.name = f.name;
  facts.demangled = f.demangled;
  return facts;
}

bool EventBuilder::BuildKernel(const LaunchRecord& record, const DeviceInfo& device,
                               schema::KernelEvent* out, schema::WaveShape* wave) noexcept {
  if (record.function == nullptr || !device.engine) return false;
  return kernel_.Build(record, FactsOf(*record.function), *device.engine, out, wave);
}

bool EventBuilder::BuildGraphKernel(const KernelActivity& a, const DeviceInfo& device,
                                    std::string_view name, std::string_view demangled,
                                    schema::KernelEvent* out, schema::WaveShape* wave) noexcept {
  occupancy::LaunchConfig launch;
  launch.regs_per_thread = a.registersPerThread;
  launch.static_smem = a.staticSharedMemory;
  launch.dyn_smem = a.dynamicSharedMemory;
  launch.block = {Clamp32(a.blockX), Clamp32(a.blockY), Clamp32(a.blockZ)};
  launch.grid = {Clamp32(a.gridX), Clamp32(a.gridY), Clamp32(a.gridZ)};
  // The record does not carry __launch_bounds__; the launch ran, so its block fits whatever the
  // bound was, and the per-SM arithmetic does not depend on it.
  launch.func_max_threads_per_block = 0;
  // An opted-in function may use up to the device's opt-in limit.
  launch.func_max_dyn_smem =
      a.shmemLimitConfig == CUPTI_FUNC_SHMEM_LIMIT_OPTIN
          ? device.limits.smem_per_block_optin - a.staticSharedMemory
          : -1;
  launch.carveout = a.isSharedMemoryCarveoutRequested ? a.sharedMemoryCarveoutRequested : -1;
  launch.cluster = {a.clusterX, a.clusterY, a.clusterZ};
  launch.max_active_clusters = static_cast<int>(a.maxActiveClusters);
  // CUpti_ActivityKernel10.maxPotentialClusterSize: the driver's largest cluster for the
  // function, its non-portable-size attribute included; the node ran, so its own size fits.
  if (launch.is_cluster()) {
    launch.max_cluster_size = static_cast<int>(std::min<uint64_t>(
        std::max<uint64_t>(a.maxPotentialClusterSize, launch.cluster.count()), INT32_MAX));
    // A cluster above the portable 8 blocks runs only when the function set
    // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (CUDA Programming Guide, thread block
    // clusters): the record does not carry the attribute, but a node that ran that way had it.
    launch.non_portable_cluster_size_allowed = launch.cluster.count() > 8;
  }
  // Graph kernels have no stable function handle here: key the cache by the name's address,
  // which the caller keeps interned per distinct name for the life of the sender.
  if (!device.engine ||
      !kernel_.Occupancy(reinterpret_cast<uintptr_t>(name.data()) ^ (uint64_t{1} << 63),
                         device.ordinal, *device.engine, launch, &out->occupancy, wave)) {
    return false;
  }
  out->tid = 0;
  out->device = static_cast<int32_t>(a.deviceId);
  out->context = a.contextId;
  out->stream = a.streamId;
  out->correlation_id = a.correlationId;
  out->api = LaunchApiName(LaunchApi::kGraphLaunch);
  out->name = name;
  out->demangled = demangled;
  out->grid = {launch.grid.x, launch.grid.y, launch.grid.z};
  out->block = {launch.block.x, launch.block.y, launch.block.z};
  if (launch.is_cluster()) {
    out->cluster = schema::Dim3{a.clusterX, a.clusterY, a.clusterZ};
  } else {
    out->cluster.reset();
  }
  out->num_regs = a.registersPerThread;
  out->static_shared_bytes = a.staticSharedMemory;
  out->dyn_shared_bytes = a.dynamicSharedMemory;
  out->local_bytes = a.localMemoryPerThread;
  out->const_bytes = 0;
  out->max_threads_per_block = device.limits.max_threads_per_block;
  out->carveout = launch.carveout;
  out->cooperative = a.launchType == CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE ||
                     a.launchType == CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE;
  out->graph_id = a.graphId;
  out->graph_node_id = a.graphNodeId;
  // No CUfunction is at hand for an activity record: the engine's figure, said as such.
  out->occupancy_source = schema::OccupancySource::kEngine;
  out->engine_max_active_blocks.reset();
  out->sm_count.reset();  // a graph node's context is not asked: the device's SMs
  out->recovered = false;
  return true;
}

void EventBuilder::BuildKernelTime(const KernelActivity& a, schema::KernelTimeEvent* out) noexcept {
  out->correlation_id = a.correlationId;
  out->device = static_cast<int32_t>(a.deviceId);
  out->context = a.contextId;
  out->stream = a.streamId;
  out->start_ns = a.start;
  out->end_ns = a.end;
  out->duration_ns = a.end >= a.start ? a.end - a.start : 0;
  // cupti_activity.h, CUpti_ActivityKernel10.graphId/graphNodeId: non-zero only for a kernel
  // launched through the graph launch APIs. Every node of one graph launch carries that launch's
  // correlationId, so the node id is what joins this event to the node's own kernel event
  // (BuildGraphKernel, made for the same records: graphId != 0).
  if (a.graphId != 0) {
    out->graph_id = a.graphId;
    out->graph_node_id = a.graphNodeId;
  } else {
    out->graph_id.reset();
    out->graph_node_id.reset();
  }
}

}  // namespace cuflight::inject
