// Everything `cuflight occupancy` prints: the device and launch it was asked about and the
// engine's answer. Built by occupancy_command.cc, rendered by occupancy_text.cc and
// occupancy_json.cc.
#ifndef CUFLIGHT_CLI_OCCUPANCY_REPORT_H_
#define CUFLIGHT_CLI_OCCUPANCY_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "cuflight/occupancy/device_limits.h"
#include "cuflight/occupancy/engine.h"

namespace cuflight::cli {

struct OccupancyReport {
  std::string device_key;              // preset key, or "current:N" for a queried GPU
  std::string device_name;             // marketing or driver name
  std::vector<std::string> overrides;  // device-limit flags given, e.g. "--smem-per-sm 32768"
  occupancy::DeviceLimits limits;      // preset (or queried) limits with the overrides applied
  occupancy::LaunchConfig launch;
  bool has_grid = false;  // --grid was given, so waves are meaningful
  occupancy::Result result;
  // The launch at every 1-D block size (occupancy::SweepBlockSizes), and the smallest size that
  // reaches the best occupancy of them (0: none fits) with that occupancy.
  std::vector<occupancy::SweepPoint> sweep;
  int32_t best_block_size = 0;
  double best_block_occupancy = 0;
  // No block size was given: the report is the sweep, and `launch` is at best_block_size.
  bool sweep_only = false;
  // --sweep or no block size: print the sweep table.
  bool show_sweep = false;
  // __launch_bounds__(launch_bounds_threads, launch_bounds_min_blocks) from --launch-bounds (0: not
  // given; min blocks 0 when only MAX was), and the registers per thread ptxas targets under it
  // (occupancy::LaunchBoundsRegisterLimit; -1: none).
  int launch_bounds_threads = 0;
  int launch_bounds_min_blocks = 0;
  int32_t launch_bounds_register_limit = -1;
  // Where launch.regs_per_thread came from: "--regs", "--ptxas" or "--launch-bounds".
  std::string regs_source;
  // The kernel --ptxas read, when given: its name ("" for a bare "Used N registers" line).
  std::optional<std::string> ptxas_kernel;
  // Why the launch cannot run (max_active_blocks == 0), one sentence; empty when it can run.
  std::string launch_failure;
  // Lines printed first, most important first: that the function has not opted in to the dynamic
  // shared memory it asks for (and what it would give if it had), which preset a device name or
  // compute capability named.
  std::vector<std::string> notes;
  // The launch opted in to its dynamic shared memory (func_max_dyn_smem = dyn_smem), when it
  // asks for more than the limit without opt-in and has not opted in.
  std::optional<occupancy::Result> opted_in;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_OCCUPANCY_REPORT_H_
