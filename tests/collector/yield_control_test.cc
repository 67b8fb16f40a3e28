// `cuflight yield`'s messages (cuflight/schema/control.h, docs/protocol.md "Yielding CUPTI") and
// the collector's reading of them (collector/daemon/yield_control.h): the exact line a producer
// takes, hostile requests, and who may make a process yield.
#include "yield_control.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cuflight/schema/control.h"

namespace cuflight::collector {
namespace {

TEST(YieldControlTest, TheProducerTakesExactlyTheLineTheCollectorWrites) {
  char buf[schema::kMaxYieldLineBytes];
  const size_t n = schema::EncodeYield(600'000, buf, sizeof(buf));
  EXPECT_EQ(std::string(buf, n), "{\"type\":\"yield\",\"for_ms\":600000}\n");
  EXPECT_EQ(schema::ParseYield(std::string_view(buf, n)), 600'000u);
  EXPECT_EQ(schema::ParseYield("{\"type\":\"yield\",\"for_ms\":0}"), 0u);
  EXPECT_EQ(schema::ParseYield("{\"type\":\"yield\",\"for_ms\":86400000}\r\n"), 86'400'000u);
  // A day at most; no other spelling (the producer parses without a JSON library).
  EXPECT_EQ(schema::EncodeYield(86'400'001, buf, sizeof(buf)), 0u);
  for (const char* bad :
       {"{\"type\":\"yield\",\"for_ms\":86400001}", "{\"type\":\"yield\",\"for_ms\":01}",
        "{\"type\":\"yield\",\"for_ms\":-1}", "{\"type\":\"yield\", \"for_ms\":5}",
        "{\"type\":\"yield\",\"for_ms\":}", "{\"type\":\"ack\",\"seq\":5}",
        "{\"type\":\"yield\",\"for_ms\":18446744073709551616}"}) {
    EXPECT_FALSE(schema::ParseYield(bad).has_value()) << bad;
  }
  // The longest line fits the bound the producer's buffer is sized by.
  EXPECT_LE(schema::EncodeYield(schema::kMaxYieldMs, buf, sizeof(buf)), schema::kMaxYieldLineBytes);
}

TEST(YieldControlTest, RequestsAreReadStrictly) {
  YieldRequest r;
  std::string error;
  ASSERT_TRUE(ParseYieldRequest(
      R"({"type":"yield_request","version":1,"pid":4242,"pid_ns":4026531836,"for_ms":600000})", &r,
      &error))
      << error;
  EXPECT_EQ(r.pid, 4242);
  EXPECT_EQ(r.pid_ns, 4026531836u);
  EXPECT_EQ(r.for_ms, 600'000u);
  ASSERT_TRUE(ParseYieldRequest(R"({"type":"yield_request","version":1,"job":"81723","for_ms":0})",
                                &r, &error));
  EXPECT_EQ(r.job, "81723");
  EXPECT_EQ(r.pid, 0);
  EXPECT_EQ(r.for_ms, 0u);
  for (const char* bad : {
           R"([1,2])",
           R"({"type":"yield_request","version":2,"pid":1,"for_ms":1})",
           R"({"type":"yield","version":1,"pid":1,"for_ms":1})",
           R"({"type":"yield_request","version":1,"for_ms":1})",
           R"({"type":"yield_request","version":1,"pid":1,"job":"j","for_ms":1})",
           R"({"type":"yield_request","version":1,"pid":0,"for_ms":1})",
           R"({"type":"yield_request","version":1,"pid":-5,"for_ms":1})",
           R"({"type":"yield_request","version":1,"pid":2147483648,"for_ms":1})",
           R"({"type":"yield_request","version":1,"pid":"1","for_ms":1})",
           R"({"type":"yield_request","version":1,"pid":1,"pid_ns":-1,"for_ms":1})",
           R"({"type":"yield_request","version":1,"job":"","for_ms":1})",
           R"({"type":"yield_request","version":1,"pid":1,"for_ms":86400001})",
           R"({"type":"yield_request","version":1,"pid":1})",
           R"({"type":"yield_request","version":1,"pid":1,"for_ms":1.5})",
           "{\"type\":\"yield_request\",\"version\":1,\"pid\":1,\"for_ms\":1",
       }) {
    EXPECT_FALSE(ParseYieldRequest(bad, &r, &error)) << bad;
    EXPECT_FALSE(error.empty());
  }
  const std::string long_job(257, 'j');
  EXPECT_FALSE(ParseYieldRequest(
      R"({"type":"yield_request","version":1,"job":")" + long_job + R"(","for_ms":1})", &r, &error));
  EXPECT_TRUE(LooksLikeYieldRequest(R"({"type":"yield_request","version":1})"));
  EXPECT_FALSE(LooksLikeYieldRequest(R"({"type":"process_start","version":1})"));
  // A process whose command line says yield_request is still a process.
  EXPECT_FALSE(LooksLikeYieldRequest(
      R"({"type":"process_start","version":1,"argv":["python","{"type":"yield_request","]})"));
}

TEST(YieldControlTest, OnlyRootOrTheProcesssOwnUserMayMakeItYield) {
  EXPECT_TRUE(MayYield(0, true, 1000));
  EXPECT_TRUE(MayYield(0, false, 0));  // root may ask a TCP producer
  EXPECT_TRUE(MayYield(1000, true, 1000));
  EXPECT_FALSE(MayYield(1001, true, 1000));
  EXPECT_FALSE(MayYield(1000, false, 1000));  // a TCP producer's uid is nobody's word
  EXPECT_FALSE(MayYield(1000, true, 0));      // not root's processes either
}

TEST(YieldControlTest, TheReplyCountsAndNamesEachMatch) {
  std::vector<YieldTarget> targets(2);
  targets[0].pid = 7;
  targets[0].exe = "/usr/bin/python3";
  targets[0].uid = 1000;
  targets[0].asked = true;
  targets[1].pid = 8;
  targets[1].exe = std::string("bad\xff", 4);  // a producer's bytes: replaced, never thrown on
  targets[1].uid = 1001;
  targets[1].why = "another user's process (only root or its own user may ask)";
  const std::string line = EncodeYieldReply(targets, "");
  ASSERT_EQ(line.back(), '\n');
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["type"], "yield_reply");
  EXPECT_EQ(j["matched"], 2);
  EXPECT_EQ(j["asked"], 1);
  EXPECT_EQ(j["refused"], 1);
  EXPECT_EQ(j["processes"][0]["pid"], 7);
  EXPECT_EQ(j["processes"][1]["asked"], false);
  EXPECT_EQ(j["processes"][1]["why"], targets[1].why);
  const nlohmann::json e = nlohmann::json::parse(EncodeYieldReply({}, "bad yield request: x"));
  EXPECT_EQ(e["error"], "bad yield request: x");
  EXPECT_FALSE(e.contains("processes"));
}

}  // namespace
}  // namespace cuflight::collector
