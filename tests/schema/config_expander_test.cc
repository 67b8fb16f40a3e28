// Interned configurations (schema/include/cuflight/schema/config_expander.h): a kernel event sent
// as its kernel_config and a launch reads back as the kernel event itself, and the expander
// refuses, by name, what a sequence cannot stand for.
#include "cuflight/schema/config_expander.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/line_decoder.h"
#include "sample_events.h"

namespace cuflight::schema {
namespace {

std::vector<OwnedKernelEvent> SampleKernels() {
  std::vector<OwnedKernelEvent> kernels;
  for (const OwnedEvent& event : testing::RoundTripEvents()) {
    if (const auto* k = std::get_if<OwnedKernelEvent>(&event)) kernels.push_back(*k);
  }
  kernels.push_back(testing::RealisticKernel());
  return kernels;
}

OwnedEvent DecodeOk(const std::string& line) {
  DecodeResult r = Decode(line);
  EXPECT_TRUE(r.ok()) << r.message << "\n" << line;
  return r.event;
}

TEST(ConfigExpanderTest, SplitThenExpandGivesTheKernelBack) {
  const std::vector<OwnedKernelEvent> kernels = SampleKernels();
  ASSERT_GE(kernels.size(), 10u);
  for (const OwnedKernelEvent& k : kernels) {
    OwnedKernelConfigEvent config;
    OwnedLaunchEvent launch;
    Split(k, 42, &config, &launch);
    EXPECT_EQ(config.config, 42u);
    EXPECT_EQ(launch.config, 42u);
    OwnedKernelEvent back;
    Expand(config, launch, &back);
    EXPECT_EQ(back, k);
    // With a wave said (config_expander.h, point 1a), whether or not it gives k's figures.
    for (const WaveShape wave : {WaveShape{1, false}, WaveShape{132, false}, WaveShape{7, true},
                                 WaveShape{0, false}}) {
      Split(k, 42, &config, &launch, wave);
      EXPECT_EQ(config.wave_size, wave.size);
      Expand(config, launch, &back);
      EXPECT_EQ(back, k);
    }
  }
}

// What a reader gets from the two lines on the wire is what Decode gives for the kernel line the
// producer would have written instead: member for member, header included.
TEST(ConfigExpanderTest, TheEncodedPairExpandsToTheDecodedKernelLine) {
  ConfigExpander expander;
  LineDecoder line_decoder;
  uint64_t id = 1;
  for (OwnedKernelEvent k : SampleKernels()) {
    k.header.seq = 1000 + id;  // each id described once in this sequence
    const OwnedEvent kernel = DecodeOk(testing::EncodeLine(k));
    OwnedKernelConfigEvent config;
    OwnedLaunchEvent launch;
    Split(k, id++, &config, &launch);
    OwnedEvent described = DecodeOk(testing::EncodeLine(config));
    EXPECT_EQ(expander.Feed(&described), ExpandVerdict::kDescribed);
    OwnedEvent expanded = DecodeOk(testing::EncodeLine(launch));
    EXPECT_EQ(expander.Feed(&expanded), ExpandVerdict::kExpanded);
    EXPECT_EQ(expanded, kernel) << testing::EncodeLine(k);
    // The same through the log readers' decoder (the launch takes its fast path).
    DecodeResult r;
    ASSERT_EQ(line_decoder.Decode(testing::EncodeLine(launch), &r), Reason::kOk) << r.message;
    EXPECT_EQ(expander.Feed(&r.event), ExpandVerdict::kExpanded);
    EXPECT_EQ(r.event, kernel);
  }
  EXPECT_GT(line_decoder.fast_lines(), 10u);
}

// The point of interning: a launch line of a CUTLASS GEMM (names of 200 bytes) is a fraction of
// its kernel line. Worst case written out: a 19-digit ts_ns, a 7-digit pid (Linux's pid_max is
// at most 2^22 = 4,194,304), 8-digit seq and correlation id, a 4-digit config id and a grid of
// three 4-digit dimensions:
//   {"type":"launch","version":1,"ts_ns":1764300000123456789,"pid":4194304,"seq":12345678   85
//   ,"tid":4194304,"correlation_id":12345678,"config":4095,"grid":[2048,2048,2048]}          79
// 164 bytes and the newline: 165, the per-grid figures left to the reader (the kernel_config's
// wave). Lines written before wave_size also held waves and tail_utilization of 17 significant
// digits (2048 blocks over 132 SMs x 3: `,"waves":5.171717171717172` 26 bytes and
// `,"tail_utilization":0.1717171717171717` 38): 229 bytes.
TEST(ConfigExpanderTest, ALaunchLineIsShort) {
  OwnedKernelEvent k = testing::RealisticKernel();
  k.header = Header{1'764'300'000'123'456'789, 4'194'304, 12'345'678};
  k.tid = 4'194'304;
  k.correlation_id = 12'345'678;
  k.grid = {2048, 2048, 2048};
  const OwnedKernelEvent kernel = k;
  // waves as a grid gives it: 2048 blocks over 132 SMs x 3 (not a short decimal).
  k.grid = {2048, 1, 1};
  k.occupancy.waves = 2048.0 / (132 * 3);
  k.occupancy.tail_utilization = 68.0 / 396;
  OwnedKernelConfigEvent config;
  OwnedLaunchEvent launch;
  Split(k, 4095, &config, &launch);
  launch.grid = {2048, 2048, 2048};
  EXPECT_EQ(testing::EncodeLine(launch).size(), 229u) << testing::EncodeLine(launch);
  // With the wave in the description: the budget is 200 bytes.
  OwnedKernelEvent derived = kernel;
  const GridWaves w = WavesOf(DimCount(2048, 2048, 2048), 1, {132, false});
  derived.occupancy.waves = w.waves;
  derived.occupancy.tail_utilization = w.tail_utilization;
  Split(derived, 4095, &config, &launch, WaveShape{132, false});
  const std::string launch_line = testing::EncodeLine(launch);
  EXPECT_EQ(launch_line.size(), 165u) << launch_line;
  EXPECT_LE(launch_line.size(), 200u);
  EXPECT_GT(testing::EncodeLine(kernel).size(), 900u);
}

OwnedKernelConfigEvent Config(uint64_t id, int32_t device) {
  OwnedKernelConfigEvent config;
  OwnedLaunchEvent unused;
  Split(testing::RealisticKernel(), id, &config, &unused);
  config.device = device;
  return config;
}

OwnedLaunchEvent Launch(uint64_t id) {
  OwnedKernelConfigEvent unused;
  OwnedLaunchEvent launch;
  Split(testing::RealisticKernel(), id, &unused, &launch);
  return launch;
}

TEST(ConfigExpanderTest, RefusesWhatTheSequenceDidNotDescribe) {
  ConfigExpander expander;
  OwnedEvent launch = Launch(7);
  EXPECT_EQ(expander.Feed(&launch), ExpandVerdict::kUnknownConfig);
  EXPECT_TRUE(std::holds_alternative<OwnedLaunchEvent>(launch));  // left as it was
  OwnedEvent config = Config(7, 0);
  EXPECT_EQ(expander.Feed(&config), ExpandVerdict::kDescribed);
  EXPECT_EQ(expander.Feed(&launch), ExpandVerdict::kExpanded);
  EXPECT_TRUE(std::holds_alternative<OwnedKernelEvent>(launch));
  // A new sequence (a new connection, spill file, log segment) starts with nothing described.
  expander.Reset();
  OwnedEvent again = Launch(7);
  EXPECT_EQ(expander.Feed(&again), ExpandVerdict::kUnknownConfig);
}

TEST(ConfigExpanderTest, TheSameDescriptionAgainIsAcceptedAnotherIsRefused) {
  ConfigExpander expander;
  EXPECT_EQ(expander.Describe(Config(3, 0)), ExpandVerdict::kDescribed);
  OwnedKernelConfigEvent resent = Config(3, 0);
  resent.header.seq += 100;  // resent with its preamble: another header, the same description
  EXPECT_EQ(expander.Describe(resent), ExpandVerdict::kDescribed);
  OwnedKernelConfigEvent other = Config(3, 0);
  other.num_regs += 1;
  EXPECT_EQ(expander.Describe(other), ExpandVerdict::kConfigRedefined);
  const OwnedKernelConfigEvent* standing = expander.Find(3);
  ASSERT_NE(standing, nullptr);
  EXPECT_TRUE(SameConfig(*standing, Config(3, 0)));  // the first one stands
  OwnedEvent other_event = other;
  EXPECT_EQ(expander.Feed(&other_event), ExpandVerdict::kConfigRedefined);
}

TEST(ConfigExpanderTest, AFloodOfDescriptionsIsBounded) {
  ConfigExpander expander(/*max_configs=*/2);
  EXPECT_EQ(expander.Describe(Config(1, 0)), ExpandVerdict::kDescribed);
  EXPECT_EQ(expander.Describe(Config(2, 0)), ExpandVerdict::kDescribed);
  EXPECT_EQ(expander.Describe(Config(3, 0)), ExpandVerdict::kConfigFlood);
  EXPECT_EQ(expander.Describe(Config(2, 0)), ExpandVerdict::kDescribed);  // known: not a new one
  EXPECT_EQ(expander.size(), 2u);
  OwnedEvent launch = Launch(3);
  EXPECT_EQ(expander.Feed(&launch), ExpandVerdict::kUnknownConfig);
}

TEST(ConfigExpanderTest, VerdictNamesAreStable) {
  EXPECT_EQ(ExpandVerdictName(ExpandVerdict::kUnknownConfig), "unknown_config");
  EXPECT_EQ(ExpandVerdictName(ExpandVerdict::kConfigRedefined), "config_redefined");
  EXPECT_EQ(ExpandVerdictName(ExpandVerdict::kConfigFlood), "config_flood");
  EXPECT_FALSE(Refused(ExpandVerdict::kExpanded));
  EXPECT_TRUE(Refused(ExpandVerdict::kConfigFlood));
}

TEST(ConfigExpanderTest, OtherEventsPassUntouched) {
  ConfigExpander expander;
  for (OwnedEvent event : testing::RoundTripEvents()) {
    if (std::holds_alternative<OwnedKernelConfigEvent>(event) ||
        std::holds_alternative<OwnedLaunchEvent>(event)) {
      continue;
    }
    const OwnedEvent before = event;
    EXPECT_EQ(expander.Feed(&event), ExpandVerdict::kPassed);
    EXPECT_EQ(event, before);
  }
}

}  // namespace
}  // namespace cuflight::schema
