// BasicAuth (web_config.h, design notes 2 and 3) with a clock the test sets: a credential that
// matched once is let in again without a bcrypt check; checks of other credentials are spaced so
// that a guessing client takes at most a quarter of the metrics thread. The end-to-end answers
// (401, 200, a bad file's exit status 2) are tests/deploy's WebConfig, on the real collector.
#include "cuflight/metrics/web_config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace cuflight::collector {
namespace {

using Clock = BasicAuth::Clock;
using Verdict = BasicAuth::Verdict;

// Varnish's basic authentication page
// (https://docs.varnish-software.com/policy-engine/auth/basic/): foo's password "key1".
constexpr const char* kFooHash = "$2y$05$j0wkwHcoF8LUkm4crmVEruzsGJpT/VpoUJZWc3A7YQi7XPzG2C0li";

// A request carrying `authorization` (base64 of "user:password" written out by hand:
// "foo:key1" -> Zm9vOmtleTE=, "foo:key2" -> Zm9vOmtleTI=).
std::string Request(const std::string& authorization) {
  return "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: " + authorization + "\r\n\r\n";
}

WebConfig FooOnly() {
  WebConfig config;
  std::string error;
  EXPECT_TRUE(
      ParseWebConfig(std::string("basic_auth_users:\n  foo: ") + kFooHash + "\n", &config, &error))
      << error;
  return config;
}

TEST(BasicAuthTest, AVerifiedPasswordIsNotCheckedAgain) {
  BasicAuth auth(FooOnly());
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(auth.Check(Request("Basic Zm9vOmtleTE="), t0), Verdict::kAllowed);
  EXPECT_EQ(auth.checks(), 1u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(auth.Check(Request("basic   Zm9vOmtleTE="), t0), Verdict::kAllowed);
  }
  EXPECT_EQ(auth.checks(), 1u);
}

TEST(BasicAuthTest, OtherCredentialsWaitThreeTimesTheLastCheck) {
  BasicAuth auth(FooOnly());
  const Clock::time_point before = Clock::now();
  EXPECT_EQ(auth.Check(Request("Basic Zm9vOmtleTI="), before), Verdict::kDenied);
  const auto took = Clock::now() - before;  // at least the check's own time
  EXPECT_EQ(auth.checks(), 1u);
  // Right after it, another guess is not checked (and neither is the right password, not yet
  // verified): a quarter of the thread's time at most.
  EXPECT_EQ(auth.Check(Request("Basic Zm9vOmtleTI="), before + took), Verdict::kThrottled);
  EXPECT_EQ(auth.Check(Request("Basic Zm9vOmtleTE="), before + took), Verdict::kThrottled);
  EXPECT_EQ(auth.checks(), 1u);
  // Past three times its duration (with room for the time measured outside it), checked again.
  const Clock::time_point later = Clock::now() + 4 * took + std::chrono::milliseconds(1);
  EXPECT_EQ(auth.Check(Request("Basic Zm9vOmtleTE="), later), Verdict::kAllowed);
  EXPECT_EQ(auth.checks(), 2u);
}

TEST(BasicAuthTest, MalformedCredentialsAreRefusedWithoutACheck) {
  BasicAuth auth(FooOnly());
  const Clock::time_point t0 = Clock::now();
  for (const std::string& request : {
           std::string("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),  // none
           Request("Basic"),                                         // no token
           Request("Basic Zm9vOmtleTE"),                             // base64 without padding
           Request("Basic Zm9v"),                                    // "foo": no colon
           Request("Digest Zm9vOmtleTE="),                           // another scheme
           // two Authorization headers
           std::string("GET / HTTP/1.1\r\nAuthorization: Basic Zm9vOmtleTE=\r\n"
                       "authorization: Basic Zm9vOmtleTE=\r\n\r\n"),
           // "foo:key1\0x" (a NUL after the right password: crypt(3) would see "key1")
           Request("Basic Zm9vOmtleTEAeA=="),
       }) {
    EXPECT_EQ(auth.Check(request, t0), Verdict::kDenied) << request;
  }
  EXPECT_EQ(auth.checks(), 0u);
}

}  // namespace
}  // namespace cuflight::collector
