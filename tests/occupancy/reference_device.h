// NVIDIA's reference calculator (cuda_occupancy.h) fed a device preset: the cudaOccDeviceProp a
// preset's limits make, and cudaFuncGetAttributes' view of a function, which the header's own
// cudaOccFuncAttributes constructor converts. Shared by the occupancy tests that drive the
// reference directly.
#ifndef CUFLIGHT_TESTS_OCCUPANCY_REFERENCE_DEVICE_H_
#define CUFLIGHT_TESTS_OCCUPANCY_REFERENCE_DEVICE_H_

#include <cuda_occupancy.h>

#include <cstddef>

#include "cuflight/occupancy/device_presets.h"

namespace cuflight::occupancy::testing {

inline cudaOccDeviceProp RefDevice(const DeviceLimits& d) {
  cudaOccDeviceProp p;
  p.computeMajor = d.cc_major;
  p.computeMinor = d.cc_minor;
  p.maxThreadsPerBlock = d.max_threads_per_block;
  p.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  p.regsPerBlock = d.regs_per_block;
  p.regsPerMultiprocessor = d.regs_per_sm;
  p.warpSize = d.warp_size;
  p.sharedMemPerBlock = static_cast<size_t>(d.smem_per_block);
  p.sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  p.numSms = d.sm_count;
  p.sharedMemPerBlockOptin = static_cast<size_t>(d.smem_per_block_optin);
  p.reservedSharedMemPerBlock = static_cast<size_t>(d.reserved_smem_per_block);
  return p;
}

// What cudaFuncGetAttributes reports for a function: the members cuda_occupancy.h's
// cudaOccFuncAttributes(const cudaFuncAttributes&) constructor reads.
struct FakeCudaFuncAttributes {
  int maxThreadsPerBlock;
  int numRegs;
  size_t sharedSizeBytes;
  size_t maxDynamicSharedSizeBytes;
};

}  // namespace cuflight::occupancy::testing

#endif  // CUFLIGHT_TESTS_OCCUPANCY_REFERENCE_DEVICE_H_
