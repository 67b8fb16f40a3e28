// A block reduction over a 40 KiB shared-memory tile, once with a static __shared__ array and
// once with the same bytes as dynamic shared memory. Shared memory binds both: the SM holds only
// a few 40 KiB tiles (plus the driver's reserved 1 KiB per block).
#include "common/ground_truth.h"

constexpr int kTile = 10240;  // floats: 40 KiB
constexpr int kThreads = 256;

__device__ void ReduceTile(float* tile, const float* in, float* out) {
  const float* src = in + static_cast<size_t>(blockIdx.x) * kTile;
  for (int i = threadIdx.x; i < kTile; i += blockDim.x) tile[i] = src[i];
  __syncthreads();
  // Halving with the odd element kept: kTile is not a power of two.
  for (int n = kTile; n > 1;) {
    const int half = (n + 1) / 2;
    for (int i = threadIdx.x; i < n - half; i += blockDim.x) tile[i] += tile[i + half];
    __syncthreads();
    n = half;
  }
  if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

__global__ void reduce_static(const float* in, float* out) {
  __shared__ float tile[kTile];
  ReduceTile(tile, in, out);
}

__global__ void reduce_dynamic(const float* in, float* out) {
  extern __shared__ float tile[];
  ReduceTile(tile, in, out);
}

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  const int blocks = 2 * prop.multiProcessorCount;
  float* in = nullptr;
  float* out = nullptr;
  EX_CHECK(cudaMalloc(&in, sizeof(float) * kTile * blocks));
  EX_CHECK(cudaMalloc(&out, sizeof(float) * blocks));
  EX_CHECK(cudaMemset(in, 0, sizeof(float) * kTile * blocks));

  const example::Config stat{dim3(blocks), dim3(kThreads), 0, 3};
  example::PrintTruth(prop, reduce_static, stat);
  for (int i = 0; i < 3; ++i) reduce_static<<<stat.grid, stat.block>>>(in, out);

  const example::Config dyn{dim3(blocks), dim3(kThreads), sizeof(float) * kTile, 3};
  example::PrintTruth(prop, reduce_dynamic, dyn);
  for (int i = 0; i < 3; ++i) reduce_dynamic<<<dyn.grid, dyn.block, dyn.dyn_smem>>>(in, out);

  EX_CHECK(cudaGetLastError());
  EX_CHECK(cudaDeviceSynchronize());
  EX_CHECK(cudaFree(in));
  EX_CHECK(cudaFree(out));
  return 0;
}
