#include "cuflight/env/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cuflight::env {
namespace {

using ::testing::HasSubstr;

constexpr char kDefaultPath[] = "/run/user/1000/cuflight/collector.sock";

ParsedConfig Parse(const std::map<std::string, std::string>& env) {
  return ParseConfig(
      [&env](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      kDefaultPath);
}

// The defaults as documented in schema/env/README.md.
Config Documented() {
  Config c;
  c.collector_path = kDefaultPath;
  c.timing = TimingPolicy::kAll;
  c.timing_window_ms = 100;
  c.timing_period_ms = 10000;
  c.timing_new_configs = true;
  c.ring_slots = 16384;
  c.on_full = OnFull::kDrop;
  c.flush_ms = 100;
  c.stats_ms = 5000;
  c.buffer_bytes = 8 * 1024 * 1024;
  c.include_regex = "";
  c.exclude_regex = "";
  c.sample_every = 1;
  c.log_level = LogLevel::kWarn;
  c.spill_dir = "";
  c.spill_rotate_bytes = 64 * 1024 * 1024;
  c.spill_max_bytes = 1024 * 1024 * 1024;
  c.api_errors = ApiErrors::kDefault;
  c.api_error_history = 8;
  c.crash_handler = true;
  c.stall_ms = 10000;
  c.blackbox = true;
  c.yield = "";
  c.yield_ms = 60000;
  c.intern_configs = true;
  return c;
}

// `value` for `variable` alone must be rejected: everything stays at its default and exactly one
// warning names the variable, the value and the default.
void ExpectRejected(const std::string& variable, const std::string& value,
                    const std::string& default_text) {
  SCOPED_TRACE(variable + "=" + value);
  const ParsedConfig parsed = Parse({{variable, value}});
  EXPECT_EQ(parsed.config, Documented());
  ASSERT_EQ(parsed.warnings.size(), 1u);
  EXPECT_THAT(parsed.warnings[0], HasSubstr(variable));
  EXPECT_THAT(parsed.warnings[0], HasSubstr("'" + value + "'"));
  EXPECT_THAT(parsed.warnings[0], HasSubstr("default " + default_text));
}

// `value` for `variable` alone is accepted, without a warning; returns the configuration.
Config Accepted(const std::string& variable, const std::string& value) {
  const ParsedConfig parsed = Parse({{variable, value}});
  EXPECT_TRUE(parsed.warnings.empty()) << variable << "=" << value << ": " << parsed.warnings[0];
  return parsed.config;
}

TEST(ConfigTest, DefaultsWithEmptyEnvironment) {
  const ParsedConfig parsed = Parse({});
  EXPECT_EQ(parsed.config, Documented());
  EXPECT_TRUE(parsed.warnings.empty());
}

TEST(ConfigTest, BlankValuesMeanUnset) {
  const ParsedConfig parsed = Parse({{"CUFLIGHT_COLLECTOR", ""},
                                     {"CUFLIGHT_TIMING", " "},
                                     {"CUFLIGHT_RING_SIZE", "\t"},
                                     {"CUFLIGHT_BUFFER_BYTES", ""},
                                     {"CUFLIGHT_INCLUDE", "  "}});
  EXPECT_EQ(parsed.config, Documented());
  EXPECT_TRUE(parsed.warnings.empty());
}

TEST(ConfigTest, IgnoresOtherVariables) {
  const ParsedConfig parsed = Parse({{"CUDA_VISIBLE_DEVICES", "1"}, {"RING_SIZE", "abc"}});
  EXPECT_EQ(parsed.config, Documented());
  EXPECT_TRUE(parsed.warnings.empty());
}

TEST(ConfigTest, Collector) {
  EXPECT_EQ(Accepted("CUFLIGHT_COLLECTOR", "/tmp/c.sock").collector_path, "/tmp/c.sock");
  EXPECT_EQ(Accepted("CUFLIGHT_COLLECTOR", "  /tmp/d.sock \n").collector_path, "/tmp/d.sock");
  EXPECT_EQ(Accepted("CUFLIGHT_COLLECTOR", "127.0.0.1:7700").collector_path, "127.0.0.1:7700");
}

TEST(ConfigTest, Timing) {
  // The three policies (docs/timing contract), in any case.
  EXPECT_EQ(Accepted("CUFLIGHT_TIMING", "all").timing, TimingPolicy::kAll);
  EXPECT_EQ(Accepted("CUFLIGHT_TIMING", " Sampled ").timing, TimingPolicy::kSampled);
  EXPECT_EQ(Accepted("CUFLIGHT_TIMING", "OFF").timing, TimingPolicy::kOff);
  // The boolean spellings of earlier versions: on is all, off is off.
  for (const char* yes : {"1", "true", "TRUE", "True", "on", "ON", "yes", "Yes", " 1 "}) {
    EXPECT_EQ(Accepted("CUFLIGHT_TIMING", yes).timing, TimingPolicy::kAll) << yes;
  }
  for (const char* no : {"0", "false", "FALSE", "off", "Off", "no", "NO", "\tno"}) {
    EXPECT_EQ(Accepted("CUFLIGHT_TIMING", no).timing, TimingPolicy::kOff) << no;
  }
  for (const char* bad : {"2", "-1", "maybe", "t", "y", "enable", "truee", "1 0", "sample",
                          "sampled,all"}) {
    ExpectRejected("CUFLIGHT_TIMING", bad, "all");
  }
}

TEST(ConfigTest, TimingWindows) {
  EXPECT_EQ(Accepted("CUFLIGHT_TIMING_WINDOW_MS", "1").timing_window_ms, 1u);
  EXPECT_EQ(Accepted("CUFLIGHT_TIMING_WINDOW_MS", "5000").timing_window_ms, 5000u);
  EXPECT_EQ(Accepted("CUFLIGHT_TIMING_PERIOD_MS", "200").timing_period_ms, 200u);
  EXPECT_EQ(Accepted("CUFLIGHT_TIMING_PERIOD_MS", "86400000").timing_period_ms, 86400000u);
  EXPECT_FALSE(Accepted("CUFLIGHT_TIMING_NEW_CONFIGS", "0").timing_new_configs);
  for (const char* bad : {"0", "60001", "-1", "1s"}) {
    ExpectRejected("CUFLIGHT_TIMING_WINDOW_MS", bad, "100");
  }
  for (const char* bad : {"99", "86400001", "ten"}) {
    ExpectRejected("CUFLIGHT_TIMING_PERIOD_MS", bad, "10000");
  }
  // Both in range, the window at most half the period: 60000 x 2 > 100000.
  const ParsedConfig ok = Parse({{"CUFLIGHT_TIMING_WINDOW_MS", "50000"},
                                 {"CUFLIGHT_TIMING_PERIOD_MS", "100000"}});
  EXPECT_TRUE(ok.warnings.empty());
  EXPECT_EQ(ok.config.timing_window_ms, 50000u);
  EXPECT_EQ(ok.config.timing_period_ms, 100000u);
  const ParsedConfig wide = Parse({{"CUFLIGHT_TIMING_WINDOW_MS", "60000"},
                                   {"CUFLIGHT_TIMING_PERIOD_MS", "100000"}});
  ASSERT_EQ(wide.warnings.size(), 1u);
  EXPECT_THAT(wide.warnings[0], HasSubstr("CUFLIGHT_TIMING_WINDOW_MS=60000 is more than half"));
  EXPECT_THAT(wide.warnings[0], HasSubstr("using the defaults 100 and 10000"));
  EXPECT_EQ(wide.config.timing_window_ms, 100u);
  EXPECT_EQ(wide.config.timing_period_ms, 10000u);
  // A window of 20 s against the default 10 s period: the same.
  EXPECT_EQ(Parse({{"CUFLIGHT_TIMING_WINDOW_MS", "20000"}}).warnings.size(), 1u);
}

TEST(ConfigTest, RingSize) {
  EXPECT_EQ(Accepted("CUFLIGHT_RING_SIZE", "64").ring_slots, 64u);
  EXPECT_EQ(Accepted("CUFLIGHT_RING_SIZE", "1024").ring_slots, 1024u);
  EXPECT_EQ(Accepted("CUFLIGHT_RING_SIZE", " 65536 ").ring_slots, 65536u);
  EXPECT_EQ(Accepted("CUFLIGHT_RING_SIZE", "4194304").ring_slots, 4194304u);
  for (const char* bad : {"0", "32", "63", "4194305", "8388608", "99999999999999999999999", "abc",
                          "-64", "+64", "1e3", "0x100", "64k", "1024.0", "10 24"}) {
    ExpectRejected("CUFLIGHT_RING_SIZE", bad, "16384");
  }
}

TEST(ConfigTest, RingSizeNotAPowerOfTwoIsRoundedUpWithOneWarning) {
  const std::pair<const char*, uint32_t> cases[] = {
      {"65", 128}, {"100", 128}, {"10000", 16384}, {"4194303", 4194304}};
  for (const auto& [value, rounded] : cases) {
    const ParsedConfig parsed = Parse({{"CUFLIGHT_RING_SIZE", value}});
    EXPECT_EQ(parsed.config.ring_slots, rounded) << value;
    ASSERT_EQ(parsed.warnings.size(), 1u) << value;
    EXPECT_THAT(parsed.warnings[0], HasSubstr("CUFLIGHT_RING_SIZE"));
    EXPECT_THAT(parsed.warnings[0], HasSubstr(std::string("'") + value + "'"));
    EXPECT_THAT(parsed.warnings[0], HasSubstr("power of two"));
    EXPECT_THAT(parsed.warnings[0], HasSubstr(std::to_string(rounded)));
  }
}

TEST(ConfigTest, OnFull) {
  EXPECT_EQ(Accepted("CUFLIGHT_ON_FULL", "drop").on_full, OnFull::kDrop);
  EXPECT_EQ(Accepted("CUFLIGHT_ON_FULL", "DROP").on_full, OnFull::kDrop);
  EXPECT_EQ(Accepted("CUFLIGHT_ON_FULL", "block").on_full, OnFull::kBlock);
  EXPECT_EQ(Accepted("CUFLIGHT_ON_FULL", " Block ").on_full, OnFull::kBlock);
  for (const char* bad : {"wait", "1", "dropp", "blocking", "drop,block"}) {
    ExpectRejected("CUFLIGHT_ON_FULL", bad, "drop");
  }
}

TEST(ConfigTest, FlushMs) {
  EXPECT_EQ(Accepted("CUFLIGHT_FLUSH_MS", "1").flush_ms, 1u);
  EXPECT_EQ(Accepted("CUFLIGHT_FLUSH_MS", "250").flush_ms, 250u);
  EXPECT_EQ(Accepted("CUFLIGHT_FLUSH_MS", "10000").flush_ms, 10000u);
  for (const char* bad : {"0", "10001", "-5", "abc", "1.5", "100ms", "+100", "4294967396"}) {
    ExpectRejected("CUFLIGHT_FLUSH_MS", bad, "100");
  }
}

TEST(ConfigTest, StatsMs) {
  EXPECT_EQ(Accepted("CUFLIGHT_STATS_MS", "100").stats_ms, 100u);
  EXPECT_EQ(Accepted("CUFLIGHT_STATS_MS", "60000").stats_ms, 60000u);
  EXPECT_EQ(Accepted("CUFLIGHT_STATS_MS", "3600000").stats_ms, 3600000u);
  for (const char* bad : {"99", "0", "3600001", "5s", "x"}) {
    ExpectRejected("CUFLIGHT_STATS_MS", bad, "5000");
  }
}

TEST(ConfigTest, BufferBytes) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"65536", 65536},      {"64K", 65536},        {"64k", 65536},
      {"64KB", 65536},       {"64KiB", 65536},      {"64 kib", 65536},
      {"1048576B", 1048576}, {"8M", 8388608},       {"8m", 8388608},
      {"16MiB", 16777216},   {"100MB", 104857600},  {"1G", 1073741824},
      {"1gib", 1073741824},  {"1024M", 1073741824}, {"1073741824", 1073741824},
      {" 512K ", 524288}};
  for (const auto& [value, bytes] : cases) {
    EXPECT_EQ(Accepted("CUFLIGHT_BUFFER_BYTES", value).buffer_bytes, bytes) << value;
  }
  for (const char* bad : {"65535", "63K", "2G", "1025M", "1073741825", "abc", "1.5M", "M", "-1M",
                          "10T", "8MBB", "8 M B", "18446744073709551616", "17179869184G", "0"}) {
    ExpectRejected("CUFLIGHT_BUFFER_BYTES", bad, "8388608");
  }
}

