// What CUPTI's flushes hand over while a kernel spins (docs/gpu-verification.md, item 13): three
// short kernels, one spinning on a host flag, two queued behind it, on one stream, with kernel and
// synchronization activity enabled. A default flush before the launches (two synchronize records),
// a forced flush from a second thread while the main thread waits in cudaStreamSynchronize, then
// default flushes after the release and after a cudaDeviceSynchronize. Prints every record.
// Build and run on a GPU machine:
//   nvcc -O2 -arch=native scripts/gpu_check/cupti_flush_probe.cu -o /tmp/cupti_flush_probe -lcupti
//   /tmp/cupti_flush_probe
#include <cuda_runtime.h>
#include <cupti.h>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <thread>
static void CUPTIAPI Req(uint8_t** b, size_t* s, size_t* m) {
  *s = 1 << 20; *b = static_cast<uint8_t*>(aligned_alloc(8, *s)); *m = 0; }
static void CUPTIAPI Done(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  printf("  buffer valid %zu\n", valid);
  CUpti_Activity* r = nullptr;
  CUptiResult st;
  while ((st = cuptiActivityGetNextRecord(b, valid, &r)) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(r);
      printf("    kernel corr %u ctx %u stream %u %s start %llu end %llu\n", k->correlationId, k->contextId, k->streamId, k->name,
             (unsigned long long)k->start, (unsigned long long)k->end);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
      auto* y = reinterpret_cast<CUpti_ActivitySynchronization2*>(r);
      printf("    sync type %d corr %u ctx %u stream %u start %llu end %llu ret %u\n", (int)y->type, y->correlationId, y->contextId,
             y->streamId, (unsigned long long)y->start, (unsigned long long)y->end, y->returnValue);
    } else printf("    kind %d\n", (int)r->kind);
  }
  printf("    loop ended with %d\n", (int)st);
  fflush(stdout);
  free(b);
}
__global__ void step(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }
__global__ void spin(volatile int* flag) { while (*flag == 0) {} }
int main() {
  cuptiActivityRegisterCallbacks(Req, Done);
  printf("enable kernel %d sync %d\n", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
         cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  int* flag; cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped); *flag = 0;
  int* dflag; cudaHostGetDevicePointer(&dflag, flag, 0);
  float* x; cudaMalloc(&x, 1 << 22);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamSynchronize(s);
  cudaDeviceSynchronize();
  printf("two syncs done before launches; default flush:\n"); cuptiActivityFlushAll(0);
  for (int i = 0; i < 3; ++i) step<<<4096, 256, 0, s>>>(x, 1 << 20);
  spin<<<1, 32, 0, s>>>(dflag);
  for (int i = 0; i < 2; ++i) step<<<4096, 256, 0, s>>>(x, 1 << 20);
  std::thread t([&] {
    usleep(500000);
    printf("forced flush while main is in cudaStreamSynchronize:\n"); fflush(stdout);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    usleep(300000);
    printf("release\n"); fflush(stdout);
    *flag = 1; __sync_synchronize();
  });
  cudaError_t e = cudaStreamSynchronize(s);
  printf("cudaStreamSynchronize returned %d; default flush:\n", (int)e); cuptiActivityFlushAll(0);
  t.join();
  cudaDeviceSynchronize();
  printf("cudaDeviceSynchronize; default flush:\n"); cuptiActivityFlushAll(0);
  printf("forced flush at end:\n"); cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  return 0;
}
