#include "cuflight/blackbox/kernel_event.h"

#include <algorithm>
#include <cstdint>

namespace cuflight::blackbox {

bool KernelEventBuilder::Occupancy(uint64_t function_key, int32_t device,
                                   const occupancy::DeviceContext& engine,
                                   const occupancy::LaunchConfig& launch,
                                   schema::OccupancyFields* out,
                                   schema::WaveShape* wave) noexcept {
  occupancy::CacheKey key;
  key.function = function_key;
  key.device = static_cast<uint32_t>(device);
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
    if (occupancy::Compute(engine, launch, &result) != occupancy::Status::kOk) return false;
    *out = result.fields;
    cache_.Insert(key, *out);
  }
  const schema::WaveShape shape = occupancy::ComputeWaves(engine.limits().sm_count, launch, out);
  if (wave != nullptr) *wave = shape;
  return true;
}

void KernelEventBuilder::ApplyDriver(int32_t driver_blocks, const occupancy::DeviceLimits& limits,
                                     const occupancy::LaunchConfig& launch,
                                     schema::KernelEvent* out, schema::WaveShape* wave) noexcept {
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
  const int warp_size = limits.warp_size > 0 ? limits.warp_size : 32;
  const uint64_t threads = launch.block.count();
  const auto wpb = static_cast<int32_t>(
      std::min<uint64_t>((threads + static_cast<uint64_t>(warp_size) - 1) / warp_size, INT32_MAX));
  f.max_active_blocks = driver_blocks;
  f.active_warps = static_cast<int32_t>(std::min<int64_t>(int64_t{driver_blocks} * wpb, INT32_MAX));
  f.occupancy =
      f.max_warps > 0 ? std::min(1.0, static_cast<double>(f.active_warps) / f.max_warps) : 0.0;
  // No resource the engine computes gives this count: none is named as the limit.
  f.limiting_resource = schema::Resource::kOther;
  f.limiting_resources = schema::MaskOf(schema::Resource::kOther);
  const schema::WaveShape shape = occupancy::ComputeWaves(limits.sm_count, launch, &f);
  if (wave != nullptr) *wave = shape;
}

bool KernelEventBuilder::BuildFrom(const LaunchFields& record, const FunctionFacts& f,
                                   const occupancy::DeviceContext& engine,
                                   schema::KernelEvent* out, schema::WaveShape* wave) noexcept {
  if (!f.attributes_ok) return false;
  occupancy::LaunchConfig launch;
  launch.regs_per_thread = f.num_regs;
  launch.static_smem = f.static_smem;
  launch.dyn_smem = record.dyn_smem;
  launch.block = {record.block[0], record.block[1], record.block[2]};
  launch.grid = {record.grid[0], record.grid[1], record.grid[2]};
  launch.func_max_threads_per_block = f.max_threads_per_block;
  launch.func_max_dyn_smem = record.func_max_dyn_smem;
  launch.carveout = record.carveout >= 0 ? record.carveout : record.func_carveout;
  launch.cluster = {record.cluster[0], record.cluster[1], record.cluster[2]};
  launch.non_portable_cluster_size_allowed = f.non_portable_cluster_allowed;
  launch.max_active_clusters = record.max_active_clusters;
  launch.max_cluster_size = record.max_cluster_size;
  if (!Occupancy(f.key, record.device, engine, launch, &out->occupancy, wave)) return false;
  ApplyDriver(record.driver_max_active_blocks, engine.limits(), launch, out, wave);
  // A launch into a partition of the device (a green context, a limited MPS client): its waves
  // are counted over the SMs it may use, and the event says how many.
  if (record.sm_count > 0 && record.sm_count < engine.limits().sm_count) {
    const schema::WaveShape shape =
        occupancy::ComputeWaves(record.sm_count, launch, &out->occupancy);
    if (wave != nullptr) *wave = shape;
    out->sm_count = record.sm_count;
  } else {
    out->sm_count.reset();
  }

  out->tid = record.tid;
  out->device = record.device;
  out->context = record.context;
  out->stream = record.stream;
  out->correlation_id = record.correlation_id;
  out->api = LaunchApiName(record.api);
  out->name = f.name;
  out->demangled = f.demangled;
  out->grid = {record.grid[0], record.grid[1], record.grid[2]};
  out->block = {record.block[0], record.block[1], record.block[2]};
  if (launch.is_cluster()) {
    out->cluster = schema::Dim3{record.cluster[0], record.cluster[1], record.cluster[2]};
  } else {
    out->cluster.reset();
  }
  out->num_regs = f.num_regs;
  out->static_shared_bytes = f.static_smem;
  out->dyn_shared_bytes = record.dyn_smem;
  out->local_bytes = f.local_bytes;
  out->const_bytes = f.const_bytes;
  out->max_threads_per_block = f.max_threads_per_block;
  out->carveout = launch.carveout;
  out->cooperative = record.cooperative;
  out->graph_id.reset();
  out->graph_node_id.reset();
  out->recovered = false;
  return true;
}

void BuildDeviceEvent(int32_t ordinal, std::string_view name, std::string_view uuid,
                      const occupancy::DeviceLimits& l, schema::DeviceEvent* out) noexcept {
  out->device = ordinal;
  out->name = name;
  out->uuid = uuid;
  out->cc_major = l.cc_major;
  out->cc_minor = l.cc_minor;
  out->sm_count = l.sm_count;
  out->max_threads_per_block = l.max_threads_per_block;
  out->max_threads_per_sm = l.max_threads_per_sm;
  out->max_blocks_per_sm = l.max_blocks_per_sm;
  out->regs_per_sm = l.regs_per_sm;
  out->regs_per_block = l.regs_per_block;
  out->smem_per_sm = l.smem_per_sm;
  out->smem_per_block = l.smem_per_block;
  out->smem_per_block_optin = l.smem_per_block_optin;
  out->reserved_smem_per_block = l.reserved_smem_per_block;
  out->warp_size = l.warp_size;
  out->max_cluster_size = l.max_cluster_size;
  out->recovered = false;
}

}  // namespace cuflight::blackbox
