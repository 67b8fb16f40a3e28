// A cooperative launch: a grid-wide barrier (cooperative_groups::this_grid().sync()) needs every
// block resident at once, so the grid is exactly max active blocks per SM times the SM count and
// the launch goes through cudaLaunchCooperativeKernel.
#include <cooperative_groups.h>

#include "common/ground_truth.h"

__global__ void two_phase(float* data, float* sums) {
  namespace cg = cooperative_groups;
  cg::grid_group grid = cg::this_grid();
  const unsigned i = grid.thread_rank();
  data[i] = static_cast<float>(i % 7);
  grid.sync();
  if (threadIdx.x == 0) {
    float s = 0;
    for (unsigned k = 0; k < blockDim.x; ++k) s += data[(i + k * blockDim.x) % grid.size()];
    sums[blockIdx.x] = s;
  }
}

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  int per_sm = 0;
  const int threads = 256;
  EX_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, two_phase, threads, 0));
  const int blocks = per_sm * prop.multiProcessorCount;
  float* data = nullptr;
  float* sums = nullptr;
  EX_CHECK(cudaMalloc(&data, sizeof(float) * blocks * threads));
  EX_CHECK(cudaMalloc(&sums, sizeof(float) * blocks));

  example::Config c{dim3(blocks), dim3(threads), 0, 2};
  c.cooperative = true;
  example::PrintTruth(prop, two_phase, c);
  void* args[] = {&data, &sums};
  for (int i = 0; i < 2; ++i) {
    EX_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(two_phase), c.grid, c.block,
                                         args, 0, nullptr));
  }
  EX_CHECK(cudaDeviceSynchronize());
  EX_CHECK(cudaFree(data));
  EX_CHECK(cudaFree(sums));
  return 0;
}
