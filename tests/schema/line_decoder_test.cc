// LineDecoder against Decode (which validator_test holds to the reference decoder): the same
// reason, message, header and event for every sample and mutated line the schema tests make,
// through one reused result (so a kernel with a cluster followed by one without cannot leak the
// cluster), plus the forms its fast path hands to the general path.
#include "cuflight/schema/line_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "alloc_counter.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "sample_events.h"
#include "validator_internal.h"

namespace cuflight::schema {
namespace {

using testing::EncodeLine;
using testing::RealisticKernel;

// Decodes `line` with `decoder` into `reused` and checks it equals Decode(line).
void ExpectSameAsDecode(LineDecoder& decoder, DecodeResult& reused, std::string_view line) {
  const DecodeResult want = Decode(line);
  const Reason got = decoder.Decode(line, &reused);
  EXPECT_EQ(got, want.reason) << line;
  EXPECT_EQ(reused.reason, want.reason) << line;
  EXPECT_EQ(reused.message, want.message) << line;
  EXPECT_EQ(reused.header, want.header) << line;
  if (want.ok()) {
    EXPECT_TRUE(reused.event == want.event) << line;
  }
}

OwnedKernelTimeEvent Time(uint64_t corr, std::optional<uint64_t> node) {
  OwnedKernelTimeEvent t;
  t.header = {1732000000123456789, 31337, 7};
  t.correlation_id = corr;
  t.device = 1;
  t.context = 3;
  t.stream = 0x20;
  t.start_ns = 1732000000123500000;
  t.end_ns = 1732000000123600000;
  t.duration_ns = 100000;
  if (node) {
    t.graph_id = 9;
    t.graph_node_id = node;
  }
  return t;
}

TEST(LineDecoderTest, EverySampleAndMutatedLineAsDecode) {
  LineDecoder decoder;
  DecodeResult reused;
  std::vector<std::string> lines = testing::SampleLines();
  for (std::string& line : testing::MutatedLines()) lines.push_back(std::move(line));
  uint64_t in_layout = 0;  // kernel and kernel_time lines the validator's fast path accepts
  for (const std::string& line : lines) {
    ExpectSameAsDecode(decoder, reused, line);
    LineInfo info;
    if (internal::ValidateFastPath(line, &info) &&
        (info.type == EventType::kKernel || info.type == EventType::kKernelTime ||
         info.type == EventType::kLaunch)) {
      ++in_layout;
    }
  }
  // Those are read by the fast path, every other line by the general path.
  EXPECT_GT(in_layout, 30u);
  EXPECT_EQ(decoder.fast_lines(), in_layout);
  EXPECT_EQ(decoder.general_lines(), lines.size() - in_layout);
}

TEST(LineDecoderTest, ReusedResultForgetsTheOptionalFieldsOfTheLineBefore) {
  OwnedKernelEvent with = RealisticKernel();
  with.cluster = Dim3{2, 1, 1};
  with.occupancy.has_cluster = true;
  with.occupancy.cluster_occupancy = 0.5;
  with.graph_id = 4;
  with.graph_node_id = 5;
  with.cooperative = true;
  with.occupancy_source = OccupancySource::kDriver;
  with.engine_max_active_blocks = 3;
  const OwnedKernelEvent without = RealisticKernel();
  LineDecoder decoder;
  DecodeResult reused;
  for (const OwnedEvent& e : std::vector<OwnedEvent>{with, without, Time(1, 5), Time(2, {}),
                                                      with, without}) {
    const std::string line = EncodeLine(e);
    ASSERT_EQ(decoder.Decode(line, &reused), Reason::kOk) << line;
    EXPECT_TRUE(reused.event == e) << line;
    EXPECT_EQ(*reused.header, HeaderOf(e));
  }
  EXPECT_EQ(decoder.fast_lines(), 6u);
  EXPECT_EQ(decoder.general_lines(), 0u);
}

// A result that goes from a kernel line to a line of another type and back keeps the kernel
// event's string buffers: the kernel line after a kernel_time, or after a line the general path
// reads (a device event), allocates nothing.
TEST(LineDecoderTest, AKernelEventsStringsOutliveLinesOfOtherTypes) {
  const std::string kernel = EncodeLine(RealisticKernel());
  OwnedDeviceEvent device;
  device.header = {1, 1, 2};
  device.name = "NVIDIA H100 80GB HBM3, a device name longer than a short string";
  device.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  device.warp_size = 32;
  const std::string other_lines[] = {EncodeLine(Time(3, 5)), EncodeLine(device)};
  LineDecoder decoder;
  DecodeResult reused;
  ASSERT_EQ(decoder.Decode(kernel, &reused), Reason::kOk);
  for (const std::string& other : other_lines) {
    SCOPED_TRACE(other);
    ASSERT_EQ(decoder.Decode(other, &reused), Reason::kOk);
    ASSERT_FALSE(std::holds_alternative<OwnedKernelEvent>(reused.event));
    const int64_t before = test_support::AllocationsOnThisThread();
    ASSERT_EQ(decoder.Decode(kernel, &reused), Reason::kOk);
    EXPECT_EQ(test_support::AllocationsOnThisThread(), before);
    EXPECT_TRUE(reused.event == OwnedEvent(RealisticKernel()));
  }
  EXPECT_EQ(decoder.general_lines(), 1u);  // the device line
}

// Valid forms the fast path does not take go to the general path, with Decode's result.
TEST(LineDecoderTest, FormsOutsideTheEncoderLayoutGiveDecodesResult) {
  std::string line = EncodeLine(RealisticKernel());
  line.pop_back();  // '\n'
  auto replace = [&](std::string_view from, std::string_view to) {
    std::string s = line;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::vector<std::string> lines = {
      replace(R"("num_regs":84)", R"("num_regs":84.0)"),       // an integer as 84.0
      replace(R"("num_regs":84)", R"("num_regs":8.4e1)"),      // ... and as 8.4e1
      replace(R"("api":"cuLaunchKernel")", R"("api":"cuLaunch\u004bernel")"),  // an escape
      replace(R"("grid":[1024,2,1])", R"("grid":[ 1024, 2, 1 ])"),  // spaces in an array
      replace(R"("block":[256,1,1])", R"("block":[256,1,1],"grid":[1,2,3])"),  // grid repeated
      replace(R"({"type":"kernel",)", R"({"type":"kernel","from_a_later_version":{"a":[1]},)"),
      replace(R"("waves":)", R"("waves" : )"),                    // spaces around the colon
      " " + line + " \r\n",
      replace(R"("tid":4243)", R"("t\u0069d":4243)"),            // an escaped member name
  };
  LineDecoder decoder;
  DecodeResult reused;
  for (const std::string& l : lines) {
    const DecodeResult want = Decode(l);
    ASSERT_TRUE(want.ok()) << l << ": " << want.message;
    ExpectSameAsDecode(decoder, reused, l);
  }
}

// nlohmann/json reads "-0" as the integer 0, so the double is +0.0, not -0.0.
TEST(LineDecoderTest, NegativeZeroIntegerIsPositiveZeroAsInDecode) {
  std::string line = EncodeLine(RealisticKernel());
  const std::string from = R"("waves":)";
  const size_t at = line.find(from) + from.size();
  line.replace(at, line.find(',', at) - at, "-0");
  LineDecoder decoder;
  DecodeResult result;
  ASSERT_EQ(decoder.Decode(line, &result), Reason::kOk) << result.message;
  const double waves = std::get<OwnedKernelEvent>(result.event).occupancy.waves;
  EXPECT_EQ(waves, 0.0);
  EXPECT_FALSE(std::signbit(waves));
  EXPECT_EQ(std::signbit(std::get<OwnedKernelEvent>(Decode(line).event).occupancy.waves),
            std::signbit(waves));
}

TEST(LineDecoderTest, NamesTheTypeOfALineOfAnUnknownType) {
  LineDecoder decoder;
  DecodeResult result;
  // A type of a later schema (this build knows none named so).
  const std::string later =
      R"({"type":"gpu_reset","version":1,"ts_ns":5,"pid":7,"seq":3,"device":0})";
  EXPECT_EQ(decoder.Decode(later, &result), Reason::kUnknownType);
  EXPECT_EQ(decoder.last_type(), "gpu_reset");
  ASSERT_TRUE(result.header.has_value());
  EXPECT_EQ(result.header->pid, 7);
  EXPECT_EQ(result.header->seq, 3u);
  ASSERT_EQ(decoder.Decode(EncodeLine(Time(1, {})), &result), Reason::kOk);
  EXPECT_EQ(decoder.last_type(), "kernel_time");
  EXPECT_EQ(decoder.Decode("not json", &result), Reason::kMalformedJson);
  EXPECT_EQ(decoder.last_type(), "");
}

}  // namespace
}  // namespace cuflight::schema
