// Rewriting the top-level pid of a stored line to the SO_PEERCRED pid.
#include "pid_rewrite.h"

#include <gtest/gtest.h>

#include <string>

namespace cuflight::collector {
namespace {

TEST(PidRewriteTest, ReplacesOnlyTheTopLevelPid) {
  std::string out;
  ASSERT_TRUE(RewritePid(R"({"type":"kernel","pid":999,"seq":3,"nested":{"pid":5},"s":"\"pid\":7"})"
                         "\n",
                         4242, &out));
  EXPECT_EQ(out, R"({"type":"kernel","pid":4242,"seq":3,"nested":{"pid":5},"s":"\"pid\":7"})"
                 "\n");
}

TEST(PidRewriteTest, KeepsWhitespaceAndOtherBytes) {
  std::string out;
  ASSERT_TRUE(
      RewritePid("  { \"a\" : [1, {\"pid\": 2}] , \"pid\" : 17 , \"z\": null }\n", 1, &out));
  EXPECT_EQ(out, "  { \"a\" : [1, {\"pid\": 2}] , \"pid\" : 1 , \"z\": null }\n");
}

TEST(PidRewriteTest, FindsAnEscapedNameAndEveryRepeat) {
  std::string out;
  ASSERT_TRUE(RewritePid(R"({"p\u0069d":1,"x":2,"pid":3})", 77, &out));
  EXPECT_EQ(out, R"({"p\u0069d":77,"x":2,"pid":77})");
}

TEST(PidRewriteTest, NoTopLevelPidIsReported) {
  std::string out;
  EXPECT_FALSE(RewritePid(R"({"nested":{"pid":1}})", 5, &out));
  EXPECT_FALSE(RewritePid(R"([1,2])", 5, &out));
  EXPECT_FALSE(RewritePid(R"({})", 5, &out));
}

}  // namespace
}  // namespace cuflight::collector
