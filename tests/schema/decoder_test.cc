#include "cuflight/schema/decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

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
    EXPECT_THAT(result.message, StartsWith("malformed JSON at byte ")) << line;
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
  EXPECT_EQ(Decode(deep + std::string(200'000, ']')).reason, Reason::kMalformedJson);
}

// The event object is depth 1; kMaxNestingDepth levels are allowed, one more is malformed.
TEST(DecoderTest, NestingDepthLimit) {
  const auto nested = [](int depth) {
    return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']');
  };
  EXPECT_EQ(Decode(nested(kMaxNestingDepth)).reason, Reason::kNotAnObject);
  EXPECT_EQ(Decode(nested(kMaxNestingDepth + 1)).reason, Reason::kMalformedJson);
  std::string line = EncodeLine(RealisticKernel());
  line.pop_back();  // '\n'
  line.pop_back();  // '}'
  const DecodeResult at_limit = Decode(line + R"(,"later":)" + nested(kMaxNestingDepth - 1) + "}");
  EXPECT_TRUE(at_limit.ok()) << at_limit.message;
  const DecodeResult beyond = Decode(line + R"(,"later":)" + nested(kMaxNestingDepth) + "}");
  EXPECT_EQ(beyond.reason, Reason::kMalformedJson);
  // Brackets inside strings do not count.
  const DecodeResult in_string =
      Decode(line + R"(,"later":")" + std::string(100, '[') + R"(\"{{"})");
  EXPECT_TRUE(in_string.ok()) << in_string.message;
}

// nlohmann's lexer takes a NUL byte for the end of the input; Decode rejects every NUL instead,
// and the message points at it.
TEST(DecoderTest, NulByteIsMalformedAnywhere) {
  const std::string line = EncodeLine(RealisticKernel());
  const std::string object = line.substr(0, line.size() - 1);
  for (const std::string& bad :
       {object + std::string(1, '\0'), object + std::string("\0garbage", 8),
        object + " " + std::string(1, '\0') + "\n", std::string(1, '\0') + object}) {
    const DecodeResult result = Decode(bad);
    EXPECT_EQ(result.reason, Reason::kMalformedJson);
    EXPECT_THAT(result.message,
                StartsWith("malformed JSON at byte " + std::to_string(bad.find('\0')) + ": "));
  }
}

// strtod overflows to infinity beyond DBL_MAX; nlohmann reports that as out_of_range, which
// Decode reports as malformed (not an internal error).
TEST(DecoderTest, NumberBeyondDoubleIsMalformed) {
  std::string line = EncodeLine(RealisticKernel());
  line.pop_back();
  line.pop_back();
  for (const char* number : {"1e400", "-1e400", "1.7976931348623159e308", "1e999999999999"}) {
    EXPECT_EQ(Decode(line + R"(,"later":)" + number + "}").reason, Reason::kMalformedJson)
        << number;
  }
  for (const char* number : {"1.7976931348623157e308", "1e-400", "-1e-99999999999999", "0e999"}) {
    EXPECT_TRUE(Decode(line + R"(,"later":)" + number + "}").ok()) << number;
  }
}

TEST(DecoderTest, ByteOrderMarkOnlyAtTheStart) {
  const std::string line = EncodeLine(RealisticKernel());
  EXPECT_TRUE(Decode("\xEF\xBB\xBF" + line).ok());
  EXPECT_EQ(Decode(" \xEF\xBB\xBF" + line).reason, Reason::kMalformedJson);
  EXPECT_EQ(Decode("\xEF\xBB" + line).reason, Reason::kMalformedJson);
}

