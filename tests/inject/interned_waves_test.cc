// The producer's side of per-grid figures derived, not sent (schema/waves.h; config_expander.h,
// point 1a): the wave the event builder counted a launch's waves in goes into its kernel_config,
// the launch line leaves the figures out, and a reader's expansion of the two lines is the kernel
// line the library would have sent whole, bit for bit. Launches through the fake driver on an
// H100 (132 SMs); expected figures worked out by hand.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "event_builder.h"
#include "inject_test_support.h"

namespace cuflight::inject::testing {
namespace {

constexpr uint64_t kF = 0x2000;
constexpr const char* kMangled = "_Z4gemmv";

template <class E>
std::string Line(const E& event) {
  std::array<char, 8192> buf{};
  const size_t n = schema::Encode(event, buf.data(), buf.size());
  EXPECT_NE(n, 0u);
  return std::string(buf.data(), n);
}

schema::OwnedEvent DecodeOk(const std::string& line) {
  schema::DecodeResult r = schema::Decode(line);
  EXPECT_TRUE(r.ok()) << r.message << "\n" << line;
  return r.event;
}

// The event sent whole, and its two interned lines read back, agree; the launch line has no
// per-grid figure.
void ExpectTheLinesExpandToTheKernelLine(const schema::KernelEvent& event, schema::WaveShape wave) {
  schema::KernelConfigEvent config;
  schema::LaunchEvent launch;
  schema::Split(event, 1, &config, &launch, wave);
  EXPECT_FALSE(launch.waves.has_value());
  const std::string launch_line = Line(launch);
  EXPECT_EQ(launch_line.find("waves"), std::string::npos) << launch_line;
  schema::ConfigExpander expander;
  schema::OwnedEvent described = DecodeOk(Line(config));
  ASSERT_EQ(expander.Feed(&described), schema::ExpandVerdict::kDescribed);
  schema::OwnedEvent expanded = DecodeOk(launch_line);
  ASSERT_EQ(expander.Feed(&expanded), schema::ExpandVerdict::kExpanded);
  EXPECT_EQ(expanded, DecodeOk(Line(event)));
}

struct Built {
  schema::KernelEvent event;
  schema::WaveShape wave;
};

Built BuildNext(Harness& h, EventBuilder& builder) {
  LaunchRecord record;
  EXPECT_TRUE(h.ring->TryPop(&record));
  Built b;
  EXPECT_TRUE(builder.BuildKernel(record, *h.devices.Get(0), &b.event, &b.wave));
  return b;
}

// 32 registers and 128 threads on an H100: 16 blocks per SM (64 warps / 4), the driver's answer
// too. 2048 blocks over 132 x 16 = 2112 slots: 2048/2112 of one wave.
TEST(BuilderWaves, ALaunchsWaveIsItsSmsTimesItsResidentBlocks) {
  Harness h;
  EventBuilder builder;
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params p{Fn(kF), 2048, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  const Built b = BuildNext(h, builder);
  EXPECT_EQ(b.event.occupancy.max_active_blocks, 16);
  EXPECT_EQ(b.wave, (schema::WaveShape{2112, false}));
  EXPECT_EQ(b.event.occupancy.waves, 2048.0 / 2112);
  EXPECT_EQ(b.event.occupancy.tail_utilization, 2048.0 / 2112);
  ExpectTheLinesExpandToTheKernelLine(b.event, b.wave);
}

// Clusters of 16 blocks bind; the driver says 8 fit at once (cuOccupancyMaxActiveClusters): 272
// blocks are 17 clusters, 2 full waves and 1 of 8.
TEST(BuilderWaves, AClusterBoundLaunchsWaveIsTheDriversClusters) {
  Harness h;
  EventBuilder builder;
  h.fake.functions[kF] = FakeFunction{};
  h.fake.max_active_clusters = 8;
  h.fake.max_potential_cluster_size = 16;
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = 16;
  attr.value.clusterDim.y = 1;
  attr.value.clusterDim.z = 1;
  CUlaunchConfig config{272, 1, 1, 128, 1, 1, 0, St(kStream), &attr, 1};
  cuLaunchKernelEx_params p{&config, Fn(kF), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, kMangled, 1);
  const Built b = BuildNext(h, builder);
  ASSERT_EQ(b.event.occupancy.limiting_resource, schema::Resource::kCluster);
  EXPECT_EQ(b.wave, (schema::WaveShape{8, true}));
  EXPECT_EQ(b.event.occupancy.waves, 2.125);
  EXPECT_EQ(b.event.occupancy.tail_utilization, 0.125);
  ExpectTheLinesExpandToTheKernelLine(b.event, b.wave);
}

// A green context of 16 SMs (cuGreenCtxGetDevResource): 264 blocks of 64 threads with four named
// barriers each (the driver's 16 blocks per SM) fill 264 / (16 x 16) = 1.03125 waves there; the
// kernel_config carries sm_count 16 and the wave of 256 blocks.
TEST(BuilderWaves, AGreenContextsWaveIsOfItsSms) {
  Harness h;
  EventBuilder builder;
  FakeFunction f;
  f.num_regs = 16;
  f.block_barriers = 4;
  h.fake.functions[kF] = f;
  constexpr uint64_t kGreenStream = 0x7E;
  constexpr uint64_t kGreen = 0x6E;
  constexpr uint64_t kGreenContext = 0xC1;
  h.fake.stream_context[kGreenStream] = kGreenContext;
  h.fake.context_device[kGreenContext] = 0;
  h.fake.stream_green[kGreenStream] = kGreen;
  h.fake.green_sms[kGreen] = 16;
  cuLaunchKernel_params p{Fn(kF), 264, 1, 1, 64, 1, 1, 0, St(kGreenStream), nullptr, nullptr};
  h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
  const Built b = BuildNext(h, builder);
  ASSERT_EQ(b.event.sm_count, 16);
  EXPECT_EQ(b.wave, (schema::WaveShape{256, false}));
  EXPECT_EQ(b.event.occupancy.waves, 1.03125);
  EXPECT_EQ(b.event.occupancy.tail_utilization, 0.03125);
  ExpectTheLinesExpandToTheKernelLine(b.event, b.wave);
}

// A graph's kernel node, from its activity record (the engine's figures): clusters of 16,
// CUPTI's maxActiveClusters 8, 272 blocks: as the cluster launch above.
TEST(BuilderWaves, AGraphNodesWaveComesFromItsActivityRecord) {
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
  a.gridX = 272;
  a.gridY = a.gridZ = 1;
  a.clusterX = 16;
  a.clusterY = a.clusterZ = 1;
  a.maxPotentialClusterSize = 16;
  a.maxActiveClusters = 8;
  a.graphId = 7;
  a.graphNodeId = 70;
  schema::KernelEvent event;
  schema::WaveShape wave;
  ASSERT_TRUE(builder.BuildGraphKernel(a, *h.devices.Get(0), "g", "g", &event, &wave));
  ASSERT_EQ(event.occupancy.limiting_resource, schema::Resource::kCluster);
  EXPECT_EQ(wave, (schema::WaveShape{8, true}));
  EXPECT_EQ(event.occupancy.waves, 2.125);
  EXPECT_EQ(event.occupancy.tail_utilization, 0.125);
  ExpectTheLinesExpandToTheKernelLine(event, wave);
}

}  // namespace
}  // namespace cuflight::inject::testing
