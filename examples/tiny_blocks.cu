// An elementwise kernel launched with tiny blocks (16 and 32 threads): each block is one warp, so
// the SM's block slots run out long before its warps do.
#include "common/ground_truth.h"

__global__ void scale(float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  const int n = 1 << 20;
  float* x = nullptr;
  EX_CHECK(cudaMalloc(&x, sizeof(float) * n));
  EX_CHECK(cudaMemset(x, 0, sizeof(float) * n));
  for (int block : {16, 32}) {
    const example::Config c{dim3((n + block - 1) / block), dim3(block), 0, 2};
    example::PrintTruth(prop, scale, c);
    for (int i = 0; i < 2; ++i) scale<<<c.grid, c.block>>>(x, 1.5f, n);
  }
  EX_CHECK(cudaGetLastError());
  EX_CHECK(cudaDeviceSynchronize());
  EX_CHECK(cudaFree(x));
  return 0;
}