TEST(DecoderTest, DuplicateKeysLastOneCounts) {
  std::string line = EncodeLine(RealisticKernel());
  line.pop_back();
  line.pop_back();
  const DecodeResult later_tid = Decode(line + R"(,"tid":5})");
  ASSERT_TRUE(later_tid.ok()) << later_tid.message;
  EXPECT_EQ(std::get<OwnedKernelEvent>(later_tid.event).tid, 5);
  EXPECT_EQ(Decode(line + R"(,"tid":-5})").reason, Reason::kOutOfRange);
  // An escaped name is the same name.
  EXPECT_EQ(Decode(line + R"(,"t\u0069d":"x"})").reason, Reason::kWrongType);
  const DecodeResult type_again = Decode(line + R"(,"type":"kernel_time"})");
  EXPECT_EQ(type_again.reason, Reason::kMissingField);  // a kernel_time without end_ns
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
      Decode(R"({"type":"gpu_reset","version":1,"ts_ns":5,"pid":6,"seq":7,"why":"x"})");
  EXPECT_EQ(result.reason, Reason::kUnknownType);
  EXPECT_EQ(result.message, R"(event: unknown type "gpu_reset")");
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
    if (key == "cooperative") continue;  // optional (added in a minor version)
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
              R"(kernel: field "limiting_resource" must be one of registers, shared_mem, warps, blocks, barriers, cluster, other, got "tmem")"},
          Case{"occupancy_source", "cupti",
               R"(kernel: field "occupancy_source" must be one of driver, engine, got "cupti")"},
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

// Lines written before the minor additions (no cooperative, ppid, uid, config or the new
// counters) still decode, with the documented defaults.
TEST(DecoderTest, LinesWithoutTheMinorAdditionsDecode) {
  json kernel = KernelDoc();
  kernel.erase("cooperative");
  const DecodeResult k = DecodeDoc(kernel);
  ASSERT_TRUE(k.ok()) << k.message;
  EXPECT_FALSE(std::get<OwnedKernelEvent>(k.event).cooperative);
  EXPECT_FALSE(std::get<OwnedKernelEvent>(k.event).graph_id.has_value());

  const DecodeResult start = Decode(
      R"({"type":"process_start","version":1,"ts_ns":1,"pid":2,"seq":0,"exe":"/bin/x",)"
      R"("argv":["x"],"hostname":"h","start_ns":0,"cuflight_version":"0.1.0",)"
      R"("cuda_driver_version":0,"cupti_version":0})");
  ASSERT_TRUE(start.ok()) << start.message;
  const auto& s = std::get<OwnedProcessStartEvent>(start.event);
  EXPECT_EQ(s.ppid, 0);
  EXPECT_EQ(s.uid, -1);
  EXPECT_TRUE(s.config.empty());
  EXPECT_EQ(s.instance_id, 0u);
  EXPECT_EQ(s.pid_ns, 0u);
  EXPECT_TRUE(s.truncated.empty());

  const DecodeResult stats = Decode(
      R"({"type":"stats","version":1,"ts_ns":1,"pid":2,"seq":3,"emitted":4,"dropped":5,)"
      R"("ring_capacity":6,"interval_ns":7})");
  ASSERT_TRUE(stats.ok()) << stats.message;
  const auto& st = std::get<OwnedStatsEvent>(stats.event);
  EXPECT_EQ(st.emitted, 4u);
  EXPECT_EQ(st.launches + st.filtered + st.dropped_ring_full + st.dropped_disconnected +
                st.dropped_backpressure + st.ring_high_water + st.cpu_ns + st.timing_dropped,
            0u);

  const DecodeResult end = Decode(
      R"({"type":"process_end","version":1,"ts_ns":1,"pid":2,"seq":3,"exit_code":null,)"
      R"("emitted":4,"dropped":5})");
  ASSERT_TRUE(end.ok()) << end.message;
  EXPECT_EQ(std::get<OwnedProcessEndEvent>(end.event).launches, 0u);
  EXPECT_EQ(std::get<OwnedProcessEndEvent>(end.event).timing_dropped, 0u);

  // A line of the encoder before timing_dropped: every other counter, none of it.
  const DecodeResult counted = Decode(
      R"({"type":"process_end","version":1,"ts_ns":1,"pid":2,"seq":3,"exit_code":0,)"
      R"("emitted":4,"dropped":5,"launches":6,"filtered":7,"dropped_ring_full":1,)"
      R"("dropped_disconnected":4})");
  ASSERT_TRUE(counted.ok()) << counted.message;
  const auto& e = std::get<OwnedProcessEndEvent>(counted.event);
  EXPECT_EQ(e.dropped_disconnected, 4u);
  EXPECT_EQ(e.timing_dropped, 0u);
  EXPECT_EQ(e.dropped_backpressure, 0u);

  // A line of the encoder before dropped_backpressure: timing_dropped, none of it.
  const DecodeResult timed = Decode(
      R"({"type":"process_crash","version":1,"ts_ns":1,"pid":2,"seq":3,"signal":11,)"
      R"("signal_name":"SIGSEGV","code":1,"addr":0,"tid":2,"app_handler":false,"emitted":3,)"
      R"("dropped":1,"launches":6,"filtered":0,"dropped_ring_full":0,"dropped_disconnected":1,)"
      R"("timing_dropped":2})");
  ASSERT_TRUE(timed.ok()) << timed.message;
  const auto& c = std::get<OwnedProcessCrashEvent>(timed.event);
  EXPECT_EQ(c.dropped_disconnected, 1u);
  EXPECT_EQ(c.timing_dropped, 2u);
  EXPECT_EQ(c.dropped_backpressure, 0u);
}

