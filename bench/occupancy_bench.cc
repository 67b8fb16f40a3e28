// Occupancy engine cost: a full uncached Compute() (reference arithmetic, breakdown, what-if,
// best block size) and a cached lookup as the injector's launch path does it.
#include <benchmark/benchmark.h>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"
#include "cuflight/occupancy/occupancy_cache.h"

namespace {

using namespace cuflight::occupancy;

LaunchConfig TypicalLaunch() {
  LaunchConfig l;
  l.regs_per_thread = 40;
  l.block = {256, 1, 1};
  l.static_smem = 8 * 1024;
  l.dyn_smem = 16 * 1024;
  l.grid = {4096, 1, 1};
  return l;
}

void BM_ComputeUncached(benchmark::State& state) {
  const char* device = state.range(0) == 0 ? "a100" : "h100-sxm";
  auto ctx = DeviceContext::Make(FindDevicePreset(device)->limits);
  LaunchConfig l = TypicalLaunch();
  Result r;
  int regs = 0;
  for (auto _ : state) {
    l.regs_per_thread = 24 + (regs++ & 63);  // vary the input so nothing is hoisted
    Compute(*ctx, l, &r);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(device);
}
BENCHMARK(BM_ComputeUncached)->Arg(0)->Arg(1);

void BM_CachedLookup(benchmark::State& state) {
  OccupancyCache cache(4096);
  auto ctx = DeviceContext::Make(FindDevicePreset("h100-sxm")->limits);
  constexpr int kKernels = 256;
  CacheKey keys[kKernels];
  for (int i = 0; i < kKernels; ++i) {
    keys[i].function = 0x7f0000001000ull + 0x40ull * static_cast<uint64_t>(i);
    keys[i].block_x = 128u << (i % 3);
    keys[i].block_y = keys[i].block_z = 1;
    keys[i].dyn_smem = static_cast<uint32_t>(i % 4) * 1024;
    Result r;
    LaunchConfig l = TypicalLaunch();
    l.block = {keys[i].block_x, 1, 1};
    Compute(*ctx, l, &r);
    cache.Insert(keys[i], r.fields);
  }
  cuflight::schema::OccupancyFields out;
  int i = 0;
  for (auto _ : state) {
    bool hit = cache.Lookup(keys[i++ & (kKernels - 1)], &out);
    benchmark::DoNotOptimize(hit);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CachedLookup);

}  // namespace

BENCHMARK_MAIN();
