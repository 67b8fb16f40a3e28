// Large dynamic shared memory: a kernel opts in to the device's per-block maximum with
// cudaFuncAttributeMaxDynamicSharedMemorySize (above the 48 KiB default), is launched with all of
// it, then again with 64 KiB after asking for a 50 % shared-memory carveout
// (cudaFuncAttributePreferredSharedMemoryCarveout), which limits how much of the SM's unified
// L1/shared storage the driver gives to shared memory.
#include "common/ground_truth.h"

__global__ void stencil(const float* in, float* out, int n) {
  extern __shared__ float window[];
  const int per_block = n / gridDim.x;
  const float* src = in + blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) window[i] = src[i];
  __syncthreads();
  for (int i = threadIdx.x + 1; i + 1 < per_block; i += blockDim.x) {
    out[blockIdx.x * per_block + i] = 0.25f * window[i - 1] + 0.5f * window[i] + 0.25f * window[i + 1];
  }
}

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  cudaFuncAttributes attr{};
  EX_CHECK(cudaFuncGetAttributes(&attr, stencil));
  const size_t max_dyn = prop.sharedMemPerBlockOptin - attr.sharedSizeBytes;
  EX_CHECK(cudaFuncSetAttribute(stencil, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(max_dyn)));
  const int grid = prop.multiProcessorCount;
  const int n = static_cast<int>(max_dyn / sizeof(float)) * grid;
  float* in = nullptr;
  float* out = nullptr;
  EX_CHECK(cudaMalloc(&in, sizeof(float) * n));
  EX_CHECK(cudaMalloc(&out, sizeof(float) * n));
  EX_CHECK(cudaMemset(in, 0, sizeof(float) * n));

  const example::Config all{dim3(grid), dim3(512), max_dyn};
  example::PrintTruth(prop, stencil, all);
  stencil<<<all.grid, all.block, all.dyn_smem>>>(in, out, n);

  EX_CHECK(cudaFuncSetAttribute(stencil, cudaFuncAttributePreferredSharedMemoryCarveout, 50));
  const int n64 = 16384 * grid;  // 64 KiB of floats per block
  const example::Config half{dim3(grid), dim3(256), 65536};
  example::PrintTruth(prop, stencil, half);
  stencil<<<half.grid, half.block, half.dyn_smem>>>(in, out, n64);

  EX_CHECK(cudaGetLastError());
  EX_CHECK(cudaDeviceSynchronize());
  EX_CHECK(cudaFree(in));
  EX_CHECK(cudaFree(out));
  return 0;
}