TEST(DecoderTest, DroppedBackpressureIsAnUnsignedCounter) {
  const std::string head =
      R"({"type":"process_end","version":1,"ts_ns":1,"pid":2,"seq":3,"exit_code":0,)"
      R"("emitted":4,"dropped":5,"dropped_backpressure":)";
  const DecodeResult max = Decode(head + "18446744073709551615}");
  ASSERT_TRUE(max.ok()) << max.message;
  EXPECT_EQ(std::get<OwnedProcessEndEvent>(max.event).dropped_backpressure, 18446744073709551615u);
  EXPECT_EQ(Decode(head + "-1}").reason, Reason::kOutOfRange);
  EXPECT_EQ(Decode(head + "18446744073709551616}").reason, Reason::kOutOfRange);
  EXPECT_EQ(Decode(head + "\"3\"}").reason, Reason::kWrongType);
  EXPECT_EQ(Decode(head + "null}").reason, Reason::kWrongType);
  const DecodeResult stats =
      Decode(R"({"type":"stats","version":1,"ts_ns":1,"pid":2,"seq":3,"emitted":4,"dropped":5,)"
             R"("ring_capacity":6,"interval_ns":7,"dropped_backpressure":5})");
  ASSERT_TRUE(stats.ok()) << stats.message;
  EXPECT_EQ(std::get<OwnedStatsEvent>(stats.event).dropped_backpressure, 5u);
}

TEST(DecoderTest, TimingDroppedIsAnUnsignedCounter) {
  const std::string head =
      R"({"type":"stats","version":1,"ts_ns":1,"pid":2,"seq":3,"emitted":4,"dropped":5,)"
      R"("ring_capacity":6,"interval_ns":7,"timing_dropped":)";
  const DecodeResult max = Decode(head + "18446744073709551615}");
  ASSERT_TRUE(max.ok()) << max.message;
  EXPECT_EQ(std::get<OwnedStatsEvent>(max.event).timing_dropped, 18446744073709551615u);
  EXPECT_EQ(Decode(head + "-1}").reason, Reason::kOutOfRange);
  EXPECT_EQ(Decode(head + "18446744073709551616}").reason, Reason::kOutOfRange);
  EXPECT_EQ(Decode(head + "\"3\"}").reason, Reason::kWrongType);
  EXPECT_EQ(Decode(head + "null}").reason, Reason::kWrongType);
  const DecodeResult crash = Decode(
      R"({"type":"process_crash","version":1,"ts_ns":1,"pid":2,"seq":3,"signal":11,)"
      R"("signal_name":"SIGSEGV","code":1,"addr":0,"tid":2,"app_handler":false,"emitted":3,)"
      R"("dropped":0,"timing_dropped":2})");
  ASSERT_TRUE(crash.ok()) << crash.message;
  EXPECT_EQ(std::get<OwnedProcessCrashEvent>(crash.event).timing_dropped, 2u);
}

