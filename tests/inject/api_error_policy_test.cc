// Which failed driver calls become api_error events. Routine failures (the list in
// cuflight/schema/routine_failures.h) are counted, not sent; repeats of one (call, CUresult)
// beyond the first 10 are sent at most once a second and otherwise counted; everything else is
// sent. CUresult values and their meaning are cuda.h's.
#include <gtest/gtest.h>

#include <vector>

#include "cuflight/schema/routine_failures.h"
#include "inject_test_support.h"

namespace cuflight::inject::testing {
namespace {

size_t Records(Harness& h) {
  size_t n = 0;
  LaunchRecord r;
  while (h.ring->TryPop(&r)) ++n;
  return n;
}

void Fail(Harness& h, CUpti_CallbackId cbid, CUresult code, uint32_t correlation_id = 1) {
  const int no_params = 0;
  Callback cb(&no_params, nullptr, correlation_id);
  cb.result = code;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb.data);
}

TEST(ApiErrorPolicy, RoutineFailuresAreCountedNotSent) {
  Harness h;
  struct Case {
    CUpti_CallbackId cbid;
    CUresult code;
    const char* why;
  };
  const Case routine[] = {
      {CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute, CUDA_ERROR_INVALID_VALUE,
       "NCCL/UCX/MPI probing a host pointer"},
      {CUPTI_DRIVER_TRACE_CBID_cuCtxEnablePeerAccess, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
       "peer access enabled twice"},
      {CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
       "host memory registered twice"},
      {CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal_v2, CUDA_ERROR_NOT_FOUND, "symbol lookup"},
      {CUPTI_DRIVER_TRACE_CBID_cuEventQuery, CUDA_ERROR_NOT_READY, "polling"},
  };
  for (const Case& c : routine) {
    Fail(h, c.cbid, c.code);
    EXPECT_EQ(Records(h), 0u) << c.why;
  }
  EXPECT_EQ(h.recorder->api_errors_routine(), 5u);
  EXPECT_EQ(h.recorder->api_errors(), 0u);

  // The same calls failing in a way that matters are sent.
  Fail(h, CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute, CUDA_ERROR_ILLEGAL_ADDRESS);
  Fail(h, CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, CUDA_ERROR_OUT_OF_MEMORY);
  Fail(h, CUPTI_DRIVER_TRACE_CBID_cuEventQuery, CUDA_ERROR_LAUNCH_FAILED);  // a fault, seen late
  EXPECT_EQ(Records(h), 3u);
  EXPECT_EQ(h.recorder->api_errors(), 3u);
  EXPECT_EQ(h.recorder->api_errors_routine(), 5u);
}

TEST(ApiErrorPolicy, RepeatsOfOneFailureAreRateLimited) {
  int flushes = 0;
  RecorderOptions options;
  options.on_sticky_error = [&flushes] { ++flushes; };
  Harness h(4096, options);
  // After a fault every later call on the dead context returns the same error: 1,000 of them
  // within a second give the first 10 (the first one flushed), the rest counted.
  for (uint32_t i = 0; i < 1000; ++i) {
    Fail(h, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, CUDA_ERROR_ILLEGAL_ADDRESS, i);
  }
  EXPECT_EQ(Records(h), ApiErrorLimiter::kBurst);
  EXPECT_EQ(h.recorder->api_errors_suppressed(), 1000u - ApiErrorLimiter::kBurst);
  EXPECT_EQ(flushes, 1);
  // Another (call, code) pair has its own count.
  Fail(h, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(Records(h), 1u);
}

TEST(ApiErrorLimiter, AfterTheBurstOnePerSecond) {
  ApiErrorLimiter limiter;
  constexpr int64_t kSecond = 1000000000;
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += limiter.Allow(7, 2, 100 + i);
  EXPECT_EQ(allowed, 10);
  EXPECT_FALSE(limiter.Allow(7, 2, 200));
  EXPECT_FALSE(limiter.Allow(7, 2, 109 + kSecond - 1));
  EXPECT_TRUE(limiter.Allow(7, 2, 109 + kSecond));      // a second after the last one allowed
  EXPECT_FALSE(limiter.Allow(7, 2, 109 + kSecond + 5));
  EXPECT_TRUE(limiter.Allow(8, 2, 300));                // another call
}

TEST(RoutineFailures, TheReportsViewAgreesWithTheLibrarys) {
  // The list's names are CUPTI driver callback names (the library's view does not compile
  // otherwise); the report matches api_error events by name and code.
  EXPECT_TRUE(schema::IsRoutineFailure("cuPointerGetAttribute", 1));
  EXPECT_TRUE(schema::IsRoutineFailure("cuStreamQuery_ptsz", 600));
  EXPECT_TRUE(schema::IsRoutineFailure("cuGetProcAddress_v2", 500));
  EXPECT_FALSE(schema::IsRoutineFailure("cuPointerGetAttribute", 700));
  EXPECT_FALSE(schema::IsRoutineFailure("cuMemAlloc_v2", 2));
  EXPECT_TRUE(IsRoutineFailure(CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
                               CUDA_ERROR_INVALID_VALUE));
  EXPECT_FALSE(IsRoutineFailure(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUDA_ERROR_OUT_OF_MEMORY));
  static_assert(CUDA_ERROR_INVALID_VALUE == 1 && CUDA_ERROR_NOT_FOUND == 500 &&
                    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED == 704 &&
                    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED == 705 &&
                    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED == 712 &&
                    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED == 713,
                "routine_failures.h writes these codes as numbers");
}

}  // namespace
}  // namespace cuflight::inject::testing
