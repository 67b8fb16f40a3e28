// The CUPTI callback handler fed hand-made CUpti_CallbackData around real driver parameter
// structs, with a fake driver.
#include "recorder.h"

#include <gtest/gtest.h>


#include <random>
#include <thread>
#include <vector>

#include "event_builder.h"
#include "inject_test_support.h"

namespace cuflight::inject::testing {
namespace {

constexpr uint64_t kF = 0x1000;
constexpr const char* kMangled = "_Z6kernelPfi";

std::vector<LaunchRecord> Drain(LaunchRing& ring) {
  std::vector<LaunchRecord> out;
  LaunchRecord r;
  while (ring.TryPop(&r)) out.push_back(r);
  return out;
}

TEST(Recorder, RecordsALaunchWithItsFunctionAttributes) {
  Harness h;
  FakeFunction f;
  f.num_regs = 64;
  f.static_smem = 1024;
  f.local_bytes = 16;
  f.const_bytes = 128;
  f.max_threads_per_block = 512;
  f.max_dyn_smem = 100000;
  f.carveout = 50;
  h.fake.functions[kF] = f;
  cuLaunchKernel_params p{Fn(kF), 132, 1, 1, 256, 1, 1, 2048, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 42);

  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  const LaunchRecord& r = records[0];
  EXPECT_EQ(r.correlation_id, 42u);
  EXPECT_EQ(r.context, kContextId);
  EXPECT_EQ(r.stream, kStreamId);
  EXPECT_EQ(r.device, 0);
  EXPECT_EQ(r.grid[0], 132u);
  EXPECT_EQ(r.block[0], 256u);
  EXPECT_EQ(r.dyn_smem, 2048u);
  EXPECT_EQ(r.api, LaunchApi::kLaunchKernel);
  EXPECT_GT(r.tid, 0);
  EXPECT_GT(r.ts_ns, 1700000000LL * 1000000000LL);  // a 2023+ wall clock
  ASSERT_NE(r.function, nullptr);
  EXPECT_TRUE(r.function->attributes_ok);
  EXPECT_EQ(r.function->num_regs, 64);
  EXPECT_EQ(r.function->static_smem, 1024);
  EXPECT_EQ(r.function->local_bytes, 16);
  EXPECT_EQ(r.function->const_bytes, 128);
  EXPECT_EQ(r.function->max_threads_per_block, 512);
  EXPECT_EQ(r.function->max_dyn_smem, 100000);
  EXPECT_EQ(r.function->carveout, 50);
  EXPECT_EQ(r.function->name, kMangled);
  EXPECT_EQ(r.function->demangled, "kernel(float*, int)");
  const DeviceInfo* device = h.devices.Get(0);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->name, "Fake GPU 0");
  EXPECT_EQ(device->uuid, "GPU-00102030-4050-6070-8090-a0b0c0d0e0f0");
  EXPECT_TRUE(device->engine.has_value());
  EXPECT_EQ(h.functions.TotalLaunches(), 1u);
  EXPECT_EQ(h.functions.TotalFiltered(), 0u);
}

TEST(Recorder, ReadsAttributesOncePerFunctionAndTakesSetAttributesFromTheSettingCall) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  const int queries_after_first = h.fake.attribute_queries;
  EXPECT_GT(queries_after_first, 0);
  for (uint32_t i = 0; i < 100; ++i) h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 2 + i);
  EXPECT_EQ(h.fake.attribute_queries, queries_after_first);

  // cudaFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) reaches the driver as cuFuncSetAttribute.
  h.fake.functions[kF].max_dyn_smem = 200000;
  cuFuncSetAttribute_params set{Fn(kF), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200000};
  Callback cb(&set, nullptr, 500);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute,
                         &cb.data);
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1000);
  std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 102u);
  EXPECT_EQ(records.front().func_max_dyn_smem, 48 * 1024);
  EXPECT_EQ(records.back().func_max_dyn_smem, 200000);  // the value the call set
  EXPECT_EQ(h.fake.attribute_queries, queries_after_first);  // no re-read needed

  // An attribute the FunctionInfo holds, set to another value: read again.
  h.fake.functions[kF].non_portable = 1;
  cuFuncSetAttribute_params cluster{Fn(kF), CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1};
  Callback cluster_cb(&cluster, nullptr, 1001);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute,
                         &cluster_cb.data);
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1002);
  records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].function->non_portable_cluster_allowed);
  EXPECT_EQ(records[0].func_max_dyn_smem, 200000);  // the re-read includes the earlier set
  EXPECT_GT(h.fake.attribute_queries, queries_after_first);
}

