// Human-readable output of `cuflight occupancy`: at most 100 columns, no colour.
#ifndef CUFLIGHT_CLI_OCCUPANCY_TEXT_H_
#define CUFLIGHT_CLI_OCCUPANCY_TEXT_H_

#include <string>

#include "occupancy_report.h"

namespace cuflight::cli {

// Device and launch lines, one row per resource (used per block, available per SM, blocks per SM
// it allows, occupancy it alone allows, a marker on the binding ones), the totals, waves when the
// grid is known, and the what-if lines. Ends with '\n'.
std::string RenderOccupancyText(const OccupancyReport& report);

// The preset table of `--list-devices`, one row per preset. Ends with '\n'.
std::string RenderDevicePresetsText();

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_OCCUPANCY_TEXT_H_