TEST(ConfigTest, IncludeAndExclude) {
  EXPECT_EQ(Accepted("CUFLIGHT_INCLUDE", "gemm").include_regex, "gemm");
  EXPECT_EQ(Accepted("CUFLIGHT_INCLUDE", "^void (cutlass|cub)::").include_regex,
            "^void (cutlass|cub)::");
  EXPECT_EQ(Accepted("CUFLIGHT_EXCLUDE", "nccl|[Rr]educe").exclude_regex, "nccl|[Rr]educe");
  for (const char* variable : {"CUFLIGHT_INCLUDE", "CUFLIGHT_EXCLUDE"}) {
    for (const char* bad : {"(", "gemm)", "[a-", "a{2,1}", "*x", "(a)\\1"}) {
      SCOPED_TRACE(std::string(variable) + "=" + bad);
      const ParsedConfig parsed = Parse({{variable, bad}});
      EXPECT_EQ(parsed.config, Documented());  // the pattern is dropped: no filter
      ASSERT_EQ(parsed.warnings.size(), 1u);
      EXPECT_THAT(parsed.warnings[0], HasSubstr(variable));
      EXPECT_THAT(parsed.warnings[0], HasSubstr(std::string("'") + bad + "'"));
      EXPECT_THAT(parsed.warnings[0], HasSubstr("filter"));
    }
  }
}

