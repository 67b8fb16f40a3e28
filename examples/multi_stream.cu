// Several host threads, each with two streams of its own, launching the same kernel
// concurrently. Thread t uses t + 1 KiB of dynamic shared memory, so each thread's launches form
// their own configuration: cuflight must attribute every launch, from every thread and stream.
#include <thread>
#include <vector>

#include "common/ground_truth.h"

constexpr int kThreads = 4;
constexpr int kStreamsPerThread = 2;
constexpr int kLaunchesPerStream = 25;

__global__ void stream_work(float* x, int n) {
  extern __shared__ float scratch[];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.5f + 1.0f;
  if (threadIdx.x == 0) scratch[0] = x[0];
}

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  const int n = 64 * 128;
  std::vector<float*> buffers(kThreads);
  for (float*& b : buffers) {
    EX_CHECK(cudaMalloc(&b, sizeof(float) * n * kStreamsPerThread));
    EX_CHECK(cudaMemset(b, 0, sizeof(float) * n * kStreamsPerThread));
  }
  for (int t = 0; t < kThreads; ++t) {
    const example::Config c{dim3(64), dim3(128), static_cast<size_t>(t + 1) * 1024,
                            kStreamsPerThread * kLaunchesPerStream};
    example::PrintTruth(prop, stream_work, c);
  }

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, n, &buffers] {
      EX_CHECK(cudaSetDevice(0));
      cudaStream_t streams[kStreamsPerThread];
      for (cudaStream_t& s : streams) EX_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      const size_t dyn = static_cast<size_t>(t + 1) * 1024;
      for (int i = 0; i < kLaunchesPerStream; ++i) {
        for (int s = 0; s < kStreamsPerThread; ++s) {
          stream_work<<<64, 128, dyn, streams[s]>>>(buffers[t] + s * n, n);
        }
      }
      EX_CHECK(cudaGetLastError());
      for (cudaStream_t s : streams) {
        EX_CHECK(cudaStreamSynchronize(s));
        EX_CHECK(cudaStreamDestroy(s));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (float* b : buffers) EX_CHECK(cudaFree(b));
  return 0;
}
