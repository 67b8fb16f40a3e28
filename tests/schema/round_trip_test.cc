#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <variant>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "sample_events.h"

namespace cuflight::schema {
namespace {

using testing::EncodeLine;
using testing::LossyEvents;
using testing::RoundTripEvents;

TEST(RoundTripTest, SamplesCoverEveryEventType) {
  std::set<EventType> types;
  for (const OwnedEvent& event : RoundTripEvents()) types.insert(TypeOf(event));
  EXPECT_EQ(types.size(), static_cast<size_t>(kEventTypeCount));
}

TEST(RoundTripTest, DecodeReturnsEveryFieldUnchanged) {
  for (const OwnedEvent& event : RoundTripEvents()) {
    const std::string line = EncodeLine(event);
    const DecodeResult result = Decode(line);
    ASSERT_TRUE(result.ok()) << result.message << "\n" << line;
    EXPECT_EQ(TypeOf(result.event), TypeOf(event));
    EXPECT_TRUE(result.event == event) << line;
    ASSERT_TRUE(result.header.has_value());
    EXPECT_EQ(*result.header, HeaderOf(event));
    // Re-encoding shows which field differs when the comparison above fails.
    EXPECT_EQ(EncodeLine(result.event), line);
  }
}

TEST(RoundTripTest, ViewAndOwnedStoragesEncodeTheSameBytes) {
  for (const OwnedEvent& event : RoundTripEvents()) {
    std::string owned(1 << 20, '\0');
    owned.resize(Encode(event, owned.data(), owned.size()));
    EXPECT_EQ(owned, EncodeLine(event));
  }
}

// Lossy inputs (ill-formed UTF-8, non-finite numbers) are sanitized once: the decoded event
// encodes to the same line again.
TEST(RoundTripTest, SanitizedLinesAreStable) {
  for (const OwnedEvent& event : LossyEvents()) {
    const std::string line = EncodeLine(event);
    const DecodeResult result = Decode(line);
    ASSERT_TRUE(result.ok()) << result.message << "\n" << line;
    EXPECT_EQ(EncodeLine(result.event), line);
  }
}

TEST(RoundTripTest, NonFiniteAndOutOfRangeDoublesDecodeInRange) {
  for (const OwnedEvent& event : LossyEvents()) {
    const auto* kernel = std::get_if<OwnedKernelEvent>(&event);
    if (kernel == nullptr || !kernel->cluster) continue;  // only the bad-double samples
    const DecodeResult result = Decode(EncodeLine(event));
    ASSERT_TRUE(result.ok()) << result.message;
    const OccupancyFields& o = std::get<OwnedKernelEvent>(result.event).occupancy;
    for (const double v :
         {o.occupancy, o.reg_occupancy, o.smem_occupancy, o.warp_occupancy, o.block_occupancy,
          o.barrier_occupancy, o.cluster_occupancy, o.tail_utilization}) {
      EXPECT_TRUE(std::isfinite(v));
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 1.0);
    }
    EXPECT_TRUE(std::isfinite(o.waves));
    EXPECT_GE(o.waves, 0.0);
    EXPECT_EQ(o.regs_for_next_block, -1);
    EXPECT_EQ(o.smem_for_next_block, -1);
  }
}

}  // namespace
}  // namespace cuflight::schema