TEST(Recorder, OnlySuccessfulLaunchesAtApiExitAreRecorded) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  Callback failed(&p, kMangled, 1);
  failed.result = CUDA_ERROR_INVALID_VALUE;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                         &failed.data);
  Callback enter(&p, kMangled, 2);
  enter.data.callbackSite = CUPTI_API_ENTER;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                         &enter.data);
  // The failed launch is no kernel: it is an api_error record, with the launch's stream.
  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].kind, RecordKind::kApiError);
  EXPECT_EQ(records[0].cbid, static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_EQ(records[0].result, static_cast<int32_t>(CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(records[0].stream, kStreamId);
  EXPECT_EQ(records[0].context, kContextId);
  EXPECT_EQ(records[0].correlation_id, 1u);
  EXPECT_EQ(h.functions.TotalLaunches(), 0u);
}

TEST(Recorder, AFailedDriverCallBecomesAnApiErrorRecord) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 10);  // learns the context
  const int sync = 0;  // cuCtxSynchronize has no parameters
  Callback failed(&sync, nullptr, 11);
  failed.result = CUDA_ERROR_INVALID_VALUE;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
                         &failed.data);
  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].kind, RecordKind::kLaunch);
  const LaunchRecord& e = records[1];
  EXPECT_EQ(e.kind, RecordKind::kApiError);
  EXPECT_EQ(e.cbid, static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize));
  EXPECT_EQ(e.result, static_cast<int32_t>(CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(e.device, 0);  // the context's device, known from the launch
  EXPECT_EQ(e.context, kContextId);
  EXPECT_EQ(e.stream, CUPTI_INVALID_STREAM_ID);  // the call names no stream
  EXPECT_GT(e.tid, 0);
  EXPECT_EQ(h.recorder->api_errors(), 1u);
}

TEST(Recorder, PollingAndEntryPointProbingAreNotErrors) {
  Harness h;
  cuStreamQuery_params query{St(kStream)};
  Callback not_ready(&query, nullptr, 1);
  not_ready.result = CUDA_ERROR_NOT_READY;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,
                         &not_ready.data);
  cuGetProcAddress_v2_params probe{};
  Callback not_found(&probe, nullptr, 2);
  not_found.result = CUDA_ERROR_NOT_FOUND;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
                         &not_found.data);
  EXPECT_TRUE(Drain(*h.ring).empty());
  EXPECT_EQ(h.recorder->api_errors(), 0u);
  // The same code from another call is an error.
  cuMemAlloc_v2_params alloc{};
  Callback oom(&alloc, nullptr, 3);
  oom.result = CUDA_ERROR_NOT_FOUND;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
                         &oom.data);
  EXPECT_EQ(Drain(*h.ring).size(), 1u);
}

TEST(Recorder, TheFirstStickyErrorAsksForAnImmediateFlushAndNothingElseDoes) {
  int flushes = 0;
  RecorderOptions options;
  options.on_sticky_error = [&flushes] { ++flushes; };
  Harness h(1024, options);
  const int sync = 0;  // cuCtxSynchronize has no parameters
  for (const CUresult code : {CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY}) {
    Callback failed(&sync, nullptr, 1);
    failed.result = code;
    h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
                           &failed.data);
  }
  EXPECT_EQ(flushes, 0);
  for (const CUresult code : {CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED,
                              CUDA_ERROR_ECC_UNCORRECTABLE, CUDA_ERROR_MISALIGNED_ADDRESS}) {
    Callback failed(&sync, nullptr, 2);
    failed.result = code;
    h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
                           &failed.data);
  }
  // Every call on the dead context fails the same way: only the first one waits for a flush,
  // all of them are recorded.
  EXPECT_EQ(flushes, 1);
  EXPECT_EQ(Drain(*h.ring).size(), 6u);
}

