// Register pressure: the same arithmetic with and without __launch_bounds__. Without bounds the
// compiler keeps many values live in registers and registers bind occupancy; with
// __launch_bounds__(256, 4) it must fit four 256-thread blocks per SM, so it uses fewer registers
// (spilling if need be) and more blocks are resident.
#include "common/ground_truth.h"

constexpr int kLive = 64;

__device__ float Churn(const float* in, int n) {
  float acc[kLive];
#pragma unroll
  for (int i = 0; i < kLive; ++i) acc[i] = in[(threadIdx.x + i * 7) % n];
  for (int k = 0; k < n; ++k) {
#pragma unroll
    for (int i = 0; i < kLive; ++i) acc[i] = acc[i] * 1.0001f + acc[(i + 5) % kLive];
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < kLive; ++i) s += acc[i];
  return s;
}

__global__ void unbounded(const float* in, float* out, int n) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = Churn(in, n);
}

__global__ void __launch_bounds__(256, 4) bounded(const float* in, float* out, int n) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = Churn(in, n);
}

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  const int n = 256;
  float* buf = nullptr;
  EX_CHECK(cudaMalloc(&buf, sizeof(float) * 2 * 256 * 1024));
  EX_CHECK(cudaMemset(buf, 0, sizeof(float) * 2 * 256 * 1024));
  float* out = buf + 256 * 1024;

  for (int block : {128, 256}) {
    const example::Config c{dim3(512), dim3(block)};
    example::PrintTruth(prop, unbounded, c);
    unbounded<<<c.grid, c.block>>>(buf, out, n);
    example::PrintTruth(prop, bounded, c);
    bounded<<<c.grid, c.block>>>(buf, out, n);
  }
  EX_CHECK(cudaGetLastError());
  EX_CHECK(cudaDeviceSynchronize());
  EX_CHECK(cudaFree(buf));
  return 0;
}
