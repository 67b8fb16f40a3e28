// The cuflight_cli library in process: RunCli() with a fake driver behind the DeviceQuery seam,
// and the small parsing and table helpers.

#include <unistd.h>

#include <algorithm>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "app.h"
#include "arg_parse.h"
#include "cuflight/occupancy/device_presets.h"
#include "cuflight/report/text_table.h"
#include "device_query.h"
#include "usage_error.h"
#include "yield_command.h"

namespace cuflight::cli {
namespace {

using ::testing::HasSubstr;

// A machine with one H100 SXM, as the driver would describe it.
class FakeDeviceQuery : public DeviceQuery {
 public:
  bool Query(int ordinal, QueriedDevice* device, std::string* error) override {
    ++calls;
    if (ordinal != 0) {
      *error = "no CUDA device 1 (this machine has 1 device)";
      return false;
    }
    device->name = "Fake H100";
    device->limits = occupancy::FindDevicePreset("h100-sxm")->limits;
    return true;
  }
  int calls = 0;
};

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

CliRun RunInProcess(const std::vector<const char*>& args, DeviceQuery& query) {
  std::vector<const char*> argv = {"cuflight"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::ostringstream out;
  std::ostringstream err;
  const int code = RunCli(static_cast<int>(argv.size()), argv.data(), out, err, query);
  return {code, out.str(), err.str()};
}

TEST(CliInProcess, DeviceCurrentUsesTheDriverSeam) {
  FakeDeviceQuery fake;
  // H100: 32 regs/thread -> 1024 regs/warp -> 16 warps per sub-partition -> 64 warps; 256
  // threads = 8 warps -> 8 blocks; warps 64 / 8 = 8: 100%.
  const CliRun r = RunInProcess(
      {"occupancy", "--device", "current", "--regs", "32", "--threads", "256", "--json"}, fake);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  EXPECT_EQ(fake.calls, 1);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["device"]["key"], "current:0");
  EXPECT_EQ(j["device"]["name"], "Fake H100");
  EXPECT_EQ(j["device"]["cc_major"], 9);
  EXPECT_EQ(j["max_active_blocks"], 8);
}

TEST(CliInProcess, DeviceCurrentFailureIsOneLine) {
  FakeDeviceQuery fake;
  const CliRun r = RunInProcess(
      {"occupancy", "--device", "current:1", "--regs", "32", "--threads", "256"}, fake);
  EXPECT_EQ(r.exit_code, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "cuflight occupancy: --device current:1: no CUDA device 1 (this machine has "
            "1 device)\n");
}

TEST(CliInProcess, PresetsNeverQueryTheDriver) {
  FakeDeviceQuery fake;
  const CliRun r =
      RunInProcess({"occupancy", "--device", "a100", "--regs", "32", "--threads", "256"}, fake);
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_EQ(fake.calls, 0);
}

TEST(CliInProcess, OverridesApplyOnTopOfTheQueriedDevice) {
  FakeDeviceQuery fake;
  const CliRun r = RunInProcess({"occupancy", "--device", "current", "--regs", "32", "--threads",
                                 "256", "--sm-count", "100", "--grid", "800", "--json"},
                                fake);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["device"]["sm_count"], 100);
  EXPECT_DOUBLE_EQ(j["waves"].get<double>(), 1.0);  // 800 / (100 SMs x 8 blocks)
}

// The driver's view of an sm_90 device (cc override) gets cluster limits derived from the cc.
TEST(CliInProcess, ComputeCapabilityOverrideSetsClusterLimits) {
  FakeDeviceQuery fake;
  const CliRun r =
      RunInProcess({"occupancy", "--device", "a100", "--cc", "9.0", "--regs", "32", "--threads",
                    "256", "--cluster", "16", "--non-portable-cluster", "--json"},
                   fake);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["device"]["max_cluster_size"], 8);
  EXPECT_EQ(j["device"]["max_cluster_size_non_portable"], 16);
}

TEST(SetClusterLimits, FollowsComputeCapability) {
  struct Case {
    int major, minor, portable, non_portable;
  };
  for (const Case c : {Case{8, 0, 0, 0}, Case{8, 9, 0, 0}, Case{9, 0, 8, 16}, Case{10, 0, 8, 16},
                       Case{10, 3, 8, 8}, Case{12, 0, 8, 8}}) {
    occupancy::DeviceLimits l;
    l.cc_major = c.major;
    l.cc_minor = c.minor;
    SetClusterLimits(&l);
    EXPECT_EQ(l.max_cluster_size, c.portable) << c.major << "." << c.minor;
    EXPECT_EQ(l.max_cluster_size_non_portable, c.non_portable) << c.major << "." << c.minor;
  }
}

TEST(ArgParse, Integers) {
  const Allowed regs{0, 255, "registers per thread"};
  EXPECT_EQ(ParseInteger("--regs", "40", regs), 40);
  EXPECT_EQ(ParseInteger("--regs", " +7 ", regs), 7);
  try {
    ParseInteger("--regs", "300", regs);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--regs 300 is out of range: allowed 0..255 registers per thread");
  }
  try {
    ParseInteger("--regs", "4O", regs);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--regs 4O is not an integer: allowed 0..255 registers per thread");
  }
  EXPECT_THROW(ParseInteger("--regs", "", regs), UsageError);
  EXPECT_THROW(ParseInteger("--regs", "99999999999999999999999", regs), UsageError);
}

