// CUDA graphs: two kernels captured from a stream into a graph replayed 5 times with
// cudaGraphLaunch, and a second graph replayed 4 times with the driver's cuGraphLaunch. Only the
// replays execute kernels (launches into a capturing stream do not run), so each kernel node
// counts once per replay; cuflight reports them as kernel events with graph ids.
#include "common/driver_api.h"

__global__ void graph_scale(float* x, float a) { x[blockIdx.x * blockDim.x + threadIdx.x] *= a; }
__global__ void graph_add(float* x, float b) { x[blockIdx.x * blockDim.x + threadIdx.x] += b; }

// Captures `body` on `stream` into an executable graph.
template <typename Body>
cudaGraphExec_t Capture(cudaStream_t stream, Body body) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  EX_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  body();
  EX_CHECK(cudaStreamEndCapture(stream, &graph));
  EX_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  EX_CHECK(cudaGraphDestroy(graph));
  return exec;
}

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  const auto cu_graph_launch = example::DriverEntry<PFN_cuGraphLaunch_v10000>("cuGraphLaunch");
  float* x = nullptr;
  EX_CHECK(cudaMalloc(&x, sizeof(float) * 32 * 256));
  EX_CHECK(cudaMemset(x, 0, sizeof(float) * 32 * 256));
  cudaStream_t stream = nullptr;
  EX_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // Graph 1: scale then add over 16 blocks; 5 replays through the runtime.
  example::Config scale{dim3(16), dim3(256), 0, 5};
  scale.graph = true;
  example::Config add16{dim3(16), dim3(256), 0, 5};
  add16.graph = true;
  const cudaGraphExec_t first = Capture(stream, [&] {
    graph_scale<<<scale.grid, scale.block, 0, stream>>>(x, 2.0f);
    graph_add<<<add16.grid, add16.block, 0, stream>>>(x, 1.0f);
  });
  example::PrintTruth(prop, graph_scale, scale);
  example::PrintTruth(prop, graph_add, add16);
  for (int i = 0; i < 5; ++i) EX_CHECK(cudaGraphLaunch(first, stream));

  // Graph 2: add over 32 blocks of 128 threads; 4 replays through the driver.
  example::Config add32{dim3(32), dim3(128), 0, 4};
  add32.graph = true;
  const cudaGraphExec_t second = Capture(stream, [&] {
    graph_add<<<add32.grid, add32.block, 0, stream>>>(x, 0.5f);
  });
  example::PrintTruth(prop, graph_add, add32);
  for (int i = 0; i < 4; ++i) {
    EX_CU_CHECK(cu_graph_launch(reinterpret_cast<CUgraphExec>(second),
                                reinterpret_cast<CUstream>(stream)));
  }

  EX_CHECK(cudaStreamSynchronize(stream));
  EX_CHECK(cudaGraphExecDestroy(first));
  EX_CHECK(cudaGraphExecDestroy(second));
  EX_CHECK(cudaStreamDestroy(stream));
  EX_CHECK(cudaFree(x));
  return 0;
}
