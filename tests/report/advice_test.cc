// The report's advice on a table of cases worked out by hand. Each case is a launch on a real
// GPU's limits (occupancy/device_presets.h, from NVIDIA's "Technical Specifications per Compute
// Capability" table); the occupancy engine, which its own tests hold equal to NVIDIA's
// cuda_occupancy.h, turns it into the kernel event's occupancy fields as the injected library
// would. The expected line and the arithmetic behind it are written out with each case.
//
// Register arithmetic used below (cuda_occupancy.h, cc 7.0 and later): a warp's registers are
// regs/thread x 32 rounded up to 256; an SM has 4 sub-partitions of 65536 / 4 = 16384 registers,
// each holding floor(16384 / regs-per-warp) warps. Shared memory: a block takes its static +
// dynamic bytes + 1 KiB reserved (cc 8.0 and later), rounded up to 128 B; an H100 SM has up to
// 228 KiB = 233472 B.
#include "cuflight/report/advice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"
#include "report_test_events.h"

namespace cuflight::report {
namespace {

using schema::Resource;

struct Case {
  const char* device;  // preset key
  int regs;
  int64_t static_smem;
  int64_t dyn_smem;
  schema::Dim3 block;
  schema::Dim3 grid;
  int64_t local_bytes;  // per thread
  std::string expected;
};

// The signature the report builds for one launch of `c` (build_report.cc): the kernel event's
// resources and occupancy fields, its device's limits, one launch's waves.
Signature SignatureOf(const Case& c) {
  const occupancy::DevicePreset* preset = occupancy::FindDevicePreset(c.device);
  EXPECT_NE(preset, nullptr) << c.device;
  const occupancy::DeviceLimits& d = preset->limits;
  occupancy::LaunchConfig l;
  l.regs_per_thread = c.regs;
  l.static_smem = c.static_smem;
  l.dyn_smem = c.dyn_smem;
  l.block = {c.block.x, c.block.y, c.block.z};
  l.grid = {c.grid.x, c.grid.y, c.grid.z};
  // A launch above the limit without opt-in ran, so the function had opted in.
  if (c.static_smem + c.dyn_smem > d.smem_per_block) l.func_max_dyn_smem = c.dyn_smem;
  occupancy::Result r;
  EXPECT_EQ(occupancy::Compute(*occupancy::DeviceContext::Make(d), l, &r), occupancy::Status::kOk);
  Signature s;
  s.name = "_Z6kernelv";
  s.block = c.block;
  s.dyn_smem = c.dyn_smem;
  s.regs = c.regs;
  s.first.num_regs = c.regs;
  s.first.static_shared_bytes = c.static_smem;
  s.first.dyn_shared_bytes = c.dyn_smem;
  s.first.local_bytes = c.local_bytes;
  s.first.block = c.block;
  s.first.grid = c.grid;
  s.first.occupancy = r.fields;
  s.launches = 1;
  s.waves_min = s.waves_max = s.waves_mean = r.fields.waves;
  s.warps_per_block = WarpsPerBlock(r.fields, c.block, d.warp_size);
  s.device_limits = d;
  return s;
}

TEST(ReportAdviceTable, HandWorkedCases) {
  const Case cases[] = {
      // The grid cannot fill the GPU. 128 regs/thread: 4096 regs/warp, 16384 / 4096 = 4 warps per
      // sub-partition, 16 per SM; 256-thread blocks are 8 warps: 2 blocks/SM (25%). 4 blocks on
      // 132 SMs x 2 = 264 slots: 4 / 264 = 0.015 waves. Every block is resident at once, so fewer
      // registers (the old advice) cannot help; 128 SMs get nothing.
      {"h100",
       128,
       0,
       0,
       {256, 1, 1},
       {4, 1, 1},
       0,
       "grid of 4 blocks is under one wave (0.02 waves of 132 SMs x 2 blocks/SM): every block "
       "is already resident, so higher occupancy cannot help; 128 of 132 SMs get no block; "
       "launch more blocks (less work per block, split-K)"},
      // Same kernel with a grid of 1320 blocks (5 waves) and no spills: 25%, not low (the low
      // mark is below 25%), no verdict. Three blocks need 24 warps = 6 per sub-partition:
      // 16384 / 6 = 2730 regs/warp, rounded down to 256: 2560 = 80 regs/thread (81 rounds up to
      // 2816, 5 warps). 3 x 8 / 64 = 37.5% -> 38%. __launch_bounds__(256, 3) asks for 3 blocks.
      {"h100",
       128,
       0,
       0,
       {256, 1, 1},
       {1320, 1, 1},
       0,
       "25% occupancy; registers limit 2 blocks/SM; <= 80 regs/thread would fit 3 (38%): "
       "__launch_bounds__(256, 3) or -maxrregcount=80 (fewer registers can spill to local memory; "
       "check ptxas -v)"},
      // The same kernel already spilling 64 B/thread: fewer registers would spill more, so no
      // register count is suggested; at 25% the way out is less per-thread state.
      {"h100",
       128,
       0,
       0,
       {256, 1, 1},
       {1320, 1, 1},
       64,
       "25% occupancy; registers limit 2 blocks/SM, and it already spills 64 B/thread: fewer "
       "registers would spill more; cut per-thread state (smaller tiles, fewer live values) "
       "instead"},
      // An attention-like kernel at 50%: 64 regs/thread = 2048 regs/warp, 8 warps per
      // sub-partition, 32 per SM = 4 blocks of 8 warps: 32 / 64 = 50%, probably enough. The
      // what-if is offered for a latency-bound kernel only: 5 blocks need 40 warps = 10 per
      // sub-partition, 16384 / 10 = 1638 -> 1536 regs/warp = 48 regs/thread; 40 / 64 = 62.5% ->
      // 63%.
      {"h100",
       64,
       0,
       0,
       {256, 1, 1},
       {1320, 1, 1},
       0,
       "50% occupancy (probably enough); registers limit 4 blocks/SM; if latency-bound, <= 48 "
       "regs/thread would fit 5 (63%): __launch_bounds__(256, 5) or -maxrregcount=48 (fewer "
       "registers can spill to local memory; check ptxas -v)"},
      // At 50% with spills, registers binding: allowing more registers is the useful direction.
      {"h100",
       64,
       0,
       0,
       {256, 1, 1},
       {1320, 1, 1},
       32,
       "50% occupancy (probably enough); registers limit 4 blocks/SM, and it already spills 32 "
       "B/thread: fewer registers would spill more; allowing more registers (-maxrregcount, "
       "__launch_bounds__) may remove the spill"},
      // Low occupancy from shared memory: 64 KiB dynamic + 1 KiB reserved = 65 KiB a block;
      // 228 / 65 = 3 blocks of 4 warps = 12 / 64 = 18.75% -> 19%, below 25%: low. 32 regs/thread
      // allow 16 warps per sub-partition (no limit). Four blocks: 233472 / 4 = 58368 B each,
      // minus 1 KiB reserved = 57344 B = 56 KiB; 16 / 64 = 25%.
      {"h100",
       32,
       0,
       64 * 1024,
       {128, 1, 1},
       {1320, 1, 1},
       0,
       "19% occupancy (low, likely latency-bound); 64 KiB smem/block limits 3 blocks/SM; <= 56 "
       "KiB/block would fit 4 (25%): less dynamic shared memory (smaller tiles)"},
      // A tie: 96 regs/thread = 3072 regs/warp, 16384 / 3072 = 5 warps per sub-partition, 20 per
      // SM = 2 blocks of 8 warps; 99 KiB + 1 KiB = 100 KiB a block, 228 / 100 = 2 blocks. Both
      // give 2 (25%): fewer registers alone still leave shared memory at 2, and the reverse.
      // Three blocks: registers as above need <= 80 regs/thread; shared memory 233472 / 3 =
      // 77824 B, minus 1 KiB = 76800 B = 75 KiB. Together: 3 blocks, 24 / 64 = 37.5% -> 38%.
      {"h100",
       96,
       0,
       99 * 1024,
       {256, 1, 1},
       {1320, 1, 1},
       0,
       "25% occupancy; registers and shared_mem both limit 2 blocks/SM: changing one alone "
       "gains nothing; <= 80 regs/thread and <= 75 KiB/block together would fit 3 (38%): "
       "__launch_bounds__(256, 3) or -maxrregcount=80 (fewer registers can spill to local memory; "
       "check ptxas -v), less dynamic shared memory (smaller tiles)"},
      // Block slots with a block size that gains: 32-thread blocks, 32 regs/thread (1024
      // regs/warp, 16 warps per sub-partition: 64 warps, no limit); 32 block slots x 1 warp =
      // 32 / 64 = 50%. 1024-thread blocks: 2 blocks x 32 warps = 64 / 64 = 100%.
      {"h100",
       32,
       0,
       0,
       {32, 1, 1},
       {13200, 1, 1},
       0,
       "50% occupancy (probably enough); block slots limit 32 blocks/SM of 1 warp; if "
       "latency-bound, blocks of 1024 threads would reach 100%"},
      // A block size that gains nothing is not named. V100: 64 regs/thread = 2048 regs/warp,
      // 8 warps per sub-partition, 32 per SM; 32-thread blocks: registers allow 32 blocks, block
      // slots 32: a tie at 32 / 64 = 50%. The engine's best block size (1024, the largest of
      // those reaching its best) gives 32 warps / 32 = 1 block = 50% too: no gain.
      {"v100",
       64,
       0,
       0,
       {32, 1, 1},
       {13200, 1, 1},
       0,
       "50% occupancy (probably enough); registers and blocks both limit 32 blocks/SM: "
       "changing one alone gains nothing"},
      // Full occupancy is not limited by anything: 32 regs/thread, 256-thread blocks: 8 blocks
      // of 8 warps = 64 / 64.
      {"h100", 32, 0, 0, {256, 1, 1}, {1320, 1, 1}, 0, ""},
      {"h100",
       32,
       0,
       0,
       {256, 1, 1},
       {1320, 1, 1},
       24,
       "full occupancy; 24 B/thread spilled to local memory"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Advice(SignatureOf(c)), c.expected)
        << c.device << " regs " << c.regs << " smem " << c.static_smem << "+" << c.dyn_smem
        << " block " << c.block.x << " grid " << c.grid.x << " local " << c.local_bytes;
  }
}

// Kernels of libraries and code generators (kernel_origin.h), on the same devices: the fact, and
// what their user can change instead of registers and launch bounds.
TEST(ReportAdviceTable, LibraryKernelsGetTheirOwnLevers) {
  const std::string cublas =
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
      "segment_k_off_kernel__5x_cublas";
  const std::string cublas_levers =
      "cuBLAS picks the kernel from the GEMM's shape, data type and math mode: change the shape or "
      "batch (dimensions that are multiples of 16 use tensor cores), the data type, or in PyTorch "
      "torch.backends.cuda.matmul.allow_tf32 / torch.set_float32_matmul_precision; cuBLASLt "
      "callers can try other algorithms from cublasLtMatmulAlgoGetHeuristic";
  // A Hopper GEMM: 384 threads (12 warps, three warpgroups), 168 regs/thread = 5376 regs/warp
  // (21 x 256), 16384 / 5376 = 3 warps per sub-partition, 12 per SM: 1 block; 200 KiB dynamic +
  // 1 KiB reserved = 201 KiB of 228: 1 block. Both give 1 block, 12 / 64 = 18.75% -> 19%; 264
  // blocks on 132 SMs are 2 waves.
  Case gemm{"h100", 168, 0, 200 * 1024, {384, 1, 1}, {264, 1, 1}, 0, ""};
  Signature s = SignatureOf(gemm);
  s.demangled = cublas;
  EXPECT_EQ(Advice(s),
            "19% occupancy; registers and shared_mem limit 1 block/SM: a cuBLAS kernel, not "
            "rebuilt with your flags; tensor-core kernels run one or two large blocks per SM by "
            "design; check with Nsight Compute's achieved occupancy and stall reasons whether it "
            "matters; " + cublas_levers);
  // The same as the user's own kernel: the register lever, with its cost.
  s.demangled = "void my_gemm<128>(float const*, float*)";
  EXPECT_THAT(Advice(s), ::testing::HasSubstr("registers and shared_mem both limit 1 block/SM"));
  EXPECT_THAT(Advice(s), ::testing::Not(::testing::HasSubstr("cuBLAS")));
  // Four blocks: 4 / (132 x 1) = 0.03 waves, 128 SMs idle; more work per call, not more blocks.
  gemm.grid = {4, 1, 1};
  s = SignatureOf(gemm);
  s.demangled = cublas;
  EXPECT_EQ(Advice(s),
            "grid of 4 blocks is under one wave (0.03 waves of 132 SMs x 1 block/SM): every block "
            "is already resident, so higher occupancy cannot help; 128 of 132 SMs get no block; "
            "give it more work per call (a larger or batched GEMM; cuBLAS chooses split-K itself)");
  // An Inductor reduction: 255 regs/thread = 8160 -> 8192 regs/warp, 2 warps per sub-partition,
  // 8 per SM: one 256-thread block, 8 / 64 = 12.5% -> 13%. No tensor-core sentence.
  s = SignatureOf({"h100", 255, 0, 0, {256, 1, 1}, {1320, 1, 1}, 0, ""});
  s.demangled = "triton_red_fused_native_layer_norm_7";
  EXPECT_EQ(Advice(s),
            "13% occupancy; registers limit 1 block/SM: a Triton kernel, not rebuilt with your "
            "flags; check with Nsight Compute's achieved occupancy and stall reasons whether it "
            "matters; its Triton config sets this: num_warps, num_stages and the BLOCK sizes "
            "(torch.compile(mode=\"max-autotune\") searches them; for your own kernel, the "
            "@triton.autotune configs)");
  // PyTorch's add at 50%: 64 regs/thread = 2048 regs/warp, 8 warps per sub-partition, 32 per
  // SM = 8 blocks of 4 warps, 32 / 64: only the fact.
  s = SignatureOf({"h100", 64, 0, 0, {128, 1, 1}, {1320, 1, 1}, 0, ""});
  s.demangled =
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
      "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
      "at::detail::Array<char*, 3>)";
  EXPECT_EQ(Advice(s), "50% occupancy (probably enough); registers limit 8 blocks/SM");
}

// The first case's kernel launched in a green context of 16 SMs (kernel.sm_count 16): its 4 blocks
// on 16 SMs x 2 = 32 slots are 4 / 32 = 0.125 waves, and 12 of the 16 SMs get no block; the
// device's 132 SMs are not the ones the launch could use.
TEST(ReportAdviceTable, AGreenContextsWavesAreOfItsSms) {
  Signature s = SignatureOf({"h100", 128, 0, 0, {256, 1, 1}, {4, 1, 1}, 0, ""});
  s.first.sm_count = 16;
  s.first.occupancy.waves = 0.125;
  s.waves_min = s.waves_max = s.waves_mean = 0.125;
  EXPECT_EQ(Advice(s),
            "grid of 4 blocks is under one wave (0.12 waves of 16 SMs x 2 blocks/SM): every block "
            "is already resident, so higher occupancy cannot help; 12 of 16 SMs get no block; "
            "launch more blocks (less work per block, split-K)");
}

// Without the device's limits (no device event) the engine cannot check a change: a tie says
// only that both bind, and no block size is named.
TEST(ReportAdviceTable, WithoutTheDeviceNoUncheckedSuggestion) {
  schema::OccupancyFields f = testing::Fields(32, 1, 64, Resource::kBlocks);
  f.best_block_size = 1024;
  Signature s;
  s.block = {32, 1, 1};
  s.first.block = s.block;
  s.first.occupancy = f;
  s.warps_per_block = 1;
  EXPECT_EQ(Advice(s), "50% occupancy (probably enough); block slots limit 32 blocks/SM of 1 warp");
  f = testing::Fields(6, 8, 64, Resource::kRegisters);
  f.limiting_resources |= schema::MaskOf(Resource::kSharedMem);
  s.block = {256, 1, 1};
  s.first.occupancy = f;
  s.warps_per_block = 8;
  EXPECT_EQ(Advice(s),
            "75% occupancy (probably enough); registers and shared_mem both limit 6 blocks/SM: "
            "changing one alone gains nothing");
}

}  // namespace
}  // namespace cuflight::report
