// Drives the built `cuflight` binary (CUFLIGHT_CLI_PATH) as a user would and checks its output,
// exit status and stderr. Expected numbers are worked out by hand below from the A100/H100
// limits (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability") and the
// allocation rules of cuda_occupancy.h, not copied from the program.
//
// A100 (cc 8.0): 65536 regs/SM in 4 sub-partitions of 16384; registers go to warps in units of
// 256; 2048 threads = 64 warps/SM; 32 blocks/SM; 164 KiB = 167936 B shared memory per SM (the
// default carveout is the largest step, 164 KiB); 163 KiB = 166912 B opt-in per block;
// 1 KiB reserved per block; shared memory allocated in 128 B units; 108 SMs.

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.h"

namespace cuflight {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessResult;
using testing::RunProcess;

ProcessResult Cuflight(const std::vector<std::string>& args) {
  return RunProcess(CUFLIGHT_CLI_PATH, args);
}

ProcessResult Occupancy(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"occupancy"};
  all.insert(all.end(), args.begin(), args.end());
  return Cuflight(all);
}

// One row of the resource table: "<name>  <used>  <available>  <blocks/SM>  <occ>[  <- limits]".
struct Row {
  std::string blocks;
  std::string occupancy;
  bool limits = false;
};

Row FindRow(const std::string& out, const std::string& resource) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(resource + " ", 0) != 0) continue;
    Row row;
    constexpr std::string_view kMarker = "<- limits";
    if (line.ends_with(kMarker)) {
      row.limits = true;
      line.resize(line.size() - kMarker.size());
    }
    std::istringstream words(line);
    std::vector<std::string> tokens;
    for (std::string w; words >> w;) tokens.push_back(w);
    if (tokens.size() >= 3) {
      row.blocks = tokens[tokens.size() - 2];
      row.occupancy = tokens.back();
    }
    return row;
  }
  ADD_FAILURE() << "no row for " << resource << " in:\n" << out;
  return {};
}

// The value after a totals label such as "max active blocks/SM".
std::string Total(const std::string& out, const std::string& label) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(label + " ", 0) != 0) continue;
    const size_t start = line.find_first_not_of(' ', label.size());
    return start == std::string::npos ? "" : line.substr(start);
  }
  ADD_FAILURE() << "no line " << label << " in:\n" << out;
  return "";
}

void ExpectSuccess(const ProcessResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

// Exit 2, exactly one non-empty line on stderr that starts with "cuflight" and names `flag`.
void ExpectUsageError(const ProcessResult& r, const std::string& flag) {
  EXPECT_EQ(r.exit_code, 2) << "stdout:\n" << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line:\n" << r.err;
  EXPECT_THAT(r.err, AllOf(HasSubstr("cuflight"), HasSubstr(flag)));
  EXPECT_EQ(r.out, "");
}

// 40 regs/thread, 256 threads (8 warps):
//   registers: 40 x 32 = 1280 regs/warp (already a multiple of 256); 16384 / 1280 = 12 warps per
//              sub-partition -> 48 warps/SM -> 48 / 8 = 6 blocks; 1280 x 8 = 10240 regs/block
//   warps:     64 / 8 = 8 blocks       blocks: 32
//   shared:    0 + 1024 reserved = 1024 B/block -> 167936 / 1024 = 164 blocks
//   -> 6 blocks/SM, 48 of 64 warps, occupancy 75%, registers bind.
//   one more block (7 = 56 warps, 14 per sub-partition): 16384 / 14 = 1170 regs/warp, down to
//   the 256 unit 1024 = 32 regs/thread. Shared memory is not binding: its what-if is impossible.
//   best block size: at most 48 warps fit (12 per sub-partition), i.e. 1536 threads; scanning
//   down from 1024, the first size reaching 1536 is 768 (24 warps, 2 blocks): 75%.
const std::vector<std::string> kRegisterBound = {"--device", "a100",      "--regs",
                                                 "40",       "--threads", "256"};

TEST(OccupancyCli, RegisterBoundTable) {
  const ProcessResult r = Occupancy(kRegisterBound);
  ExpectSuccess(r);
  const Row regs = FindRow(r.out, "registers");
  EXPECT_EQ(regs.blocks, "6");
  EXPECT_EQ(regs.occupancy, "75.0%");
  EXPECT_TRUE(regs.limits);
  EXPECT_THAT(r.out, HasSubstr("10240 regs"));
  EXPECT_EQ(FindRow(r.out, "warps").blocks, "8");
  EXPECT_FALSE(FindRow(r.out, "warps").limits);
  EXPECT_EQ(FindRow(r.out, "blocks").blocks, "32");
  EXPECT_EQ(FindRow(r.out, "shared_mem").blocks, "164");
  EXPECT_EQ(FindRow(r.out, "barriers").blocks, "unlimited");  // barriers count from cc 9.0
  EXPECT_EQ(Total(r.out, "max active blocks/SM"), "6");
  EXPECT_EQ(Total(r.out, "active warps/SM"), "48 of 64");
  EXPECT_EQ(Total(r.out, "occupancy"), "75.0%");
  EXPECT_EQ(Total(r.out, "limiting resource"), "registers");
  EXPECT_THAT(r.out, HasSubstr("registers: <= 32 regs/thread would fit 7 blocks/SM"));
  EXPECT_THAT(
      r.out,
      HasSubstr(
          "shared memory: less shared memory cannot fit 7 blocks/SM; registers would still limit"));
  // The engine's best block size, 768 (the largest reaching 1536 threads), gives 75% too: no
  // gain, so none is offered.
  EXPECT_THAT(r.out, HasSubstr("best block size: none gives more than this launch's 75.0%"));
  EXPECT_THAT(r.out, Not(HasSubstr("768 threads")));
  EXPECT_THAT(r.out, Not(HasSubstr("waves")));
  EXPECT_THAT(r.out, Not(HasSubstr("cluster")));
}

TEST(OccupancyCli, TableFitsIn100Columns) {
  for (const auto& args : {kRegisterBound, std::vector<std::string>{"--list-devices"}}) {
    const ProcessResult r = Occupancy(args);
    ExpectSuccess(r);
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_LE(line.size(), 100u) << line;
      EXPECT_FALSE(line.ends_with(" ")) << line;
    }
  }
}

