// A kernel that writes through a bad pointer, for post-mortem tests: the program prints the
// ground truth of its one launch, launches, and the synchronisation reports
// cudaErrorIllegalAddress. Exit status 3 when it faulted as intended, 1 when it did not.
#include <cstdint>

#include "common/ground_truth.h"

constexpr int kExitFaulted = 3;

__global__ void write_through(float* p) { p[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

int main() {
  const cudaDeviceProp prop = example::RequireDevice();
  // An address no allocation uses: high in the 49-bit GPU virtual address space.
  float* bad = reinterpret_cast<float*>(uintptr_t{0x1ull} << 47);
  const example::Config c{dim3(4), dim3(64)};
  example::PrintTruth(prop, write_through, c);
  write_through<<<c.grid, c.block>>>(bad);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) {
    std::fprintf(stderr, "the write through %p did not fault\n", static_cast<void*>(bad));
    return example::kExitCudaError;
  }
  std::fprintf(stderr, "faulted as intended: %s\n", cudaGetErrorString(e));
  return kExitFaulted;
}