// A green context is a "distinct spatial partition of the GPU" (cuda.h): a launch on a stream of
// one of 16 SMs (cuStreamGetGreenCtx, cuGreenCtxGetDevResource with CU_DEV_RESOURCE_TYPE_SM) says
// so in its record; a context limited to 66 SMs (cuCtxGetDevResource, as an MPS client might be)
// likewise; a context with the whole device (132 SMs, the H100 SXM preset) says nothing (0: the
// device's). Each context is asked once, however many launches.
TEST(Recorder, ALaunchInAPartitionCarriesItsSmCountAskedOncePerContext) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  constexpr uint64_t kGreenStream = 0x7E;
  constexpr uint64_t kGreenContext = 0xC1;  // cuCtxFromGreenCtx of kGreen
  constexpr uint64_t kGreen = 0x6E;
  h.fake.stream_context[kGreenStream] = kGreenContext;
  h.fake.context_device[kGreenContext] = 0;
  h.fake.stream_green[kGreenStream] = kGreen;
  h.fake.green_sms[kGreen] = 16;
  cuLaunchKernel_params green{Fn(kF), 64, 1, 1, 128, 1, 1, 0, St(kGreenStream), nullptr, nullptr};
  for (uint32_t i = 0; i < 50; ++i) h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &green, kMangled, i);
  std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 50u);
  for (const LaunchRecord& r : records) EXPECT_EQ(r.sm_count, 16u);
  EXPECT_EQ(h.fake.resource_queries, 1);

  // The NULL stream of the whole device's context: nothing said.
  cuLaunchKernel_params whole{Fn(kF), 64, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &whole, kMangled, 100);
  records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].sm_count, 0u);
  EXPECT_EQ(h.fake.resource_queries, 2);

  // After a context teardown the count is asked again (the handle may come back as another).
  h.fake.context_sms[kContext] = 66;
  cuCtxDestroy_v2_params destroy{reinterpret_cast<CUcontext>(static_cast<uintptr_t>(0xDEAD))};
  Callback gone(&destroy, nullptr, 101);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2,
                         &gone.data);
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &whole, kMangled, 102);
  records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].sm_count, 66u);
  EXPECT_EQ(h.fake.resource_queries, 3);
}

TEST(Recorder, CallbacksRaisedByItsOwnDriverCallsAreIgnored) {
  // The runtime launches a CUkernel: cuFuncGetAttribute on it fails, the recorder resolves its
  // CUfunction and asks again. CUPTI raises callbacks for those calls too; the failed one must
  // not become the application's api_error, and nothing may be recorded from inside them.
  Harness h;
  constexpr uint64_t kKernel = 0x7000;
  h.fake.kernels[kKernel].functions[0] = kF;
  h.fake.functions[kF] = FakeFunction{};
  int nested = 0;
  const int no_params = 0;
  h.fake.after_attribute_query = [&](CUresult result) {
    ++nested;
    Callback cb(&no_params, nullptr, 900);
    cb.result = result;
    h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API,
                           CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute, &cb.data);
  };
  cuLaunchKernel_params p{Fn(kKernel), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  EXPECT_GT(nested, 1);  // the failed query on the CUkernel, then those on its CUfunction
  EXPECT_EQ(h.recorder->api_errors(), 0u);
  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].kind, RecordKind::kLaunch);
  EXPECT_EQ(records[0].function->resolved_function, kF);

  // The same failure made by the application is reported.
  h.fake.after_attribute_query = nullptr;
  Callback app(&no_params, nullptr, 901);
  app.result = CUDA_ERROR_INVALID_HANDLE;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
                         &app.data);
  EXPECT_EQ(h.recorder->api_errors(), 1u);
}

TEST(Recorder, SettingAnAttributeToTheValueItHasKeepsTheCache) {
  // Libraries that call cudaFuncSetAttribute before every launch must not send every launch
  // down the slow path.
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  const int queries = h.fake.attribute_queries;
  for (uint32_t i = 0; i < 50; ++i) {
    cuFuncSetAttribute_params same{Fn(kF), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   48 * 1024};
    Callback cb(&same, nullptr, 100 + i);
    h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute,
                           &cb.data);
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 200 + i);
  }
  EXPECT_EQ(h.fake.attribute_queries, queries);
  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 51u);
  EXPECT_EQ(records.front().function, records.back().function);
  EXPECT_EQ(records.back().func_max_dyn_smem, 48 * 1024);
}

