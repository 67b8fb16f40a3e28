// A GPU hang on purpose, for the stall report (docs/crash.md, "GPU hangs"): a kernel spins on a
// flag in mapped pinned host memory that the host sets only after N seconds (the first argument,
// default 3), so the kernel does not finish for that long while the process keeps running.
//
// On one stream: 3 short `step` kernels, then `spin`, then 2 more `step` kernels queued behind it.
// The process stalls on `spin`: that is the kernel a stall report must name, not the ones that
// finished before it nor those queued after it. The program prints the ground truth of both
// configurations, and one line {"stall_kernel":"<spin's mangled name>","release_after_s":N} for
// scripts/gpu-check. Exit status 0 once the flag released the kernel and everything finished.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/ground_truth.h"

__global__ void step(float* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * 0.5f + 1.0f;
}

// Spins until the host sets *flag. volatile: every iteration reads the flag through the mapping.
__global__ void spin(volatile int* flag) {
  if (threadIdx.x != 0) return;
  while (*flag == 0) __nanosleep(1000);
}

int main(int argc, char** argv) {
  char* end = nullptr;
  const long seconds = argc >= 2 ? std::strtol(argv[1], &end, 10) : 3;
  if (argc > 2 || (argc == 2 && (end == argv[1] || *end != '\0')) || seconds < 0 ||
      seconds > 3600) {
    std::fprintf(stderr, "usage: hang [SECONDS (0..3600, default 3)]\n");
    return 2;
  }
  const cudaDeviceProp prop = example::RequireDevice();
  EX_CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
  int* host_flag = nullptr;
  EX_CHECK(cudaHostAlloc(&host_flag, sizeof(int), cudaHostAllocMapped));
  *reinterpret_cast<volatile int*>(host_flag) = 0;
  int* device_flag = nullptr;
  EX_CHECK(cudaHostGetDevicePointer(&device_flag, host_flag, 0));
  constexpr int kN = 1 << 20;
  float* data = nullptr;
  EX_CHECK(cudaMalloc(&data, kN * sizeof(float)));
  cudaStream_t stream = nullptr;
  EX_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  example::Config step_config{dim3((kN + 255) / 256), dim3(256)};
  step_config.launches = 5;
  const example::Config spin_config{dim3(1), dim3(32)};
  example::PrintTruth(prop, step, step_config);
  example::PrintTruth(prop, spin, spin_config);
  {
    const char* mangled = nullptr;
    EX_CHECK(cudaFuncGetName(&mangled, reinterpret_cast<const void*>(spin)));
    std::string line = "{\"stall_kernel\":";
    example::AppendJsonString(&line, mangled);
    line += ",\"release_after_s\":" + std::to_string(seconds) + "}\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }

  for (int i = 0; i < 3; ++i) step<<<step_config.grid, step_config.block, 0, stream>>>(data, kN);
  spin<<<spin_config.grid, spin_config.block, 0, stream>>>(device_flag);
  for (int i = 0; i < 2; ++i) step<<<step_config.grid, step_config.block, 0, stream>>>(data, kN);
  EX_CHECK(cudaGetLastError());

  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  __atomic_store_n(host_flag, 1, __ATOMIC_SEQ_CST);  // visible to the GPU through the mapping
  EX_CHECK(cudaStreamSynchronize(stream));
  std::fprintf(stderr, "released after %ld s\n", seconds);
  EX_CHECK(cudaStreamDestroy(stream));
  EX_CHECK(cudaFree(data));
  EX_CHECK(cudaFreeHost(host_flag));
  return 0;
}
