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

// Occupancy at or above which more rarely helps: about half the warps hide the latency of most
// kernels (V. Volkov, "Better Performance at Lower Occupancy", GTC 2010). The advice still says
// what would fit more, as an option for a latency-bound kernel.
inline constexpr double kEnoughOccupancy = 0.5;
// Occupancy below which a kernel is likely latency-bound (too few warps to switch between).
inline constexpr double kLowOccupancy = 0.25;

// One line of advice for a signature's representative launch, "" when there is nothing to say
// (full occupancy, no spills, the grid fills the GPU). The rules, first match (docs/report.md):
//   no block fits:  "cannot run: registers allow no block on an SM"
//   the grid is under one wave (every launch): "grid of 4 blocks is under one wave (0.03 waves of
//                   132 SMs x 1 block/SM): every block is already resident, so higher occupancy
//                   cannot help; 128 of 132 SMs get no block; launch more blocks (...)"
//   full occupancy: "" or "full occupancy; 24 B/thread spilled to local memory"
//   cluster, other: "cluster placement limits occupancy to 40%", "the CUDA driver allows ..."
//   a tie:          "38% occupancy; registers and shared_mem both limit 3 blocks/SM: changing
//                   one alone gains nothing; <= 64 regs/thread and <= 40 KiB/block together
//                   would fit 4 (50%): __launch_bounds__(256, 4) or -maxrregcount=64, ..."
//   registers, spilling: "...; registers limit 2 blocks/SM, and it already spills 64 B/thread:
//                   fewer registers would spill more; ..."
//   registers:      "75% occupancy (probably enough); registers limit 6 blocks/SM; if
//                   latency-bound, <= 32 regs/thread would fit 7 (88%): __launch_bounds__(256,
//                   7) or -maxrregcount=32"
//   shared memory:  "19% occupancy (low, likely latency-bound); 48 KiB smem/block limits 3
//                   blocks/SM; <= 40 KiB/block would fit 4 (25%): smaller __shared__ tiles"
//   warps, blocks, barriers: "50% occupancy (probably enough); block slots limit 32 blocks/SM
//                   of 1 warp; if latency-bound, blocks of 64 threads would reach 100%"
// The register levers carry their cost: "(fewer registers can spill to local memory: check
// ptxas -v and SPILL after rebuilding)".
// A kernel of a library or a code generator (kernel_origin.h: cuBLAS, cuDNN, CUTLASS,
// FlashAttention, Triton, PyTorch, NCCL) cannot be rebuilt with other register limits, and
// tensor-core GEMMs run one or two large blocks per SM by design. After the rules up to "cluster,
// other" it gets the fact and what its user can change instead:
//   "13% occupancy; registers limit 1 block/SM: a cuBLAS kernel, not rebuilt with your flags;
//   tensor-core kernels run one or two large blocks per SM by design; check with Nsight
//   Compute's achieved occupancy and stall reasons whether it matters; cuBLAS picks the kernel
//   from the GEMM's shape, data type and math mode: ..." (at kEnoughOccupancy and above only the
//   fact), and its grid rule asks for more work per launch instead of more blocks.
// The occupancy words: "(probably enough)" from kEnoughOccupancy, "(low, likely latency-bound)"
// below kLowOccupancy. A block size, and a joint change, is named only when the occupancy engine,
// run on the signature's device (Signature::device_limits) for the changed launch, gives more
// than the launch has; without the device's limits neither is named. Fewer registers are never
// suggested to a kernel that uses local memory. Percentages are rounded half up to integers.
std::string Advice(const Signature& signature);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_ADVICE_H_
