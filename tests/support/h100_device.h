// The `device` event of an H100 SXM for tests that need one: the limits of occupancy's "h100-sxm"
// preset (what cudaGetDeviceProperties reports on that GPU), with a fixed name and uuid.
#ifndef CUFLIGHT_TESTS_SUPPORT_H100_DEVICE_H_
#define CUFLIGHT_TESTS_SUPPORT_H100_DEVICE_H_

#include "cuflight/occupancy/device_limits.h"
#include "cuflight/occupancy/device_presets.h"
#include "cuflight/schema/events.h"

namespace cuflight::test_support {

// Sets everything of *e but its header and device ordinal.
template <class S>
void SetH100(schema::BasicDeviceEvent<S>* e) {
  const occupancy::DeviceLimits& l = occupancy::FindDevicePreset("h100-sxm")->limits;
  e->name = "NVIDIA H100 80GB HBM3";
  e->uuid = "GPU-12345678-1234-1234-1234-123456789abc";
  e->cc_major = l.cc_major;
  e->cc_minor = l.cc_minor;
  e->sm_count = l.sm_count;
  e->max_threads_per_block = l.max_threads_per_block;
  e->max_threads_per_sm = l.max_threads_per_sm;
  e->max_blocks_per_sm = l.max_blocks_per_sm;
  e->regs_per_sm = l.regs_per_sm;
  e->regs_per_block = l.regs_per_block;
  e->smem_per_sm = l.smem_per_sm;
  e->smem_per_block = l.smem_per_block;
  e->smem_per_block_optin = l.smem_per_block_optin;
  e->reserved_smem_per_block = l.reserved_smem_per_block;
  e->warp_size = l.warp_size;
  e->max_cluster_size = l.max_cluster_size;
}

}  // namespace cuflight::test_support

#endif  // CUFLIGHT_TESTS_SUPPORT_H100_DEVICE_H_
