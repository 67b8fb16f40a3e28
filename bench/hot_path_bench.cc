// The launch hot path: the CUPTI callback handler on hand-made callback data for a function,
// device and context already seen (the cached case), through to the record in the ring. The
// ring is drained with the timer paused whenever it is full, so every timed push succeeds.
// BM_LaunchCallbackCachedInBlackbox: the same with the ring in a black box (a memfd of 262144
// slots, the largest ring a black box holds), as the injected library runs it by default.
//
// BM_LaunchCallbackNewConfiguration: the slow path a launch configuration takes once (here every
// launch has a dynamic shared memory size not seen before), with the driver asked for its
// occupancy (<1>; the fake driver answers with cuda_occupancy.h, so a real driver's own cost
// comes on top) or not (<0>, the driver lacks the entry point): the difference is what asking
// the driver adds besides the driver's own time.
//
// The launch's timestamp comes from the event clock (cuflight/base/tsc_clock.h), which the
// injector's sender thread refits every 10 ms or so; here the benchmark refits it whenever it
// drains the ring, with the timer paused. BM_LaunchCallbackCachedClockGettime: the same launch
// with the clock never fitted, so that it reads clock_gettime(CLOCK_REALTIME) as before the
// event clock (and as in a process whose kernel does not keep time with the TSC).
// BM_EventClockNow / BM_ClockGettimeRealtime: the two clocks alone. Every other launch benchmark
// fits the event clock and refits it at each drain (RunLaunches): a line left unrefitted for
// kMaxExtrapolationNs (1 s) is dropped, and a benchmark that ran after it would time
// clock_gettime without saying so.
//
//   build/release/bin/hot_path_bench --benchmark_min_time=0.5 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <cupti.h>

#include <time.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "cuflight/base/tsc_clock.h"
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/occupancy/device_presets.h"
#include "device_table.h"
#include "fake_cuda.h"
#include "function_table.h"
#include "launch_ring.h"
#include "recorder.h"
#include "timing_windows.h"

namespace cuflight::inject {
namespace {

using testing::FakeCuda;
using testing::FakeFunction;

constexpr size_t kRingSlots = size_t{1} << 20;
constexpr size_t kBlackboxRingSlots = size_t{1} << 18;

// The event clock fitted as the sender thread fits it: two refreshes a baseline apart.
void FitEventClock() {
  base::EventClock().Refresh();
  timespec pause{0, 2 * base::TscRealtimeClock::kMinRefreshNs};
  nanosleep(&pause, nullptr);
  base::EventClock().Refresh();
}

struct Setup {
  FakeCuda fake;
  testing::ScopedFake scope{&fake};
  DriverApi driver;
  CuptiApi cupti;
  FunctionTable functions{1 << 16};
  DeviceTable devices;
  std::unique_ptr<blackbox::RegionWriter> region;
  std::unique_ptr<LaunchRing> ring;
  std::unique_ptr<Recorder> recorder;
  size_t ring_slots = kRingSlots;

