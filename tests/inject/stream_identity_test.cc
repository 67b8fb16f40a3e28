// One identity per stream and context across all events. Launch-callback events name the stream
// and context by CUPTI's ids (cuptiGetStreamIdEx, cuptiGetContextId in cupti_activity.h), the ids
// CUPTI's activity records carry (CUpti_ActivityKernel10.streamId, .contextId), so a stream's
// launches, its graph nodes and its kernel times are one track. The per-thread default stream of
// each thread is a stream of its own; the legacy NULL stream is one per context.
#include <gtest/gtest.h>

#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "event_builder.h"
#include "inject_test_support.h"

namespace cuflight::inject::testing {
namespace {

constexpr uint64_t kF = 0x3000;
constexpr const char* kMangled = "_Z1kv";

LaunchRecord LaunchOn(Harness& h, CUpti_CallbackId cbid, uint64_t stream, uint32_t corr) {
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(stream), nullptr, nullptr};
  h.Launch(cbid, &p, kMangled, corr);
  LaunchRecord record;
  EXPECT_TRUE(h.ring->TryPop(&record));
  return record;
}

TEST(StreamIdentity, ALaunchNamesItsStreamAsItsActivityRecordsDo) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  const LaunchRecord launch = LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kStream, 1);
  EXPECT_EQ(launch.context, kContextId);
  EXPECT_EQ(launch.stream, kStreamId);

  // The same launch's kernel_time, and a graph node on the same stream, from CUPTI's records.
  KernelActivity a{};
  a.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  a.correlationId = 1;
  a.contextId = kContextId;
  a.streamId = kStreamId;
  a.start = 1000;
  a.end = 2000;
  schema::KernelTimeEvent time;
  EventBuilder::BuildKernelTime(a, &time);
  schema::KernelEvent kernel;
  EventBuilder builder;
  ASSERT_TRUE(builder.BuildKernel(launch, *h.devices.Get(0), &kernel));
  EXPECT_EQ(time.context, kernel.context);
  EXPECT_EQ(time.stream, kernel.stream);
}

TEST(StreamIdentity, AStreamIsAskedAboutOnce) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  for (uint32_t i = 0; i < 1000; ++i) LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kStream, i);
  EXPECT_EQ(h.fake.stream_id_queries, 1);
}

TEST(StreamIdentity, EachThreadsPerThreadDefaultStreamIsItsOwn) {
  // cuLaunchKernel_ptsz with stream 0 launches into the calling thread's per-thread default
  // stream (cuda.h, CU_STREAM_PER_THREAD); so does CU_STREAM_PER_THREAD through cuLaunchKernel.
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  const uint64_t kPerThread = reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD);
  const uint64_t kLegacy = reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY);
  const LaunchRecord legacy = LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0, 1);
  const LaunchRecord legacy_named = LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kLegacy, 2);
  const LaunchRecord mine = LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, 0, 3);
  const LaunchRecord mine_named = LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kPerThread, 4);
  const LaunchRecord mine_again = LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, 0, 5);
  EXPECT_EQ(legacy.stream, legacy_named.stream);
  EXPECT_NE(mine.stream, legacy.stream);
  EXPECT_EQ(mine_named.stream, mine.stream);
  EXPECT_EQ(mine_again.stream, mine.stream);
  EXPECT_EQ(h.fake.stream_id_queries, 2);  // the legacy stream once, this thread's once

  // Three more threads, alive at once (each thread has its own per-thread stream while it
  // lives), launching one after another (the harness's ring and fake are not shared safely).
  std::vector<uint64_t> others(3);
  std::vector<uint64_t> others_legacy(3);
  std::mutex mu;
  std::latch all_launched(static_cast<std::ptrdiff_t>(others.size()));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < others.size(); ++t) {
    threads.emplace_back([&, t] {
      {
        std::lock_guard<std::mutex> lock(mu);
        others[t] = LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, 0, 10 + t).stream;
        others_legacy[t] = LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0, 20 + t).stream;
      }
      all_launched.arrive_and_wait();
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < others.size(); ++t) {
    EXPECT_NE(others[t], mine.stream) << t;
    EXPECT_NE(others[t], legacy.stream) << t;
    EXPECT_EQ(others_legacy[t], legacy.stream) << t;  // one legacy stream per context
    for (size_t u = 0; u < t; ++u) EXPECT_NE(others[t], others[u]) << t << " " << u;
  }
}

TEST(StreamIdentity, ADestroyedStreamsHandleMayNameANewStream) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  EXPECT_EQ(LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kStream, 1).stream, kStreamId);
  cuStreamDestroy_v2_params destroy{St(kStream)};
  Callback cb(&destroy, nullptr, 2);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2,
                         &cb.data);
  // cuStreamCreate hands the same address to a new stream, which CUPTI numbers anew.
  h.fake.stream_ids[kStream] = 77;
  EXPECT_EQ(LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kStream, 3).stream, 77u);
}

TEST(StreamIdentity, AFailedLaunchNamesTheSameStreamAsItsKernels) {
  Harness h;
  h.fake.functions[kF] = FakeFunction{};
  const LaunchRecord ok = LaunchOn(h, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, 0, 1);
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr};
  Callback failed(&p, kMangled, 2);
  failed.result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                         &failed.data);
  LaunchRecord error;
  ASSERT_TRUE(h.ring->TryPop(&error));
  EXPECT_EQ(error.kind, RecordKind::kApiError);
  EXPECT_EQ(error.stream, ok.stream);
  EXPECT_EQ(error.context, ok.context);
}

}  // namespace
}  // namespace cuflight::inject::testing