// Same launch over a grid of 1000 blocks: a wave is 108 SMs x 6 = 648 blocks, so
// 1000 / 648 = 1.54 waves, and the last wave holds 1000 - 648 = 352 of 648 slots = 54.3%.
TEST(OccupancyCli, WavesWithGrid) {
  std::vector<std::string> args = kRegisterBound;
  args.insert(args.end(), {"--grid", "1000"});
  const ProcessResult r = Occupancy(args);
  ExpectSuccess(r);
  EXPECT_THAT(Total(r.out, "waves"), HasSubstr("1.54"));
  EXPECT_THAT(Total(r.out, "waves"), HasSubstr("648 blocks per wave"));
  EXPECT_THAT(Total(r.out, "tail utilization"), HasSubstr("54.3%"));
}

// 32 regs/thread, 256 threads, 32 KiB dynamic shared memory:
//   registers: 32 x 32 = 1024 regs/warp; 16384 / 1024 = 16 warps per sub-partition -> 64 warps
//              -> 8 blocks          warps: 8         blocks: 32
//   shared:    32768 + 1024 reserved = 33792 B (264 x 128) -> 167936 / 33792 = 4.97 -> 4 blocks
//   -> 4 blocks, 32 of 64 warps, 50%, shared memory binds.
//   one more block: 167936 / 5 = 33587 B, down to 128 B units 33536, less 1 KiB reserved
//   = 32512 B of static + dynamic shared memory. Registers are not binding: no what-if.
//   best block size: 100% needs 64 warps from at most 4 blocks (shared memory allows 4 at every
//   size, the dynamic 32 KiB staying per block), so 16 warps = 512 threads a block: registers
//   then allow 64 warps / 16 = 4 blocks, warps 4. 480 threads (15 warps) reach only 60 warps.
//   512 is the smallest size at 100% (cudaOccMaxPotentialBlockSize's search would name 1024).
TEST(OccupancyCli, SharedMemoryBound) {
  const ProcessResult r =
      Occupancy({"--device", "a100", "--regs", "32", "--threads", "256", "--dyn-smem", "32768"});
  ExpectSuccess(r);
  const Row smem = FindRow(r.out, "shared_mem");
  EXPECT_EQ(smem.blocks, "4");
  EXPECT_EQ(smem.occupancy, "50.0%");
  EXPECT_TRUE(smem.limits);
  EXPECT_THAT(r.out, HasSubstr("33792 B"));
  EXPECT_EQ(FindRow(r.out, "registers").blocks, "8");
  EXPECT_FALSE(FindRow(r.out, "registers").limits);
  EXPECT_EQ(Total(r.out, "max active blocks/SM"), "4");
  EXPECT_EQ(Total(r.out, "occupancy"), "50.0%");
  EXPECT_EQ(Total(r.out, "limiting resource"), "shared_mem");
  EXPECT_THAT(r.out, HasSubstr("shared memory: <= 32512 B/block (static + dynamic) would fit 5"));
  EXPECT_THAT(
      r.out,
      HasSubstr("registers: fewer registers cannot fit 5 blocks/SM; shared_mem would still limit"));
  EXPECT_THAT(r.out, HasSubstr("best block size: 512 threads (occupancy 100.0%; the smallest "
                               "size reaching it)"));
}