TEST(DecoderTest, GraphIdsComeTogether) {
  json doc = KernelDoc();
  doc["graph_id"] = 3;
  DecodeResult result = DecodeDoc(doc);
  EXPECT_EQ(result.reason, Reason::kMissingField);
  EXPECT_EQ(result.message,
            R"(kernel: field "graph_node_id" is required when "graph_id" is present)");
  doc["graph_node_id"] = 4;
  result = DecodeDoc(doc);
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(std::get<OwnedKernelEvent>(result.event).graph_id, 3u);
  EXPECT_EQ(std::get<OwnedKernelEvent>(result.event).graph_node_id, 4u);
  doc.erase("graph_id");
  result = DecodeDoc(doc);
  EXPECT_EQ(result.reason, Reason::kMissingField);
  EXPECT_EQ(result.message,
            R"(kernel: field "graph_id" is required when "graph_node_id" is present)");
  doc["graph_id"] = -3;
  EXPECT_EQ(DecodeDoc(doc).reason, Reason::kOutOfRange);
  doc = KernelDoc();
  doc["cooperative"] = 1;
  result = DecodeDoc(doc);
  EXPECT_EQ(result.reason, Reason::kWrongType);
  EXPECT_EQ(result.message, R"(kernel: field "cooperative" must be a boolean, got 1)");
}

// kernel_time: the graph ids of a graph's kernel node come together, as in the kernel event; a
// line without them (an ordinary launch, or a line written before they existed) decodes with
// neither set.
TEST(DecoderTest, KernelTimeGraphIds) {
  const std::string head =
      R"({"type":"kernel_time","version":1,"ts_ns":1,"pid":2,"seq":3,"correlation_id":77,)"
      R"("device":1,"context":5,"stream":6,"start_ns":1000,"end_ns":3000,"duration_ns":2000)";
  DecodeResult result = Decode(head + "}");
  ASSERT_TRUE(result.ok()) << result.message;
  const auto& old = std::get<OwnedKernelTimeEvent>(result.event);
  EXPECT_EQ(old.correlation_id, 77u);
  EXPECT_EQ(old.device, 1);
  EXPECT_EQ(old.duration_ns, 2000u);
  EXPECT_FALSE(old.graph_id.has_value());
  EXPECT_FALSE(old.graph_node_id.has_value());

  result = Decode(head + R"(,"graph_id":9,"graph_node_id":18446744073709551615})");
  ASSERT_TRUE(result.ok()) << result.message;
  const auto& node = std::get<OwnedKernelTimeEvent>(result.event);
  EXPECT_EQ(node.graph_id, 9u);
  EXPECT_EQ(node.graph_node_id, 18446744073709551615u);

  result = Decode(head + R"(,"graph_id":9})");
  EXPECT_EQ(result.reason, Reason::kMissingField);
  EXPECT_EQ(result.message,
            R"(kernel_time: field "graph_node_id" is required when "graph_id" is present)");
  result = Decode(head + R"(,"graph_node_id":4})");
  EXPECT_EQ(result.reason, Reason::kMissingField);
  EXPECT_EQ(result.message,
            R"(kernel_time: field "graph_id" is required when "graph_node_id" is present)");
  EXPECT_EQ(Decode(head + R"(,"graph_id":9,"graph_node_id":-1})").reason, Reason::kOutOfRange);
  EXPECT_EQ(Decode(head + R"(,"graph_id":18446744073709551616,"graph_node_id":1})").reason,
            Reason::kOutOfRange);
  EXPECT_EQ(Decode(head + R"(,"graph_id":null,"graph_node_id":1})").reason, Reason::kWrongType);
}

