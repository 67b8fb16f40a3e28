// Seam between the CLI and the CUDA driver: reading the limits of a GPU present on this machine
// (`--device current[:N]`). The real implementation loads libcuda.so.1 with dlopen at run time,
// so cuflight builds, links and runs on machines without a driver; tests substitute a fake.
#ifndef CUFLIGHT_CLI_DEVICE_QUERY_H_
#define CUFLIGHT_CLI_DEVICE_QUERY_H_

#include <memory>
#include <string>

#include "cuflight/occupancy/device_limits.h"

namespace cuflight::cli {

struct QueriedDevice {
  std::string name;  // cuDeviceGetName
  occupancy::DeviceLimits limits;
};

class DeviceQuery {
 public:
  virtual ~DeviceQuery() = default;
  // Fills `*device` with the limits of CUDA device `ordinal` (>= 0) and returns true. On failure
  // returns false and sets `*error` to one line without a trailing newline, e.g.
  // "no CUDA driver (libcuda.so.1: cannot open shared object file: No such file or directory)".
  // Called from one thread.
  virtual bool Query(int ordinal, QueriedDevice* device, std::string* error) = 0;
};

// The CUDA driver, opened on the first Query() and kept loaded for the life of the process.
std::unique_ptr<DeviceQuery> MakeDriverDeviceQuery();

// Thread block cluster limits, which no device attribute reports: the portable maximum is 8
// blocks on compute capability 9.0 and newer; cc 9.0 and 10.0 (H100, B200) allow 16 with
// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED. Both are 0 below 9.0 (no clusters).
// Sets limits->max_cluster_size{,_non_portable} from limits->cc_major/cc_minor.
void SetClusterLimits(occupancy::DeviceLimits* limits);

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_DEVICE_QUERY_H_