TEST(ConfigTest, Sample) {
  EXPECT_EQ(Accepted("CUFLIGHT_SAMPLE", "1").sample_every, 1u);
  EXPECT_EQ(Accepted("CUFLIGHT_SAMPLE", "10").sample_every, 10u);
  EXPECT_EQ(Accepted("CUFLIGHT_SAMPLE", "1000000").sample_every, 1000000u);
  for (const char* bad : {"0", "1000001", "x", "-1", "1/10"}) {
    ExpectRejected("CUFLIGHT_SAMPLE", bad, "1");
  }
}

TEST(ConfigTest, LogLevel) {
  const std::pair<const char*, LogLevel> cases[] = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug},  {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},   {"error", LogLevel::kError},  {"off", LogLevel::kOff},
      {"DEBUG", LogLevel::kDebug}, {" Error ", LogLevel::kError}};
  for (const auto& [value, level] : cases) {
    EXPECT_EQ(Accepted("CUFLIGHT_LOG_LEVEL", value).log_level, level) << value;
  }
  for (const char* bad : {"verbose", "warning", "3", "err", "none"}) {
    ExpectRejected("CUFLIGHT_LOG_LEVEL", bad, "warn");
  }
}

TEST(ConfigTest, SpillDir) {
  EXPECT_EQ(Accepted("CUFLIGHT_SPILL_DIR", "/var/tmp/spill").spill_dir, "/var/tmp/spill");
  EXPECT_EQ(Accepted("CUFLIGHT_SPILL_DIR", " /a b/c/ ").spill_dir, "/a b/c/");
  EXPECT_EQ(Accepted("CUFLIGHT_SPILL_DIR", "").spill_dir, "");
  for (const char* bad : {"spill", "./spill", "~/spill", "../x"}) {
    ExpectRejected("CUFLIGHT_SPILL_DIR", bad, "(no spill)");
  }
}