TEST(Recorder, KernelAttributeChangesReachTheNextLaunchThroughEitherHandle) {
  // cudaFuncSetAttribute on a library-loaded kernel reaches the driver as cuKernelSetAttribute
  // on the CUkernel the runtime launches; a driver-API program may set it on the CUfunction the
  // CUkernel resolves to.
  Harness h;
  constexpr uint64_t kKernel = 0x7000;
  h.fake.kernels[kKernel].functions[0] = kF;
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kKernel), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);

  h.fake.functions[kF].max_dyn_smem = 200000;
  cuKernelSetAttribute_params by_kernel{CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200000,
                                        reinterpret_cast<CUkernel>(kKernel), 0};
  Callback kernel_cb(&by_kernel, nullptr, 2);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuKernelSetAttribute,
                         &kernel_cb.data);
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 3);

  h.fake.functions[kF].carveout = 50;
  cuFuncSetAttribute_params by_function{Fn(kF), CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                        50};
  Callback function_cb(&by_function, nullptr, 4);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute,
                         &function_cb.data);
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 5);

  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].func_max_dyn_smem, 48 * 1024);
  EXPECT_EQ(records[1].func_max_dyn_smem, 200000);
  EXPECT_EQ(records[1].func_carveout, -1);
  EXPECT_EQ(records[2].func_carveout, 50);
  EXPECT_EQ(records[2].func_max_dyn_smem, 200000);
  EXPECT_EQ(records[0].function, records[2].function);  // nothing re-read, nothing republished
}

TEST(Recorder, ApiErrorsOffRecordsNoErrors) {
  RecorderOptions options;
  options.api_errors = false;
  Harness h(1024, options);
  const int sync = 0;  // cuCtxSynchronize has no parameters
  Callback failed(&sync, nullptr, 1);
  failed.result = CUDA_ERROR_ILLEGAL_ADDRESS;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
                         &failed.data);
  EXPECT_TRUE(Drain(*h.ring).empty());
}

TEST(Recorder, ARuntimeLaunchYieldsExactlyOneRecord) {
  // cudaLaunchKernel: CUPTI reports the runtime call, then the driver call it makes. Only the
  // driver domain is recorded, so the pair gives one record.
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  cudaLaunchKernel_v7000_params rt{};
  Callback runtime(&rt, kMangled, 7);
  runtime.data.functionName = "cudaLaunchKernel";
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_RUNTIME_API,
                         CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &runtime.data);
  cuLaunchKernel_params p{Fn(kF), 4, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 7);
  EXPECT_EQ(Drain(*h.ring).size(), 1u);
}

TEST(Recorder, SamplesEveryNthLaunchPerFunctionAndCountsEveryLaunch) {
  RecorderOptions options;
  options.sample_every = 4;
  Harness h(1024, options);
  h.fake.functions[kF] = FakeFunction{};
  h.fake.functions[kF + 1] = FakeFunction{};
  cuLaunchKernel_params a{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  cuLaunchKernel_params b{Fn(kF + 1), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t i = 0; i < 10; ++i) h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &a, "_Z1av", i);
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &b, "_Z1bv", 100);  // a rare kernel still shows
  // a: launches 0, 4, 8 recorded; b: its first launch.
  EXPECT_EQ(Drain(*h.ring).size(), 4u);
  EXPECT_EQ(h.functions.TotalLaunches(), 11u);
  EXPECT_EQ(h.functions.TotalFiltered(), 7u);
}

TEST(Recorder, NameFilterDecidesOncePerFunction) {
  RecorderOptions options;
  int calls = 0;
  options.accept = [&calls](std::string_view demangled, std::string_view) {
    ++calls;
    return demangled.find("gemm") != std::string_view::npos;
  };
  Harness h(1024, options);
  h.fake.functions[kF] = FakeFunction{};
  h.fake.functions[kF + 1] = FakeFunction{};
  cuLaunchKernel_params gemm{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  cuLaunchKernel_params other{Fn(kF + 1), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t i = 0; i < 5; ++i) {
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &gemm, "_Z4gemmv", i);
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &other, "_Z6reducev", 10 + i);
  }
  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 5u);
  for (const LaunchRecord& r : records) EXPECT_EQ(r.function->demangled, "gemm()");
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(h.functions.TotalLaunches(), 10u);
  EXPECT_EQ(h.functions.TotalFiltered(), 5u);
}

