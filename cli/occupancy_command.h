// `cuflight occupancy`: the occupancy engine as a calculator. Resolves a device (a preset or the
// GPU present, plus per-limit overrides) and a launch from flags, checks every value against the
// device, computes, and prints a table or one JSON object.
#ifndef CUFLIGHT_CLI_OCCUPANCY_COMMAND_H_
#define CUFLIGHT_CLI_OCCUPANCY_COMMAND_H_

#include <CLI/CLI.hpp>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "device_query.h"
#include "occupancy_report.h"

namespace cuflight::cli {

class OccupancyCommand {
 public:
  // Adds the `occupancy` subcommand with its options to `parent`. CLI11 keeps pointers into this
  // object, so it must outlive parsing and cannot move.
  explicit OccupancyCommand(CLI::App* parent);
  OccupancyCommand(const OccupancyCommand&) = delete;
  OccupancyCommand& operator=(const OccupancyCommand&) = delete;

  // True once the parsed command line has selected `occupancy`.
  bool Selected() const;

  // After a successful parse: writes the result (or the preset list) to `out` and returns
  // kExitOk. A launch that cannot run is a result, not an error. Throws UsageError, one line, for
  // missing or out-of-range flags, unknown devices, an unreadable `--device current` or limits
  // the engine rejects. `device_query` is used only for `--device current[:N]`.
  int Run(DeviceQuery& device_query, std::istream& in, std::ostream& out) const;

  // The report Run() would print, without printing it; same errors. `--ptxas -` reads `in`.
  OccupancyReport Compute(DeviceQuery& device_query, std::istream& in) const;

  // For a flag this command does not have but a user may reach for, the one it means instead:
  // "; __launch_bounds__'s minBlocksPerMultiprocessor is --launch-bounds MAX,MINBLOCKS" for
  // --min-blocks-per-sm. "" when there is no such flag, so the caller's "did you mean" applies.
  static std::string HintForUnknownFlag(std::string_view flag);

 private:
  // A flag's value as typed; parsed and range-checked against the device in Compute().
  struct TextFlag {
    std::string text;
    CLI::Option* option = nullptr;
    bool Given() const { return option != nullptr && option->count() > 0; }
  };

  CLI::App* app_ = nullptr;
  TextFlag device_, regs_, threads_, block_, static_smem_, dyn_smem_, carveout_, grid_, cluster_,
      max_active_clusters_, max_threads_per_block_, max_dyn_smem_, cc_, launch_bounds_, ptxas_,
      ptxas_kernel_;
  std::vector<TextFlag> limit_flags_;  // parallel to the device-limit table in the .cc
  bool non_portable_cluster_ = false;
  bool sweep_ = false;
  bool json_ = false;
  bool list_devices_ = false;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_OCCUPANCY_COMMAND_H_
