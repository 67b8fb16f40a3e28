// The calculator's answers to what people ask (issue 36): which block size, what
// __launch_bounds__ does, the GPUs they have, and what ptxas -v printed. Drives the built
// `cuflight` binary (CUFLIGHT_CLI_PATH); expected numbers come from NVIDIA's reference calculator
// (cuda_occupancy.h, cudaOccMaxActiveBlocksPerMultiprocessor) called here with device limits typed
// in from the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability" and
// the products' datasheets, or by hand where written out: never from the program's own tables.
#include <cuda_occupancy.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "subprocess.h"
#include "temp_dir.h"

namespace cuflight {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessResult;
using testing::RunProcess;

ProcessResult Occupancy(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"occupancy"};
  all.insert(all.end(), args.begin(), args.end());
  return RunProcess(CUFLIGHT_CLI_PATH, all);
}

nlohmann::json Json(const std::vector<std::string>& args) {
  std::vector<std::string> with = args;
  with.push_back("--json");
  const ProcessResult r = Occupancy(with);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

// Exit 2 and exactly one line on stderr naming `flag`.
void ExpectUsageError(const ProcessResult& r, const std::string& flag, const std::string& detail) {
  EXPECT_EQ(r.exit_code, 2) << "stdout:\n" << r.out;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line:\n" << r.err;
  EXPECT_THAT(r.err, HasSubstr("cuflight occupancy: "));
  EXPECT_THAT(r.err, HasSubstr(flag));
  EXPECT_THAT(r.err, HasSubstr(detail));
  EXPECT_EQ(r.out, "");
}

// The notes as one line each: the text wraps them at 100 columns with a 6-space indent.
std::string Unwrapped(std::string text) {
  for (size_t at = text.find("\n      "); at != std::string::npos; at = text.find("\n      ")) {
    text.replace(at, 7, " ");
  }
  return text;
}

// A GPU as the Programming Guide's table and the product's datasheet give it.
struct Gpu {
  int cc_major, cc_minor, sms, threads_per_sm;
  int64_t smem_per_sm, optin, reserved;
};

cudaOccDeviceProp Prop(const Gpu& g) {
  cudaOccDeviceProp p;
  p.computeMajor = g.cc_major;
  p.computeMinor = g.cc_minor;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsPerMultiprocessor = g.threads_per_sm;
  p.regsPerBlock = 65536;
  p.regsPerMultiprocessor = 65536;
  p.warpSize = 32;
  p.sharedMemPerBlock = 48 * 1024;
  p.sharedMemPerMultiprocessor = static_cast<size_t>(g.smem_per_sm);
  p.numSms = g.sms;
  p.sharedMemPerBlockOptin = static_cast<size_t>(g.optin);
  p.reservedSharedMemPerBlock = static_cast<size_t>(g.reserved);
  return p;
}

struct FakeCudaFuncAttributes {
  int maxThreadsPerBlock;
  int numRegs;
  size_t sharedSizeBytes;
  size_t maxDynamicSharedSizeBytes;
};

// cudaOccMaxActiveBlocksPerMultiprocessor for a function of `regs` registers and `static_smem`
// bytes that has not opted in, launched with `threads` threads and `dyn_smem` bytes.
int RefBlocks(const Gpu& g, int regs, int threads, int64_t static_smem = 0, int64_t dyn_smem = 0,
              int max_threads = 1024) {
  const cudaOccDeviceProp p = Prop(g);
  const cudaOccFuncAttributes a(
      FakeCudaFuncAttributes{max_threads, regs, static_cast<size_t>(static_smem),
                             static_cast<size_t>(std::max<int64_t>(0, 48 * 1024 - static_smem))});
  cudaOccDeviceState s;
  cudaOccResult r{};
  EXPECT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads,
                                                    static_cast<size_t>(dyn_smem)),
            CUDA_OCC_SUCCESS);
  return r.activeBlocksPerMultiprocessor;
}