TEST(ConfigTest, SpillRotateBytes) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"1M", 1048576},      {"1048576", 1048576},    {"256M", 268435456}, {"1G", 1073741824},
      {"64G", 68719476736}, {"65536M", 68719476736}, {" 2 MiB ", 2097152}};
  for (const auto& [value, bytes] : cases) {
    const Config c = Accepted("CUFLIGHT_SPILL_ROTATE_BYTES", value);
    EXPECT_EQ(c.spill_rotate_bytes, bytes) << value;
    // The maximum is raised silently to the rotation size when that is larger.
    EXPECT_EQ(c.spill_max_bytes, std::max<uint64_t>(bytes, 1073741824)) << value;
  }
  for (const char* bad : {"1048575", "1023K", "65G", "68719476737", "0", "x", "64T", "-1M"}) {
    ExpectRejected("CUFLIGHT_SPILL_ROTATE_BYTES", bad, "67108864");
  }
}

TEST(ConfigTest, SpillMaxBytes) {
  EXPECT_EQ(Accepted("CUFLIGHT_SPILL_MAX_BYTES", "64M").spill_max_bytes, 67108864u);
  EXPECT_EQ(Accepted("CUFLIGHT_SPILL_MAX_BYTES", "100G").spill_max_bytes, 107374182400u);
  EXPECT_EQ(Accepted("CUFLIGHT_SPILL_MAX_BYTES", "65536G").spill_max_bytes, 70368744177664u);
  for (const char* bad : {"1023K", "65537G", "x", "0", "1.5G"}) {
    ExpectRejected("CUFLIGHT_SPILL_MAX_BYTES", bad, "1073741824");
  }
  // Below the (default) rotation size of 64M.
  ExpectRejected("CUFLIGHT_SPILL_MAX_BYTES", "32M", "1073741824");
  ExpectRejected("CUFLIGHT_SPILL_MAX_BYTES", "1M", "1073741824");

  // Equal to the rotation size: accepted.
  const ParsedConfig equal =
      Parse({{"CUFLIGHT_SPILL_ROTATE_BYTES", "8M"}, {"CUFLIGHT_SPILL_MAX_BYTES", "8M"}});
  EXPECT_TRUE(equal.warnings.empty());
  EXPECT_EQ(equal.config.spill_rotate_bytes, 8388608u);
  EXPECT_EQ(equal.config.spill_max_bytes, 8388608u);

  // Below a rotation size larger than the default maximum: falls back to the rotation size.
  const ParsedConfig below =
      Parse({{"CUFLIGHT_SPILL_ROTATE_BYTES", "4G"}, {"CUFLIGHT_SPILL_MAX_BYTES", "2G"}});
  ASSERT_EQ(below.warnings.size(), 1u);
  EXPECT_THAT(below.warnings[0], HasSubstr("CUFLIGHT_SPILL_MAX_BYTES='2G'"));
  EXPECT_THAT(below.warnings[0], HasSubstr("4294967296"));
  EXPECT_EQ(below.config.spill_rotate_bytes, 4294967296u);
  EXPECT_EQ(below.config.spill_max_bytes, 4294967296u);

  // A bad rotation size falls back first; the maximum is checked against the fallback.
  const ParsedConfig both =
      Parse({{"CUFLIGHT_SPILL_ROTATE_BYTES", "1K"}, {"CUFLIGHT_SPILL_MAX_BYTES", "16M"}});
  ASSERT_EQ(both.warnings.size(), 2u);
  EXPECT_THAT(both.warnings[0], HasSubstr("CUFLIGHT_SPILL_ROTATE_BYTES"));
  EXPECT_THAT(both.warnings[1], HasSubstr("CUFLIGHT_SPILL_MAX_BYTES"));
  EXPECT_EQ(both.config.spill_rotate_bytes, 67108864u);
  EXPECT_EQ(both.config.spill_max_bytes, 1073741824u);
}

