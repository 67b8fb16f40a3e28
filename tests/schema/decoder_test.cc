#include "cuflight/schema/decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "sample_events.h"

namespace cuflight::schema {
namespace {

using nlohmann::json;
using testing::EncodeLine;
using ::testing::HasSubstr;
using testing::RealisticKernel;
using ::testing::StartsWith;

// A valid kernel line as a JSON document, to break one field at a time.
json KernelDoc() { return json::parse(EncodeLine(RealisticKernel())); }

DecodeResult DecodeDoc(const json& doc) { return Decode(doc.dump()); }

TEST(DecoderTest, ValidLineWithWhitespaceAndUnknownFields) {
  json doc = KernelDoc();
  doc["added_in_a_later_minor_version"] = {{"nested", true}};
  const DecodeResult result = Decode("  " + doc.dump() + "\r\n");
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.reason, Reason::kOk);
  EXPECT_TRUE(result.message.empty());
  EXPECT_EQ(TypeOf(result.event), EventType::kKernel);
  EXPECT_TRUE(std::get<OwnedKernelEvent>(result.event) == RealisticKernel());
}

TEST(DecoderTest, MalformedJson) {
  for (const std::string_view line :
       {"", "\n", "{", R"({"type":"kernel",)", "{} {}", "{}\n{}", R"({"a":NaN})", "{'a':1}",
        "{\"a\":\"\xC3\x28\"}", "{\"a\":\"raw\ttab\"}"}) {
    const DecodeResult result = Decode(line);
    EXPECT_EQ(result.reason, Reason::kMalformedJson) << line;
    EXPECT_THAT(result.message, StartsWith("malformed JSON: ")) << line;
    EXPECT_FALSE(result.header.has_value());
  }
}

TEST(DecoderTest, MalformedJsonMessageIsAscii) {
  const DecodeResult result = Decode("{\"a\":\"\xFF\xFE\x01");
  EXPECT_EQ(result.reason, Reason::kMalformedJson);
  for (const char c : result.message) {
    EXPECT_GE(static_cast<unsigned char>(c), 0x20u);
    EXPECT_LT(static_cast<unsigned char>(c), 0x7Fu);
  }
}

TEST(DecoderTest, DeepNestingIsRejectedWithoutRecursion) {
  const std::string deep(200'000, '[');
  EXPECT_EQ(Decode(deep).reason, Reason::kMalformedJson);
  EXPECT_EQ(Decode(deep + std::string(200'000, ']')).reason, Reason::kNotAnObject);
}

TEST(DecoderTest, NotAnObject) {
  for (const std::string_view line : {"[]", "[1,2]", "42", "\"kernel\"", "null", "true"}) {
    const DecodeResult result = Decode(line);
    EXPECT_EQ(result.reason, Reason::kNotAnObject) << line;
    EXPECT_THAT(result.message, HasSubstr("not a JSON object")) << line;
  }
}

TEST(DecoderTest, UnknownTypeKeepsTheHeader) {
  const DecodeResult result =
      Decode(R"({"type":"process_lost","version":1,"ts_ns":5,"pid":6,"seq":7,"why":"x"})");
  EXPECT_EQ(result.reason, Reason::kUnknownType);
  EXPECT_EQ(result.message, R"(event: unknown type "process_lost")");
  ASSERT_TRUE(result.header.has_value());
  EXPECT_EQ(*result.header, (Header{5, 6, 7}));
}

TEST(DecoderTest, UnsupportedVersion) {
  for (const json& version : {json(2), json(0), json(-1), json(1e300), json(1.0e19)}) {
    json doc = KernelDoc();
    doc["version"] = version;
    const DecodeResult result = DecodeDoc(doc);
    EXPECT_EQ(result.reason, Reason::kUnsupportedVersion) << version;
    EXPECT_THAT(result.message, StartsWith("kernel: version ")) << version;
    EXPECT_THAT(result.message, HasSubstr("reads version 1"));
  }
  // The version is checked before the type is looked up.
  const DecodeResult result = Decode(R"({"type":"new_thing","version":2})");
  EXPECT_EQ(result.reason, Reason::kUnsupportedVersion);
  EXPECT_EQ(result.message, "event: version 2 is not supported (this build reads version 1)");
}

TEST(DecoderTest, MissingField) {
  struct Case {
    std::string field;
    std::string message;
  };
  for (const Case& c :
       {Case{"type", R"(event: field "type" is missing)"},
        Case{"version", R"(kernel: field "version" is missing)"},
        Case{"seq", R"(kernel: field "seq" is missing)"},
        Case{"grid", R"(kernel: field "grid" is missing)"},
        Case{"regs_for_next_block", R"(kernel: field "regs_for_next_block" is missing)"},
        Case{"best_block_size", R"(kernel: field "best_block_size" is missing)"}}) {
    json doc = KernelDoc();
    doc.erase(c.field);
    const DecodeResult result = DecodeDoc(doc);
    EXPECT_EQ(result.reason, Reason::kMissingField) << c.field;
    EXPECT_EQ(result.message, c.message);
  }
}

TEST(DecoderTest, MissingFieldOfEveryRequiredKernelField) {
  const json full = KernelDoc();
  for (const auto& [key, value] : full.items()) {
    json doc = full;
    doc.erase(key);
    const DecodeResult result = DecodeDoc(doc);
    EXPECT_EQ(result.reason, Reason::kMissingField) << key;
    EXPECT_THAT(result.message, HasSubstr("\"" + key + "\"")) << key;
  }
}

TEST(DecoderTest, ClusterOccupancyRequiresCluster) {
  json doc = KernelDoc();
  doc["cluster_occupancy"] = 0.5;
  const DecodeResult result = DecodeDoc(doc);
  EXPECT_EQ(result.reason, Reason::kMissingField);
  EXPECT_EQ(result.message,
            R"(kernel: field "cluster" is required when "cluster_occupancy" is present)");
  doc["cluster"] = {1, 2, 1};
  const DecodeResult with_cluster = DecodeDoc(doc);
  ASSERT_TRUE(with_cluster.ok()) << with_cluster.message;
  const auto& kernel = std::get<OwnedKernelEvent>(with_cluster.event);
  EXPECT_EQ(kernel.cluster, (Dim3{1, 2, 1}));
  EXPECT_TRUE(kernel.occupancy.has_cluster);
  EXPECT_EQ(kernel.occupancy.cluster_occupancy, 0.5);
}

TEST(DecoderTest, WrongType) {
  struct Case {
    std::string field;
    json value;
    std::string message;
  };
  for (
      const Case& c : {
          Case{"tid", "7", R"(kernel: field "tid" must be an integer, got "7")"},
          Case{"tid", 7.5, R"(kernel: field "tid" must be an integer, got 7.5)"},
          Case{"type", 3, R"(event: field "type" must be a string, got 3)"},
          Case{"version", "1", R"(kernel: field "version" must be an integer, got "1")"},
          Case{"name", nullptr, R"(kernel: field "name" must be a string, got null)"},
          Case{"grid",
               {1, 2},
               R"(kernel: field "grid" must be an array of 3 unsigned integers, got [1,2])"},
          Case{"grid",
               {1, 2, "3"},
               R"(kernel: field "grid" must be an array of 3 unsigned integers, got [1,2,"3"])"},
          Case{"block", json::object(),
               R"(kernel: field "block" must be an array of 3 unsigned integers, got {})"},
          Case{"cluster", nullptr,
               R"(kernel: field "cluster" must be an array of 3 unsigned integers, got null)"},
          Case{"occupancy", "1",
               R"(kernel: field "occupancy" must be a number in [0, 1], got "1")"},
          Case{
              "limiting_resources", "warps",
              R"(kernel: field "limiting_resources" must be an array of resource names, got "warps")"},
          Case{"regs_for_next_block", true,
               R"(kernel: field "regs_for_next_block" must be an integer or null, got true)"},
      }) {
    json doc = KernelDoc();
    doc[c.field] = c.value;
    const DecodeResult result = DecodeDoc(doc);
    EXPECT_EQ(result.reason, Reason::kWrongType) << c.field;
    EXPECT_EQ(result.message, c.message);
  }
}

TEST(DecoderTest, OutOfRange) {
  struct Case {
    std::string field;
    json value;
    std::string message;
  };
  for (
      const Case& c : {
          Case{"occupancy", 1.5,
               R"(kernel: field "occupancy" must be a number in [0, 1], got 1.5)"},
          Case{"tail_utilization", -0.25,
               R"(kernel: field "tail_utilization" must be a number in [0, 1], got -0.25)"},
          Case{"waves", -1, R"(kernel: field "waves" must be a number >= 0, got -1)"},
          Case{"seq", -1,
               R"(kernel: field "seq" must be an integer in [0, 18446744073709551615], got -1)"},
          Case{"pid", 2147483648u,
               R"(kernel: field "pid" must be an integer in [0, 2147483647], got 2147483648)"},
          Case{"carveout", 101,
               R"(kernel: field "carveout" must be an integer in [-1, 100], got 101)"},
          Case{"carveout", -2,
               R"(kernel: field "carveout" must be an integer in [-1, 100], got -2)"},
          Case{
              "context", 1e20,
              R"(kernel: field "context" must be an integer in [0, 18446744073709551615], got 1e+20)"},
          Case{
              "grid",
              {1, 2, -1},
              R"(kernel: field "grid" must be an array of 3 integers in [0, 4294967295], got [1,2,-1])"},
          Case{
              "regs_for_next_block", -1,
              R"(kernel: field "regs_for_next_block" must be an integer in [0, 2147483647], got -1)"},
          Case{
              "limiting_resource", "tmem",
              R"(kernel: field "limiting_resource" must be one of registers, shared_mem, warps, blocks, barriers, cluster, got "tmem")"},
          Case{
              "limiting_resources",
              {"warps", "warps"},
              R"(kernel: field "limiting_resources" must not repeat a resource, got ["warps","warps"])"},
      }) {
    json doc = KernelDoc();
    doc[c.field] = c.value;
    const DecodeResult result = DecodeDoc(doc);
    EXPECT_EQ(result.reason, Reason::kOutOfRange) << c.field;
    EXPECT_EQ(result.message, c.message);
  }
}

TEST(DecoderTest, HeaderIsSetOnlyOnceValid) {
  json doc = KernelDoc();
  doc["seq"] = -1;
  EXPECT_FALSE(DecodeDoc(doc).header.has_value());
  doc = KernelDoc();
  doc["grid"] = "big";
  const DecodeResult body_error = DecodeDoc(doc);
  EXPECT_EQ(body_error.reason, Reason::kWrongType);
  ASSERT_TRUE(body_error.header.has_value());
  EXPECT_EQ(*body_error.header, RealisticKernel().header);
}

TEST(DecoderTest, IntegralFloatsCountAsIntegers) {
  json doc = KernelDoc();
  doc["tid"] = 12.0;
  doc["version"] = 1.0;
  doc["regs_for_next_block"] = nullptr;
  const DecodeResult result = DecodeDoc(doc);
  ASSERT_TRUE(result.ok()) << result.message;
  const auto& kernel = std::get<OwnedKernelEvent>(result.event);
  EXPECT_EQ(kernel.tid, 12);
  EXPECT_EQ(kernel.occupancy.regs_for_next_block, -1);
}

TEST(DecoderTest, LongValuesAreCutInMessages) {
  json doc = KernelDoc();
  doc["tid"] = std::string(10'000, 'x');
  const DecodeResult result = DecodeDoc(doc);
  EXPECT_EQ(result.reason, Reason::kWrongType);
  EXPECT_LT(result.message.size(), 120u);
  EXPECT_THAT(result.message, HasSubstr("..."));
}

TEST(DecoderTest, FirstFaultWins) {
  json doc = KernelDoc();
  doc["version"] = 3;
  doc.erase("grid");
  EXPECT_EQ(DecodeDoc(doc).reason, Reason::kUnsupportedVersion);
  doc["version"] = 1;
  doc["tid"] = -5;  // tid comes before grid
  EXPECT_EQ(DecodeDoc(doc).reason, Reason::kOutOfRange);
}

TEST(DecoderTest, ReasonNamesAreStableAndDistinct) {
  EXPECT_EQ(ReasonName(Reason::kOk), "ok");
  EXPECT_EQ(ReasonName(Reason::kMalformedJson), "malformed_json");
  EXPECT_EQ(ReasonName(Reason::kNotAnObject), "not_an_object");
  EXPECT_EQ(ReasonName(Reason::kUnknownType), "unknown_type");
  EXPECT_EQ(ReasonName(Reason::kUnsupportedVersion), "unsupported_version");
  EXPECT_EQ(ReasonName(Reason::kMissingField), "missing_field");
  EXPECT_EQ(ReasonName(Reason::kWrongType), "wrong_type");
  EXPECT_EQ(ReasonName(Reason::kOutOfRange), "out_of_range");
  EXPECT_EQ(ReasonName(Reason::kInternalError), "internal_error");
  std::set<std::string_view> names;
  for (int i = 0; i < kReasonCount; ++i) names.insert(ReasonName(static_cast<Reason>(i)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kReasonCount));
  EXPECT_EQ(names.count("unknown"), 0u);
}

TEST(DecoderTest, EventTypeNames) {
  for (int i = 0; i < kEventTypeCount; ++i) {
    const auto type = static_cast<EventType>(i);
    EXPECT_EQ(EventTypeFromName(EventTypeName(type)), type);
  }
  EXPECT_EQ(EventTypeFromName("kernel "), std::nullopt);
  EXPECT_EQ(EventTypeName(EventType::kKernelTime), "kernel_time");
}

}  // namespace
}  // namespace cuflight::schema
