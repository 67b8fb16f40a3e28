// A driver-API program: loads a module from an embedded fatbinary (cuModuleLoadData), looks its
// kernels up by name and launches them with cuLaunchKernelEx, once plainly with dynamic shared
// memory and once with the cooperative launch attribute. The driver functions come through
// cudaGetDriverEntryPointByVersion, so the program does not link libcuda.
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/driver_api.h"
#include "driver_kernels_fatbin.h"  // bin2c of driver_kernels.cu's fatbinary: driver_kernels_fatbin[]

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  EX_CHECK(cudaFree(nullptr));  // makes the primary context current for the driver calls below
  const auto load = example::DriverEntry<PFN_cuModuleLoadData_v2000>("cuModuleLoadData");
  const auto get_function =
      example::DriverEntry<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction");
  const auto launch_ex = example::DriverEntry<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx");
  const auto occupancy = example::DriverEntry<PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050>(
      "cuOccupancyMaxActiveBlocksPerMultiprocessor");

  // bin2c's array is byte-aligned; the driver reads the fatbinary header as 8-byte words.
  std::vector<uint64_t> image((sizeof(driver_kernels_fatbin) + 7) / 8);
  std::memcpy(image.data(), driver_kernels_fatbin, sizeof(driver_kernels_fatbin));
  CUmodule module = nullptr;
  EX_CU_CHECK(load(&module, image.data()));
  CUfunction saxpy = nullptr;
  CUfunction barrier = nullptr;
  EX_CU_CHECK(get_function(&saxpy, module, "saxpy_tiles"));
  EX_CU_CHECK(get_function(&barrier, module, "grid_barrier"));

  const int n = 192 * 4 * prop.multiProcessorCount;
  float* x = nullptr;
  float* y = nullptr;
  EX_CHECK(cudaMalloc(&x, sizeof(float) * n));
  EX_CHECK(cudaMalloc(&y, sizeof(float) * n));
  EX_CHECK(cudaMemset(x, 0, sizeof(float) * n));
  EX_CHECK(cudaMemset(y, 0, sizeof(float) * n));

  // Plain cuLaunchKernelEx: 192 threads, 192 floats of dynamic shared memory, 3 launches.
  example::Config plain{dim3(n / 192), dim3(192), 192 * sizeof(float), 3};
  plain.driver_api = true;
  example::Print(prop, example::DriverFacts(saxpy, plain), plain);
  CUlaunchConfig config{};
  config.gridDimX = plain.grid.x;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = plain.block.x;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = static_cast<unsigned>(plain.dyn_smem);
  float a = 2.0f;
  void* saxpy_args[] = {&a, &x, &y, const_cast<int*>(&n)};
  for (int i = 0; i < 3; ++i) EX_CU_CHECK(launch_ex(&config, saxpy, saxpy_args, nullptr));

  // Cooperative through the launch attribute: every block resident at once.
  int per_sm = 0;
  EX_CU_CHECK(occupancy(&per_sm, barrier, 256, 0));
  example::Config coop{dim3(per_sm * prop.multiProcessorCount), dim3(256), 0, 1};
  coop.cooperative = true;
  coop.driver_api = true;
  example::Print(prop, example::DriverFacts(barrier, coop), coop);
  CUlaunchAttribute cooperative{};
  cooperative.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  cooperative.value.cooperative = 1;
  config.gridDimX = coop.grid.x;
  config.blockDimX = coop.block.x;
  config.sharedMemBytes = 0;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  void* barrier_args[] = {&y, const_cast<int*>(&n)};
  EX_CU_CHECK(launch_ex(&config, barrier, barrier_args, nullptr));

  EX_CHECK(cudaDeviceSynchronize());
  EX_CHECK(cudaFree(x));
  EX_CHECK(cudaFree(y));
  return 0;
}
