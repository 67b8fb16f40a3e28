// Event lines for the report tests, encoded with the schema's own encoder, and a helper that
// writes files.
#ifndef CUFLIGHT_TESTS_REPORT_REPORT_TEST_EVENTS_H_
#define CUFLIGHT_TESTS_REPORT_REPORT_TEST_EVENTS_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "cuflight/schema/events.h"

namespace cuflight::report::testing {

// One complete line (ending in '\n') for any owned event.
std::string Line(const schema::OwnedEvent& event);

schema::OwnedProcessStartEvent Start(int32_t pid, uint64_t seq, int64_t start_ns,
                                     std::string exe = "/opt/app/bin/trainer");
schema::OwnedDeviceEvent Device(int32_t pid, uint64_t seq, int32_t device, std::string name);

// A kernel launch with the given occupancy fields (everything else plausible).
struct KernelSpec {
  std::string name = "_Z6kernelPf";
  std::string demangled = "kernel(float*)";
  schema::Dim3 grid{1024, 1, 1};
  schema::Dim3 block{256, 1, 1};
  int32_t regs = 32;
  int64_t static_smem = 0;
  int64_t dyn_smem = 0;
  int64_t local_bytes = 0;
  int32_t device = 0;
  uint64_t stream = 0;
  schema::OccupancyFields occupancy;
};
schema::OwnedKernelEvent Kernel(int32_t pid, uint64_t seq, int64_t ts_ns, uint64_t correlation_id,
                                const KernelSpec& spec);
schema::OwnedKernelTimeEvent KernelTime(int32_t pid, uint64_t seq, uint64_t correlation_id,
                                        uint64_t duration_ns, uint64_t stream = 0);
schema::OwnedApiErrorEvent ApiError(int32_t pid, uint64_t seq, std::string api,
                                    std::string error_name, int32_t code,
                                    std::vector<uint64_t> last_correlation_ids);
schema::OwnedProcessEndEvent End(int32_t pid, uint64_t seq, int32_t exit_code);

// Occupancy fields of a launch of `wpb` warps per block limited by `limiter` at `blocks` per SM
// on an SM of `max_warps` warps; the other resources allow full occupancy.
schema::OccupancyFields Fields(int32_t blocks, int32_t wpb, int32_t max_warps,
                               schema::Resource limiter);

// Writes `bytes` to `path` (creating parent directories).
void WriteFile(const std::filesystem::path& path, std::string_view bytes);

}  // namespace cuflight::report::testing

#endif  // CUFLIGHT_TESTS_REPORT_REPORT_TEST_EVENTS_H_
