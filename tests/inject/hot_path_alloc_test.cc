// The launch hot path makes no heap allocation: every operator new of the test's thread is
// counted (alloc_counter.h) while 10,000 launches of a known function (a CUfunction, or a CUkernel
// on a stream) go through the recorder into the ring, on that thread.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "activity_buffers.h"
#include "alloc_counter.h"
#include "cuflight/blackbox/region_writer.h"
#include "inject_test_support.h"
#include "running_collector.h"
#include "sender_thread.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

using Clock = std::chrono::steady_clock;

TEST(HotPath, CachedLaunchesAllocateNothing) {
  Harness h(16384);
  h.fake.functions[0x1000] = FakeFunction{};
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = 2;
  attr.value.clusterDim.y = 1;
  attr.value.clusterDim.z = 1;
  CUlaunchConfig config{132, 1, 1, 128, 1, 1, 0, St(kStream), &attr, 1};
  cuLaunchKernelEx_params ex{&config, Fn(0x1000), nullptr, nullptr};
  cuLaunchKernel_params plain{Fn(0x1000), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  // First launch: the slow path reads the driver and allocates, once.
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, "_Z1kv", 0);

  const int64_t before = test_support::AllocationsOnThisThread();
  for (uint32_t i = 0; i < 5000; ++i) {
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, "_Z1kv", i);
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &ex, "_Z1kv", i);
  }
  EXPECT_EQ(test_support::AllocationsOnThisThread(), before);
  EXPECT_EQ(h.ring->SizeApprox(), 10001u);
}

// The same with the ring in a black box, as the injected library runs by default: the function
// and its device are described there on the slow path, and a cached launch only copies its
// record (which names the function's descriptor) into the memfd.
TEST(HotPath, CachedLaunchesIntoTheBlackBoxAllocateNothing) {
  Harness h(16384);
  blackbox::RegionOptions o;
  o.ring_capacity = 16384;
  o.journal_capacity = 16384;
  std::string error;
  const std::unique_ptr<blackbox::RegionWriter> region = blackbox::RegionWriter::Create(o, &error);
  ASSERT_NE(region, nullptr) << error;
  h.ring = std::make_unique<LaunchRing>(
      16384, LaunchRing::Storage{region->ring_control(), region->ring_slots()});
  RecorderOptions options;
  options.blackbox = region.get();
  h.recorder = std::make_unique<Recorder>(&h.driver, &h.cupti, h.ring.get(), &h.functions,
                                          &h.devices, options);
  h.fake.functions[0x1000] = FakeFunction{};
  cuLaunchKernel_params plain{Fn(0x1000), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, "_Z1kv", 0);  // the slow path

  const int64_t before = test_support::AllocationsOnThisThread();
  for (uint32_t i = 0; i < 10000; ++i) {
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, "_Z1kv", i);
  }
  EXPECT_EQ(test_support::AllocationsOnThisThread(), before);
  EXPECT_EQ(h.ring->SizeApprox(), 10001u);
  LaunchRecord r;
  ASSERT_TRUE(h.ring->TryPop(&r));
  EXPECT_EQ(r.function_desc, 0u);  // the black box's first descriptor
  EXPECT_EQ(region->functions_refused(), 0u);
}

// A CUkernel (how the runtime launches) on a stream of its own: its device comes from the
// stream's context, remembered after the first launch.
TEST(HotPath, CachedCuKernelLaunchesOnAStreamAllocateNothing) {
  Harness h(16384);
  h.fake.functions[0x1000] = FakeFunction{};
  h.fake.kernels[0x7000].functions[0] = 0x1000;
  h.fake.stream_context[kStream] = kContext;
  cuLaunchKernel_params p{Fn(0x7000), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, "_Z1kv", 0);
  const int stream_queries = h.fake.stream_context_queries;
  const int64_t before = test_support::AllocationsOnThisThread();
  for (uint32_t i = 0; i < 10000; ++i) h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, "_Z1kv", i);
  EXPECT_EQ(test_support::AllocationsOnThisThread(), before);
  EXPECT_EQ(h.fake.stream_context_queries, stream_queries);
  EXPECT_EQ(h.ring->SizeApprox(), 10001u);
}