// JSON object semantics: Decode returns config sorted by name, a repeated name with its last value
// (which alone must be a string).
TEST(DecoderTest, ConfigIsSortedAndLastValueWins) {
  const std::string head =
      R"({"type":"process_start","version":1,"ts_ns":1,"pid":2,"seq":0,"exe":"/bin/x",)"
      R"("argv":[],"hostname":"h","start_ns":0,"cuflight_version":"0.1.0",)"
      R"("cuda_driver_version":0,"cupti_version":0,"ppid":1,"uid":0,"config":)";
  const DecodeResult result =
      Decode(head + R"({"CUFLIGHT_Z":"1","CUFLIGHT_A":7,"CUFLIGHT_A":"2","CUFLIGHT_M":"3"}})");
  ASSERT_TRUE(result.ok()) << result.message;
  const auto& start = std::get<OwnedProcessStartEvent>(result.event);
  using Pair = std::pair<std::string, std::string>;
  EXPECT_EQ(start.config,
            (std::vector<Pair>{{"CUFLIGHT_A", "2"}, {"CUFLIGHT_M", "3"}, {"CUFLIGHT_Z", "1"}}));
  EXPECT_EQ(start.uid, 0);
  // Two string values of one name (the second written with an escape): the last one, once.
  const DecodeResult twice = Decode(
      head +
      R"({"CUFLIGHT_Z":"1","CUFLIGHT_A":"first","CUFLIGHT_M":"3","CUFLIGHT_\u0041":"last"}})");
  ASSERT_TRUE(twice.ok()) << twice.message;
  EXPECT_EQ(std::get<OwnedProcessStartEvent>(twice.event).config,
            (std::vector<Pair>{{"CUFLIGHT_A", "last"}, {"CUFLIGHT_M", "3"}, {"CUFLIGHT_Z", "1"}}));
  EXPECT_EQ(Decode(head + R"({"CUFLIGHT_A":"2","CUFLIGHT_A":7}})").reason, Reason::kWrongType);
  EXPECT_EQ(Decode(head + R"(["CUFLIGHT_A"]})").reason, Reason::kWrongType);
  EXPECT_EQ(Decode(head + R"(null})").reason, Reason::kWrongType);
}

// The identity fields: integers in [0, 2^64-1]; truncated an array of strings.
TEST(DecoderTest, ProcessStartIdentityAndTruncationFields) {
  const std::string head =
      R"({"type":"process_start","version":1,"ts_ns":1,"pid":2,"seq":0,"exe":"/bin/x",)"
      R"("argv":[],"hostname":"h","start_ns":0,"cuflight_version":"0.1.0",)"
      R"("cuda_driver_version":0,"cupti_version":0)";
  const DecodeResult result = Decode(
      head + R"(,"instance_id":18446744073709551615,"pid_ns":4026532198,"truncated":["argv"]})");
  ASSERT_TRUE(result.ok()) << result.message;
  const auto& start = std::get<OwnedProcessStartEvent>(result.event);
  EXPECT_EQ(start.instance_id, 18446744073709551615u);
  EXPECT_EQ(start.pid_ns, 4026532198u);
  EXPECT_EQ(start.truncated, std::vector<std::string>{"argv"});
  EXPECT_EQ(Decode(head + R"(,"instance_id":-1})").reason, Reason::kOutOfRange);
  EXPECT_EQ(Decode(head + R"(,"instance_id":18446744073709551616})").reason, Reason::kOutOfRange);
  EXPECT_EQ(Decode(head + R"(,"instance_id":"9f"})").reason, Reason::kWrongType);
  EXPECT_EQ(Decode(head + R"(,"pid_ns":null})").reason, Reason::kWrongType);
  EXPECT_EQ(Decode(head + R"(,"truncated":"argv"})").reason, Reason::kWrongType);
  EXPECT_EQ(Decode(head + R"(,"truncated":[1]})").reason, Reason::kWrongType);
}