TEST(Recorder, LaunchesIntoACapturingStreamAreNotRecorded) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  EXPECT_EQ(h.fake.capture_queries, 0);  // no capture anywhere: no driver query

  cuStreamBeginCapture_v2_params begin{St(kStream), CU_STREAM_CAPTURE_MODE_GLOBAL};
  Callback begin_cb(&begin, nullptr, 2);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API,
                         CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &begin_cb.data);
  h.fake.capturing_streams[kStream] = 1;
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 3);  // captured, not run
  cuLaunchKernel_params elsewhere{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(0x999), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &elsewhere, kMangled, 4);  // runs
  EXPECT_EQ(h.recorder->captured(), 1u);

  cuStreamEndCapture_params end{St(kStream), nullptr};
  Callback end_cb(&end, nullptr, 5);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
                         &end_cb.data);
  h.fake.capturing_streams.clear();
  const int queries = h.fake.capture_queries;
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 6);
  EXPECT_EQ(h.fake.capture_queries, queries);

  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].correlation_id, 1u);
  EXPECT_EQ(records[1].correlation_id, 4u);
  EXPECT_EQ(records[2].correlation_id, 6u);
}

TEST(Recorder, APerThreadStreamLaunchIsCheckedAgainstThePerThreadStreamsCapture) {
  // cudaStreamBeginCapture(cudaStreamPerThread) under --default-stream per-thread: the _ptsz
  // launches into stream 0 go to the capture; legacy-stream launches still run.
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  cuStreamBeginCapture_v2_params begin{CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL};
  Callback begin_cb(&begin, nullptr, 1);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API,
                         CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz, &begin_cb.data);
  h.fake.capturing_streams[reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD)] = 1;
  cuLaunchKernel_ptsz_params per_thread{Fn(kF), 1, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &per_thread, kMangled, 2);
  cuLaunchKernel_params legacy{Fn(kF), 1, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &legacy, kMangled, 3);
  EXPECT_EQ(h.recorder->captured(), 1u);
  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].correlation_id, 3u);
  // The legacy stream's CUPTI id (asked with the context and perThreadStream 0).
  EXPECT_EQ(records[0].stream, (h.fake.null_stream_ids[{kContext, 0}]));
}

TEST(Recorder, LegacyLaunchUsesBlockShapeAndSharedSize) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  cuFuncSetBlockShape_params shape{Fn(kF), 16, 16, 2};
  Callback shape_cb(&shape, nullptr, 1);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuFuncSetBlockShape,
                         &shape_cb.data);
  cuFuncSetSharedSize_params smem{Fn(kF), 3000};
  Callback smem_cb(&smem, nullptr, 2);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuFuncSetSharedSize,
                         &smem_cb.data);
  cuLaunchGrid_params launch{Fn(kF), 7, 9};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, &launch, kMangled, 3);
  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].api, LaunchApi::kLaunchGrid);
  EXPECT_EQ(records[0].block[0], 16u);
  EXPECT_EQ(records[0].block[1], 16u);
  EXPECT_EQ(records[0].block[2], 2u);
  EXPECT_EQ(records[0].dyn_smem, 3000u);
  EXPECT_EQ(records[0].grid[0], 7u);
  EXPECT_EQ(records[0].grid[1], 9u);
}

TEST(Recorder, CompileTimeClusterDimsMakeAClusterLaunch) {
  Harness h;
  FakeFunction f;
  f.cluster[0] = 2;
  f.cluster[1] = 1;
  f.cluster[2] = 1;
  h.fake.functions[kF] = f;
  cuLaunchKernel_params p{Fn(kF), 132, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].cluster[0], 2u);
  EXPECT_EQ(records[0].cluster[1], 1u);
}

