// `cuflight occupancy --json` and `--list-devices --json` output. Objects keep insertion order
// (nlohmann::ordered_json) so the output reads in the order below.
#ifndef CUFLIGHT_CLI_OCCUPANCY_JSON_H_
#define CUFLIGHT_CLI_OCCUPANCY_JSON_H_

#include <nlohmann/json.hpp>

#include "cuflight/occupancy/device_limits.h"
#include "cuflight/schema/occupancy_fields.h"
#include "occupancy_report.h"

namespace cuflight::cli {

// Every OccupancyFields member under its `kernel` event JSON name: cluster_occupancy only when
// has_cluster (and has_cluster itself not at all), limiting_resource as a name,
// limiting_resources as an array of names in Resource order, regs_for_next_block and
// smem_for_next_block null when -1. Produced by the wire encoder (schema::EncodeOccupancyFields),
// so the names and number formats are the kernel event's own.
nlohmann::ordered_json OccupancyFieldsToJson(const schema::OccupancyFields& fields);

// Each DeviceLimits member under its C++ name, plus max_warps_per_sm.
nlohmann::ordered_json DeviceLimitsToJson(const occupancy::DeviceLimits& limits);

// {"device": {key, name, overrides, limits...}, "launch": {...}, <OccupancyFieldsToJson members>,
//  "detail": {warps_per_block, smem_config_bytes, smem_limit_per_block, blocks_per_sm}}.
// Block counts equal to occupancy::kUnlimited are null.
nlohmann::ordered_json OccupancyReportToJson(const OccupancyReport& report);

// Array of every preset: {key, aliases (array), name, limits...}.
nlohmann::ordered_json DevicePresetsToJson();

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_OCCUPANCY_JSON_H_