TEST(DecoderTest, ProcessLost) {
  const DecodeResult result = Decode(
      R"({"type":"process_lost","version":1,"ts_ns":5,"pid":6,"seq":7,"last_seq":7,)"
      R"("reason":"collector_shutdown","events_stored":8,"events_lost":0})");
  ASSERT_TRUE(result.ok()) << result.message;
  const auto& lost = std::get<OwnedProcessLostEvent>(result.event);
  EXPECT_EQ(lost.header, (Header{5, 6, 7}));
  EXPECT_EQ(lost.last_seq, 7u);
  EXPECT_EQ(lost.reason, LostReason::kCollectorShutdown);
  EXPECT_EQ(lost.events_stored, 8u);
  const DecodeResult bad_reason = Decode(
      R"({"type":"process_lost","version":1,"ts_ns":5,"pid":6,"seq":0,"last_seq":null,)"
      R"("reason":"crashed","events_stored":0,"events_lost":0})");
  EXPECT_EQ(bad_reason.reason, Reason::kOutOfRange);
  EXPECT_THAT(bad_reason.message, HasSubstr(R"(process_lost: field "reason")"));
  const DecodeResult no_seq = Decode(
      R"({"type":"process_lost","version":1,"ts_ns":5,"pid":6,"seq":0,)"
      R"("reason":"disconnected","events_stored":0,"events_lost":0})");
  EXPECT_EQ(no_seq.reason, Reason::kMissingField);
  EXPECT_EQ(LostReasonFromName("disconnected"), LostReason::kDisconnected);
  EXPECT_EQ(LostReasonName(LostReason::kCollectorShutdown), "collector_shutdown");
  EXPECT_EQ(LostReasonFromName("Disconnected"), std::nullopt);
}

TEST(DecoderTest, ProcessCrash) {
  const std::string head =
      R"({"type":"process_crash","version":1,"ts_ns":5,"pid":6,"seq":7,"signal":11,)"
      R"("signal_name":"SIGSEGV","code":1,"addr":16,"tid":9,)";
  const DecodeResult result = Decode(head + R"("app_handler":false,"emitted":3,"dropped":0})");
  ASSERT_TRUE(result.ok()) << result.message;
  const auto& crash = std::get<OwnedProcessCrashEvent>(result.event);
  EXPECT_EQ(crash.header, (Header{5, 6, 7}));
  EXPECT_EQ(crash.signal, 11);
  EXPECT_EQ(crash.signal_name, "SIGSEGV");
  EXPECT_EQ(crash.addr, 16u);
  EXPECT_EQ(crash.tid, 9);
  EXPECT_FALSE(crash.app_handler);
  EXPECT_EQ(crash.launches, 0u);  // optional, absent
  EXPECT_EQ(Decode(head + R"("app_handler":1,"emitted":3,"dropped":0})").reason,
            Reason::kWrongType);
  EXPECT_EQ(Decode(head + R"("emitted":3,"dropped":0})").reason, Reason::kMissingField);
  const DecodeResult no_signal = Decode(
      R"({"type":"process_crash","version":1,"ts_ns":5,"pid":6,"seq":7,"signal":0,)"
      R"("signal_name":"?","code":0,"addr":0,"tid":9,"app_handler":false,"emitted":3,"dropped":0})");
  EXPECT_EQ(no_signal.reason, Reason::kOutOfRange);
  EXPECT_THAT(no_signal.message, HasSubstr(R"(process_crash: field "signal")"));
}