TEST(Recorder, ClusterLaunchesAskTheDriverForResidentClustersOncePerConfiguration) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  h.fake.max_active_clusters = 10;
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = 2;
  attr.value.clusterDim.y = 1;
  attr.value.clusterDim.z = 1;
  CUlaunchConfig config{132, 1, 1, 128, 1, 1, 1024, St(kStream), &attr, 1};
  cuLaunchKernelEx_params p{&config, Fn(kF), nullptr, nullptr};
  for (uint32_t i = 0; i < 5; ++i) h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, kMangled, i);
  EXPECT_EQ(h.fake.cluster_queries, 1);
  EXPECT_EQ(h.fake.last_cluster_config.blockDimX, 128u);
  EXPECT_EQ(h.fake.last_cluster_config.sharedMemBytes, 1024u);
  EXPECT_EQ(h.fake.last_cluster_config.hStream, St(kStream));
  EXPECT_EQ(h.fake.last_cluster_dims[0], 2u);
  EXPECT_EQ(h.fake.last_cluster_dims[1], 1u);

  config.blockDimX = 256;  // another configuration: asked again
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, kMangled, 10);
  EXPECT_EQ(h.fake.cluster_queries, 2);

  // No cluster: nothing to ask.
  cuLaunchKernel_params plain{Fn(kF), 132, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, kMangled, 11);
  EXPECT_EQ(h.fake.cluster_queries, 2);

  // A __cluster_dims__ kernel launched plainly is a cluster launch too; a driver that cannot say
  // gives 0 (unknown), remembered so that it is not asked at every launch.
  FakeFunction compiled;
  compiled.cluster[0] = 4;
  compiled.cluster[1] = 1;
  compiled.cluster[2] = 1;
  h.fake.functions[kF + 1] = compiled;
  h.fake.max_active_clusters = -1;
  cuLaunchKernel_params dims{Fn(kF + 1), 132, 1, 1, 64, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dims, kMangled, 12);
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dims, kMangled, 13);
  EXPECT_EQ(h.fake.cluster_queries, 3);
  EXPECT_EQ(h.fake.last_cluster_dims[0], 4u);

  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 9u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(records[i].max_active_clusters, 10) << i;
  EXPECT_EQ(records[6].max_active_clusters, 0);  // not a cluster launch
  EXPECT_EQ(records[7].max_active_clusters, 0);  // the driver could not say
  EXPECT_EQ(records[8].max_active_clusters, 0);
}

TEST(Recorder, FunctionsWithoutAttributesAreCountedNotRecorded) {
  Harness h;
  FakeFunction broken;
  broken.fail = true;
  h.fake.functions[kF] = broken;
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  EXPECT_TRUE(Drain(*h.ring).empty());
  EXPECT_EQ(h.recorder->unresolved(), 1u);
  EXPECT_EQ(h.functions.TotalLaunches(), 1u);
  EXPECT_EQ(h.functions.TotalFiltered(), 1u);
}

TEST(Recorder, AFullRingDropsAndCountsExactly) {
  Harness h(64);
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t i = 0; i < 100; ++i) h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, i);
  const size_t kept = Drain(*h.ring).size();
  EXPECT_EQ(kept, h.ring->capacity());
  EXPECT_EQ(kept + h.recorder->dropped_ring_full(), 100u);
}

TEST(Recorder, ManyThreadsLoseNothingUncounted) {
  Harness h(256);
  h.fake.functions[kF] = FakeFunction{};
  // Warm the caches on this thread: the fake driver is not thread-safe, the hot path is.
  cuLaunchKernel_params warm{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &warm, kMangled, 0);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::atomic<bool> done{false};
  size_t popped = 0;
  std::thread consumer([&] {
    LaunchRecord r;
    while (!done.load(std::memory_order_acquire)) {
      while (h.ring->TryPop(&r)) ++popped;
    }
    while (h.ring->TryPop(&r)) ++popped;
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&h, t] {
      cuLaunchKernel_params p{Fn(kF), static_cast<unsigned>(t + 1), 1, 1, 128, 1, 1, 0,
                              St(kStream), nullptr, nullptr};
      for (int i = 0; i < kPerThread; ++i) {
        Callback cb(&p, kMangled, static_cast<uint32_t>(i));
        h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                               &cb.data);
      }
    });
  }
  for (std::thread& t : producers) t.join();
  done.store(true, std::memory_order_release);
  consumer.join();
  EXPECT_EQ(popped + h.recorder->dropped_ring_full(), 1u + kThreads * kPerThread);
  EXPECT_EQ(h.functions.TotalLaunches(), 1u + kThreads * kPerThread);
}