constexpr int64_t KiB = 1024;
// cc 8.9, 128 SMs (Ada whitepaper: 16384 CUDA cores).
constexpr Gpu kRtx4090{8, 9, 128, 1536, 100 * KiB, 99 * KiB, KiB};
// cc 9.0, 132 SMs (H100 whitepaper, SXM5).
constexpr Gpu kH100{9, 0, 132, 2048, 228 * KiB, 227 * KiB, KiB};
// cc 8.9, 142 SMs (L40 datasheet: 18176 CUDA cores).
constexpr Gpu kL40{8, 9, 142, 1536, 100 * KiB, 99 * KiB, KiB};

// "What block size should I use?" The case: 72 registers on an RTX 4090; 64 and 128
// threads both reach 58.3% (28 of 48 warps), and the smallest is named, not the 896 that the
// reference's search (largest of a tie) would give.
TEST(OccupancyQuestions, WithoutThreadsEveryBlockSizeAndTheSmallestBest) {
  const ProcessResult text = Occupancy({"--device", "rtx4090", "--regs", "72"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("best block size: 64 threads, occupancy 58.3%"));
  EXPECT_THAT(text.out, HasSubstr("also reached by sizes 128, 224, 448, 896"));
  EXPECT_THAT(text.out, HasSubstr("at 64 threads per block:"));

  const nlohmann::json j = Json({"--device", "rtx4090", "--regs", "72"});
  const nlohmann::json& sizes = j["block_sizes"];
  EXPECT_EQ(sizes["smallest_best"], 64);
  EXPECT_TRUE(sizes["sweep_only"].get<bool>());
  ASSERT_EQ(sizes["sweep"].size(), 32u);
  int best_warps = 0, smallest = 0;
  for (const nlohmann::json& point : sizes["sweep"]) {
    const int threads = point["threads"];
    const int blocks = RefBlocks(kRtx4090, 72, threads);
    EXPECT_EQ(point["max_active_blocks"], blocks) << threads;
    EXPECT_DOUBLE_EQ(point["occupancy"].get<double>(), blocks * (threads / 32) / 48.0) << threads;
    if (blocks * threads / 32 > best_warps) {
      best_warps = blocks * threads / 32;
      smallest = threads;
    }
  }
  EXPECT_EQ(smallest, 64);
  EXPECT_EQ(j["launch"]["threads_per_block"], 64);  // the detail is for the size it names
  EXPECT_EQ(j["max_active_blocks"], RefBlocks(kRtx4090, 72, 64));
}

TEST(OccupancyQuestions, SweepFlagKeepsTheLaunchAndAddsTheTable) {
  const ProcessResult r =
      Occupancy({"--device", "rtx4090", "--regs", "72", "--threads", "896", "--sweep"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("block 896,1,1"));
  EXPECT_THAT(r.out, HasSubstr("block sizes (1-D blocks; 72 regs/thread"));
  EXPECT_THAT(r.out,
              HasSubstr("none gives more than this launch's 58.3%; 64 threads reach it too"));
}

// __launch_bounds__(256, 2) on an H100: the Programming Guide's rule gives the most registers
// with which 2 blocks of 256 threads fit 65536 registers: 128 (by hand: 16 warps, 4 per
// sub-partition of 16384 registers, 4096 per warp). With 128 registers a 256-thread block gets
// 2 blocks/SM, as the reference says.
TEST(OccupancyQuestions, LaunchBoundsGiveTheRegisterCap) {
  const nlohmann::json j =
      Json({"--device", "h100", "--launch-bounds", "256,2", "--threads", "256"});
  EXPECT_EQ(j["launch"]["regs_per_thread"], 128);
  EXPECT_EQ(j["launch"]["func_max_threads_per_block"], 256);
  EXPECT_EQ(j["function"]["launch_bounds"]["register_limit_estimate"], 128);
  EXPECT_EQ(j["function"]["launch_bounds"]["min_blocks_per_sm"], 2);
  EXPECT_EQ(j["function"]["regs_source"], "--launch-bounds");
  EXPECT_EQ(j["max_active_blocks"], RefBlocks(kH100, 128, 256, 0, 0, 256));
  EXPECT_EQ(j["max_active_blocks"], 2);

  // Registers above the cap: ptxas would cut them; computed with the cap, and said so.
  const ProcessResult r = Occupancy(
      {"--device", "h100", "--launch-bounds", "256,2", "--threads", "256", "--regs", "168"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(Unwrapped(r.out), HasSubstr("ptxas would target at most 128 registers per thread"));
  EXPECT_THAT(Unwrapped(r.out), HasSubstr("an estimate"));
  EXPECT_THAT(Unwrapped(r.out), HasSubstr("computed with 128 instead of the 168 given"));
  // Registers under the cap stay as given: 64 regs x 256 threads: 4 blocks (by hand: 2048 per
  // warp, 8 warps per sub-partition = 32 warps / 8).
  const nlohmann::json under =
      Json({"--device", "h100", "--launch-bounds", "256,2", "--threads", "256", "--regs", "64"});
  EXPECT_EQ(under["launch"]["regs_per_thread"], 64);
  EXPECT_EQ(under["max_active_blocks"], RefBlocks(kH100, 64, 256, 0, 0, 256));

  // (384, 2): 24 warps, 6 per sub-partition: 2730 registers per warp, down to 256s 2560: 80.
  const nlohmann::json odd =
      Json({"--device", "a100", "--launch-bounds", "384,2", "--threads", "384"});
  EXPECT_EQ(odd["function"]["launch_bounds"]["register_limit_estimate"], 80);

  // A block above MAX cannot launch; without --threads the sweep stops at MAX.
  const ProcessResult above =
      Occupancy({"--device", "h100", "--launch-bounds", "256", "--threads", "512", "--regs", "32"});
  EXPECT_EQ(above.exit_code, 0) << above.err;
  EXPECT_THAT(above.out, HasSubstr("exceeds the function's limit of 256"));
  const nlohmann::json sweep = Json({"--device", "h100", "--launch-bounds", "256", "--regs", "32"});
  EXPECT_EQ(sweep["block_sizes"]["sweep"].size(), 8u);
  EXPECT_EQ(sweep["block_sizes"]["sweep"].back()["threads"], 256);
}

// What ptxas -v prints is taken as it is: the line, a file of the whole build output, standard
// input, or the two numbers with their words.
TEST(OccupancyQuestions, PtxasOutputGivesRegistersAndStaticSharedMemory) {
  const std::string line =
      "ptxas info    : Used 92 registers, used 1 barriers, 16640 bytes smem, 400 bytes cmem[0]";
  const int expected = RefBlocks(kL40, 92, 128, 16640);
  const nlohmann::json j = Json({"--device", "l40", "--threads", "128", "--ptxas", line});
  EXPECT_EQ(j["launch"]["regs_per_thread"], 92);
  EXPECT_EQ(j["launch"]["static_smem"], 16640);
  EXPECT_EQ(j["max_active_blocks"], expected);
  // By hand: 92 x 32 = 2944 -> 3072 per warp, 5 warps per sub-partition, 20 per SM: 5 blocks of
  // 4 warps; shared memory 16640 + 1024 = 17664 B: 102400 / 17664 = 5 blocks.
  EXPECT_EQ(expected, 5);

  const nlohmann::json words = Json({"--device", "l40", "--threads", "128", "--regs",
                                     "92 registers", "--static-smem", "16640 bytes smem"});
  EXPECT_EQ(words["launch"]["regs_per_thread"], 92);
  EXPECT_EQ(words["launch"]["static_smem"], 16640);
  EXPECT_EQ(words["max_active_blocks"], expected);

  // nvcc -Xptxas -v output of two kernels, one spilling, compiled for another architecture.
  test_support::TempDir dir;
  const std::string log = (dir.path() / "build.log").string();
  {
    std::ofstream out(log);
    out << "ptxas info    : 0 bytes gmem\n"
           "ptxas info    : Compiling entry function '_Z4gemmPKfS0_Pf' for 'sm_80'\n"
           "ptxas info    : Function properties for _Z4gemmPKfS0_Pf\n"
           "    24 bytes stack frame, 20 bytes spill stores, 20 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 32768 bytes smem, 380 bytes "
           "cmem[0]\n"
           "ptxas info    : Compiling entry function '_Z6reducePfi' for 'sm_80'\n"
           "ptxas info    : Function properties for _Z6reducePfi\n"
           "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 24 registers, used 1 barriers, 1024 bytes smem, 364 bytes "
           "cmem[0]\n";
  }
  const ProcessResult both = Occupancy({"--device", "l40", "--threads", "256", "--ptxas", log});
  ExpectUsageError(both, "--ptxas", "--ptxas-kernel NAME");
  EXPECT_THAT(both.err, HasSubstr("_Z4gemmPKfS0_Pf, _Z6reducePfi"));

  const ProcessResult gemm =
      Occupancy({"--device", "l40", "--threads", "256", "--ptxas", log, "--ptxas-kernel", "gemm"});
  EXPECT_EQ(gemm.exit_code, 0) << gemm.err;
  EXPECT_THAT(Unwrapped(gemm.out), HasSubstr("_Z4gemmPKfS0_Pf: 255 registers, 32768 B static"));
  EXPECT_THAT(Unwrapped(gemm.out), HasSubstr("compiled for sm_80"));
  EXPECT_THAT(Unwrapped(gemm.out), HasSubstr("this device is sm_89"));
  EXPECT_THAT(Unwrapped(gemm.out), HasSubstr("already spills (20 B stores"));

  // Piped, as `nvcc ... 2>&1 | cuflight occupancy --ptxas -` would.
  const ProcessResult piped = RunProcess(
      "/bin/sh", {"-c", "cat '" + log + "' | '" + std::string(CUFLIGHT_CLI_PATH) +
                            "' occupancy --device l40 --threads 256 --ptxas - --ptxas-kernel "
                            "reduce --json"});
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  const nlohmann::json reduce = nlohmann::json::parse(piped.out);
  EXPECT_EQ(reduce["launch"]["regs_per_thread"], 24);
  EXPECT_EQ(reduce["launch"]["static_smem"], 1024);
  EXPECT_EQ(reduce["function"]["ptxas_kernel"], "_Z6reducePfi");
  EXPECT_EQ(reduce["max_active_blocks"], RefBlocks(kL40, 24, 256, 1024));

  // cuobjdump --dump-resource-usage of a binary says the same in its own words.
  const std::string cuobjdump =
      "Resource usage:\n Common:\n  GLOBAL:0\n Function _Z6reducePfi:\n  REG:24 STACK:0 "
      "SHARED:1024 LOCAL:0 CONSTANT[0]:364 TEXTURE:0 SURFACE:0 SAMPLER:0\n";
  const nlohmann::json dumped = Json({"--device", "l40", "--threads", "256", "--ptxas", cuobjdump});
  EXPECT_EQ(dumped["launch"]["regs_per_thread"], 24);
  EXPECT_EQ(dumped["launch"]["static_smem"], 1024);
  EXPECT_EQ(dumped["function"]["ptxas_kernel"], "_Z6reducePfi");
}

// Each new preset computes what the reference computes for the GPU as NVIDIA documents it.
TEST(OccupancyQuestions, NewPresetsAgreeWithTheReference) {
  struct Case {
    const char* device;
    Gpu gpu;
  };
  const Case cases[] = {
      {"a30", {8, 0, 56, 2048, 164 * KiB, 163 * KiB, KiB}},
      {"a40", {8, 6, 84, 1536, 100 * KiB, 99 * KiB, KiB}},
      {"L40", kL40},
      {"rtx-a6000", {8, 6, 84, 1536, 100 * KiB, 99 * KiB, KiB}},
      {"rtx6000-ada", {8, 9, 142, 1536, 100 * KiB, 99 * KiB, KiB}},
      {"rtx3080", {8, 6, 68, 1536, 100 * KiB, 99 * KiB, KiB}},
      {"h20", {9, 0, 78, 2048, 228 * KiB, 227 * KiB, KiB}},
      {"h800", kH100},
      {"gh200", kH100},
      {"h100-nvl", kH100},
      {"b300", {10, 3, 148, 2048, 228 * KiB, 227 * KiB, KiB}},
      {"gb10", {12, 1, 48, 1536, 100 * KiB, 99 * KiB, KiB}},
      {"orin", {8, 7, 16, 1536, 164 * KiB, 163 * KiB, KiB}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.device);
    for (const auto& [regs, threads, dyn] :
         {std::tuple{40, 256, 20 * KiB}, std::tuple{128, 128, 0L}, std::tuple{32, 96, 40 * KiB}}) {
      const nlohmann::json j =
          Json({"--device", c.device, "--regs", std::to_string(regs), "--threads",
                std::to_string(threads), "--dyn-smem", std::to_string(dyn)});
      EXPECT_EQ(j["device"]["cc_major"], c.gpu.cc_major);
      EXPECT_EQ(j["device"]["cc_minor"], c.gpu.cc_minor);
      EXPECT_EQ(j["device"]["sm_count"], c.gpu.sms);
      EXPECT_EQ(j["max_active_blocks"], RefBlocks(c.gpu, regs, threads, 0, dyn))
          << regs << " regs, " << threads << " threads, " << dyn << " B";
      EXPECT_EQ(j["max_warps"], c.gpu.threads_per_sm / 32);
    }
  }
}

TEST(OccupancyQuestions, DeviceNamesPickTheRightPresetAndSaySo) {
  // L40 is a preset of its own, not a typo of l4.
  const nlohmann::json l40 = Json({"--device", "L40", "--regs", "32", "--threads", "256"});
  EXPECT_EQ(l40["device"]["key"], "l40");
  EXPECT_TRUE(l40["notes"].empty());
  // The name the GPU reports.
  EXPECT_EQ(Json({"--device", "NVIDIA RTX 6000 Ada Generation", "--regs", "32", "--threads",
                  "256"})["device"]["key"],
            "rtx6000-ada");
  EXPECT_EQ(
      Json({"--device", "NVIDIA H100 NVL", "--regs", "32", "--threads", "256"})["device"]["key"],
      "h100-nvl");
  // "h100" is one of three: which it took, and the others.
  const nlohmann::json h100 = Json({"--device", "h100", "--regs", "32", "--threads", "256"});
  EXPECT_EQ(h100["device"]["key"], "h100-sxm");
  ASSERT_EQ(h100["notes"].size(), 1u);
  EXPECT_THAT(h100["notes"][0].get<std::string>(),
              HasSubstr("'h100' is preset h100-sxm (NVIDIA H100 80GB HBM3 (SXM5), 132 SMs); the "
                        "other presets it may mean: h100-pcie, h100-nvl"));
  // The capabilities the issue named.
  EXPECT_EQ(Json({"--device", "sm_87", "--regs", "32", "--threads", "256"})["device"]["key"],
            "orin");
  EXPECT_EQ(Json({"--device", "sm_103", "--regs", "32", "--threads", "256"})["device"]["key"],
            "b300");
  EXPECT_EQ(Json({"--device", "sm_121", "--regs", "32", "--threads", "256"})["device"]["key"],
            "gb10");
}

// A capability without a preset, with its limits given: Jetson AGX Xavier (cc 7.2: 2048 threads
// and 32 blocks per SM, 96 KiB shared memory per SM and per block opt-in; 8 SMs, 512 CUDA cores).
TEST(OccupancyQuestions, CapabilityWithoutPresetTakesTheLimitsGiven) {
  const std::vector<std::string> limits = {
      "--sm-count",    "8",     "--max-threads-per-sm", "2048", "--max-blocks-per-sm",    "32",
      "--regs-per-sm", "65536", "--smem-per-sm",        "96K",  "--smem-per-block-optin", "96K"};
  std::vector<std::string> args = {"--device",  "sm_72", "--regs",     "40",
                                   "--threads", "256",   "--dyn-smem", "30K"};
  args.insert(args.end(), limits.begin(), limits.end());
  const nlohmann::json j = Json(args);
  EXPECT_EQ(j["device"]["cc_major"], 7);
  EXPECT_EQ(j["device"]["cc_minor"], 2);
  EXPECT_EQ(j["device"]["reserved_smem_per_block"], 0);  // from cc 8.0 only
  const Gpu xavier{7, 2, 8, 2048, 96 * KiB, 96 * KiB, 0};
  EXPECT_EQ(j["max_active_blocks"], RefBlocks(xavier, 40, 256, 0, 30 * KiB));

  // One missing: the line lists it and where to find the numbers.
  args.resize(args.size() - 2);
  const ProcessResult r = Occupancy(args);
  ExpectUsageError(r, "--device sm_72", "missing: --smem-per-block-optin");
  EXPECT_THAT(r.err, HasSubstr("cudaGetDeviceProperties"));
  EXPECT_THAT(r.err, Not(HasSubstr("--cc")));
}

TEST(OccupancyQuestions, MinBlocksFlagPointsToLaunchBounds) {
  const ProcessResult r = Occupancy(
      {"--device", "a100", "--regs", "32", "--threads", "256", "--min-blocks-per-sm", "2"});
  ExpectUsageError(r, "--min-blocks-per-sm", "--launch-bounds MAX,MINBLOCKS");
  EXPECT_THAT(r.err, Not(HasSubstr("did you mean --max-blocks-per-sm")));
}

struct Bad {
  const char* name;
  std::vector<std::string> args;
  const char* flag;
  const char* detail;
};

class OccupancyQuestionsBadInput : public ::testing::TestWithParam<Bad> {};

TEST_P(OccupancyQuestionsBadInput, ExitsTwoWithOneLine) {
  const Bad& b = GetParam();
  ExpectUsageError(Occupancy(b.args), b.flag, b.detail);
}

const std::vector<std::string> kA100 = {"--device", "a100", "--threads", "256"};

std::vector<std::string> A100(std::vector<std::string> extra) {
  std::vector<std::string> args = kA100;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

INSTANTIATE_TEST_SUITE_P(
    All, OccupancyQuestionsBadInput,
    ::testing::Values(
        Bad{"LaunchBoundsNotANumber", A100({"--launch-bounds", "abc"}), "--launch-bounds abc",
            "not an integer"},
        Bad{"LaunchBoundsTooManyThreads", A100({"--launch-bounds", "2048"}), "--launch-bounds 2048",
            "1..1024"},
        Bad{"LaunchBoundsTooManyBlocks", A100({"--launch-bounds", "256,33"}), "--launch-bounds 33",
            "1..32 blocks per SM"},
        Bad{"LaunchBoundsThreeParts", A100({"--launch-bounds", "256,2,1"}), "--launch-bounds", ""},
        Bad{"LaunchBoundsAndMaxThreads",
            A100({"--launch-bounds", "256", "--max-threads-per-block", "256"}), "--launch-bounds",
            "--max-threads-per-block"},
        Bad{"PtxasWithoutNumbers", A100({"--ptxas", "ptxas info : Used many registers"}), "--ptxas",
            "no \"Used N registers\" line"},
        Bad{"PtxasNoFile", A100({"--ptxas", "/nonexistent/build.log"}),
            "--ptxas /nonexistent/build.log", "not a readable file"},
        Bad{"PtxasAndRegs", A100({"--ptxas", "Used 32 registers", "--regs", "32"}), "--regs",
            "--ptxas"},
        Bad{"PtxasAndStaticSmem", A100({"--ptxas", "Used 32 registers", "--static-smem", "1K"}),
            "--static-smem", "--ptxas"},
        Bad{"PtxasKernelAlone", A100({"--regs", "32", "--ptxas-kernel", "gemm"}), "--ptxas-kernel",
            "needs --ptxas"},
        Bad{"PtxasKernelUnknown",
            A100({"--ptxas", "Compiling entry function '_Z1kv' for 'sm_80'\nUsed 32 registers",
                  "--ptxas-kernel", "gemm"}),
            "--ptxas-kernel gemm", "_Z1kv"},
        Bad{"PtxasTooManyRegisters", A100({"--ptxas", "Used 300 registers"}), "--ptxas", "0..255"},
        Bad{"PtxasTooMuchSmem", A100({"--ptxas", "Used 32 registers, 65536 bytes smem"}), "--ptxas",
            "65536 bytes smem"},
        Bad{"RegsWrongWord", A100({"--regs", "92 regs"}), "--regs", "not an integer"}),
    [](const ::testing::TestParamInfo<Bad>& param) { return std::string(param.param.name); });

}  // namespace
}  // namespace cuflight