TEST(ConfigTest, OneWarningPerBadVariableAndGoodOnesStillApply) {
  const ParsedConfig parsed = Parse({{"CUFLIGHT_FLUSH_MS", "0"},
                                     {"CUFLIGHT_SAMPLE", "zero"},
                                     {"CUFLIGHT_LOG_LEVEL", "loud"},
                                     {"CUFLIGHT_STATS_MS", "1000"},
                                     {"CUFLIGHT_ON_FULL", "block"}});
  Config expected = Documented();
  expected.stats_ms = 1000;
  expected.on_full = OnFull::kBlock;
  EXPECT_EQ(parsed.config, expected);
  ASSERT_EQ(parsed.warnings.size(), 3u);
  std::string all;
  for (const std::string& w : parsed.warnings) all += w + "\n";
  EXPECT_THAT(all, HasSubstr("CUFLIGHT_FLUSH_MS"));
  EXPECT_THAT(all, HasSubstr("CUFLIGHT_SAMPLE"));
  EXPECT_THAT(all, HasSubstr("CUFLIGHT_LOG_LEVEL"));
}

TEST(ConfigTest, WarningQuotesControlCharactersSafelyAndCutsLongValues) {
  const ParsedConfig bell = Parse({{"CUFLIGHT_SAMPLE", "1\a2"}});
  ASSERT_EQ(bell.warnings.size(), 1u);
  EXPECT_THAT(bell.warnings[0], HasSubstr("'1?2'"));

  const ParsedConfig huge = Parse({{"CUFLIGHT_ON_FULL", std::string(10000, 'x')}});
  ASSERT_EQ(huge.warnings.size(), 1u);
  EXPECT_LT(huge.warnings[0].size(), 400u);
  EXPECT_THAT(huge.warnings[0], HasSubstr("..."));
}

TEST(ConfigTest, NeverThrowsAndFallsBackToDefaults) {
  const ParsedConfig thrown = ParseConfig(
      [](const char*) -> const char* { throw std::runtime_error("getenv failed"); }, kDefaultPath);
  EXPECT_EQ(thrown.config, Documented());
  EXPECT_EQ(thrown.warnings.size(), 1u);

  const ParsedConfig empty_function = ParseConfig({}, kDefaultPath);
  EXPECT_EQ(empty_function.config, Documented());
  EXPECT_EQ(empty_function.warnings.size(), 1u);
}

TEST(ConfigTest, ApiErrorsAndCrashHandler) {
  EXPECT_FALSE(Accepted("CUFLIGHT_CRASH_HANDLER", "0").crash_handler);
  EXPECT_EQ(Accepted("CUFLIGHT_API_ERROR_HISTORY", "0").api_error_history, 0u);
  EXPECT_EQ(Accepted("CUFLIGHT_API_ERROR_HISTORY", "64").api_error_history, 64u);
  ExpectRejected("CUFLIGHT_API_ERROR_HISTORY", "65", "8");
  ExpectRejected("CUFLIGHT_CRASH_HANDLER", "2", "true");
  EXPECT_FALSE(Accepted("CUFLIGHT_BLACKBOX", "0").blackbox);
  EXPECT_TRUE(Accepted("CUFLIGHT_BLACKBOX", "on").blackbox);
  ExpectRejected("CUFLIGHT_BLACKBOX", "sometimes", "true");
}

