// Poll-heavy program: one host thread spinning cudaStreamQuery on its own stream while 12 threads
// each launch ~10 us kernels on their own streams, for S seconds (default 5). Prints one JSON line:
//   {"seconds":S,"queries":Q,"queries_per_s":R,"launches":L,"launches_per_s":R2,
//    "kernel_cycles":C,"clock_khz":K,"hang_s":H}
// This is the program a framework's scheduler looks like (a thread asking "done yet?" as fast as
// it can while others launch): the query rate is what an injection library must not slow, since
// cuStreamQuery is one of the high-rate calls the injector's default subscription leaves out.
//
// The poller keeps one kernel in flight on its stream: it launches one, queries until the query
// says cudaSuccess (cudaErrorNotReady before; cuda_runtime_api.h, cudaStreamQuery), then launches
// the next, so its queries see both answers as a real poll loop does. Each kernel spins for
// 10 us worth of clock64() cycles at the device's peak clock (cudaDevAttrClockRate, in kHz:
// driver_types.h "Peak clock frequency in kilohertz"; 10 us = kHz x 10 / 1000 cycles), so at a
// lower clock it runs a little longer; the figures are ratios between modes on one machine.
//
// --hang T: the polling thread's stream starts with a kernel that spins until a flag in mapped
// host memory (cudaHostAllocMapped) is set, which the main thread does after T seconds (T < S):
// for T seconds the poller spins cudaStreamQuery on a hung stream while the others launch, for
// the stall check (a stall named, no kernel record dropped).
//
// Usage: poll_heavy [--seconds S] [--hang T]. Exits 69 with "no CUDA device" on stderr when there
// is none, 2 on bad arguments.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/ground_truth.h"

namespace {

constexpr int kLaunchThreads = 12;
constexpr long long kKernelMicroseconds = 10;

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Spins until the host writes a non-zero value into *flag (mapped host memory: every read goes
// over the bus, volatile keeps the compiler from hoisting it out of the loop).
__global__ void hang_kernel(const volatile int* flag) {
  while (*flag == 0) {
  }
}

bool ParseSeconds(const char* text, double* out) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0) || v > 3600) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  double hang_s = 0;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--seconds") == 0 && has_value && ParseSeconds(argv[i + 1], &seconds)) {
      ++i;
    } else if (std::strcmp(argv[i], "--hang") == 0 && has_value &&
               ParseSeconds(argv[i + 1], &hang_s)) {
      ++i;
    } else {
      std::fprintf(stderr, "usage: poll_heavy [--seconds S (0, 3600]] [--hang T (0, S)]\n");
      return 2;
    }
  }
  if (hang_s >= seconds) {
    std::fprintf(stderr, "poll_heavy: --hang %.3f must be shorter than --seconds %.3f\n", hang_s,
                 seconds);
    return 2;
  }
  example::RequireDevice();
  int clock_khz = 0;
  EX_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long cycles = static_cast<long long>(clock_khz) * kKernelMicroseconds / 1000;

  // Warm-up: loads the module and lets an injector see the kernel once before the clock runs.
  cudaStream_t poll_stream = nullptr;
  EX_CHECK(cudaStreamCreateWithFlags(&poll_stream, cudaStreamNonBlocking));
  for (int i = 0; i < 100; ++i) spin_kernel<<<1, 32, 0, poll_stream>>>(cycles);
  EX_CHECK(cudaStreamSynchronize(poll_stream));

  int* flag_host = nullptr;
  int* flag_device = nullptr;
  if (hang_s > 0) {
    EX_CHECK(cudaHostAlloc(&flag_host, sizeof(int), cudaHostAllocMapped));
    *reinterpret_cast<volatile int*>(flag_host) = 0;
    EX_CHECK(cudaHostGetDevicePointer(&flag_device, flag_host, 0));
  }

  std::atomic<bool> stop{false};
  std::atomic<long> launches{0};
  long queries = 0;
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  if (flag_device != nullptr) hang_kernel<<<1, 1, 0, poll_stream>>>(flag_device);
  for (int t = 0; t < kLaunchThreads; ++t) {
    threads.emplace_back([&] {
      cudaStream_t stream = nullptr;
      EX_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      long n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        spin_kernel<<<1, 32, 0, stream>>>(cycles);
        ++n;
      }
      EX_CHECK(cudaGetLastError());
      launches.fetch_add(n);
      EX_CHECK(cudaStreamSynchronize(stream));
      EX_CHECK(cudaStreamDestroy(stream));
    });
  }
  threads.emplace_back([&] {
    spin_kernel<<<1, 32, 0, poll_stream>>>(cycles);
    while (!stop.load(std::memory_order_relaxed)) {
      const cudaError_t e = cudaStreamQuery(poll_stream);
      ++queries;
      if (e == cudaSuccess) {
        spin_kernel<<<1, 32, 0, poll_stream>>>(cycles);
      } else if (e != cudaErrorNotReady) {
        EX_CHECK(e);
      }
    }
  });

  if (flag_host != nullptr) {
    std::this_thread::sleep_for(std::chrono::duration<double>(hang_s));
    *reinterpret_cast<volatile int*>(flag_host) = 1;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds - hang_s));
  } else {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
  stop.store(true);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (std::thread& t : threads) t.join();
  EX_CHECK(cudaDeviceSynchronize());
  EX_CHECK(cudaGetLastError());
  std::printf(
      "{\"seconds\":%.6f,\"queries\":%ld,\"queries_per_s\":%.1f,\"launches\":%ld,"
      "\"launches_per_s\":%.1f,\"kernel_cycles\":%lld,\"clock_khz\":%d,\"hang_s\":%.3f}\n",
      elapsed, queries, static_cast<double>(queries) / elapsed, launches.load(),
      static_cast<double>(launches.load()) / elapsed, cycles, clock_khz, hang_s);
  EX_CHECK(cudaStreamDestroy(poll_stream));
  if (flag_host != nullptr) EX_CHECK(cudaFreeHost(flag_host));
  return 0;
}