TEST(EventBuilder, OccupancyEqualsTheReferenceCalculatorForEveryLaunch) {
  // 2,000 random functions and launches on three devices; the expected block counts come from
  // cudaOccMaxActiveBlocksPerMultiprocessor, not from the engine.
  std::mt19937_64 rng(20261121);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  for (const char* device : {"h100-sxm", "a100", "t4"}) {
    Harness h(4096, {}, device);
    EventBuilder builder;
    const occupancy::DeviceLimits& limits = h.fake.devices[0];
    for (int i = 0; i < 700; ++i) {
      FakeFunction f;
      f.num_regs = uniform(0, 3) == 0 ? uniform(1, 255) : uniform(16, 96);
      f.static_smem = uniform(0, 2) == 0 ? 0 : uniform(0, 40) * 1024;
      f.max_threads_per_block = uniform(0, 3) == 0 ? uniform(1, 32) * 32 : 1024;
      const bool opted_in = uniform(0, 2) == 0;
      f.max_dyn_smem = opted_in ? static_cast<int>(limits.smem_per_block_optin) - f.static_smem
                                : std::max(0, static_cast<int>(limits.smem_per_block) - f.static_smem);
      f.carveout = uniform(0, 2) == 0 ? uniform(0, 100) : -1;
      const uint64_t handle = 0x10000 + static_cast<uint64_t>(i);
      h.fake.functions[handle] = f;
      const int block = std::min(f.max_threads_per_block, uniform(1, 32) * 32);
      const unsigned dyn = static_cast<unsigned>(uniform(0, std::max(0, f.max_dyn_smem)));
      cuLaunchKernel_params p{Fn(handle), static_cast<unsigned>(uniform(1, 5000)), 1, 1,
                              static_cast<unsigned>(block), 1, 1, dyn, St(kStream), nullptr, nullptr};
      h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, "_Z1kv", static_cast<uint32_t>(i));
      LaunchRecord record;
      ASSERT_TRUE(h.ring->TryPop(&record));
      schema::KernelEvent event;
      const int expected = ReferenceBlocks(limits, f, block, dyn);
      if (expected < 0) continue;  // the reference refuses the configuration
      ASSERT_TRUE(builder.BuildKernel(record, *h.devices.Get(0), &event));
      EXPECT_EQ(event.occupancy.max_active_blocks, expected)
          << device << " regs=" << f.num_regs << " smem=" << f.static_smem << "+" << dyn
          << " block=" << block << " carveout=" << f.carveout;
      EXPECT_EQ(event.num_regs, f.num_regs);
      EXPECT_EQ(event.dyn_shared_bytes, dyn);
      ++checked;
    }
  }
  EXPECT_GT(checked, 1500);
}

TEST(EventBuilder, FewerResidentClustersThanTheSmsAllowMakeTheClusterTheLimit) {
  // 32 registers, 128 threads (4 warps), no shared memory on an H100 (132 SMs, 64 warps/SM):
  // 16 blocks per SM, occupancy 1.0. Clusters of 2 blocks; if the driver places only 100
  // clusters at once, 200 blocks are resident: 200 * 4 warps / (132 * 64) = 800 / 8448 of the
  // GPU's warp slots. If it places 1056 (132 * 16 / 2), the cluster costs nothing.
  for (const int clusters : {100, 1056}) {
    Harness h;
    EventBuilder builder;
    h.fake.functions[kF] = FakeFunction{};
    h.fake.max_active_clusters = clusters;
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    CUlaunchConfig config{264, 1, 1, 128, 1, 1, 0, St(kStream), &attr, 1};
    cuLaunchKernelEx_params p{&config, Fn(kF), nullptr, nullptr};
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, kMangled, 1);
    LaunchRecord record;
    ASSERT_TRUE(h.ring->TryPop(&record));
    schema::KernelEvent event;
    ASSERT_TRUE(builder.BuildKernel(record, *h.devices.Get(0), &event));
    EXPECT_DOUBLE_EQ(event.occupancy.occupancy, 1.0);
    EXPECT_TRUE(event.occupancy.has_cluster);
    if (clusters == 100) {
      EXPECT_NEAR(event.occupancy.cluster_occupancy, 800.0 / 8448.0, 1e-12);
      EXPECT_EQ(event.occupancy.limiting_resource, schema::Resource::kCluster);
    } else {
      EXPECT_DOUBLE_EQ(event.occupancy.cluster_occupancy, 1.0);
      EXPECT_NE(event.occupancy.limiting_resource, schema::Resource::kCluster);
    }
  }
}