  explicit Setup(bool in_blackbox = false) {
    fake.devices[0] = occupancy::FindDevicePreset("h100-sxm")->limits;
    fake.context_device[0xC0] = 0;
    // The launches' stream 0x5E was made in context 0xC0: cuStreamGetCtx answers it, as a driver
    // does for every stream a launch succeeded on (cuda.h, cuStreamGetCtx). Without it the fake
    // refuses the handle, and every launch would ask the driver again.
    fake.stream_context[0x5E] = 0xC0;
    for (uint64_t f = 0; f < 64; ++f) fake.functions[0x1000 + f] = FakeFunction{};
    driver = fake.driver();
    cupti = fake.cupti();
    RecorderOptions options;
    if (in_blackbox) {
      ring_slots = kBlackboxRingSlots;
      blackbox::RegionOptions o;
      o.ring_capacity = static_cast<uint32_t>(ring_slots);
      o.journal_capacity = 1 << 16;
      std::string error;
      region = blackbox::RegionWriter::Create(o, &error);
      if (region == nullptr) std::abort();
      ring = std::make_unique<LaunchRing>(
          ring_slots, LaunchRing::Storage{region->ring_control(), region->ring_slots()});
      options.blackbox = region.get();
    } else {
      ring = std::make_unique<LaunchRing>(ring_slots);
    }
    recorder =
        std::make_unique<Recorder>(&driver, &cupti, ring.get(), &functions, &devices, options);
  }
};

// The benchmark loop every launch benchmark shares: `launch(i)` makes launch i (1, 2, ...) and
// puts one record in the ring. Whenever the ring is full it is drained with the timer paused, so
// every timed push succeeds, and the event clock is refitted there when `refit_clock` (as the
// sender thread refits it every 10 ms or so: a line older than kMaxExtrapolationNs is no longer
// used, and the launch would read clock_gettime instead).
template <typename Launch>
void RunLaunches(benchmark::State& state, Setup& s, bool refit_clock, Launch launch) {
  uint32_t i = 0;
  size_t in_ring = s.ring->SizeApprox();
  for (auto _ : state) {
    if (in_ring == s.ring_slots) {
      state.PauseTiming();
      LaunchRecord r;
      while (s.ring->TryPop(&r)) {
      }
      in_ring = 0;
      if (refit_clock) base::EventClock().Refresh();
      state.ResumeTiming();
    }
    launch(++i);
    ++in_ring;
  }
  state.SetItemsProcessed(state.iterations());
}

template <int kFunctions, bool kInBlackbox = false, bool kEventClock = true>
void BM_LaunchCallbackCached(benchmark::State& state) {
  Setup s(kInBlackbox);
  if (kEventClock) {
    FitEventClock();
  } else {
    base::EventClock().Reset();  // clock_gettime until the next fit
  }
  cuLaunchKernel_params params[kFunctions];
  for (int i = 0; i < kFunctions; ++i) {
    params[i] = {reinterpret_cast<CUfunction>(uintptr_t{0x1000} + i), 132, 1, 1, 256, 1, 1, 0,
                 reinterpret_cast<CUstream>(0x5E), nullptr, nullptr};
  }
  CUresult result = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_EXIT;
  data.functionReturnValue = &result;
  data.symbolName = "_Z6kernelPfi";
  data.context = reinterpret_cast<CUcontext>(0xC0);
  for (int i = 0; i < kFunctions; ++i) {  // first launches: the slow path, outside the timing
    data.functionParams = &params[i];
    s.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
  }
  RunLaunches(state, s, kEventClock, [&](uint32_t i) {
    data.functionParams = &params[(i - 1) % kFunctions];
    data.correlationId = i;
    s.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
  });
  state.counters["dropped"] = static_cast<double>(s.ring->dropped());
  state.counters["driver_queries"] = static_cast<double>(s.fake.occupancy_queries);
  state.counters["tsc"] = base::EventClock().counter_in_use() ? 1 : 0;
}
BENCHMARK(BM_LaunchCallbackCached<1>);
BENCHMARK(BM_LaunchCallbackCached<64>);
void BM_LaunchCallbackCachedInBlackbox(benchmark::State& state) {
  BM_LaunchCallbackCached<1, true>(state);
}
BENCHMARK(BM_LaunchCallbackCachedInBlackbox);
void BM_LaunchCallbackCachedClockGettime(benchmark::State& state) {
  BM_LaunchCallbackCached<1, false, false>(state);
}
BENCHMARK(BM_LaunchCallbackCachedClockGettime);

void BM_EventClockNow(benchmark::State& state) {
  FitEventClock();
  int64_t refit_at = base::EventClock().NowNs() + base::TscRealtimeClock::kMinRefreshNs;
  for (auto _ : state) {
    const int64_t now = base::EventClock().NowNs();
    benchmark::DoNotOptimize(now);
    if (now > refit_at) {  // as the sender thread does, every 10 ms
      state.PauseTiming();
      base::EventClock().Refresh();
      refit_at = now + base::TscRealtimeClock::kMinRefreshNs;
      state.ResumeTiming();
    }
  }
  state.counters["tsc"] = base::EventClock().counter_in_use() ? 1 : 0;
}
BENCHMARK(BM_EventClockNow);
void BM_ClockGettimeRealtime(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(base::NowRealtimeNs());
}
BENCHMARK(BM_ClockGettimeRealtime);

// A launch's entry and exit callbacks, as CUPTI makes them: under the sampled timing policy
// (kSampled) the entry stores the window word in correlationData and the exit reads it again
// (timing_windows.h, point 3); otherwise the entry returns at once.
template <bool kSampled>
void BM_LaunchEntryAndExit(benchmark::State& state) {
  Setup s;
  FitEventClock();
  std::atomic<uint64_t> window{TimingWindows::kOpen};
  if (kSampled) {
    RecorderOptions options;
    options.timing_window = &window;
    s.recorder = std::make_unique<Recorder>(&s.driver, &s.cupti, s.ring.get(), &s.functions,
                                            &s.devices, options);
  }
  cuLaunchKernel_params params{reinterpret_cast<CUfunction>(uintptr_t{0x1000}), 132, 1, 1, 256,
                               1, 1, 0, reinterpret_cast<CUstream>(0x5E), nullptr, nullptr};
  CUresult result = CUDA_SUCCESS;
  uint64_t shared = 0;
  CUpti_CallbackData data{};
  data.functionReturnValue = &result;
  data.functionParams = &params;
  data.symbolName = "_Z6kernelPfi";
  data.context = reinterpret_cast<CUcontext>(0xC0);
  data.correlationData = &shared;
  data.callbackSite = CUPTI_API_EXIT;  // the first launch: the slow path, outside the timing
  s.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
  RunLaunches(state, s, /*refit_clock=*/true, [&](uint32_t i) {
    data.correlationId = i;
    data.callbackSite = CUPTI_API_ENTER;
    s.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
    data.callbackSite = CUPTI_API_EXIT;
    s.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
  });
  state.counters["tsc"] = base::EventClock().counter_in_use() ? 1 : 0;
}
BENCHMARK(BM_LaunchEntryAndExit<false>);
BENCHMARK(BM_LaunchEntryAndExit<true>);

template <int kAskDriver>
void BM_LaunchCallbackNewConfiguration(benchmark::State& state) {
  Setup s;
  FitEventClock();
  if (!kAskDriver) {
    s.driver.OccupancyMaxActiveBlocksPerMultiprocessorWithFlags = nullptr;
    s.recorder = std::make_unique<Recorder>(&s.driver, &s.cupti, s.ring.get(), &s.functions,
                                            &s.devices, RecorderOptions{});
  }
  cuLaunchKernel_params params = {reinterpret_cast<CUfunction>(uintptr_t{0x1000}), 132, 1, 1, 256,
                                  1, 1, 0, reinterpret_cast<CUstream>(0x5E), nullptr, nullptr};
  CUresult result = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_EXIT;
  data.functionReturnValue = &result;
  data.symbolName = "_Z6kernelPfi";
  data.context = reinterpret_cast<CUcontext>(0xC0);
  data.functionParams = &params;
  s.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
  RunLaunches(state, s, /*refit_clock=*/true, [&](uint32_t i) {
    // A size never launched before: 1..49152 bytes, then the same sizes with another block.
    params.sharedMemBytes = 1 + i % 49152;
    params.blockDimX = 256 - 32 * ((i / 49152) % 8);
    data.correlationId = i;
    s.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
  });
  state.counters["driver_queries"] = static_cast<double>(s.fake.occupancy_queries);
}
// What every other driver call costs the application while api_error events are on (the whole
// driver domain is subscribed): CUPTI raises an enter and an exit callback for it; the handler
// returns at the enter, and at the exit looks at the result and the callback id.
void BM_DriverCallbackNotALaunch(benchmark::State& state) {
  Setup s;
  cuMemcpyHtoD_v2_params params{};
  CUresult result = CUDA_SUCCESS;
  CUpti_CallbackData enter{};
  enter.callbackSite = CUPTI_API_ENTER;
  enter.functionParams = &params;
  enter.context = reinterpret_cast<CUcontext>(0xC0);
  CUpti_CallbackData exit = enter;
  exit.callbackSite = CUPTI_API_EXIT;
  exit.functionReturnValue = &result;
  for (auto _ : state) {
    s.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
                           &enter);
    s.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
                           &exit);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DriverCallbackNotALaunch);

BENCHMARK(BM_LaunchCallbackNewConfiguration<0>);
BENCHMARK(BM_LaunchCallbackNewConfiguration<1>);

}  // namespace
}  // namespace cuflight::inject

BENCHMARK_MAIN();