TEST(DecoderTest, Stall) {
  // A hand-written line, as a reader of the protocol documentation would write one.
  const std::string head =
      R"({"type":"stall","version":1,"ts_ns":5,"pid":6,"seq":7,"state":"stalled","stall_ms":10000,)"
      R"("stalled_ms":12500,"completed":0,"streams_stalled":1,"streams":[)";
  const std::string launch =
      R"x({"correlation_id":41,"name":"_Z4spinPVi","demangled":"spin(int volatile*)",)x"
      R"("grid":[1,1,1],"block":[32,1,1],"occupancy":0.015625,"age_ms":12500})";
  const std::string stream = R"({"device":0,"context":1,"stream":7,"waiting_ms":12500,)"
                             R"("unfinished":3,"launches":[)" +
                             launch + "]}";
  const DecodeResult result = Decode(head + stream + "]}");
  ASSERT_TRUE(result.ok()) << result.message;
  const auto& stall = std::get<OwnedStallEvent>(result.event);
  EXPECT_EQ(stall.header, (Header{5, 6, 7}));
  EXPECT_EQ(stall.state, StallState::kStalled);
  EXPECT_EQ(stall.stall_ms, 10000);
  EXPECT_EQ(stall.stalled_ms, 12500);
  EXPECT_EQ(stall.streams_stalled, 1);
  ASSERT_EQ(stall.streams.size(), 1u);
  EXPECT_EQ(stall.streams[0].stream, 7u);
  EXPECT_EQ(stall.streams[0].unfinished, 3);
  ASSERT_EQ(stall.streams[0].launches.size(), 1u);
  const OwnedStallLaunch& l = stall.streams[0].launches[0];
  EXPECT_EQ(l.correlation_id, 41u);
  EXPECT_EQ(l.demangled, "spin(int volatile*)");
  EXPECT_EQ(l.block, (Dim3{32, 1, 1}));
  EXPECT_EQ(l.occupancy, 1.0 / 64);
  EXPECT_EQ(l.age_ms, 12500);

  const DecodeResult resolved = Decode(
      R"({"type":"stall","version":1,"ts_ns":5,"pid":6,"seq":8,"state":"resolved",)"
      R"("stall_ms":10000,"stalled_ms":40000,"completed":4,"streams_stalled":0,"streams":[]})");
  ASSERT_TRUE(resolved.ok()) << resolved.message;
  EXPECT_EQ(std::get<OwnedStallEvent>(resolved.event).state, StallState::kResolved);

  EXPECT_EQ(Decode(std::string(head).replace(head.find("stalled"), 7, "hung") + "]}").reason,
            Reason::kOutOfRange);
  const DecodeResult not_objects = Decode(head + "[1,2,3]]}");
  EXPECT_EQ(not_objects.reason, Reason::kWrongType);
  EXPECT_THAT(not_objects.message,
              HasSubstr(R"(stall: field "streams" must be an array of objects)"));
  // A nested fault names its place.
  std::string no_name = stream;
  no_name.erase(no_name.find(R"("name":"_Z4spinPVi",)"), 20);
  const DecodeResult missing = Decode(head + no_name + "]}");
  EXPECT_EQ(missing.reason, Reason::kMissingField);
  EXPECT_EQ(missing.message, R"(stall: streams[0]: launches[0]: field "name" is missing)");
  std::string bad_device = stream;
  bad_device.replace(bad_device.find(R"("device":0)"), 10, R"("device":-1)");
  const DecodeResult negative = Decode(head + stream + "," + bad_device + "]}");
  EXPECT_EQ(negative.reason, Reason::kOutOfRange);
  EXPECT_THAT(negative.message, StartsWith(R"(stall: streams[1]: field "device")"));
  EXPECT_EQ(StallStateFromName("resolved"), StallState::kResolved);
  EXPECT_EQ(StallStateName(StallState::kStalled), "stalled");
  EXPECT_EQ(StallStateFromName("Stalled"), std::nullopt);
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
  EXPECT_EQ(EventTypeName(EventType::kProcessLost), "process_lost");
  EXPECT_EQ(static_cast<int>(EventType::kProcessLost), 7);
  EXPECT_EQ(EventTypeName(EventType::kProcessCrash), "process_crash");
  EXPECT_EQ(static_cast<int>(EventType::kProcessCrash), 8);
}

}  // namespace
}  // namespace cuflight::schema