TEST(EventBuilder, ADynamicSharedMemoryLimitSetAfterTheFirstLaunchApplies) {
  // A kernel launched once with the default 48 KiB limit, then opted in to 200,000 bytes
  // (cudaFuncSetAttribute) and launched with 100,000 bytes: the second launch is computed with
  // the new limit. The reference calculator gets the function as the driver then describes it.
  Harness h;
  EventBuilder builder;
  const occupancy::DeviceLimits& limits = h.fake.devices[0];
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params small{Fn(kF), 132, 1, 1, 256, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &small, kMangled, 1);
  cuFuncSetAttribute_params set{Fn(kF), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200000};
  Callback cb(&set, nullptr, 2);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute,
                         &cb.data);
  h.fake.functions[kF].max_dyn_smem = 200000;  // what the driver holds after the set returned
  cuLaunchKernel_params big{Fn(kF), 132, 1, 1, 256, 1, 1, 100000, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &big, kMangled, 3);

  FakeFunction opted_in;
  opted_in.max_dyn_smem = 200000;
  const int expected = ReferenceBlocks(limits, opted_in, 256, 100000);
  ASSERT_GT(expected, 0);
  LaunchRecord record;
  schema::KernelEvent event;
  ASSERT_TRUE(h.ring->TryPop(&record));
  ASSERT_TRUE(h.ring->TryPop(&record));
  ASSERT_TRUE(builder.BuildKernel(record, *h.devices.Get(0), &event));
  EXPECT_EQ(event.occupancy.max_active_blocks, expected);
}

TEST(EventBuilder, ALaunchsOwnCarveoutOverridesTheFunctions) {
  // 40 KiB of static shared memory per block, 64 threads: shared memory limits. The function
  // prefers the largest carveout; the launch asks for 25 %. The reference calculator is given
  // each carveout as the function attribute it would be.
  Harness h;
  EventBuilder builder;
  const occupancy::DeviceLimits& limits = h.fake.devices[0];
  FakeFunction f;
  f.static_smem = 40 * 1024;
  f.carveout = 100;
  h.fake.functions[kF] = f;
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
  attr.value.sharedMemCarveout = 25;
  CUlaunchConfig with_carveout{132, 1, 1, 64, 1, 1, 0, St(kStream), &attr, 1};
  cuLaunchKernelEx_params p{&with_carveout, Fn(kF), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, kMangled, 1);
  CUlaunchConfig plain{132, 1, 1, 64, 1, 1, 0, St(kStream), nullptr, 0};
  cuLaunchKernelEx_params q{&plain, Fn(kF), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &q, kMangled, 2);

  FakeFunction as_launched = f;
  as_launched.carveout = 25;
  const int expected_launch = ReferenceBlocks(limits, as_launched, 64, 0);
  const int expected_function = ReferenceBlocks(limits, f, 64, 0);
  ASSERT_LT(expected_launch, expected_function);  // the two carveouts differ in blocks
  LaunchRecord record;
  schema::KernelEvent event;
  ASSERT_TRUE(h.ring->TryPop(&record));
  ASSERT_TRUE(builder.BuildKernel(record, *h.devices.Get(0), &event));
  EXPECT_EQ(event.carveout, 25);
  EXPECT_EQ(event.occupancy.max_active_blocks, expected_launch);
  ASSERT_TRUE(h.ring->TryPop(&record));
  ASSERT_TRUE(builder.BuildKernel(record, *h.devices.Get(0), &event));
  EXPECT_EQ(event.carveout, 100);
  EXPECT_EQ(event.occupancy.max_active_blocks, expected_function);
}

// The launch's context is unknown to cuptiGetDeviceId: the device comes from cuptiGetDeviceId
// with a NULL context (cupti_activity.h: "the device that contains the currently active
// context"; "may be called from within callback functions"), never from cuCtxGetDevice, which is
// not documented as callable from inside a callback.
TEST(Recorder, TheDeviceOfAnUnknownContextComesFromCuptiNotTheDriver) {
  Harness h;
  h.fake.devices[1] = h.fake.devices[0];
  h.fake.context_device.clear();  // CUPTI refuses kContext (CUPTI_ERROR_INVALID_CONTEXT)
  h.fake.current_device = 1;      // the launching thread's current context is on device 1
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kF), 4, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 7);
  const std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].device, 1);
  EXPECT_EQ(h.fake.ctx_get_device_calls, 0);
}

}  // namespace
}  // namespace cuflight::inject::testing
