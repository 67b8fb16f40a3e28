// A CUDA program for the GPU check of the injected library: launches kernels of different
// resource shapes through the runtime (<<<>>>, cudaLaunchKernelEx with a cluster, cooperative,
// and a CUDA graph) and prints, for each launch configuration, what the runtime's own occupancy
// calculator says:
//   EXPECT <kernel> <block threads> <dynamic smem bytes> <cudaOccupancyMaxActiveBlocksPerMultiprocessor>
// The test runs it under libcuflight_inject.so and compares the kernel events with these lines.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t e = (call);                                                             \
    if (e != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

__global__ void light(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x; }

// Enough live values to need many registers.
__global__ void heavy(float* out, int n) {
  float acc[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) acc[i] = out[(threadIdx.x + i * 7) % n];
  for (int k = 0; k < n; ++k) {
#pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = acc[i] * 1.0001f + acc[(i + 1) % 48];
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < 48; ++i) s += acc[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

__global__ void static_smem(float* out) {
  __shared__ float buf[6144];  // 24 KiB
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = buf[(threadIdx.x + 1) % blockDim.x];
}

// Touches only the dynamic shared memory the launch gave it (`floats` of them): a launch with none
// must not write there (on an H200 that was an illegal address).
__global__ void dynamic_smem(float* out, unsigned floats) {
  extern __shared__ float dyn[];
  const unsigned used = floats < blockDim.x ? floats : blockDim.x;
  if (threadIdx.x < used) dyn[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = used == 0 ? 0.0f : dyn[(threadIdx.x + 1) % used];
}

__global__ void __launch_bounds__(256, 2) bounded(float* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = 2.0f * threadIdx.x;
}

__global__ void __cluster_dims__(2, 1, 1) clustered(float* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = 3.0f;
}

__global__ void coop(float* out) {
  cooperative_groups::this_grid().sync();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 4.0f;
}

__global__ void in_graph(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] += 1.0f; }

template <typename Kernel>
int Expect(const char* name, Kernel kernel, int block, size_t dyn) {
  int blocks = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, block, dyn));
  std::printf("EXPECT %s %d %zu %d\n", name, block, dyn, blocks);
  return blocks;
}

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("DEVICE %s sm_%d%d\n", prop.name, prop.major, prop.minor);
  float* out = nullptr;
  const size_t elems = size_t{1} << 22;
  CHECK(cudaMalloc(&out, elems * sizeof(float)));
  CHECK(cudaMemset(out, 0, elems * sizeof(float)));

  for (int block : {64, 128, 256, 512, 1024}) {
    Expect("light", light, block, 0);
    light<<<64, block>>>(out);
    Expect("heavy", heavy, block, 0);
    heavy<<<32, block>>>(out, 64);
    Expect("static_smem", static_smem, block, 0);
    static_smem<<<32, block>>>(out);
  }
  const size_t opt_in = 100 * 1024;
  CHECK(cudaFuncSetAttribute(dynamic_smem, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(opt_in)));
  for (size_t dyn : {size_t{0}, size_t{4096}, size_t{40000}, opt_in}) {
    Expect("dynamic_smem", dynamic_smem, 256, dyn);
    dynamic_smem<<<32, 256, dyn>>>(out, static_cast<unsigned>(dyn / sizeof(float)));
  }
  CHECK(cudaFuncSetAttribute(dynamic_smem, cudaFuncAttributePreferredSharedMemoryCarveout, 25));
  Expect("dynamic_smem", dynamic_smem, 128, 8192);
  dynamic_smem<<<32, 128, 8192>>>(out, 8192 / sizeof(float));
  for (int block : {128, 256}) {
    Expect("bounded", bounded, block, 0);
    bounded<<<64, block>>>(out);
  }
  if (prop.major >= 9) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(64);
    config.blockDim = dim3(128);
    Expect("clustered", clustered, 128, 0);
    CHECK(cudaLaunchKernelEx(&config, clustered, out));
  }
  {
    const int blocks = Expect("coop", coop, 256, 0);
    void* args[] = {&out};
    CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(coop), dim3(blocks * prop.multiProcessorCount),
                                      dim3(256), args, 0, nullptr));
  }
  {
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    in_graph<<<16, 512, 0, stream>>>(out);
    in_graph<<<16, 512, 0, stream>>>(out);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    Expect("in_graph", in_graph, 512, 0);
    for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    std::printf("GRAPH_NODES_RUN 6\n");
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(out));
  // Exit after a device reset: the injector must still deliver every event and process_end.
  CHECK(cudaDeviceReset());
  std::fflush(stdout);
  return 0;
}