// CUFLIGHT_API_ERRORS: the four settings by name, and the booleans it took before it had them
// (true was the whole driver domain less the high-rate queries: now `default`; false: `off`).
TEST(ConfigTest, ApiErrorsSettings) {
  EXPECT_EQ(Accepted("CUFLIGHT_API_ERRORS", "off").api_errors, ApiErrors::kOff);
  EXPECT_EQ(Accepted("CUFLIGHT_API_ERRORS", "launches").api_errors, ApiErrors::kLaunches);
  EXPECT_EQ(Accepted("CUFLIGHT_API_ERRORS", " Default ").api_errors, ApiErrors::kDefault);
  EXPECT_EQ(Accepted("CUFLIGHT_API_ERRORS", "ALL").api_errors, ApiErrors::kAll);
  for (const char* yes : {"1", "true", "on", "yes"}) {
    EXPECT_EQ(Accepted("CUFLIGHT_API_ERRORS", yes).api_errors, ApiErrors::kDefault) << yes;
  }
  for (const char* no : {"0", "false", "no"}) {
    EXPECT_EQ(Accepted("CUFLIGHT_API_ERRORS", no).api_errors, ApiErrors::kOff) << no;
  }
  for (const char* bad : {"maybe", "2", "launch", "everything"}) {
    ExpectRejected("CUFLIGHT_API_ERRORS", bad, "default");
  }
  EXPECT_EQ(ApiErrorsName(ApiErrors::kLaunches), "launches");
}

// CUFLIGHT_COLLECTOR_UID: a numeric uid; 4294967295 is (uid_t)-1, "no uid" to the kernel.
TEST(ConfigTest, StallMs) {
  EXPECT_EQ(Accepted("CUFLIGHT_STALL_MS", "0").stall_ms, 0u);  // off
  EXPECT_EQ(Accepted("CUFLIGHT_STALL_MS", "100").stall_ms, 100u);
  EXPECT_EQ(Accepted("CUFLIGHT_STALL_MS", " 2500 ").stall_ms, 2500u);
  EXPECT_EQ(Accepted("CUFLIGHT_STALL_MS", "3600000").stall_ms, 3600000u);
  for (const char* bad : {"99", "1", "3600001", "-5", "10s", "1e4", "0x10"}) {
    ExpectRejected("CUFLIGHT_STALL_MS", bad, "10000");
  }
  // Without kernel timing stalls are still detected, from synchronising calls (docs/crash.md):
  // the threshold stays, with no warning.
  const ParsedConfig untimed = Parse({{"CUFLIGHT_TIMING", "0"}});
  EXPECT_EQ(untimed.config.stall_ms, kDefaultStallMs);
  EXPECT_TRUE(untimed.warnings.empty());
  const ParsedConfig asked = Parse({{"CUFLIGHT_TIMING", "off"}, {"CUFLIGHT_STALL_MS", "5000"}});
  EXPECT_EQ(asked.config.stall_ms, 5000u);
  EXPECT_TRUE(asked.warnings.empty());
  const ParsedConfig off_anyway = Parse({{"CUFLIGHT_TIMING", "0"}, {"CUFLIGHT_STALL_MS", "0"}});
  EXPECT_EQ(off_anyway.config.stall_ms, 0u);
  EXPECT_TRUE(off_anyway.warnings.empty());
  // Sampled timing keeps it (launches in timing windows are watched).
  EXPECT_EQ(Parse({{"CUFLIGHT_TIMING", "sampled"}}).config.stall_ms, 10000u);
}

