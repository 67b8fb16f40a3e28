// `cuflight demo` on a machine without a GPU (this one): it writes a recording and its HTML
// review, prints the review, and every occupancy figure and register what-if in it is what
// NVIDIA's reference calculator (cuda_occupancy.h, called here) gives for an H100 SXM as the
// Programming Guide and the H100 whitepaper describe it (cc 9.0, 132 SMs, 2048 threads, 64 Ki
// registers and 228 KiB shared memory per SM, 227 KiB opt-in and 1 KiB reserved per block).
#include <cuda_occupancy.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "subprocess.h"
#include "temp_dir.h"

namespace cuflight {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::ProcessResult;
using testing::RunProcess;

cudaOccDeviceProp H100() {
  cudaOccDeviceProp p;
  p.computeMajor = 9;
  p.computeMinor = 0;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsPerMultiprocessor = 2048;
  p.regsPerBlock = 65536;
  p.regsPerMultiprocessor = 65536;
  p.warpSize = 32;
  p.sharedMemPerBlock = 48 * 1024;
  p.sharedMemPerMultiprocessor = 228 * 1024;
  p.numSms = 132;
  p.sharedMemPerBlockOptin = 227 * 1024;
  p.reservedSharedMemPerBlock = 1024;
  return p;
}

struct FakeCudaFuncAttributes {
  int maxThreadsPerBlock;
  int numRegs;
  size_t sharedSizeBytes;
  size_t maxDynamicSharedSizeBytes;
};

// The reference's answer for a launch as a program that opts in to the dynamic shared memory it
// asks for (above the 48 KiB limit without opt-in) would make it.
cudaOccResult Reference(int regs, int threads, int64_t static_smem, int64_t dyn_smem) {
  const cudaOccDeviceProp p = H100();
  const int64_t max_dyn = static_smem + dyn_smem > 48 * 1024 ? dyn_smem : 48 * 1024 - static_smem;
  const cudaOccFuncAttributes a(FakeCudaFuncAttributes{1024, regs, static_cast<size_t>(static_smem),
                                                       static_cast<size_t>(max_dyn)});
  cudaOccDeviceState s;
  cudaOccResult r{};
  EXPECT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads,
                                                    static_cast<size_t>(dyn_smem)),
            CUDA_OCC_SUCCESS);
  return r;
}

TEST(Demo, WritesARecordingAndReviewsItWithoutAGpu) {
  test_support::TempDir tmp;
  const fs::path dir = tmp.path() / "demo";
  const ProcessResult r = RunProcess(CUFLIGHT_CLI_PATH, {"demo", "--dir", dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("no GPU was used"));
  EXPECT_THAT(r.out, HasSubstr("40000 launches"));
  EXPECT_THAT(r.out, HasSubstr("SIGSEGV"));  // rank 0's crash, in the review
  EXPECT_THAT(r.out, HasSubstr("cuflight report " + (dir / "logs").string()));

  std::ifstream html(dir / "report.html");
  std::stringstream page;
  page << html.rdbuf();
  EXPECT_THAT(page.str(), HasSubstr("<html"));
  EXPECT_GT(page.str().size(), 10000u);

  // Every kernel's occupancy and register what-if, as the review reads them from the logs.
  const ProcessResult json =
      RunProcess(CUFLIGHT_CLI_PATH, {"report", (dir / "logs").string(), "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json signatures = nlohmann::json::parse(json.out)["signatures"];
  ASSERT_EQ(signatures.size(), 12u);
  int register_what_ifs = 0;
  for (const nlohmann::json& s : signatures) {
    const int regs = s["registers"];
    const int threads =
        s["block"][0].get<int>() * s["block"][1].get<int>() * s["block"][2].get<int>();
    const int64_t static_smem = s["static_smem"];
    const int64_t dyn_smem = s["dyn_smem"];
    SCOPED_TRACE(std::to_string(regs) + " regs, " + std::to_string(threads) + " threads, " +
                 std::to_string(static_smem) + "+" + std::to_string(dyn_smem) + " B");
    const cudaOccResult ref = Reference(regs, threads, static_smem, dyn_smem);
    EXPECT_EQ(s["max_active_blocks"], ref.activeBlocksPerMultiprocessor);
    const nlohmann::json& next = s["what_if"]["regs_for_next_block"];
    if (next.is_null()) continue;
    // The most registers per thread with which the register file alone holds one more block.
    const int target = ref.activeBlocksPerMultiprocessor + 1;
    int most = -1;
    for (int r2 = 0; r2 <= 255; ++r2) {
      if (Reference(r2, threads, static_smem, dyn_smem).blockLimitRegs >= target) most = r2;
    }
    EXPECT_EQ(next, most);
    ++register_what_ifs;
  }
  EXPECT_GE(register_what_ifs, 3);

  // Run again into the same directory: refused, nothing mixed.
  const ProcessResult again = RunProcess(CUFLIGHT_CLI_PATH, {"demo", "--dir", dir.string()});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("cuflight demo: --dir"));
  EXPECT_THAT(again.err, HasSubstr("not empty"));
}

// Without --dir: a new directory under $TMPDIR, named in the output.
TEST(Demo, DefaultDirectoryIsNewUnderTmpdir) {
  test_support::TempDir tmp;
  const std::string script = "TMPDIR='" + tmp.path().string() + "' '" +
                             std::string(CUFLIGHT_CLI_PATH) + "' demo --html-only";
  const ProcessResult r = RunProcess("/bin/sh", {"-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int made = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(tmp.path())) {
    EXPECT_TRUE(e.path().filename().string().starts_with("cuflight-demo-")) << e.path();
    EXPECT_TRUE(fs::exists(e.path() / "report.html"));
    EXPECT_THAT(r.out, HasSubstr(e.path().string()));
    ++made;
  }
  EXPECT_EQ(made, 1);
  // --html-only: what was written and what to run next, not the terminal review.
  EXPECT_LT(std::count(r.out.begin(), r.out.end(), '\n'), 15) << r.out;
}

}  // namespace
}  // namespace cuflight
