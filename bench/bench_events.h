// Sample events shared by the benchmarks, so every figure is measured on the same lines.
#ifndef CUFLIGHT_BENCH_BENCH_EVENTS_H_
#define CUFLIGHT_BENCH_BENCH_EVENTS_H_

#include "cuflight/schema/events.h"

namespace cuflight::bench {

// A PyTorch-style CUTLASS GEMM launch on an H100: 84-character mangled name, 151-character
// demangled name, the occupancy numbers the engine reports for it (about 1.1 KB encoded). View
// storage by default; schema::Owned for an event that owns its strings (the validator's tests).
template <class S = schema::View>
schema::BasicKernelEvent<S> RealisticKernel() {
  schema::BasicKernelEvent<S> k;
  k.header = {1732000000123456789, 31337, 1048576};
  k.tid = 31340;
  k.device = 0;
  k.context = 0x55d1c0a3b2e0;
  k.stream = 0x55d1c0f41230;
  k.correlation_id = 734211;
  k.api = "cuLaunchKernel";
  k.name =
      "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedIfEEEEEvNT_6ParamsE";
  k.demangled =
      "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::"
      "MmaPipelined<float>, cutlass::epilogue::Epilogue, true>>(Gemm::Params)";
  k.grid = {264, 8, 1};
  k.block = {256, 1, 1};
  k.num_regs = 168;
  k.static_shared_bytes = 49152;
  k.dyn_shared_bytes = 32768;
  k.local_bytes = 0;
  k.const_bytes = 616;
  k.max_threads_per_block = 256;
  k.carveout = -1;
  schema::OccupancyFields& o = k.occupancy;
  o.max_active_blocks = 1;
  o.active_warps = 8;
  o.max_warps = 64;
  o.occupancy = 0.125;
  o.reg_occupancy = 0.125;
  o.smem_occupancy = 0.25;
  o.warp_occupancy = 1;
  o.block_occupancy = 1;
  o.barrier_occupancy = 1;
  o.limiting_resource = schema::Resource::kRegisters;
  o.limiting_resources = schema::MaskOf(schema::Resource::kRegisters);
  o.allocated_regs_per_block = 43008;
  o.allocated_smem_per_block = 82944;
  o.waves = 16.0 / 1.1;
  o.tail_utilization = 2.0 / 3.0;
  o.regs_for_next_block = 128;
  o.smem_for_next_block = 115712;
  o.best_block_size = 128;
  return k;
}

}  // namespace cuflight::bench

#endif  // CUFLIGHT_BENCH_BENCH_EVENTS_H_