// 16 regs/thread, 32 threads (1 warp):
//   registers: 16 x 32 = 512 regs/warp; 16384 / 512 = 32 warps per sub-partition -> 128 blocks
//   warps: 64 / 1 = 64 blocks     shared: 167936 / 1024 = 164 blocks     blocks: 32
//   -> 32 blocks, 32 of 64 warps = 50%, block slots bind. No what-if can beat the slot count.
TEST(OccupancyCli, BlockSlotBound) {
  const ProcessResult r = Occupancy({"--device", "a100", "--regs", "16", "--threads", "32"});
  ExpectSuccess(r);
  const Row blocks = FindRow(r.out, "blocks");
  EXPECT_EQ(blocks.blocks, "32");
  EXPECT_EQ(blocks.occupancy, "50.0%");
  EXPECT_TRUE(blocks.limits);
  EXPECT_EQ(FindRow(r.out, "registers").blocks, "128");
  EXPECT_EQ(FindRow(r.out, "warps").blocks, "64");
  EXPECT_EQ(Total(r.out, "active warps/SM"), "32 of 64");
  EXPECT_EQ(Total(r.out, "occupancy"), "50.0%");
  EXPECT_EQ(Total(r.out, "limiting resource"), "blocks");
  EXPECT_THAT(
      r.out,
      HasSubstr("registers: fewer registers cannot fit 33 blocks/SM; blocks would still limit"));
}

// H100 (cc 9.0, same per-SM numbers as A100 except 228 KiB shared memory), 32 regs, 64 threads
// (2 warps): registers 64 warps / 2 = 32 blocks, warps 64 / 2 = 32, slots 32, and barriers
// (counted from cc 9.0: 2 per block slot = 64, one per block) 64. Three resources tie at 32;
// registers is named because it comes first; occupancy 32 x 2 / 64 = 100%.
TEST(OccupancyCli, TiesAndBarriersOnHopper) {
  const ProcessResult r = Occupancy({"--device", "h100", "--regs", "32", "--threads", "64"});
  ExpectSuccess(r);
  EXPECT_TRUE(FindRow(r.out, "registers").limits);
  EXPECT_TRUE(FindRow(r.out, "warps").limits);
  EXPECT_TRUE(FindRow(r.out, "blocks").limits);
  EXPECT_EQ(FindRow(r.out, "barriers").blocks, "64");
  EXPECT_FALSE(FindRow(r.out, "barriers").limits);
  EXPECT_EQ(Total(r.out, "occupancy"), "100.0%");
  EXPECT_EQ(Total(r.out, "limiting resource"), "registers (tied with warps and blocks)");
}

