// The CUDA driver is the authority on a launch's resident blocks; the engine explains the number.
// Every launch configuration asks cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags once (and,
// for clusters, cuOccupancyMaxActiveClusters and cuOccupancyMaxPotentialClusterSize); the kernel
// event reports the driver's count, says who gave it, and says when the engine disagrees.
//
// The fake driver computes its answer with NVIDIA's reference calculator (cuda_occupancy.h) from
// what the driver knows about the function, including its named-barrier count, which no function
// attribute exposes: the engine, which sees only the attributes, assumes one barrier per block.
#include <gtest/gtest.h>

#include <algorithm>

#include "cuflight/occupancy/device_attributes.h"
#include "event_builder.h"
#include "inject_test_support.h"
#include "launch_config_table.h"

namespace cuflight::inject::testing {
namespace {

constexpr uint64_t kF = 0x2000;
constexpr const char* kMangled = "_Z4gemmv";

schema::KernelEvent BuildNext(Harness& h, EventBuilder& builder) {
  LaunchRecord record;
  EXPECT_TRUE(h.ring->TryPop(&record));
  schema::KernelEvent event;
  EXPECT_TRUE(builder.BuildKernel(record, *h.devices.Get(0), &event));
  return event;
}

// A small kernel with four named barriers per block on an H100 (cc 9.0, 32 block slots, 64 warps
// per SM), 64 threads (2 warps), 16 registers, no shared memory:
//  - what the attributes show: 32 blocks per SM (the block slots bind), 64 of 64 warps, 100 %;
//  - cuda_occupancy.h, cudaOccMaxBlocksPerSMBlockBarrierLimit: on cc 9.x an SM has
//    2 x 32 = 64 barriers; 4 per block leave room for 16 blocks: 32 of 64 warps, 50 %.
FakeFunction BarrierHeavy() {
  FakeFunction f;
  f.num_regs = 16;
  f.block_barriers = 4;
  return f;
}

// Waves on a green context of 16 SMs (cuStreamGetGreenCtx, cuGreenCtxGetDevResource): the same
// kernel (16 resident blocks per SM, the driver's) with a grid of 264 blocks fills 264 / (16 x 16)
// = 1.03125 waves there, the last with 8 of 256 slots (0.03125); on the whole H100 (132 SMs) the
// same grid is 264 / (132 x 16) = 0.125 of a wave, all of it the tail. The event says 16 SMs.
TEST(DriverOccupancy, WavesCountTheSmsOfTheLaunchsGreenContext) {
  Harness h;
  EventBuilder builder;
  h.fake.functions[kF] = BarrierHeavy();
  constexpr uint64_t kGreenStream = 0x7E;
  constexpr uint64_t kGreen = 0x6E;
  // cuStreamGetCtx of a green context's stream: "equivalent to the one returned by
  // cuCtxFromGreenCtx() on the green context" (cuda.h), a context of its own.
  constexpr uint64_t kGreenContext = 0xC1;
  h.fake.stream_context[kGreenStream] = kGreenContext;
  h.fake.context_device[kGreenContext] = 0;
  h.fake.stream_green[kGreenStream] = kGreen;
  h.fake.green_sms[kGreen] = 16;
  cuLaunchKernel_params green{Fn(kF), 264, 1, 1, 64, 1, 1, 0, St(kGreenStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &green, kMangled, 1);
  schema::KernelEvent event = BuildNext(h, builder);
  EXPECT_EQ(event.occupancy.max_active_blocks, 16);
  ASSERT_TRUE(event.sm_count.has_value());
  EXPECT_EQ(*event.sm_count, 16);
  EXPECT_DOUBLE_EQ(event.occupancy.waves, 1.03125);
  EXPECT_DOUBLE_EQ(event.occupancy.tail_utilization, 0.03125);

  cuLaunchKernel_params whole{Fn(kF), 264, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &whole, kMangled, 2);
  event = BuildNext(h, builder);
  EXPECT_FALSE(event.sm_count.has_value());
  EXPECT_DOUBLE_EQ(event.occupancy.waves, 0.125);
  EXPECT_DOUBLE_EQ(event.occupancy.tail_utilization, 0.125);
}

TEST(DriverOccupancy, TheDriversCountIsReportedAndTheEnginesDisagreementSaid) {
  Harness h;
  EventBuilder builder;
  h.fake.functions[kF] = BarrierHeavy();
  cuLaunchKernel_params p{Fn(kF), 264, 1, 1, 64, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  const schema::KernelEvent event = BuildNext(h, builder);

  EXPECT_EQ(event.occupancy_source, schema::OccupancySource::kDriver);
  EXPECT_EQ(event.occupancy.max_active_blocks, 16);
  EXPECT_EQ(event.occupancy.active_warps, 32);
  EXPECT_DOUBLE_EQ(event.occupancy.occupancy, 0.5);
  ASSERT_TRUE(event.engine_max_active_blocks.has_value());
  EXPECT_EQ(*event.engine_max_active_blocks, 32);
  // No resource the engine computed allows only 16: none is named as the limit.
  EXPECT_EQ(event.occupancy.limiting_resource, schema::Resource::kOther);
  EXPECT_EQ(event.occupancy.limiting_resources, schema::MaskOf(schema::Resource::kOther));
  // The per-resource figures still explain: the block slots alone would give 100 %.
  EXPECT_DOUBLE_EQ(event.occupancy.block_occupancy, 1.0);
  // Waves follow the driver's count: 264 blocks over 132 SMs x 16 = 0.125 waves.
  EXPECT_DOUBLE_EQ(event.occupancy.waves, 264.0 / (132.0 * 16.0));
  EXPECT_EQ(builder.disagreements(), 1u);
}

TEST(DriverOccupancy, EachConfigurationAsksTheDriverOnce) {
  Harness h;
  EventBuilder builder;
  h.fake.functions[kF] = BarrierHeavy();
  cuLaunchKernel_params p{Fn(kF), 264, 1, 1, 64, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t i = 0; i < 100; ++i) h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, i);
  EXPECT_EQ(h.fake.occupancy_queries, 1);
  cuLaunchKernel_params other{Fn(kF), 264, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t i = 0; i < 100; ++i) {
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &other, kMangled, 200 + i);
  }
  EXPECT_EQ(h.fake.occupancy_queries, 2);
  // Every event of one configuration carries the same answer: 16 blocks. With 128 threads
  // (4 warps) the warps alone allow 64 / 4 = 16 too, so there the engine agrees; with 64
  // threads it says 32 (block slots) and disagrees.
  for (int i = 0; i < 200; ++i) {
    const schema::KernelEvent event = BuildNext(h, builder);
    EXPECT_EQ(event.occupancy.max_active_blocks, 16);
    EXPECT_EQ(event.engine_max_active_blocks.has_value(), i < 100) << i;
  }
  EXPECT_EQ(builder.disagreements(), 100u);
}

TEST(DriverOccupancy, WhenBothAgreeTheEnginesLimiterStands) {
  // 64 registers x 256 threads = 16,384 registers per block; an H100 SM has 65,536: 4 blocks,
  // 32 of 64 warps. One barrier per block, as the engine assumes: the driver says 4 too.
  Harness h;
  EventBuilder builder;
  FakeFunction f;
  f.num_regs = 64;
  h.fake.functions[kF] = f;
  cuLaunchKernel_params p{Fn(kF), 132, 1, 1, 256, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  const schema::KernelEvent event = BuildNext(h, builder);
  EXPECT_EQ(event.occupancy_source, schema::OccupancySource::kDriver);
  EXPECT_EQ(event.occupancy.max_active_blocks, 4);
  EXPECT_FALSE(event.engine_max_active_blocks.has_value());
  EXPECT_EQ(event.occupancy.limiting_resource, schema::Resource::kRegisters);
  EXPECT_EQ(builder.disagreements(), 0u);
}

TEST(DriverOccupancy, ADriverThatCannotSayLeavesTheEnginesFigureSaidAsSuch) {
  Harness h;
  EventBuilder builder;
  h.fake.functions[kF] = BarrierHeavy();
  h.fake.occupancy_fails = true;
  cuLaunchKernel_params p{Fn(kF), 264, 1, 1, 64, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 2);
  EXPECT_EQ(h.fake.occupancy_queries, 1);  // the failure is remembered, not asked again
  const schema::KernelEvent event = BuildNext(h, builder);
  EXPECT_EQ(event.occupancy_source, schema::OccupancySource::kEngine);
  EXPECT_EQ(event.occupancy.max_active_blocks, 32);
  EXPECT_FALSE(event.engine_max_active_blocks.has_value());
  EXPECT_EQ(builder.disagreements(), 0u);
}

TEST(DriverOccupancy, ALaunchCarveoutTheDriversCallCannotExpressKeepsTheEngine) {
  // cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags takes no launch attributes (cuda.h): it
  // computes under the function's own carveout. A cuLaunchKernelEx carveout of 25 % that differs
  // from the function's is not asked about.
  Harness h;
  EventBuilder builder;
  FakeFunction f = BarrierHeavy();
  f.carveout = 100;
  h.fake.functions[kF] = f;
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
  attr.value.sharedMemCarveout = 25;
  CUlaunchConfig config{132, 1, 1, 64, 1, 1, 0, St(kStream), &attr, 1};
  cuLaunchKernelEx_params p{&config, Fn(kF), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, kMangled, 1);
  EXPECT_EQ(h.fake.occupancy_queries, 0);
  const schema::KernelEvent event = BuildNext(h, builder);
  EXPECT_EQ(event.occupancy_source, schema::OccupancySource::kEngine);
  // The same carveout as the function's is the function's: asked.
  attr.value.sharedMemCarveout = 100;
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, kMangled, 2);
  EXPECT_EQ(h.fake.occupancy_queries, 1);
  EXPECT_EQ(BuildNext(h, builder).occupancy_source, schema::OccupancySource::kDriver);
}

// Clusters of 16 blocks: above the portable 8 (CUDA Programming Guide, thread block clusters), so
// the device's limits alone would call the launch impossible. The launch ran (the callback's
// result is CUDA_SUCCESS): it is never reported with 0 resident blocks.
TEST(DriverOccupancy, AClusterLaunchThatRanIsNeverReportedWithNoResidentBlock) {
  for (const int potential : {16, 0}) {  // the driver says 16; the driver cannot say
    Harness h;
    EventBuilder builder;
    h.fake.functions[kF] = FakeFunction{};
    h.fake.max_active_clusters = 8;
    h.fake.max_potential_cluster_size = potential;
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 16;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    CUlaunchConfig config{256, 1, 1, 128, 1, 1, 0, St(kStream), &attr, 1};
    cuLaunchKernelEx_params p{&config, Fn(kF), nullptr, nullptr};
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, kMangled, 1);
    EXPECT_EQ(h.fake.cluster_size_queries, 1);
    const schema::KernelEvent event = BuildNext(h, builder);
    // 32 registers x 128 threads: 16 blocks per SM (64 warps / 4), as the driver says too.
    EXPECT_EQ(event.occupancy.max_active_blocks, 16) << potential;
    // 8 clusters of 16 blocks resident on the GPU: 128 blocks x 4 warps of 132 x 64.
    ASSERT_TRUE(event.occupancy.has_cluster);
    EXPECT_NEAR(event.occupancy.cluster_occupancy, 512.0 / 8448.0, 1e-12) << potential;
    EXPECT_EQ(event.occupancy.limiting_resource, schema::Resource::kCluster);
  }
}

TEST(DriverOccupancy, AGraphNodesClusterFitsWhatCuptiSaysTheDriverAllows) {
  // A graph node with clusters of 16 (CUpti_ActivityKernel10.maxPotentialClusterSize = 16,
  // maxActiveClusters = 8): it ran, so it is reported resident, from the engine (no CUfunction
  // for an activity record).
  Harness h;
  EventBuilder builder;
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 32, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);  // reads device 0
  KernelActivity a{};
  a.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  a.registersPerThread = 32;
  a.blockX = 128;
  a.blockY = a.blockZ = 1;
  a.gridX = 256;
  a.gridY = a.gridZ = 1;
  a.clusterX = 16;
  a.clusterY = a.clusterZ = 1;
  a.maxPotentialClusterSize = 16;
  a.maxActiveClusters = 8;
  a.graphId = 7;
  a.graphNodeId = 70;
  schema::KernelEvent event;
  ASSERT_TRUE(builder.BuildGraphKernel(a, *h.devices.Get(0), "g", "g", &event));
  EXPECT_EQ(event.occupancy_source, schema::OccupancySource::kEngine);
  EXPECT_EQ(event.occupancy.max_active_blocks, 16);
  ASSERT_TRUE(event.occupancy.has_cluster);
  EXPECT_NEAR(event.occupancy.cluster_occupancy, 512.0 / 8448.0, 1e-12);
}

// CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH (cuda.h: "Indicates device supports cluster launch") decides
// whether a device has clusters, not its compute capability; the device's own figure is the
// portable 8 (CUDA Programming Guide), the rest is per function from the driver.
TEST(DriverOccupancy, ClusterLimitsComeFromTheDeviceAttribute) {
  struct Device {
    int cluster_launch;
    int cc_major;
  };
  for (const Device d : {Device{1, 9}, Device{0, 9}, Device{1, 10}, Device{0, 8}}) {
    occupancy::DeviceLimits limits = occupancy::FindDevicePreset("h100-sxm")->limits;
    limits.cc_major = d.cc_major;
    struct Getter {
      const occupancy::DeviceLimits* limits;
      int cluster_launch;
    } getter{&limits, d.cluster_launch};
    auto get = [](void* context, int attribute, int* value) -> int {
      const auto* g = static_cast<const Getter*>(context);
      const occupancy::DeviceLimits& l = *g->limits;
      switch (static_cast<CUdevice_attribute>(attribute)) {
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = l.cc_major; return 0;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = l.cc_minor; return 0;
        case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = l.sm_count; return 0;
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = l.max_threads_per_block; return 0;
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = l.max_threads_per_sm; return 0;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *value = l.max_blocks_per_sm; return 0;
        case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *value = l.regs_per_sm; return 0;
        case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *value = l.regs_per_block; return 0;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *value = static_cast<int>(l.smem_per_sm); return 0;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = static_cast<int>(l.smem_per_block); return 0;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = static_cast<int>(l.smem_per_block_optin); return 0;
        case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *value = static_cast<int>(l.reserved_smem_per_block); return 0;
        case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = l.warp_size; return 0;
        case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *value = g->cluster_launch; return 0;
        default: return CUDA_ERROR_INVALID_VALUE;
      }
    };
    occupancy::DeviceLimits read{};
    ASSERT_TRUE(occupancy::ReadDeviceLimits(get, &getter, &read, nullptr));
    EXPECT_EQ(read.max_cluster_size, d.cluster_launch ? 8 : 0) << d.cc_major;
    EXPECT_EQ(read.max_cluster_size_non_portable, d.cluster_launch ? 8 : 0) << d.cc_major;
  }
}

TEST(LaunchConfigTable, PacksEveryAnswerIntoOneWord) {
  for (const DriverOccupancy d :
       {DriverOccupancy{0, 0, 0}, DriverOccupancy{32, 1056, 16}, DriverOccupancy{-1, 0, 8},
        DriverOccupancy{65534, (1 << 24) - 1, 65535}}) {
    EXPECT_EQ(DriverOccupancy::Unpack(d.Pack()), d);
  }
  LaunchConfigTable table(64);
  LaunchConfigKey a;
  a.function = 1;
  a.block[0] = 128;
  LaunchConfigKey b = a;
  b.block[0] = 256;
  table.Insert(a, DriverOccupancy{4, 0, 0});
  ASSERT_TRUE(table.Find(a).has_value());
  EXPECT_EQ(table.Find(a)->max_active_blocks, 4);
  EXPECT_FALSE(table.Find(b).has_value());
}

}  // namespace
}  // namespace cuflight::inject::testing
