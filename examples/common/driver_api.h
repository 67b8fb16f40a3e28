// Driver API entry points for the example programs, obtained through the runtime
// (cudaGetDriverEntryPointByVersion) so that no program links libcuda: each still starts, and
// says "no CUDA device", on a machine without a driver.
#ifndef CUFLIGHT_EXAMPLES_COMMON_DRIVER_API_H_
#define CUFLIGHT_EXAMPLES_COMMON_DRIVER_API_H_

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "ground_truth.h"

namespace example {

// The driver function `symbol` as of CUDA 12.3 (the ABI the PFN_*_v* types below name). Exits
// kExitCudaError when the driver does not have it. Call after RequireDevice().
template <typename Fn>
Fn DriverEntry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  EX_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, 12030, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || fn == nullptr) {
    Fail("cudaGetDriverEntryPointByVersion", symbol, __FILE__, __LINE__);
  }
  return reinterpret_cast<Fn>(fn);
}

// Ground-truth inputs for a driver-API function (CUfunction): the same fields RuntimeFacts reads,
// through cuFuncGetName, cuFuncGetAttribute and cuOccupancyMaxActiveBlocksPerMultiprocessor.
// The reference's function attributes are built as cuda_occupancy.h's conversion from
// cudaFuncAttributes builds them (opt-in limit, one block barrier, partitioned caching off).
inline FunctionFacts DriverFacts(CUfunction func, const Config& c) {
  static const auto get_name = DriverEntry<PFN_cuFuncGetName_v12030>("cuFuncGetName");
  static const auto get_attr = DriverEntry<PFN_cuFuncGetAttribute_v2020>("cuFuncGetAttribute");
  static const auto occupancy = DriverEntry<PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050>(
      "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  FunctionFacts f;
  const char* name = nullptr;
  EX_CU_CHECK(get_name(&name, func));
  f.name = name;
  int max_threads = 0, regs = 0, static_smem = 0, max_dyn = 0, carveout = -1;
  EX_CU_CHECK(get_attr(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, func));
  EX_CU_CHECK(get_attr(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, func));
  EX_CU_CHECK(get_attr(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, func));
  EX_CU_CHECK(get_attr(&max_dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, func));
  EX_CU_CHECK(get_attr(&carveout, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, func));
  f.attrs.maxThreadsPerBlock = max_threads;
  f.attrs.numRegs = regs;
  f.attrs.sharedSizeBytes = static_cast<size_t>(static_smem);
  f.attrs.partitionedGCConfig = PARTITIONED_GC_OFF;
  f.attrs.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
  f.attrs.maxDynamicSharedSizeBytes = static_cast<size_t>(max_dyn);
  f.attrs.numBlockBarriers = 1;
  f.carveout = carveout;
  const int threads = static_cast<int>(c.block.x * c.block.y * c.block.z);
  EX_CU_CHECK(occupancy(&f.driver_max_active_blocks, func, threads, c.dyn_smem));
  return f;
}

}  // namespace example

#endif  // CUFLIGHT_EXAMPLES_COMMON_DRIVER_API_H_
