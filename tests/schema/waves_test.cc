// Per-grid figures derived, not sent (schema/include/cuflight/schema/waves.h; config_expander.h,
// point 1a): a kernel_config says what one wave of its launches is, a launch leaves out `waves`
// and `tail_utilization`, and every reader computes them from its grid, bit for bit the figures
// the producer had. Expected values are worked out by hand in the comments (a wave is every slot
// resident at once: SMs x resident blocks per SM, or the driver's max_active_clusters clusters).
#include "cuflight/schema/waves.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <variant>

#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/line_decoder.h"
#include "sample_events.h"

namespace cuflight::schema {
namespace {

TEST(Waves, AGridOverOneWaveByHand) {
  // H100, 132 SMs x 8 resident blocks = 1056 slots; 2048 blocks: 1 full wave and 992 of 1056.
  EXPECT_EQ(WavesOf(2048, 1, {1056, false}), (GridWaves{2048.0 / 1056, 992.0 / 1056}));
  // A grid of exactly two waves: the last one is full.
  EXPECT_EQ(WavesOf(2112, 1, {1056, false}), (GridWaves{2.0, 1.0}));
  // A green context of 16 SMs x 8: 132 blocks are one wave of 128 and 4 of 128 (0.03125).
  EXPECT_EQ(WavesOf(132, 1, {128, false}), (GridWaves{1.03125, 0.03125}));
  // Less than one wave: all of it is the tail.
  EXPECT_EQ(WavesOf(264, 1, {2112, false}), (GridWaves{0.125, 0.125}));
}

TEST(Waves, ClustersCountInClustersOnlyWhenTheyBind) {
  // 272 blocks in clusters of 16 are 17 clusters; 8 resident at once: 2 full waves and 1 of 8.
  EXPECT_EQ(WavesOf(272, 16, {8, true}), (GridWaves{17.0 / 8, 1.0 / 8}));
  // The same grid counted in blocks (the cluster does not bind): 272 of 132 x 16 = 2112 slots.
  EXPECT_EQ(WavesOf(272, 16, {2112, false}), (GridWaves{272.0 / 2112, 272.0 / 2112}));
}

TEST(Waves, NothingToCountIsZero) {
  EXPECT_EQ(WavesOf(0, 1, {1056, false}), (GridWaves{0, 0}));  // the grid unknown
  EXPECT_EQ(WavesOf(2048, 1, {0, false}), (GridWaves{0, 0}));  // nothing can be resident
  EXPECT_EQ(WavesOf(8, 16, {8, true}), (GridWaves{0, 0}));     // fewer blocks than a cluster
}

TEST(Waves, DimCountSaturates) {
  EXPECT_EQ(DimCount(264, 8, 1), 2112u);
  EXPECT_EQ(DimCount(0, 5, 5), 0u);
  constexpr uint32_t kMax = UINT32_MAX;
  EXPECT_EQ(DimCount(kMax, kMax, 1), uint64_t{kMax} * kMax);
  EXPECT_EQ(DimCount(kMax, kMax, 2), UINT64_MAX);
}

// A CUTLASS GEMM on an H100 (132 SMs, 1 resident block per SM: testing::RealisticKernel) with
// `grid` and the per-grid figures as given.
OwnedKernelEvent Kernel(Dim3 grid, double waves, double tail) {
  OwnedKernelEvent k = testing::RealisticKernel();
  k.grid = grid;
  k.occupancy.waves = waves;
  k.occupancy.tail_utilization = tail;
  return k;
}

std::string Line(const OwnedEvent& event) { return testing::EncodeLine(event); }

OwnedEvent DecodeOk(const std::string& line) {
  DecodeResult r = Decode(line);
  EXPECT_TRUE(r.ok()) << r.message << "\n" << line;
  return r.event;
}

// Split with the wave, then: the launch carries no per-grid figure, the description says the
// wave, and both the structs and the lines expand to the kernel event (its line, decoded).
void ExpectDerived(const OwnedKernelEvent& k, WaveShape wave) {
  OwnedKernelConfigEvent config;
  OwnedLaunchEvent launch;
  Split(k, 7, &config, &launch, wave);
  EXPECT_FALSE(launch.waves.has_value());
  EXPECT_FALSE(launch.tail_utilization.has_value());
  ASSERT_TRUE(config.wave_size.has_value());
  EXPECT_EQ(*config.wave_size, wave.size);
  EXPECT_EQ(config.wave_of_clusters, wave.clusters);
  OwnedKernelEvent back;
  Expand(config, launch, &back);
  EXPECT_EQ(back, k);
  EXPECT_TRUE(SameBits(back.occupancy.waves, k.occupancy.waves));
  EXPECT_TRUE(SameBits(back.occupancy.tail_utilization, k.occupancy.tail_utilization));

  const std::string launch_line = Line(launch);
  EXPECT_EQ(launch_line.find("waves"), std::string::npos) << launch_line;
  EXPECT_EQ(launch_line.find("tail_utilization"), std::string::npos) << launch_line;
  ConfigExpander expander;
  OwnedEvent described = DecodeOk(Line(config));
  ASSERT_EQ(expander.Feed(&described), ExpandVerdict::kDescribed);
  OwnedEvent expanded = DecodeOk(launch_line);
  ASSERT_EQ(expander.Feed(&expanded), ExpandVerdict::kExpanded);
  EXPECT_EQ(expanded, DecodeOk(Line(k)));
  // Through the log readers' decoder too (a launch line takes its fast path).
  LineDecoder decoder;
  DecodeResult r;
  ASSERT_EQ(decoder.Decode(launch_line, &r), Reason::kOk) << r.message;
  EXPECT_EQ(decoder.fast_lines(), 1u);
  ASSERT_EQ(expander.Feed(&r.event), ExpandVerdict::kExpanded);
  EXPECT_EQ(r.event, DecodeOk(Line(k)));
}

TEST(InternedWaves, ALaunchOfBlocksLeavesItsWavesToTheReader) {
  // 1 block per SM x 132 SMs: 2112 blocks are 16 waves exactly; 2048 are 15 and 68 of 132.
  ExpectDerived(Kernel({264, 8, 1}, 16.0, 1.0), {132, false});
  ExpectDerived(Kernel({2048, 1, 1}, 2048.0 / 132, 68.0 / 132), {132, false});
}

TEST(InternedWaves, AClusterBoundLaunchCountsClusters) {
  // Clusters of 2 blocks bind, the driver says 7 clusters fit at once: 1000 blocks are 500
  // clusters, 71 waves and 3 of 7.
  OwnedKernelEvent k = Kernel({1000, 1, 1}, 500.0 / 7, 3.0 / 7);
  k.cluster = Dim3{2, 1, 1};
  k.occupancy.has_cluster = true;
  k.occupancy.cluster_occupancy = 0.0625;
  k.occupancy.limiting_resource = Resource::kCluster;
  k.occupancy.limiting_resources = MaskOf(Resource::kCluster);
  ExpectDerived(k, {7, true});
  OwnedKernelConfigEvent config;
  OwnedLaunchEvent launch;
  Split(k, 7, &config, &launch, WaveShape{7, true});
  EXPECT_NE(Line(config).find(R"(,"wave_size":7,"wave_of_clusters":true})"), std::string::npos)
      << Line(config);
}

TEST(InternedWaves, AZeroGridHasNoWaves) {
  ExpectDerived(Kernel({0, 1, 1}, 0, 0), {132, false});
  ExpectDerived(Kernel({264, 8, 1}, 0, 0), {0, false});  // nothing resident
}

TEST(InternedWaves, AGraphNodesLaunch) {
  OwnedKernelEvent k = Kernel({264, 1, 1}, 2.0, 1.0);
  k.graph_id = 7;
  k.graph_node_id = 70;
  ExpectDerived(k, {132, false});
}

TEST(InternedWaves, AGreenContextsWaveIsOfItsSms) {
  // 16 SMs x 1 block: 264 blocks are 16 waves of 16 and 8 of 16.
  OwnedKernelEvent k = Kernel({264, 1, 1}, 16.5, 0.5);
  k.sm_count = 16;
  ExpectDerived(k, {16, false});
}

// Figures no wave gives (a producer's mistake, or a reader's sample) travel with the launch, and
// win over the description's wave: Expand(Split(k)) == k for any k.
TEST(InternedWaves, FiguresTheWaveDoesNotGiveTravelWithTheLaunch) {
  const OwnedKernelEvent k = Kernel({2048, 1, 1}, 1.2345678901234567, 0.1);
  OwnedKernelConfigEvent config;
  OwnedLaunchEvent launch;
  Split(k, 7, &config, &launch, WaveShape{132, false});
  ASSERT_TRUE(launch.waves.has_value());
  EXPECT_EQ(*launch.waves, 1.2345678901234567);
  EXPECT_EQ(config.wave_size, 132u);
  OwnedKernelEvent back;
  Expand(config, launch, &back);
  EXPECT_EQ(back, k);
  // -0 is not 0: a line would say so.
  const OwnedKernelEvent negative_zero = Kernel({0, 1, 1}, -0.0, 0);
  Split(negative_zero, 7, &config, &launch, WaveShape{132, false});
  EXPECT_TRUE(launch.waves.has_value());
}

// Lines written before wave_size (2026-11-28): the description says no wave and each launch
// carries its figures; they read as they did.
TEST(InternedWaves, LaunchesWrittenBeforeWaveSizeStillRead) {
  const OwnedKernelEvent k = testing::RealisticKernel();  // waves 16 / 1.1, tail 2 / 3
  OwnedKernelConfigEvent config;
  OwnedLaunchEvent launch;
  Split(k, 7, &config, &launch);
  EXPECT_FALSE(config.wave_size.has_value());
  EXPECT_EQ(Line(config).find("wave_size"), std::string::npos);
  ConfigExpander expander;
  OwnedEvent described = DecodeOk(Line(config));
  ASSERT_EQ(expander.Feed(&described), ExpandVerdict::kDescribed);
  OwnedEvent expanded = DecodeOk(Line(launch));
  ASSERT_EQ(expander.Feed(&expanded), ExpandVerdict::kExpanded);
  EXPECT_EQ(expanded, DecodeOk(Line(k)));
  // A launch without figures whose description says no wave: unknown, 0 (the kernel event's).
  launch.waves.reset();
  launch.tail_utilization.reset();
  OwnedKernelEvent back;
  Expand(config, launch, &back);
  EXPECT_EQ(back.occupancy.waves, 0);
  EXPECT_EQ(back.occupancy.tail_utilization, 0);
}

TEST(InternedWaves, WavesAndTailComeTogether) {
  OwnedKernelConfigEvent config;
  OwnedLaunchEvent launch;
  Split(testing::RealisticKernel(), 7, &config, &launch);
  launch.tail_utilization.reset();
  DecodeResult r = Decode(Line(launch));
  EXPECT_EQ(r.reason, Reason::kMissingField);
  EXPECT_NE(r.message.find("tail_utilization"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace cuflight::schema
