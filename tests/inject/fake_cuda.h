// In-process fakes of the driver and CUPTI tables for the injected library's tests: function
// attributes and devices are whatever the test sets, every call is counted.
#ifndef CUFLIGHT_TESTS_INJECT_FAKE_CUDA_H_
#define CUFLIGHT_TESTS_INJECT_FAKE_CUDA_H_

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cuflight/occupancy/device_limits.h"
#include "cupti_api.h"
#include "driver_api.h"

namespace cuflight::inject::testing {

struct FakeFunction {
  int num_regs = 32;
  int static_smem = 0;
  int local_bytes = 0;
  int const_bytes = 0;
  int max_threads_per_block = 1024;
  int max_dyn_smem = 48 * 1024;
  int carveout = -1;
  int cluster[3] = {0, 0, 0};
  int non_portable = 0;
  bool fail = false;  // every attribute query fails (CUDA_ERROR_INVALID_HANDLE)
};

struct FakeCuda {
  std::map<uint64_t, FakeFunction> functions;          // by handle
  std::map<int, occupancy::DeviceLimits> devices;      // by ordinal
  std::map<uint64_t, int> context_device;              // CUcontext -> ordinal
  std::map<uint64_t, int> capturing_streams;           // stream -> capturing (1)
  // CUkernel -> its CUfunction (cuKernelGetFunction). Attribute queries on a CUkernel handle
  // fail with CUDA_ERROR_INVALID_HANDLE unless it is also in `functions`.
  std::map<uint64_t, uint64_t> kernels;
  // Called after every cuFuncGetAttribute with its result, as CUPTI raises the exit callback of
  // a driver call the library itself makes.
  std::function<void(CUresult)> after_attribute_query;
  int current_device = 0;
  int attribute_queries = 0;
  int capture_queries = 0;
  // Activity records the fake cuptiActivityGetNextRecord walks, per buffer address.
  std::vector<CUpti_Activity*> activity_records;
  size_t activity_next = 0;

  DriverApi driver() const;
  CuptiApi cupti() const;

  static FakeCuda* current;  // the fake the static entry points use
};

// Sets FakeCuda::current for the scope.
class ScopedFake {
 public:
  explicit ScopedFake(FakeCuda* fake) { FakeCuda::current = fake; }
  ~ScopedFake() { FakeCuda::current = nullptr; }
};

}  // namespace cuflight::inject::testing

#endif  // CUFLIGHT_TESTS_INJECT_FAKE_CUDA_H_