// The hand cases again as JSON: every kernel-event occupancy name, with its type and value.
TEST(OccupancyCli, JsonHasEveryKernelEventField) {
  const ProcessResult r = Occupancy(
      {"--device", "a100", "--regs", "40", "--threads", "256", "--grid", "1000", "--json"});
  ExpectSuccess(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_object());

  for (const char* name :
       {"max_active_blocks", "active_warps", "max_warps", "allocated_regs_per_block",
        "allocated_smem_per_block", "best_block_size", "regs_for_next_block"}) {
    ASSERT_TRUE(j.contains(name)) << name;
    EXPECT_TRUE(j[name].is_number_integer()) << name;
  }
  for (const char* name : {"occupancy", "reg_occupancy", "smem_occupancy", "warp_occupancy",
                           "block_occupancy", "barrier_occupancy", "waves", "tail_utilization"}) {
    ASSERT_TRUE(j.contains(name)) << name;
    EXPECT_TRUE(j[name].is_number()) << name;
  }
  EXPECT_FALSE(j.contains("cluster_occupancy"));  // not a cluster launch
  EXPECT_FALSE(j.contains("has_cluster"));

  EXPECT_EQ(j["max_active_blocks"], 6);
  EXPECT_EQ(j["active_warps"], 48);
  EXPECT_EQ(j["max_warps"], 64);
  EXPECT_DOUBLE_EQ(j["occupancy"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["reg_occupancy"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["smem_occupancy"].get<double>(), 1.0);     // 164 blocks x 8 warps >= 64
  EXPECT_DOUBLE_EQ(j["warp_occupancy"].get<double>(), 1.0);     // 8 x 8 = 64
  EXPECT_DOUBLE_EQ(j["block_occupancy"].get<double>(), 1.0);    // 32 x 8 >= 64
  EXPECT_DOUBLE_EQ(j["barrier_occupancy"].get<double>(), 1.0);  // no barrier limit on cc 8.0
  EXPECT_EQ(j["limiting_resource"], "registers");
  EXPECT_EQ(j["limiting_resources"], nlohmann::json::array({"registers"}));
  EXPECT_EQ(j["allocated_regs_per_block"], 10240);
  EXPECT_EQ(j["allocated_smem_per_block"], 1024);
  EXPECT_NEAR(j["waves"].get<double>(), 1000.0 / 648.0, 1e-12);
  EXPECT_NEAR(j["tail_utilization"].get<double>(), 352.0 / 648.0, 1e-12);
  EXPECT_EQ(j["regs_for_next_block"], 32);
  EXPECT_TRUE(j["smem_for_next_block"].is_null());
  EXPECT_EQ(j["best_block_size"], 768);

  EXPECT_EQ(j["device"]["key"], "a100");
  EXPECT_EQ(j["device"]["cc_major"], 8);
  EXPECT_EQ(j["device"]["sm_count"], 108);
  EXPECT_EQ(j["device"]["smem_per_sm"], 167936);
  EXPECT_EQ(j["device"]["reserved_smem_per_block"], 1024);
  EXPECT_EQ(j["launch"]["regs_per_thread"], 40);
  EXPECT_EQ(j["launch"]["block"], nlohmann::json::array({256, 1, 1}));
  EXPECT_EQ(j["launch"]["grid"], nlohmann::json::array({1000, 1, 1}));
  EXPECT_EQ(j["launch"]["can_run"], true);
  EXPECT_EQ(j["detail"]["blocks_per_sm"]["registers"], 6);
  EXPECT_TRUE(j["detail"]["blocks_per_sm"]["barriers"].is_null());  // unlimited
}

TEST(OccupancyCli, JsonSharedMemoryCase) {
  const ProcessResult r = Occupancy(
      {"--device", "a100", "--regs", "32", "--threads", "256", "--dyn-smem", "32K", "--json"});
  ExpectSuccess(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["max_active_blocks"], 4);
  EXPECT_EQ(j["limiting_resource"], "shared_mem");
  EXPECT_EQ(j["allocated_smem_per_block"], 33792);
  EXPECT_EQ(j["smem_for_next_block"], 32512);
  EXPECT_TRUE(j["regs_for_next_block"].is_null());
  EXPECT_DOUBLE_EQ(j["waves"].get<double>(), 0.0);  // no --grid: unknown
}

// H100, 32 regs, 128 threads (4 warps): registers 64 warps / 4 = 16 blocks, warps 16, so 16
// blocks and 100% per SM. With clusters of 2 and the driver's 60 active clusters, 120 blocks are
// resident on 132 SMs: 120 x 4 warps / (132 x 64) = 5.7%, so the cluster placement binds.
TEST(OccupancyCli, JsonClusterLaunch) {
  const ProcessResult r =
      Occupancy({"--device", "h100", "--regs", "32", "--threads", "128", "--cluster", "2,1,1",
                 "--max-active-clusters", "60", "--grid", "264", "--json"});
  ExpectSuccess(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("cluster_occupancy"));
  EXPECT_NEAR(j["cluster_occupancy"].get<double>(), 480.0 / 8448.0, 1e-12);
  EXPECT_EQ(j["limiting_resource"], "cluster");
  EXPECT_EQ(j["launch"]["cluster"], nlohmann::json::array({2, 1, 1}));
}

TEST(OccupancyCli, ClusterRowInTable) {
  const ProcessResult r =
      Occupancy({"--device", "h100", "--regs", "32", "--threads", "128", "--cluster", "4,1,1"});
  ExpectSuccess(r);
  EXPECT_THAT(r.out, HasSubstr("cluster 4,1,1 (4 blocks)"));
  EXPECT_EQ(FindRow(r.out, "cluster").blocks, "unlimited");
  // Offline, the cluster row is an upper bound and the note says how to get the driver's number:
  // 32 regs x 128 threads on an H100 give 16 blocks/SM (warps), 100%: at most 16 x 132 / 4 = 528
  // clusters of 4.
  EXPECT_EQ(FindRow(r.out, "cluster").occupancy, "<=100.0%");
  EXPECT_THAT(r.out, HasSubstr("cudaOccupancyMaxActiveClusters"));
  EXPECT_THAT(r.out, HasSubstr("--max-active-clusters N"));
  EXPECT_THAT(r.out, HasSubstr("at most 528 clusters"));
  EXPECT_THAT(r.out, Not(HasSubstr("unknown")));
}

// A device override changes the answer. 32 regs, 256 threads, 8 KiB dynamic shared memory on
// an A100: registers 8 blocks, warps 8, shared memory (8192 + 1024 = 9216 B) 167936 / 9216 = 18,
// so 8 blocks and 100%. With --smem-per-sm 32768 the SM has a 32 KiB carveout:
// 32768 / 9216 = 3 blocks -> 24 of 64 warps = 37.5%, shared memory binds.
TEST(OccupancyCli, DeviceOverrideMakesSharedMemoryBind) {
  const std::vector<std::string> base = {"--device",  "a100", "--regs",     "32",
                                         "--threads", "256",  "--dyn-smem", "8192"};
  const ProcessResult before = Occupancy(base);
  ExpectSuccess(before);
  EXPECT_EQ(Total(before.out, "max active blocks/SM"), "8");
  EXPECT_EQ(FindRow(before.out, "shared_mem").blocks, "18");
  EXPECT_FALSE(FindRow(before.out, "shared_mem").limits);

  std::vector<std::string> args = base;
  args.insert(args.end(), {"--smem-per-sm", "32768"});
  const ProcessResult after = Occupancy(args);
  ExpectSuccess(after);
  EXPECT_EQ(FindRow(after.out, "shared_mem").blocks, "3");
  EXPECT_TRUE(FindRow(after.out, "shared_mem").limits);
  EXPECT_EQ(Total(after.out, "occupancy"), "37.5%");
  EXPECT_EQ(Total(after.out, "limiting resource"), "shared_mem");
  EXPECT_THAT(after.out, HasSubstr("overrides: --smem-per-sm 32768"));
}

// --regs-per-sm 32768 halves the register file: 8192 per sub-partition / 1024 regs per warp
// (32 regs/thread) = 8 warps -> 32 warps/SM -> 4 blocks of 8 warps: 50%, registers bind.
TEST(OccupancyCli, RegisterFileOverride) {
  const ProcessResult r = Occupancy(
      {"--device", "a100", "--regs", "32", "--threads", "256", "--regs-per-sm", "32768", "--json"});
  ExpectSuccess(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["max_active_blocks"], 4);
  EXPECT_EQ(j["limiting_resource"], "registers");
  EXPECT_EQ(j["device"]["regs_per_sm"], 32768);
  EXPECT_EQ(j["device"]["overrides"], nlohmann::json::array({"--regs-per-sm 32768"}));
}

// A block above the function's __launch_bounds__ cannot launch: 0 blocks, said plainly, exit 0.
TEST(OccupancyCli, LaunchAboveLaunchBoundsCannotRun) {
  const ProcessResult r = Occupancy(
      {"--device", "a100", "--regs", "32", "--threads", "512", "--max-threads-per-block", "256"});
  ExpectSuccess(r);
  EXPECT_THAT(r.out, HasSubstr("THE LAUNCH CANNOT RUN"));
  EXPECT_THAT(r.out, HasSubstr("--max-threads-per-block"));
  EXPECT_EQ(Total(r.out, "max active blocks/SM"), "0");
  EXPECT_EQ(Total(r.out, "occupancy"), "0.0%");
}

// 64 KiB dynamic shared memory is above the 48 KiB a function gets without opting in, so it
// cannot launch until --max-dyn-smem raises the limit; then (65536 + 1024) = 66560 B per block
// fits 167936 / 66560 = 2 blocks.
TEST(OccupancyCli, DynamicSharedMemoryNeedsOptIn) {
  const ProcessResult r = Occupancy(
      {"--device", "a100", "--regs", "32", "--threads", "256", "--dyn-smem", "65536", "--json"});
  ExpectSuccess(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["max_active_blocks"], 0);
  EXPECT_EQ(j["launch"]["can_run"], false);
  EXPECT_THAT(j["launch"]["failure"].get<std::string>(), HasSubstr("--max-dyn-smem"));

  const ProcessResult opted = Occupancy({"--device", "a100", "--regs", "32", "--threads", "256",
                                         "--dyn-smem", "65536", "--max-dyn-smem", "65536"});
  ExpectSuccess(opted);
  EXPECT_EQ(Total(opted.out, "max active blocks/SM"), "2");
  EXPECT_THAT(opted.out, Not(HasSubstr("CANNOT RUN")));

  const ProcessResult over = Occupancy({"--device", "a100", "--regs", "32", "--threads", "256",
                                        "--dyn-smem", "65536", "--max-dyn-smem", "32768"});
  ExpectSuccess(over);
  EXPECT_THAT(over.out, HasSubstr("THE LAUNCH CANNOT RUN"));
}

// Inputs as users type them: byte units (KB is 1024-based, as the CUDA documentation uses it),
// a block as 16x16, a device as a compute capability or by the name the tools print.
TEST(OccupancyCli, InputsAsUsersWriteThem) {
  for (const char* bytes : {"98304", "96K", "96k", "96KB", "96kb", "96KiB", "96 KiB", "96 K"}) {
    const ProcessResult r = Occupancy({"--device", "h100", "--regs", "32", "--threads", "256",
                                       "--dyn-smem", bytes, "--max-dyn-smem", "96K", "--json"});
    ExpectSuccess(r);
    EXPECT_EQ(nlohmann::json::parse(r.out)["launch"]["dyn_smem"], 98304) << bytes;
  }
  const ProcessResult block =
      Occupancy({"--device", "a100", "--regs", "32", "--block", "16x16", "--json"});
  ExpectSuccess(block);
  const nlohmann::json b = nlohmann::json::parse(block.out);
  EXPECT_EQ(b["launch"]["block"], nlohmann::json::array({16, 16, 1}));
  EXPECT_EQ(b["launch"]["threads_per_block"], 256);

  // A compute capability picks the first preset of it (table order) and says which.
  for (const char* cc : {"sm_90", "sm90", "sm_90a", "compute_90", "cc 9.0", "9.0"}) {
    const ProcessResult r =
        Occupancy({"--device", cc, "--regs", "32", "--threads", "256", "--json"});
    ExpectSuccess(r);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["device"]["key"], "h100-sxm") << cc;
    ASSERT_EQ(j["notes"].size(), 1u) << cc;
    EXPECT_EQ(j["notes"][0], std::string(cc) +
                                 " is compute capability 9.0: preset h100-sxm (NVIDIA H100 80GB "
                                 "HBM3 (SXM5), 132 SMs); the other 9.0 presets: h100-pcie, "
                                 "h100-nvl, h200, gh200, h800, h20");
  }
  const ProcessResult text = Occupancy({"--device", "sm_80", "--regs", "32", "--threads", "256"});
  ExpectSuccess(text);
  // The note comes first, wrapped at 100 columns.
  EXPECT_EQ(text.out.rfind("note: sm_80 is compute capability 8.0: preset a100 (NVIDIA A100 40GB, "
                           "108 SMs); the other 8.0\n      presets: a100-80gb, a30\ndevice ",
                           0),
            0u)
      << text.out;

  // Names: as --list-devices prints them, and as GPUs report them (the report's DEVICE column).
  const std::vector<std::pair<std::string, std::string>> names = {
      {"NVIDIA H100 80GB HBM3 (SXM5)", "h100-sxm"}, {"NVIDIA H100 80GB HBM3", "h100-sxm"},
      {"NVIDIA A100-SXM4-80GB", "a100-80gb"},       {"Tesla V100-SXM2-16GB", "v100"},
      {"NVIDIA GeForce RTX 4090", "rtx4090"},       {"nvidia l4", "l4"}};
  for (const auto& [name, key] : names) {
    const ProcessResult r =
        Occupancy({"--device", name, "--regs", "32", "--threads", "256", "--json"});
    ExpectSuccess(r);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["device"]["key"], key) << name;
    ASSERT_EQ(j["notes"].size(), 1u) << name;
    EXPECT_THAT(j["notes"][0].get<std::string>(), HasSubstr("'" + name + "' is preset " + key))
        << name;
  }
  // A key needs no note.
  const ProcessResult key =
      Occupancy({"--device", "a100", "--regs", "32", "--threads", "256", "--json"});
  EXPECT_TRUE(nlohmann::json::parse(key.out)["notes"].empty());
}

