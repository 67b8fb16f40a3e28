// Reading a kernel event's occupancy fields: what each resource allows, and one line of advice
// built from the what-if fields (regs_for_next_block, smem_for_next_block, best_block_size).
#ifndef CUFLIGHT_REPORT_ADVICE_H_
#define CUFLIGHT_REPORT_ADVICE_H_

#include <array>
#include <cstdint>
#include <string>

#include "cuflight/report/report_model.h"
#include "cuflight/schema/occupancy_fields.h"

namespace cuflight::report {

// Warps per block of a launch: active_warps / max_active_blocks when a block fits, else the
// block's threads over `warp_size`, rounded up.
int32_t WarpsPerBlock(const schema::OccupancyFields& f, const schema::Dim3& block, int warp_size);

// Per resource (indexed by schema::Resource), what it alone allows (see ResourceLimit).
std::array<ResourceLimit, schema::kResourceCount> ResourceLimits(const schema::OccupancyFields& f,
                                                                 int32_t warps_per_block);

// One line of advice for a signature's representative launch, "" when there is nothing to say
// (full occupancy, no spills). The rules (docs/report.md):
//   no block fits:  "cannot run: registers allow no block on an SM"
//   registers:      "registers limit 6 blocks/SM (75%); <= 32 regs/thread would fit 7 (88%)"
//   shared memory:  "48 KiB smem per block limits 3 blocks/SM (38%); <= 40 KiB per block would
//                    fit 4 (50%)"
//   warps, blocks, barriers: "block slots limit 16 blocks/SM of 2 warps (50%); blocks of 256
//                    threads reach the best occupancy"
//   cluster:        "cluster placement limits occupancy to 40%"
//   a tie without a what-if: "...; shared_mem also limits it to 6 blocks"
//   full occupancy with spills: "full occupancy; 24 B/thread spilled to local memory"
// Percentages are rounded half up to integers.
std::string Advice(const Signature& signature);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_ADVICE_H_
