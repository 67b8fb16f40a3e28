// Kernels of the driver-API example, compiled to a fatbinary that driver_launch_ex loads with
// cuModuleLoadData. extern "C" keeps their names unmangled for cuModuleGetFunction.
#include <cooperative_groups.h>

extern "C" __global__ void saxpy_tiles(float a, const float* x, float* y, int n) {
  extern __shared__ float tile[];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) y[i] = a * tile[threadIdx.x] + y[i];
}

extern "C" __global__ void grid_barrier(float* y, int n) {
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const unsigned i = grid.thread_rank();
  if (i < static_cast<unsigned>(n)) y[i] += 1.0f;
  grid.sync();
  if (i < static_cast<unsigned>(n)) y[i] *= 2.0f;
}
