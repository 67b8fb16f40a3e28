// Shared set-up for the injected library's tests: a fake driver with one H100-like device, the
// library's tables, a ring and a recorder, the sender thread over them, and helpers that build
// CUPTI callback data around real driver parameter structs.
#ifndef CUFLIGHT_TESTS_INJECT_INJECT_TEST_SUPPORT_H_
#define CUFLIGHT_TESTS_INJECT_INJECT_TEST_SUPPORT_H_

#include <cuda_occupancy.h>
#include <cupti.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "cuflight/occupancy/device_presets.h"
#include "device_table.h"
#include "fake_cuda.h"
#include "function_table.h"
#include "launch_ring.h"
#include "process_facts.h"
#include "recorder.h"
#include "running_collector.h"
#include "sender_thread.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {

// The shared test support (tests/support) that the sender thread's tests send to.
using test_support::HasProcessEnd;
using test_support::StoringCollector;
using test_support::TempSocketPath;
using Clock = std::chrono::steady_clock;

inline constexpr uint64_t kContext = 0xC0;
inline constexpr uint64_t kStream = 0x5E;
// CUPTI's ids of kContext and kStream (cuptiGetContextId, cuptiGetStreamIdEx): what the events
// carry, as CUPTI's activity records do.
inline constexpr uint32_t kContextId = 3;
inline constexpr uint32_t kStreamId = 14;

inline CUfunction Fn(uint64_t v) { return reinterpret_cast<CUfunction>(static_cast<uintptr_t>(v)); }
inline CUstream St(uint64_t v) { return reinterpret_cast<CUstream>(static_cast<uintptr_t>(v)); }

// One CUPTI driver callback at API exit with a successful result.
struct Callback {
  CUpti_CallbackData data{};
  CUresult result = CUDA_SUCCESS;

  Callback(const void* params, const char* symbol, uint32_t correlation_id,
           uint64_t context = kContext) {
    data.callbackSite = CUPTI_API_EXIT;
    data.functionName = "cuLaunchKernel";
    data.functionParams = params;
    data.functionReturnValue = &result;
    data.symbolName = symbol;
    data.context = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(context));
    data.correlationId = correlation_id;
  }
};

struct Harness {
  FakeCuda fake;
  ScopedFake scope{&fake};
  DriverApi driver;
  CuptiApi cupti;
  FunctionTable functions{1024};
  DeviceTable devices;
  std::unique_ptr<LaunchRing> ring;
  std::unique_ptr<Recorder> recorder;

  // `storage`: the ring in memory of the caller's (a black box region: ring_slots a power of
  // two), else its own.
  explicit Harness(size_t ring_slots = 1024, RecorderOptions options = {},
                   const char* device = "h100-sxm", LaunchRing::Storage storage = {}) {
    fake.devices[0] = occupancy::FindDevicePreset(device)->limits;
    fake.context_device[kContext] = 0;
    fake.context_ids[kContext] = kContextId;
    fake.stream_ids[kStream] = kStreamId;
    driver = fake.driver();
    cupti = fake.cupti();
    ring = storage.slots != nullptr ? std::make_unique<LaunchRing>(ring_slots, storage)
                                    : std::make_unique<LaunchRing>(ring_slots);
    recorder = std::make_unique<Recorder>(&driver, &cupti, ring.get(), &functions, &devices,
                                          std::move(options));
  }

  void Launch(CUpti_CallbackId cbid, const void* params, const char* symbol, uint32_t corr) {
    Callback cb(params, symbol, corr);
    recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb.data);
  }

  // The sender thread over this harness's ring, recorder and tables (not started: tests Step
  // it). `activity` and `cupti` as SenderThread's.
  SenderThread Sender(SenderThreadOptions options, ProcessFacts facts,
                      ActivityBuffers* activity = nullptr,
                      const CuptiApi* activity_cupti = nullptr) {
    return SenderThread(std::move(options), std::move(facts), ring.get(), recorder.get(),
                        &functions, &devices, activity, activity_cupti);
  }
};

// Sender thread options for a test that sends to a collector at `socket` (a StoringCollector):
// reconnects after 1 to 20 ms, so a collector started late is found at once.
inline SenderThreadOptions QuickSenderOptions(const std::string& socket, const DriverApi* driver) {
  SenderThreadOptions o;
  o.driver = driver;
  o.transport.socket_path = socket;
  o.transport.backoff_min = std::chrono::milliseconds(1);
  o.transport.backoff_max = std::chrono::milliseconds(20);
  return o;
}

// This process's facts with one configuration entry (process_start's `config`), as the injector
// reports the variables it was given.
inline ProcessFacts FactsWithConfig(std::string key, std::string value) {
  ProcessFacts f = ReadProcessFacts();
  f.config = {{std::move(key), std::move(value)}};
  return f;
}

// The reference calculator's answer for a function and launch on `limits`, converted the way
// cuda_occupancy.h converts cudaFuncAttributes.
inline int ReferenceBlocks(const occupancy::DeviceLimits& d, const FakeFunction& f, int block,
                           size_t dyn_smem) {
  cudaOccDeviceProp p;
  p.computeMajor = d.cc_major;
  p.computeMinor = d.cc_minor;
  p.maxThreadsPerBlock = d.max_threads_per_block;
  p.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  p.regsPerBlock = d.regs_per_block;
  p.regsPerMultiprocessor = d.regs_per_sm;
  p.warpSize = d.warp_size;
  p.sharedMemPerBlock = static_cast<size_t>(d.smem_per_block);
  p.sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  p.numSms = d.sm_count;
  p.sharedMemPerBlockOptin = static_cast<size_t>(d.smem_per_block_optin);
  p.reservedSharedMemPerBlock = static_cast<size_t>(d.reserved_smem_per_block);
  struct {
    int maxThreadsPerBlock;
    int numRegs;
    size_t sharedSizeBytes;
    size_t maxDynamicSharedSizeBytes;
  } fa{f.max_threads_per_block, f.num_regs, static_cast<size_t>(f.static_smem),
       static_cast<size_t>(f.max_dyn_smem)};
  cudaOccFuncAttributes attrs(fa);
  cudaOccDeviceState state;
  state.carveoutConfig = f.carveout;
  cudaOccResult result{};
  if (cudaOccMaxActiveBlocksPerMultiprocessor(&result, &p, &attrs, &state, block, dyn_smem) !=
      CUDA_OCC_SUCCESS) {
    return -1;
  }
  return result.activeBlocksPerMultiprocessor;
}

}  // namespace cuflight::inject::testing

#endif  // CUFLIGHT_TESTS_INJECT_INJECT_TEST_SUPPORT_H_
