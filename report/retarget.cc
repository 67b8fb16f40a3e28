#include "cuflight/report/retarget.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "cuflight/report/text_format.h"

namespace cuflight::report {

occupancy::LaunchConfig LaunchOf(const schema::OwnedKernelEvent& k,
                                 const occupancy::DeviceLimits& target) {
  occupancy::LaunchConfig l;
  l.regs_per_thread = k.num_regs;
  l.static_smem = k.static_shared_bytes;
  l.dyn_smem = k.dyn_shared_bytes;
  l.block = {k.block.x, k.block.y, k.block.z};
  l.grid = {k.grid.x, k.grid.y, k.grid.z};
  l.func_max_threads_per_block = k.max_threads_per_block;
  l.carveout = k.carveout;
  if (k.static_shared_bytes + k.dyn_shared_bytes > target.smem_per_block) {
    l.func_max_dyn_smem = k.dyn_shared_bytes;
  }
  if (k.cluster) l.cluster = {k.cluster->x, k.cluster->y, k.cluster->z};
  return l;
}

Retarget RetargetSignature(const Signature& sig, const occupancy::DeviceContext& device) {
  Retarget out;
  const occupancy::LaunchConfig launch = LaunchOf(sig.first, device.limits());
  const occupancy::Status status = occupancy::Compute(device, launch, &out.result);
  if (status != occupancy::Status::kOk) {
    out.error = std::string(occupancy::StatusMessage(status));
    out.change = "not computed: " + out.error;
    return out;
  }
  out.ok = true;
  const schema::OccupancyFields& before = sig.fields();
  const schema::OccupancyFields& after = out.result.fields;
  if (after.max_active_blocks == 0) {
    std::vector<std::string> zero;
    for (int i = 0; i < schema::kResourceCount; ++i) {
      if (out.result.blocks_per_sm[static_cast<size_t>(i)] == 0) {
        zero.emplace_back(schema::ResourceName(static_cast<schema::Resource>(i)));
      }
    }
    const uint64_t threads = launch.block.count();
    if (threads > static_cast<uint64_t>(device.limits().max_threads_per_block)) {
      out.change = fmt::format("cannot run: a block of {} threads is above the device's {}",
                               threads, device.limits().max_threads_per_block);
    } else {
      out.change = fmt::format("cannot run: {} allow{} no block", fmt::join(zero, ", "),
                               zero.size() == 1 ? "s" : "");
    }
    return out;
  }
  std::vector<std::string> changes;
  if (FormatPercent(before.occupancy) != FormatPercent(after.occupancy) ||
      before.max_active_blocks != after.max_active_blocks) {
    changes.push_back(fmt::format("occupancy {} -> {} ({} -> {} blocks/SM)",
                                  FormatPercent(before.occupancy), FormatPercent(after.occupancy),
                                  before.max_active_blocks, after.max_active_blocks));
  }
  if (before.limiting_resource != after.limiting_resource) {
    changes.push_back(fmt::format("limiter {} -> {}", schema::ResourceName(before.limiting_resource),
                                  schema::ResourceName(after.limiting_resource)));
  }
  out.change = changes.empty() ? "no change" : fmt::format("{}", fmt::join(changes, ", "));
  return out;
}

}  // namespace cuflight::report
