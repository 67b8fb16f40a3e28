// Thread block clusters (sm_90 and later): a kernel with a compile-time __cluster_dims__(2, 1, 1)
// launched with <<<>>>, and a kernel given a 4x1x1 cluster at launch time through
// cudaLaunchKernelEx's cluster-dimension attribute. Each block uses 96 KiB of dynamic shared
// memory, so how clusters can be placed across the GPU's SM groups may bind before the per-SM
// limits do. On an older GPU the program prints a {"note"} line and exits 0.
#include <cooperative_groups.h>

#include "common/ground_truth.h"

__global__ void __cluster_dims__(2, 1, 1) pair_exchange(float* out) {
  namespace cg = cooperative_groups;
  __shared__ float mine;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) mine = static_cast<float>(blockIdx.x);
  cluster.sync();
  float* other = cluster.map_shared_rank(&mine, cluster.block_rank() ^ 1);
  if (threadIdx.x == 0) out[blockIdx.x] = *other;
  cluster.sync();
}

__global__ void cluster_tiles(float* out) {
  namespace cg = cooperative_groups;
  extern __shared__ float tile[];
  cg::cluster_group cluster = cg::this_cluster();
  tile[threadIdx.x] = static_cast<float>(threadIdx.x);
  cluster.sync();
  const float* first = cluster.map_shared_rank(tile, 0);
  out[blockIdx.x * blockDim.x + threadIdx.x] = first[threadIdx.x];
  cluster.sync();
}

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  if (prop.major < 9) {
    example::PrintNote("cluster launches need sm_90 or later; this device is sm_" +
                       std::to_string(prop.major) + std::to_string(prop.minor) + ": skipped");
    return 0;
  }
  float* out = nullptr;
  EX_CHECK(cudaMalloc(&out, sizeof(float) * 1024 * 1024));

  example::Config pair{dim3(2 * prop.multiProcessorCount), dim3(128)};
  pair.cluster = dim3(2, 1, 1);
  example::PrintTruth(prop, pair_exchange, pair);
  pair_exchange<<<pair.grid, pair.block>>>(out);

  const size_t dyn = 96 * 1024;
  EX_CHECK(cudaFuncSetAttribute(cluster_tiles, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(dyn)));
  example::Config tiles{dim3(4 * 16), dim3(256), dyn, 2};
  tiles.cluster = dim3(4, 1, 1);
  example::PrintTruth(prop, cluster_tiles, tiles);
  cudaLaunchConfig_t config{};
  config.gridDim = tiles.grid;
  config.blockDim = tiles.block;
  config.dynamicSmemBytes = dyn;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = 4;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  for (int i = 0; i < 2; ++i) EX_CHECK(cudaLaunchKernelEx(&config, cluster_tiles, out));

  EX_CHECK(cudaDeviceSynchronize());
  EX_CHECK(cudaFree(out));
  return 0;
}