TEST(ArgParse, Bytes) {
  const Allowed smem{0, 1 << 20, "bytes"};
  EXPECT_EQ(ParseBytes("--dyn-smem", "48K", smem), 48 * 1024);
  EXPECT_EQ(ParseBytes("--dyn-smem", "48KiB", smem), 48 * 1024);
  EXPECT_EQ(ParseBytes("--dyn-smem", "1000", smem), 1000);
  EXPECT_THROW(ParseBytes("--dyn-smem", "K", smem), UsageError);
  EXPECT_THROW(ParseBytes("--dyn-smem", "2048K", smem), UsageError);
  EXPECT_THROW(ParseBytes("--dyn-smem", "9223372036854775807K", smem), UsageError);
}

TEST(ArgParse, Triples) {
  EXPECT_EQ(ParseTriple("--block", "32", ""), (std::array<int64_t, 3>{32, 1, 1}));
  EXPECT_EQ(ParseTriple("--block", "16,8", ""), (std::array<int64_t, 3>{16, 8, 1}));
  EXPECT_EQ(ParseTriple("--block", "4,4,2", ""), (std::array<int64_t, 3>{4, 4, 2}));
  EXPECT_THROW(ParseTriple("--block", "1,2,3,4", ""), UsageError);
  EXPECT_THROW(ParseTriple("--block", "1,,3", ""), UsageError);
  EXPECT_THROW(ParseTriple("--block", "", ""), UsageError);
}

TEST(ArgParse, ComputeCapability) {
  const ComputeCapability cc = ParseComputeCapability("--cc", "8.6");
  EXPECT_EQ(cc.major, 8);
  EXPECT_EQ(cc.minor, 6);
  EXPECT_THROW(ParseComputeCapability("--cc", "8"), UsageError);
  EXPECT_THROW(ParseComputeCapability("--cc", "8.10"), UsageError);
  EXPECT_THROW(ParseComputeCapability("--cc", "x.0"), UsageError);
}

// cuflight occupancy's tables (report::TextTable, shared with the report).
TEST(TextTable, PadsColumnsAndTrimsTrailingSpace) {
  using report::TextTable;
  TextTable table({{"name"}, {"n", TextTable::Align::kRight}, {"note"}});
  table.AddRow({"registers", "6", "<- limits"});
  table.AddRow({"warps", "12"});
  EXPECT_EQ(table.Render(2),
            "  name        n  note\n"
            "  registers   6  <- limits\n"
            "  warps      12\n");
}


// `cuflight yield` (docs/profilers.md): bad flags are one line and exit 2; no collector is one
// line and exit 1; nothing is sent then.
TEST(CliInProcess, YieldBadFlagsAreOneLineAndExit2) {
  FakeDeviceQuery fake;
  const std::string self = std::to_string(getpid());
  struct Case {
    std::vector<const char*> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"yield"}, "give exactly one of --pid PID and --job JOB"},
      {{"yield", "--pid", self.c_str(), "--job", "7"}, "give exactly one of --pid PID and --job JOB"},
      {{"yield", "--pid", "0"}, "--pid 0 is out of range"},
      {{"yield", "--pid", "12x"}, "--pid 12x is not an integer"},
      {{"yield", "--job", "7", "--for", "ten"}, "--for 'ten' is not a duration"},
      {{"yield", "--job", "7", "--for", "10d"}, "--for '10d' is not a duration"},
      {{"yield", "--job", "7", "--for", "0"}, "--for 0 is out of range"},
      {{"yield", "--job", "7", "--for", "25h"}, "--for 25h is out of range"},
      {{"yield", "--job", "7", "--for", "1m", "--resume"}, "--for and --resume do not go together"},
  };
  for (const Case& c : cases) {
    const CliRun r = RunInProcess(c.args, fake);
    EXPECT_EQ(r.exit_code, kExitUsage) << c.says;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("cuflight yield: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  // A pid that names no process (pid_max is at most 2^22 on Linux: 4194304 never exists).
  const CliRun r = RunInProcess({"yield", "--pid", "2147483647"}, fake);
  EXPECT_EQ(r.exit_code, kExitUsage);
  EXPECT_NE(r.err.find("--pid 2147483647: no such process"), std::string::npos) << r.err;
}

TEST(CliInProcess, YieldWithoutACollectorIsOneLineAndExit1) {
  FakeDeviceQuery fake;
  const std::string self = std::to_string(getpid());
  const CliRun r = RunInProcess(
      {"yield", "--pid", self.c_str(), "--socket", "/nonexistent/cuflight/collector.sock"}, fake);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_EQ(r.err,
            "cuflight yield: cannot reach the collector at /nonexistent/cuflight/collector.sock: "
            "No such file or directory (is it running? give its socket with --socket)\n");
}

TEST(CliInProcess, YieldDurations) {
  EXPECT_EQ(ParseYieldDuration("--for", "500ms"), 500u);
  EXPECT_EQ(ParseYieldDuration("--for", "90"), 90'000u);
  EXPECT_EQ(ParseYieldDuration("--for", "90s"), 90'000u);
  EXPECT_EQ(ParseYieldDuration("--for", "10m"), 600'000u);
  EXPECT_EQ(ParseYieldDuration("--for", "24h"), 86'400'000u);  // schema::kMaxYieldMs, a day
  EXPECT_THROW(ParseYieldDuration("--for", "86400001ms"), UsageError);
  EXPECT_THROW(ParseYieldDuration("--for", "-1s"), UsageError);
  EXPECT_THROW(ParseYieldDuration("--for", ""), UsageError);
}

}  // namespace
}  // namespace cuflight::cli
