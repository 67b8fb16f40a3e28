// Encoder throughput on the injector's hot path (target: >= 3 M kernel events/s on one core), and
// decoder throughput for reference (the collector's side).
//
//   build/release/bin/encoder_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/events.h"

namespace cuflight::schema {
namespace {

// A PyTorch-style CUTLASS GEMM launch on an H100: 84-character mangled name, 151-character
// demangled name, the occupancy numbers the engine reports for it.
KernelEvent RealisticKernel() {
  KernelEvent k;
  k.header = {1732000000123456789, 31337, 1048576};
  k.tid = 31340;
  k.device = 0;
  k.context = 0x55d1c0a3b2e0;
  k.stream = 0x55d1c0f41230;
  k.correlation_id = 734211;
  k.api = "cuLaunchKernel";
  k.name =
      "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedIfEEEEEvNT_6ParamsE";
  k.demangled =
      "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::"
      "MmaPipelined<float>, cutlass::epilogue::Epilogue, true>>(Gemm::Params)";
  k.grid = {264, 8, 1};
  k.block = {256, 1, 1};
  k.num_regs = 168;
  k.static_shared_bytes = 49152;
  k.dyn_shared_bytes = 32768;
  k.local_bytes = 0;
  k.const_bytes = 616;
  k.max_threads_per_block = 256;
  k.carveout = -1;
  OccupancyFields& o = k.occupancy;
  o.max_active_blocks = 1;
  o.active_warps = 8;
  o.max_warps = 64;
  o.occupancy = 0.125;
  o.reg_occupancy = 0.125;
  o.smem_occupancy = 0.25;
  o.warp_occupancy = 1;
  o.block_occupancy = 1;
  o.barrier_occupancy = 1;
  o.limiting_resource = Resource::kRegisters;
  o.limiting_resources = MaskOf(Resource::kRegisters);
  o.allocated_regs_per_block = 43008;
  o.allocated_smem_per_block = 82944;
  o.waves = 16.0 / 1.1;
  o.tail_utilization = 2.0 / 3.0;
  o.regs_for_next_block = 128;
  o.smem_for_next_block = 115712;
  o.best_block_size = 128;
  return k;
}

void BM_EncodeKernel(benchmark::State& state) {
  KernelEvent k = RealisticKernel();
  std::array<char, 4096> buf;
  size_t bytes = 0;
  for (auto _ : state) {
    ++k.header.seq;
    ++k.correlation_id;
    const size_t n = Encode(k, buf.data(), buf.size());
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
    bytes += n;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["line_bytes"] = static_cast<double>(Encode(k, buf.data(), buf.size()));
}
BENCHMARK(BM_EncodeKernel);

// Every string needs escaping: the slow path of the escaper.
void BM_EncodeKernelHostileNames(benchmark::State& state) {
  KernelEvent k = RealisticKernel();
  const std::string name =
      "f<\"\\\t\xC3\xA9\xE6\x97\xA5\xF0\x9F\x98\x80\x80\xC0>" + std::string(k.name.substr(0, 64));
  k.name = name;
  k.demangled = name;
  std::array<char, 4096> buf;
  size_t bytes = 0;
  for (auto _ : state) {
    const size_t n = Encode(k, buf.data(), buf.size());
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
    bytes += n;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_EncodeKernelHostileNames);

void BM_EncodeKernelTime(benchmark::State& state) {
  KernelTimeEvent t;
  t.header = {1732000000123456789, 31337, 1048577};
  t.correlation_id = 734211;
  t.context = 0x55d1c0a3b2e0;
  t.stream = 0x55d1c0f41230;
  t.start_ns = 1732000000200000000;
  t.end_ns = 1732000000200512345;
  t.duration_ns = 512345;
  std::array<char, 1024> buf;
  size_t bytes = 0;
  for (auto _ : state) {
    ++t.header.seq;
    const size_t n = Encode(t, buf.data(), buf.size());
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
    bytes += n;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_EncodeKernelTime);

void BM_DecodeKernel(benchmark::State& state) {
  std::array<char, 4096> buf;
  const std::string line(buf.data(), Encode(RealisticKernel(), buf.data(), buf.size()));
  for (auto _ : state) {
    DecodeResult result = Decode(line);
    benchmark::DoNotOptimize(result);
    if (!result.ok()) state.SkipWithError(result.message.c_str());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * line.size()));
}
BENCHMARK(BM_DecodeKernel);

}  // namespace
}  // namespace cuflight::schema

BENCHMARK_MAIN();
