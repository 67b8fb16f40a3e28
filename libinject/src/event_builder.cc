#include "event_builder.h"

#include <algorithm>

namespace cuflight::inject {
namespace {

uint32_t Clamp32(int32_t v) { return v < 0 ? 0u : static_cast<uint32_t>(v); }

}  // namespace

bool EventBuilder::Occupancy(uint64_t function_key, const DeviceInfo& device,
                             const occupancy::LaunchConfig& launch,
                             schema::OccupancyFields* out) noexcept {
  if (!device.engine) return false;
  occupancy::CacheKey key;
  key.function = function_key;
  key.device = static_cast<uint32_t>(device.ordinal);
  key.block_x = launch.block.x;
  key.block_y = launch.block.y;
  key.block_z = launch.block.z;
  key.dyn_smem = static_cast<uint32_t>(launch.dyn_smem);
  key.carveout = launch.carveout;
  key.cluster_x = launch.cluster.x;
  key.cluster_y = launch.cluster.y;
  key.cluster_z = launch.cluster.z;
  key.func_max_dyn_smem = static_cast<int32_t>(launch.func_max_dyn_smem);
  key.max_active_clusters = launch.max_active_clusters;
  key.max_cluster_size = launch.max_cluster_size;
  if (cache_.Lookup(key, out)) {
    ++hits_;
  } else {
    ++misses_;
    occupancy::Result result;
    if (occupancy::Compute(*device.engine, launch, &result) != occupancy::Status::kOk) {
      return false;
    }
    *out = result.fields;
    cache_.Insert(key, *out);
  }
  occupancy::ComputeWaves(device.limits.sm_count, launch, out);
  return true;
}

void EventBuilder::ApplyDriver(int32_t driver_blocks, const DeviceInfo& device,
                               const occupancy::LaunchConfig& launch,
                               schema::KernelEvent* out) noexcept {
  out->engine_max_active_blocks.reset();
  if (driver_blocks < 0) {
    out->occupancy_source = schema::OccupancySource::kEngine;
    return;
  }
  out->occupancy_source = schema::OccupancySource::kDriver;
  schema::OccupancyFields& f = out->occupancy;
  if (driver_blocks == f.max_active_blocks) return;
  disagreements_.fetch_add(1, std::memory_order_relaxed);
  out->engine_max_active_blocks = f.max_active_blocks;
  const int warp_size = device.limits.warp_size > 0 ? device.limits.warp_size : 32;
  const uint64_t threads = launch.block.count();
  const auto wpb = static_cast<int32_t>(
      std::min<uint64_t>((threads + static_cast<uint64_t>(warp_size) - 1) / warp_size, INT32_MAX));
  f.max_active_blocks = driver_blocks;
  f.active_warps = static_cast<int32_t>(
      std::min<int64_t>(int64_t{driver_blocks} * wpb, INT32_MAX));
  f.occupancy = f.max_warps > 0 ? std::min(1.0, static_cast<double>(f.active_warps) / f.max_warps)
                                : 0.0;
  // No resource the engine computes gives this count: none is named as the limit.
  f.limiting_resource = schema::Resource::kOther;
  f.limiting_resources = schema::MaskOf(schema::Resource::kOther);
  occupancy::ComputeWaves(device.limits.sm_count, launch, &f);
}

bool EventBuilder::BuildKernel(const LaunchRecord& record, const DeviceInfo& device,
                               schema::KernelEvent* out) noexcept {
  const FunctionInfo* f = record.function;
  if (f == nullptr || !f->attributes_ok) return false;
  occupancy::LaunchConfig launch;
  launch.regs_per_thread = f->num_regs;
  launch.static_smem = f->static_smem;
  launch.dyn_smem = record.dyn_smem;
  launch.block = {record.block[0], record.block[1], record.block[2]};
  launch.grid = {record.grid[0], record.grid[1], record.grid[2]};
  launch.func_max_threads_per_block = f->max_threads_per_block;
  launch.func_max_dyn_smem = record.func_max_dyn_smem;
  launch.carveout = record.carveout >= 0 ? record.carveout : record.func_carveout;
  launch.cluster = {record.cluster[0], record.cluster[1], record.cluster[2]};
  launch.non_portable_cluster_size_allowed = f->non_portable_cluster_allowed;
  launch.max_active_clusters = record.max_active_clusters;
  launch.max_cluster_size = record.max_cluster_size;
  // The FunctionInfo's id, not the handle or the address: a handle reused after an unload gets a
  // new FunctionInfo, and a freed FunctionInfo's address may come back for another function.
  if (!Occupancy(f->id, device, launch, &out->occupancy)) return false;
  ApplyDriver(record.driver_max_active_blocks, device, launch, out);

  out->tid = record.tid;
  out->device = record.device;
  out->context = record.context;
  out->stream = record.stream;
  out->correlation_id = record.correlation_id;
  out->api = LaunchApiName(record.api);
  out->name = f->name;
  out->demangled = f->demangled;
  out->grid = {record.grid[0], record.grid[1], record.grid[2]};
  out->block = {record.block[0], record.block[1], record.block[2]};
  if (launch.is_cluster()) {
    out->cluster = schema::Dim3{record.cluster[0], record.cluster[1], record.cluster[2]};
  } else {
    out->cluster.reset();
  }
  out->num_regs = f->num_regs;
  out->static_shared_bytes = f->static_smem;
  out->dyn_shared_bytes = record.dyn_smem;
  out->local_bytes = f->local_bytes;
  out->const_bytes = f->const_bytes;
  out->max_threads_per_block = f->max_threads_per_block;
  out->carveout = launch.carveout;
  out->cooperative = record.cooperative;
  out->graph_id.reset();
  out->graph_node_id.reset();
  return true;
}

bool EventBuilder::BuildGraphKernel(const KernelActivity& a, const DeviceInfo& device,
                                    std::string_view name, std::string_view demangled,
                                    schema::KernelEvent* out) noexcept {
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
  if (!Occupancy(reinterpret_cast<uintptr_t>(name.data()) ^ (uint64_t{1} << 63), device, launch,
                 &out->occupancy)) {
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