// CUPTI's buffer callbacks (request, complete with the dropped-record read) and the refusals
// and counts the sender reads.
TEST(HotPath, ActivityBufferCallbacksAllocateNothing) {
  FakeCuda fake;
  ScopedFake scope(&fake);
  const CuptiApi cupti = fake.cupti();
  ActivityBuffers buffers(2, 4096);
  buffers.SetDroppedRecordsSource(&cupti);
  const int64_t before = test_support::AllocationsOnThisThread();
  for (int i = 0; i < 1000; ++i) {
    uint8_t* a = nullptr;
    uint8_t* b = nullptr;
    uint8_t* refused = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    buffers.Request(&a, &size, &max_records);
    buffers.Request(&b, &size, &max_records);
    buffers.Request(&refused, &size, &max_records);
    fake.dropped_records = 1;
    buffers.Complete(nullptr, 0, a, 64);
    buffers.Complete(nullptr, 0, b, 0);
    ActivityBuffers::Completed completed;
    while (buffers.PopCompleted(&completed)) {
      buffers.Release(completed.buffer, completed.valid_size);
    }
  }
  const uint64_t lost = buffers.lost_records();
  EXPECT_EQ(test_support::AllocationsOnThisThread(), before);
  EXPECT_EQ(buffers.refused(), 1000u);
  EXPECT_EQ(buffers.cupti_dropped(), 1000u);
  EXPECT_EQ(lost, 1000u);
}

// Not the launch hot path, but per launch all the same: the sender thread's handling of launches
// of configurations it described (config_table.h, point 8: found by the record, a `launch` line
// encoded and handed to the transport) allocates nothing.
TEST(HotPath, TheSendersLaunchesOfDescribedConfigurationsAllocateNothing) {
  const std::string path = test_support::TempSocketPath("sender-alloc");
  test_support::StoringCollector collector(path);
  Harness h(16384);
  h.fake.functions[0x1000] = FakeFunction{};
  SenderThreadOptions options;
  options.driver = &h.driver;
  options.transport.socket_path = path;
  options.intern_configs = true;
  SenderThread sender = h.Sender(options, ReadProcessFacts());
  const auto launch = [&h](uint32_t grid, uint32_t block, uint32_t corr) {
    cuLaunchKernel_params p{Fn(0x1000), grid, 1, 1, block, 1, 1, 0, St(kStream), nullptr,
                            nullptr};
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, "_Z1kv", corr);
  };
  // The first launch of each configuration describes it (and allocates), and the connection is
  // made.
  launch(1, 128, 1);
  launch(1, 256, 2);
  for (int i = 0; i < 100 && h.ring->SizeApprox() > 0; ++i) sender.Step(Clock::now());
  ASSERT_EQ(h.ring->SizeApprox(), 0u);
  const int64_t before = test_support::AllocationsOnThisThread();
  for (uint32_t i = 0; i < 2000; ++i) {
    launch(1 + i, 128, 3 + 2 * i);
    launch(7 + i, 256, 4 + 2 * i);
    if (i % 100 == 99) {
      for (int k = 0; k < 100 && h.ring->SizeApprox() > 0; ++k) sender.Step(Clock::now());
    }
  }
  const int64_t after = test_support::AllocationsOnThisThread();
  EXPECT_EQ(h.ring->SizeApprox(), 0u);
  EXPECT_EQ(after, before);
  ASSERT_TRUE(sender.Finish(Clock::now() + std::chrono::seconds(20)));
}

TEST(HotPath, TheCounterSeesAllocations) {
  // The instrument works: a known allocation is counted.
  const int64_t before = test_support::AllocationsOnThisThread();
  int* volatile p = new int(5);  // volatile: the allocation cannot be optimised away
  const int64_t after = test_support::AllocationsOnThisThread();
  delete p;
  EXPECT_EQ(after, before + 1);
}

}  // namespace
}  // namespace cuflight::inject::testing