TEST(ConfigTest, CollectorUid) {
  EXPECT_EQ(Parse({}).config.collector_uid, -1);
  EXPECT_EQ(Accepted("CUFLIGHT_COLLECTOR_UID", "0").collector_uid, 0);
  EXPECT_EQ(Accepted("CUFLIGHT_COLLECTOR_UID", " 999 ").collector_uid, 999);
  EXPECT_EQ(Accepted("CUFLIGHT_COLLECTOR_UID", "4294967294").collector_uid, 4294967294);
  for (const char* bad : {"4294967295", "-1", "cuflight", "12x"}) {
    const ParsedConfig parsed = Parse({{"CUFLIGHT_COLLECTOR_UID", bad}});
    EXPECT_EQ(parsed.config.collector_uid, -1) << bad;
    ASSERT_EQ(parsed.warnings.size(), 1u) << bad;
    EXPECT_NE(parsed.warnings[0].find("CUFLIGHT_COLLECTOR_UID='"), std::string::npos)
        << parsed.warnings[0];
    EXPECT_NE(parsed.warnings[0].find("is not a numeric uid in [0, 4294967294]"), std::string::npos)
        << parsed.warnings[0];
  }
}

TEST(ConfigTest, DescribeKeysAndDefaultValues) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"collector", kDefaultPath},
      {"collector_uid", ""},
      {"timing", "all"},
      {"timing_window_ms", "100"},
      {"timing_period_ms", "10000"},
      {"timing_new_configs", "true"},
      {"ring_size", "16384"},
      {"on_full", "drop"},
      {"flush_ms", "100"},
      {"stats_ms", "5000"},
      {"buffer_bytes", "8388608"},
      {"include", ""},
      {"exclude", ""},
      {"sample", "1"},
      {"log_level", "warn"},
      {"spill_dir", ""},
      {"spill_rotate_bytes", "67108864"},
      {"spill_max_bytes", "1073741824"},
      {"api_errors", "default"},
      {"api_error_history", "8"},
      {"crash_handler", "true"},
      {"stall_ms", "10000"},
      {"blackbox", "true"},
      {"attribution_env", ""},
      {"yield", "off"},
      {"yield_ms", "60000"},
      {"intern_configs", "true"}};
  EXPECT_EQ(Describe(Documented()), expected);
  ASSERT_EQ(expected.size(), kConfigVariables.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string key = "CUFLIGHT_";
    for (char c : expected[i].first) key += static_cast<char>(std::toupper(c));
    EXPECT_EQ(key, kConfigVariables[i]);
  }
}

// Each Describe value, given back as the variable's value, yields the same configuration.
void ExpectRoundTrip(const Config& config) {
  std::map<std::string, std::string> env;
  for (const auto& [key, value] : Describe(config)) {
    std::string name = "CUFLIGHT_";
    for (char c : key) name += static_cast<char>(std::toupper(c));
    env[name] = value;
  }
  ASSERT_EQ(env.size(), kConfigVariables.size());
  const ParsedConfig parsed = Parse(env);
  EXPECT_TRUE(parsed.warnings.empty()) << parsed.warnings[0];
  EXPECT_EQ(parsed.config, config);
}

TEST(ConfigTest, DescribeRoundTrips) {
  ExpectRoundTrip(Documented());

  Config c;
  c.collector_path = "/tmp/cuflight-test/other.sock";
  c.timing = TimingPolicy::kOff;
  c.timing_window_ms = 250;
  c.timing_period_ms = 60000;
  c.timing_new_configs = false;
  c.stall_ms = 0;
  c.ring_slots = 1 << 20;
  c.on_full = OnFull::kBlock;
  c.flush_ms = 7;
  c.stats_ms = 3600000;
  c.buffer_bytes = 3 * 1024 * 1024 + 17;
  c.include_regex = "^void (gemm|conv)<";
  c.exclude_regex = "fp16";
  c.sample_every = 1000;
  c.log_level = LogLevel::kTrace;
  c.spill_dir = "/var/tmp/cuflight spill";
  c.spill_rotate_bytes = 3 * 1024 * 1024 + 5;
  c.spill_max_bytes = 5 * 1024 * 1024 + 7;
  c.collector_uid = 0;
  ExpectRoundTrip(c);
  c.collector_uid = 4294967294;
  ExpectRoundTrip(c);
  c.attribution_env = {"MY_TEAM", "EXPERIMENT_ID"};
  ExpectRoundTrip(c);
  c.timing = TimingPolicy::kSampled;
  c.stall_ms = 2000;
  ExpectRoundTrip(c);
  c.stall_ms = 0;
  c.yield = "start";
  c.yield_ms = 0;
  ExpectRoundTrip(c);
  c.yield = "/run/user/1000/cuflight yield";
  c.yield_ms = 86400000;
  ExpectRoundTrip(c);
  c.intern_configs = !Documented().intern_configs;
  ExpectRoundTrip(c);

  for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kError, LogLevel::kOff}) {
    c.log_level = level;
    ExpectRoundTrip(c);
  }
}

