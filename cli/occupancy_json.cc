#include "occupancy_json.h"

#include <string_view>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/schema/encoder.h"

namespace cuflight::cli {
namespace {

using nlohmann::ordered_json;
using occupancy::Resource;

ordered_json Triple(const occupancy::Dim3& d) { return ordered_json::array({d.x, d.y, d.z}); }

ordered_json BlockCount(int32_t blocks) {
  return blocks == occupancy::kUnlimited ? ordered_json(nullptr) : ordered_json(blocks);
}

ordered_json SplitAliases(std::string_view aliases) {
  ordered_json out = ordered_json::array();
  while (!aliases.empty()) {
    const size_t comma = aliases.find(',');
    const std::string_view alias = aliases.substr(0, comma);
    if (!alias.empty()) out.push_back(alias);
    if (comma == std::string_view::npos) break;
    aliases.remove_prefix(comma + 1);
  }
  return out;
}

ordered_json LaunchToJson(const OccupancyReport& report) {
  const occupancy::LaunchConfig& l = report.launch;
  ordered_json j;
  j["regs_per_thread"] = l.regs_per_thread;
  j["static_smem"] = l.static_smem;
  j["dyn_smem"] = l.dyn_smem;
  j["block"] = Triple(l.block);
  j["threads_per_block"] = l.block.count();
  j["grid"] = report.has_grid ? Triple(l.grid) : ordered_json(nullptr);
  j["cluster"] = l.is_cluster() ? Triple(l.cluster) : ordered_json(nullptr);
  j["func_max_threads_per_block"] = l.func_max_threads_per_block;
  j["func_max_dyn_smem"] = l.func_max_dyn_smem;
  j["carveout"] = l.carveout;
  j["non_portable_cluster_size_allowed"] = l.non_portable_cluster_size_allowed;
  j["max_active_clusters"] = l.max_active_clusters;
  j["can_run"] = report.launch_failure.empty();
  j["failure"] =
      report.launch_failure.empty() ? ordered_json(nullptr) : ordered_json(report.launch_failure);
  return j;
}

}  // namespace

ordered_json OccupancyFieldsToJson(const schema::OccupancyFields& f) {
  // The wire encoder is the one place that names and formats these fields.
  char line[2048];
  const size_t n = schema::EncodeOccupancyFields(f, line, sizeof(line));
  return ordered_json::parse(std::string_view(line, n));
}

ordered_json DeviceLimitsToJson(const occupancy::DeviceLimits& l) {
  ordered_json j;
  j["cc_major"] = l.cc_major;
  j["cc_minor"] = l.cc_minor;
  j["sm_count"] = l.sm_count;
  j["max_threads_per_block"] = l.max_threads_per_block;
  j["max_threads_per_sm"] = l.max_threads_per_sm;
  j["max_warps_per_sm"] = l.max_warps_per_sm();
  j["max_blocks_per_sm"] = l.max_blocks_per_sm;
  j["regs_per_sm"] = l.regs_per_sm;
  j["regs_per_block"] = l.regs_per_block;
  j["smem_per_sm"] = l.smem_per_sm;
  j["smem_per_block"] = l.smem_per_block;
  j["smem_per_block_optin"] = l.smem_per_block_optin;
  j["reserved_smem_per_block"] = l.reserved_smem_per_block;
  j["warp_size"] = l.warp_size;
  j["max_cluster_size"] = l.max_cluster_size;
  j["max_cluster_size_non_portable"] = l.max_cluster_size_non_portable;
  return j;
}

ordered_json OccupancyReportToJson(const OccupancyReport& report) {
  ordered_json device;
  device["key"] = report.device_key;
  device["name"] = report.device_name;
  device["overrides"] = report.overrides;
  device.update(DeviceLimitsToJson(report.limits));

  ordered_json j;
  j["notes"] = report.notes;
  j["device"] = std::move(device);
  j["launch"] = LaunchToJson(report);
  if (report.opted_in) {
    ordered_json opted;
    opted["func_max_dyn_smem"] = report.launch.dyn_smem;
    opted["max_active_blocks"] = report.opted_in->fields.max_active_blocks;
    opted["occupancy"] = report.opted_in->fields.occupancy;
    opted["limiting_resource"] = schema::ResourceName(report.opted_in->fields.limiting_resource);
    j["if_opted_in"] = std::move(opted);
  } else {
    j["if_opted_in"] = nullptr;
  }
  j.update(OccupancyFieldsToJson(report.result.fields));

  ordered_json blocks;
  for (int i = 0; i < schema::kResourceCount; ++i) {
    const auto r = static_cast<Resource>(i);
    if (r == Resource::kCluster && !report.launch.is_cluster()) continue;
    if (r == Resource::kOther) continue;  // named only when the driver disagrees
    blocks[std::string(schema::ResourceName(r))] = BlockCount(report.result.blocks_per_sm[i]);
  }
  ordered_json detail;
  detail["warps_per_block"] = report.result.warps_per_block;
  detail["smem_config_bytes"] = report.result.smem_config_bytes;
  detail["smem_limit_per_block"] = report.result.smem_limit_per_block;
  detail["blocks_per_sm"] = std::move(blocks);
  j["detail"] = std::move(detail);

  // Every 1-D block size; best_block_size above is the reference search's pick (the largest of
  // a tie), smallest_best the smallest size reaching the same best occupancy.
  ordered_json sizes;
  sizes["smallest_best"] = report.best_block_size;
  sizes["best_occupancy"] = report.best_block_occupancy;
  sizes["sweep_only"] = report.sweep_only;
  ordered_json sweep = ordered_json::array();
  for (const occupancy::SweepPoint& p : report.sweep) {
    ordered_json point;
    point["threads"] = p.threads;
    point["max_active_blocks"] = p.max_active_blocks;
    point["active_warps"] = p.active_warps;
    point["occupancy"] = p.occupancy;
    point["limiting_resource"] = schema::ResourceName(p.limiting_resource);
    sweep.push_back(std::move(point));
  }
  sizes["sweep"] = std::move(sweep);
  j["block_sizes"] = std::move(sizes);

  ordered_json function;
  function["regs_source"] = report.regs_source;
  function["ptxas_kernel"] =
      report.ptxas_kernel ? ordered_json(*report.ptxas_kernel) : ordered_json(nullptr);
  if (report.launch_bounds_threads > 0) {
    ordered_json bounds;
    bounds["max_threads_per_block"] = report.launch_bounds_threads;
    bounds["min_blocks_per_sm"] = report.launch_bounds_min_blocks;
    bounds["register_limit_estimate"] = report.launch_bounds_register_limit;
    function["launch_bounds"] = std::move(bounds);
  } else {
    function["launch_bounds"] = nullptr;
  }
  j["function"] = std::move(function);
  return j;
}

ordered_json DevicePresetsToJson() {
  ordered_json out = ordered_json::array();
  for (const occupancy::DevicePreset& preset : occupancy::DevicePresets()) {
    ordered_json j;
    j["key"] = preset.key;
    j["aliases"] = SplitAliases(preset.aliases);
    j["name"] = preset.name;
    j.update(DeviceLimitsToJson(preset.limits));
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace cuflight::cli