// Dynamic shared memory above 48 KiB without --max-dyn-smem: the first line says the function
// has not opted in and what the launch would give if it had: (65536 + 1024) B per block,
// 167936 / 66560 = 2 blocks of 8 warps = 16 / 64 = 25%, shared memory binding (32 regs/thread
// allow 8 blocks, warps 8).
TEST(OccupancyCli, DynamicSharedMemoryWithoutOptInSaysSoFirst) {
  const std::vector<std::string> args = {"--device",  "a100", "--regs",     "32",
                                         "--threads", "256",  "--dyn-smem", "64K"};
  const ProcessResult r = Occupancy(args);
  ExpectSuccess(r);
  EXPECT_EQ(r.out.rfind("note: 64 KiB of shared memory per block is above the 48 KiB a function "
                        "may use without opting in,",
                        0),
            0u)
      << r.out;
  std::string joined;  // the note's lines, rejoined
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line) && !line.starts_with("device");) {
    EXPECT_LE(line.size(), 100u) << line;
    joined += line.substr(line.find_first_not_of(' ')) + " ";
  }
  EXPECT_THAT(joined, HasSubstr("this one has not opted in (--max-dyn-smem; cudaFuncSetAttribute "
                                "MaxDynamicSharedMemorySize): the launch cannot run as given. "
                                "Opted in (--max-dyn-smem 64K), it would fit 2 blocks/SM, "
                                "occupancy 25.0%, limited by shared_mem "));
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const nlohmann::json j = nlohmann::json::parse(Occupancy(json_args).out);
  EXPECT_EQ(j["max_active_blocks"], 0);
  EXPECT_EQ(j["if_opted_in"]["max_active_blocks"], 2);
  EXPECT_EQ(j["if_opted_in"]["occupancy"], 0.25);
  EXPECT_EQ(j["if_opted_in"]["limiting_resource"], "shared_mem");
  // Opted in: no such note.
  std::vector<std::string> opted = args;
  opted.insert(opted.end(), {"--max-dyn-smem", "64K", "--json"});
  const nlohmann::json o = nlohmann::json::parse(Occupancy(opted).out);
  EXPECT_TRUE(o["if_opted_in"].is_null());
  EXPECT_TRUE(o["notes"].empty());
}