// CUFLIGHT_INTERN_CONFIGS (schema/env/README.md): a boolean, spelled as the other switches
// (CUFLIGHT_TIMING_NEW_CONFIGS, CUFLIGHT_BLACKBOX).
TEST(ConfigTest, InternConfigs) {
  for (const char* yes : {"1", "true", "On", "YES", " 1 "}) {
    EXPECT_TRUE(Accepted("CUFLIGHT_INTERN_CONFIGS", yes).intern_configs) << yes;
  }
  for (const char* no : {"0", "false", "OFF", "no", "\tno"}) {
    EXPECT_FALSE(Accepted("CUFLIGHT_INTERN_CONFIGS", no).intern_configs) << no;
  }
  for (const char* bad : {"2", "interned", "whole", "y"}) {
    ExpectRejected("CUFLIGHT_INTERN_CONFIGS", bad, "true");
  }
}

// CUFLIGHT_YIELD (schema/env/README.md): off, start, or an absolute path (a trigger file);
// CUFLIGHT_YIELD_MS in [0, 86400000] (a day).
TEST(ConfigTest, Yield) {
  EXPECT_EQ(Accepted("CUFLIGHT_YIELD", "start").yield, "start");
  EXPECT_EQ(Accepted("CUFLIGHT_YIELD", "Start").yield, "start");
  EXPECT_EQ(Accepted("CUFLIGHT_YIELD", " /run/user/1000/profiling ").yield,
            "/run/user/1000/profiling");
  for (const char* off : {"off", "OFF", "0", "false", "no"}) {
    EXPECT_EQ(Accepted("CUFLIGHT_YIELD", off).yield, "") << off;
  }
  for (const char* bad : {"stop", "yes", "1", "relative/file", "start:10"}) {
    ExpectRejected("CUFLIGHT_YIELD", bad, "off");
  }
  EXPECT_EQ(Accepted("CUFLIGHT_YIELD_MS", "0").yield_ms, 0u);
  EXPECT_EQ(Accepted("CUFLIGHT_YIELD_MS", "86400000").yield_ms, 86400000u);
  for (const char* bad : {"86400001", "-1", "1s", "abc"}) {
    ExpectRejected("CUFLIGHT_YIELD_MS", bad, "60000");
  }
}

TEST(ConfigTest, AttributionEnvAddsNamesInOrder) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Accepted("CUFLIGHT_ATTRIBUTION_ENV", "MY_TEAM").attribution_env, V{"MY_TEAM"});
  // Commas and blanks separate; repeats and the default names (RANK) are left out.
  EXPECT_EQ(Accepted("CUFLIGHT_ATTRIBUTION_ENV", " B_2, A,,RANK  B_2\tC ").attribution_env,
            (V{"B_2", "A", "C"}));
  // 16 new names are the most (cuflight/env/attribution.h); 64 bytes a name.
  std::string sixteen;
  for (int i = 0; i < 16; ++i) sixteen += "N" + std::to_string(i) + ",";
  EXPECT_EQ(Accepted("CUFLIGHT_ATTRIBUTION_ENV", sixteen).attribution_env.size(), 16u);
  EXPECT_EQ(Accepted("CUFLIGHT_ATTRIBUTION_ENV", std::string(64, 'X')).attribution_env,
            V{std::string(64, 'X')});
}

TEST(ConfigTest, AttributionEnvRejectsBadNamesWhole) {
  // Lower case would meet the derived fields' names; '=' or '.' are no variable names.
  ExpectRejected("CUFLIGHT_ATTRIBUTION_ENV", "GOOD,job", "(no names added)");
  ExpectRejected("CUFLIGHT_ATTRIBUTION_ENV", "A=B", "(no names added)");
  ExpectRejected("CUFLIGHT_ATTRIBUTION_ENV", "1ST", "(no names added)");
  ExpectRejected("CUFLIGHT_ATTRIBUTION_ENV", std::string(65, 'X'), "(no names added)");
  std::string seventeen;
  for (int i = 0; i < 17; ++i) seventeen += "N" + std::to_string(i) + " ";
  ExpectRejected("CUFLIGHT_ATTRIBUTION_ENV", seventeen.substr(0, seventeen.size() - 1),
                 "(no names added)");
}

TEST(ConfigTest, NamesOfEnums) {
  EXPECT_EQ(LogLevelName(LogLevel::kTrace), "trace");
  EXPECT_EQ(LogLevelName(LogLevel::kOff), "off");
  EXPECT_EQ(OnFullName(OnFull::kDrop), "drop");
  EXPECT_EQ(OnFullName(OnFull::kBlock), "block");
}

}  // namespace
}  // namespace cuflight::env
