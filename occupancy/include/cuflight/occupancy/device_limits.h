// The per-device numbers occupancy depends on: what cudaGetDeviceProperties (or the matching
// cuDeviceGetAttribute queries) reports for a GPU.
#ifndef CUFLIGHT_OCCUPANCY_DEVICE_LIMITS_H_
#define CUFLIGHT_OCCUPANCY_DEVICE_LIMITS_H_

#include <cstdint>

namespace cuflight::occupancy {

struct DeviceLimits {
  int cc_major = 0;                    // compute capability
  int cc_minor = 0;
  int sm_count = 0;                    // multiProcessorCount
  int max_threads_per_block = 0;       // maxThreadsPerBlock
  int max_threads_per_sm = 0;          // maxThreadsPerMultiProcessor
  int max_blocks_per_sm = 0;           // maxBlocksPerMultiProcessor
  int regs_per_sm = 0;                 // regsPerMultiprocessor
  int regs_per_block = 0;              // regsPerBlock
  int64_t smem_per_sm = 0;             // sharedMemPerMultiprocessor, bytes
  int64_t smem_per_block = 0;          // sharedMemPerBlock, bytes
  int64_t smem_per_block_optin = 0;    // sharedMemPerBlockOptin, bytes
  int64_t reserved_smem_per_block = 0; // reservedSharedMemPerBlock, bytes
  int warp_size = 32;                  // warpSize
  // Largest portable cluster size (blocks), 0 where thread block clusters do not exist (< sm_90).
  int max_cluster_size = 0;
  // Largest cluster size with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED set.
  int max_cluster_size_non_portable = 0;

  int max_warps_per_sm() const { return warp_size > 0 ? max_threads_per_sm / warp_size : 0; }
};

}  // namespace cuflight::occupancy

#endif  // CUFLIGHT_OCCUPANCY_DEVICE_LIMITS_H_