struct BadInput {
  const char* name;
  std::vector<std::string> args;  // after "occupancy"
  const char* flag;               // must appear on the one stderr line
  const char* detail = "";        // and this too, when set
};

void PrintTo(const BadInput& c, std::ostream* os) {
  *os << "occupancy";
  for (const std::string& a : c.args) *os << ' ' << a;
}

class OccupancyCliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(OccupancyCliBadInput, ExitsTwoWithOneLineNamingTheFlag) {
  const BadInput& c = GetParam();
  const ProcessResult r = Occupancy(c.args);
  ExpectUsageError(r, c.flag);
  EXPECT_THAT(r.err, HasSubstr(c.detail));
}

const std::vector<std::string> kOk = {"--device", "a100", "--regs", "32", "--threads", "256"};

std::vector<std::string> With(std::vector<std::string> extra) {
  std::vector<std::string> args = kOk;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

INSTANTIATE_TEST_SUITE_P(
    All, OccupancyCliBadInput,
    ::testing::Values(
        BadInput{"UnknownDevice",
                 {"--device", "z80", "--regs", "1", "--threads", "32"},
                 "--device 'z80'",
                 "h100-sxm"},
        // A typo gets a suggestion: h10 is one edit from h100 (and from a10; the same first
        // letter wins).
        BadInput{"DeviceTypo",
                 {"--device", "h10", "--regs", "1", "--threads", "32"},
                 "--device 'h10'",
                 "did you mean h100?"},
        // A capability without a preset asks for its limits, not for --cc over another preset
        // (whose per-SM limits may differ: Xavier's 7.2 is not Volta's 7.0 product).
        BadInput{"CapabilityWithoutPreset",
                 {"--device", "sm_72", "--regs", "1", "--threads", "32"},
                 "--device sm_72: compute capability 7.2 has no preset",
                 "--sm-count N --max-threads-per-sm N"},
        BadInput{"FlagTypo", With({"--thread", "256"}), "--thread", "did you mean --threads?"},
        BadInput{"BytesUnknownUnit", With({"--dyn-smem", "96GB"}), "--dyn-smem 96GB", "K/KB/KiB"},
        BadInput{"MissingDevice", {"--regs", "1", "--threads", "32"}, "--device", "required"},
        BadInput{"MissingRegs", {"--device", "a100", "--threads", "32"}, "--regs", "required"},
        BadInput{"ThreadsAndBlock", With({"--block", "32,1,1"}), "--block"},
        BadInput{"RegsNotANumber",
                 {"--device", "a100", "--regs", "abc", "--threads", "32"},
                 "--regs abc",
                 "0..255"},
        BadInput{"RegsTooMany",
                 {"--device", "a100", "--regs", "256", "--threads", "32"},
                 "--regs 256",
                 "0..255"},
        BadInput{"RegsNegative",
                 {"--device", "a100", "--regs", "-1", "--threads", "32"},
                 "--regs -1",
                 "out of range"},
        BadInput{"RegsMissingValue", {"--device", "a100", "--threads", "32", "--regs"}, "--regs"},
        BadInput{"ThreadsTooMany",
                 {"--device", "a100", "--regs", "32", "--threads", "2048"},
                 "--threads 2048",
                 "device a100 allows 1..1024 threads per block"},
        BadInput{"ThreadsNegative",
                 {"--device", "a100", "--regs", "32", "--threads", "-5"},
                 "--threads -5"},
        BadInput{"ThreadsFloat",
                 {"--device", "a100", "--regs", "32", "--threads", "2.5"},
                 "--threads 2.5",
                 "not an integer"},
        BadInput{"BlockProductTooLarge",
                 {"--device", "a100", "--regs", "32", "--block", "64,32"},
                 "--block 64,32 (2048 threads)",
                 "1..1024 threads"},
        BadInput{"BlockDimZero",
                 {"--device", "a100", "--regs", "32", "--block", "0,1,1"},
                 "--block 0,1,1"},
        BadInput{"BlockZTooLarge",
                 {"--device", "a100", "--regs", "32", "--block", "1,1,128"},
                 "--block 1,1,128"},
        BadInput{
            "BlockGarbage", {"--device", "a100", "--regs", "32", "--block", "8y8"}, "--block 8y8"},
        BadInput{"DynSmemAboveOptIn", With({"--dyn-smem", "200000"}), "--dyn-smem 200000",
                 "0..166912"},
        BadInput{"StaticPlusDynAboveOptIn", With({"--static-smem", "4096", "--dyn-smem", "166912"}),
                 "--dyn-smem", "0..162816"},
        BadInput{"StaticSmemAboveLimit", With({"--static-smem", "50000"}), "--static-smem"},
        BadInput{"DynSmemNegative", With({"--dyn-smem", "-1"}), "--dyn-smem -1"},
        BadInput{"MaxDynSmemAboveOptIn", With({"--max-dyn-smem", "1M"}), "--max-dyn-smem"},
        BadInput{"CarveoutTooLarge", With({"--carveout", "101"}), "--carveout 101", "-1..100"},
        BadInput{"CarveoutTooSmall", With({"--carveout", "-2"}), "--carveout -2", "-1..100"},
        BadInput{"ClusterBeforeHopper", With({"--cluster", "2,1,1"}), "--cluster", "9.0"},
        BadInput{"ClusterTooLarge",
                 {"--device", "h100", "--regs", "32", "--threads", "128", "--cluster", "4,4,1"},
                 "--cluster 4,4,1 (16 blocks)",
                 "--non-portable-cluster"},
        BadInput{"NonPortableClusterTooLarge",
                 {"--device", "h100", "--regs", "32", "--threads", "128", "--cluster", "32",
                  "--non-portable-cluster"},
                 "--cluster 32",
                 "1..16"},
        BadInput{"GridNotMultipleOfCluster",
                 {"--device", "h100", "--regs", "32", "--threads", "128", "--cluster", "2",
                  "--grid", "3"},
                 "--grid 3"},
        BadInput{"GridZero", With({"--grid", "0"}), "--grid 0"},
        BadInput{"GridYTooLarge", With({"--grid", "1,70000,1"}), "--grid 1,70000,1"},
        BadInput{"MaxThreadsPerBlockTooLarge", With({"--max-threads-per-block", "4096"}),
                 "--max-threads-per-block 4096"},
        BadInput{"UnknownFlag", With({"--frobnicate", "3"}), "--frobnicate"},
        BadInput{"OverrideZero", With({"--sm-count", "0"}), "--sm-count 0"},
        BadInput{"OverrideNotANumber", With({"--smem-per-sm", "lots"}), "--smem-per-sm lots"},
        BadInput{"BadComputeCapability", With({"--cc", "nine"}), "--cc nine"},
        BadInput{"UnsupportedComputeCapability", With({"--cc", "4.0"}), "--cc 4.0"},
        BadInput{"DeviceOrdinalGarbage",
                 {"--device", "current:x", "--regs", "1", "--threads", "32"},
                 "--device current:x"}),
    [](const ::testing::TestParamInfo<BadInput>& param_info) {
      return std::string(param_info.param.name);
    });

TEST(OccupancyCli, NoSubcommandIsAUsageError) {
  const ProcessResult r = Cuflight({});
  ExpectUsageError(r, "--help");
}

TEST(OccupancyCli, UnknownSubcommandIsAUsageError) {
  const ProcessResult r = Cuflight({"frobnicate"});
  ExpectUsageError(r, "frobnicate");
}

TEST(OccupancyCli, HelpExitsZero) {
  for (const auto& args :
       {std::vector<std::string>{"--help"}, std::vector<std::string>{"occupancy", "--help"}}) {
    const ProcessResult r = Cuflight(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("occupancy"));
  }
  const ProcessResult r = Cuflight({"occupancy", "--help"});
  EXPECT_THAT(r.out, AllOf(HasSubstr("--regs"), HasSubstr("--dyn-smem"),
                           HasSubstr("--smem-per-block-optin"), HasSubstr("--list-devices")));
}

const std::vector<std::string> kPresetKeys = {
    "v100",     "t4",        "a100",     "a100-80gb", "a30",         "a10",  "rtx3090", "rtx3080",
    "a40",      "rtx-a6000", "orin",     "l4",        "l40s",        "l40",  "rtx6000-ada",
    "rtx4090",  "h100-sxm",  "h100-pcie", "h100-nvl", "h200",        "gh200", "h800",   "h20",
    "b200",     "b300",      "rtx5090",  "gb10"};

TEST(OccupancyCli, ListDevicesShowsEveryPreset) {
  const ProcessResult r = Occupancy({"--list-devices"});
  ExpectSuccess(r);
  for (const std::string& key : kPresetKeys) {
    EXPECT_THAT(r.out, HasSubstr("\n" + key + " ")) << key;
  }
  EXPECT_THAT(r.out, HasSubstr("NVIDIA H100 80GB HBM3 (SXM5)"));
  EXPECT_THAT(r.out, HasSubstr("a100-sxm4-40gb"));  // an alias
}

TEST(OccupancyCli, ListDevicesJson) {
  const ProcessResult r = Occupancy({"--list-devices", "--json"});
  ExpectSuccess(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  std::vector<std::string> keys;
  for (const auto& device : j) keys.push_back(device["key"].get<std::string>());
  EXPECT_EQ(keys, kPresetKeys);
  EXPECT_EQ(j[2]["smem_per_block_optin"], 166912);
  EXPECT_TRUE(j[2]["aliases"].is_array());
}

// Aliases and case-insensitive keys reach the same preset.
TEST(OccupancyCli, DeviceAliases) {
  const ProcessResult r =
      Occupancy({"--device", "H100", "--regs", "32", "--threads", "256", "--json"});
  ExpectSuccess(r);
  EXPECT_EQ(nlohmann::json::parse(r.out)["device"]["key"], "h100-sxm");
}

// Without a driver (this CI) --device current fails with one line; with one it works.
TEST(OccupancyCli, DeviceCurrent) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  const ProcessResult r =
      Occupancy({"--device", "current", "--regs", "32", "--threads", "256", "--json"});
  if (driver == nullptr) {
    ExpectUsageError(r, "--device current");
    EXPECT_THAT(r.err, HasSubstr("no CUDA driver (libcuda.so.1"));
  } else if (r.exit_code == 0) {
    EXPECT_EQ(nlohmann::json::parse(r.out)["device"]["key"], "current:0");
  } else {
    ExpectUsageError(r, "--device current");  // a driver but no usable GPU
  }
}

}  // namespace
}  // namespace cuflight
