// Launch storm: launches an empty kernel N times (default 1,000,000) on one stream and prints the
// launch rate as one JSON line:
//   {"launches":N,"seconds":S,"launches_per_s":R}
// The clock runs from the first timed launch to the end of the final synchronisation, after a
// warm-up of 10,000 launches that loads the module and fills the injector's caches.
// Usage: launch_storm [N]. Exits 69 with "no CUDA device" on stderr when there is none.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "common/ground_truth.h"

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
  long n = 1000000;
  if (argc > 1) {
    char* end = nullptr;
    n = std::strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || n <= 0) {
      std::fprintf(stderr, "usage: launch_storm [LAUNCHES > 0]\n");
      return 2;
    }
  }
  example::RequireDevice();
  cudaStream_t stream = nullptr;
  EX_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < 10000; ++i) empty_kernel<<<1, 32, 0, stream>>>();
  EX_CHECK(cudaStreamSynchronize(stream));

  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) empty_kernel<<<1, 32, 0, stream>>>();
  EX_CHECK(cudaStreamSynchronize(stream));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EX_CHECK(cudaGetLastError());
  std::printf("{\"launches\":%ld,\"seconds\":%.6f,\"launches_per_s\":%.1f}\n", n, seconds,
              static_cast<double>(n) / seconds);
  EX_CHECK(cudaStreamDestroy(stream));
  return 0;
}
