// DeviceLimits from the driver's device attributes: the one mapping from CU_DEVICE_ATTRIBUTE_*
// to DeviceLimits, shared by the CLI (`--device current`) and the injected library. It calls
// no driver function itself; the caller passes the getter (cuDeviceGetAttribute bound to a
// device), so tests can feed it recorded values.
#ifndef CUFLIGHT_OCCUPANCY_DEVICE_ATTRIBUTES_H_
#define CUFLIGHT_OCCUPANCY_DEVICE_ATTRIBUTES_H_

#include <cstddef>

#include "cuflight/occupancy/device_limits.h"

namespace cuflight::occupancy {

// Reads one attribute, identified by its CUdevice_attribute value, into *value. Returns the
// CUresult (0 = success).
using DeviceAttributeGetter = int (*)(void* context, int attribute, int* value);

struct DeviceAttributeError {
  const char* attribute = nullptr;  // e.g. "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"
  int result = 0;                   // the getter's CUresult
};

// Fills *limits from the getter, attribute by attribute. Cluster limits: 8 blocks (the portable
// size) when CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH says the device has clusters, else 0; a
// non-portable size is not a device property (the driver gives it per function:
// cuOccupancyMaxPotentialClusterSize), so max_cluster_size_non_portable is the portable size too.
// On the first failing getter call for a required attribute returns false with *error naming it;
// *limits is then partial.
bool ReadDeviceLimits(DeviceAttributeGetter getter, void* context, DeviceLimits* limits,
                      DeviceAttributeError* error) noexcept;

// Thread block cluster limits for the calculator's device presets (no GPU at hand): none before
// sm_90; 8 blocks portable from sm_90; 16 with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
// on sm_90 and sm_100 (CUDA programming guide, "Thread Block Clusters"), 8 elsewhere. A real
// device's come from ReadDeviceLimits and the driver instead.
void SetClusterLimits(DeviceLimits* limits) noexcept;

}  // namespace cuflight::occupancy

#endif  // CUFLIGHT_OCCUPANCY_DEVICE_ATTRIBUTES_H_
