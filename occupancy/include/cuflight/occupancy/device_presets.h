// Built-in table of GPUs: what cudaGetDeviceProperties reports on each, so occupancy can be
// computed for a device that is not present (the CLI, `report --retarget`).
#ifndef CUFLIGHT_OCCUPANCY_DEVICE_PRESETS_H_
#define CUFLIGHT_OCCUPANCY_DEVICE_PRESETS_H_

#include <span>
#include <string_view>

#include "cuflight/occupancy/device_limits.h"

namespace cuflight::occupancy {

struct DevicePreset {
  std::string_view key;      // lower-case identifier used on the command line, e.g. "h100-sxm"
  std::string_view aliases;  // comma-separated other accepted keys, e.g. "h100"
  std::string_view name;     // marketing name, e.g. "NVIDIA H100 80GB HBM3 (SXM5)"
  DeviceLimits limits;
};

// Every preset, in a stable order (by architecture, then name).
std::span<const DevicePreset> DevicePresets();

// The preset whose key or alias equals `key` ignoring ASCII case; nullptr when none does.
const DevicePreset* FindDevicePreset(std::string_view key);

}  // namespace cuflight::occupancy

#endif  // CUFLIGHT_OCCUPANCY_DEVICE_PRESETS_H_
