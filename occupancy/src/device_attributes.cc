#include "cuflight/occupancy/device_attributes.h"

#include <cuda.h>

#include <cstdint>

namespace cuflight::occupancy {
namespace {

constexpr int kPortableClusterSize = 8;
constexpr int kNonPortableClusterSize = 16;

}  // namespace

bool ReadDeviceLimits(DeviceAttributeGetter getter, void* context, DeviceLimits* limits,
                      DeviceAttributeError* error) noexcept {
  DeviceLimits& l = *limits;
  int64_t smem_per_sm = 0;
  int64_t smem_per_block = 0;
  int64_t smem_per_block_optin = 0;
  int64_t reserved = 0;
  const struct {
    CUdevice_attribute attribute;
    const char* name;
    int* int_value;
    int64_t* wide_value;
  } kAttributes[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR", &l.cc_major,
       nullptr},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR", &l.cc_minor,
       nullptr},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT", &l.sm_count, nullptr},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "MAX_THREADS_PER_BLOCK",
       &l.max_threads_per_block, nullptr},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "MAX_THREADS_PER_MULTIPROCESSOR",
       &l.max_threads_per_sm, nullptr},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, "MAX_BLOCKS_PER_MULTIPROCESSOR",
       &l.max_blocks_per_sm, nullptr},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, "MAX_REGISTERS_PER_MULTIPROCESSOR",
       &l.regs_per_sm, nullptr},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "MAX_REGISTERS_PER_BLOCK", &l.regs_per_block,
       nullptr},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
       "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", nullptr, &smem_per_sm},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "MAX_SHARED_MEMORY_PER_BLOCK", nullptr,
       &smem_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
       nullptr, &smem_per_block_optin},
      {CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, "RESERVED_SHARED_MEMORY_PER_BLOCK",
       nullptr, &reserved},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, "WARP_SIZE", &l.warp_size, nullptr},
  };
  for (const auto& a : kAttributes) {
    int value = 0;
    const int result = getter(context, static_cast<int>(a.attribute), &value);
    if (result != 0) {
      if (error != nullptr) *error = {a.name, result};
      return false;
    }
    if (a.int_value != nullptr) *a.int_value = value;
    if (a.wide_value != nullptr) *a.wide_value = value;
  }
  l.smem_per_sm = smem_per_sm;
  l.smem_per_block = smem_per_block;
  l.smem_per_block_optin = smem_per_block_optin;
  l.reserved_smem_per_block = reserved;
  // Thread block clusters: whether the device has them is CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH
  // (absent before CUDA 11.8: none). The portable size is the same on every device (CUDA
  // Programming Guide, thread block clusters: "a maximum of 8 thread blocks in a cluster is
  // supported as a portable cluster size"); a larger, non-portable size is per function and
  // configuration, which only the driver says (cuOccupancyMaxPotentialClusterSize, asked per
  // launch configuration by the injected library), so the device's own figure stays portable.
  int cluster_launch = 0;
  if (getter(context, static_cast<int>(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH), &cluster_launch) != 0) {
    cluster_launch = 0;
  }
  l.max_cluster_size = cluster_launch != 0 ? kPortableClusterSize : 0;
  l.max_cluster_size_non_portable = l.max_cluster_size;
  return true;
}

void SetClusterLimits(DeviceLimits* limits) noexcept {
  if (limits->cc_major < 9) {
    limits->max_cluster_size = 0;
    limits->max_cluster_size_non_portable = 0;
    return;
  }
  limits->max_cluster_size = kPortableClusterSize;
  const bool non_portable_16 =
      limits->cc_minor == 0 && (limits->cc_major == 9 || limits->cc_major == 10);
  limits->max_cluster_size_non_portable =
      non_portable_16 ? kNonPortableClusterSize : kPortableClusterSize;
}

}  // namespace cuflight::occupancy
