// Cost of the launch ring (libinject/ring) for a 192-byte record:
//   BM_PushPop                    one thread, push then pop (the uncontended round trip)
//   BM_Push/threads:N             N producers, no consumer, a ring that never fills in the run
//                                 (fixed iterations): one push alone (N = 1) and under producer
//                                 contention (N = 2); Time is wall time per push of all threads
//                                 together, CPU is the CPU time of one push
//   BM_PushFull                   one thread, push into a full ring (the drop path)
//   BM_PushWithConsumer/threads:N N producers and a consumer thread draining as fast as it can,
//                                 OnFull::kBlock: the sustained rate, every record delivered
//                                 (needs a free core per thread; on fewer cores it measures the
//                                 scheduler)
//
//   build/release/bin/ring_bench --benchmark_min_time=0.5 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "cuflight/inject/ring.h"

namespace cuflight::inject {
namespace {

struct Record {
  uint64_t words[24];
};
static_assert(sizeof(Record) == 192);

Record MakeRecord(uint64_t i) {
  Record r{};
  for (uint64_t w = 0; w < 24; ++w) r.words[w] = i + w;
  return r;
}

void BM_PushPop(benchmark::State& state) {
  MpscRing<Record> ring(16384);
  Record in = MakeRecord(1);
  Record out{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring.TryPush(in));
    benchmark::DoNotOptimize(ring.TryPop(&out));
    benchmark::ClobberMemory();
    ++in.words[0];
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PushPop);

// Shared by the threads of one run; made in Setup, before the threads start.
std::unique_ptr<MpscRing<Record>> g_ring;
std::unique_ptr<std::thread> g_consumer;
std::atomic<bool> g_stop{false};

constexpr int64_t kPushesPerThread = 100000;

void SetUpNeverFull(const benchmark::State&) {
  // 2^18 slots > 2 x kPushesPerThread: no push finds the ring full.
  g_ring = std::make_unique<MpscRing<Record>>(size_t{1} << 18);
}
void TearDownRing(const benchmark::State&) { g_ring.reset(); }

void BM_Push(benchmark::State& state) {
  MpscRing<Record>& ring = *g_ring;
  Record in = MakeRecord(static_cast<uint64_t>(state.thread_index()) << 32);
  uint64_t failed = 0;
  for (auto _ : state) {
    failed += ring.TryPush(in) ? 0 : 1;
    ++in.words[0];
  }
  if (failed != 0) state.SkipWithError("the ring filled up");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Push)
    ->Threads(1)
    ->Threads(2)
    ->Iterations(kPushesPerThread)
    ->UseRealTime()
    ->Setup(SetUpNeverFull)
    ->Teardown(TearDownRing);

// The drop path: every push finds the ring full.
void BM_PushFull(benchmark::State& state) {
  MpscRing<Record> ring(64);
  const Record in = MakeRecord(3);
  while (ring.TryPush(in)) {
  }
  for (auto _ : state) benchmark::DoNotOptimize(ring.TryPush(in));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PushFull);

void StartConsumer(const benchmark::State&) {
  g_ring = std::make_unique<MpscRing<Record>>(16384);
  g_stop.store(false);
  g_consumer = std::make_unique<std::thread>([] {
    Record out{};
    while (!g_stop.load(std::memory_order_relaxed)) {
      while (g_ring->TryPop(&out)) benchmark::DoNotOptimize(out);
    }
  });
}
void StopConsumer(const benchmark::State&) {
  g_stop.store(true);
  g_consumer->join();
  g_consumer.reset();
  g_ring.reset();
}

// Sustained rate with a consumer thread: OnFull::kBlock, so every record gets through and the
// time per push includes waiting for the consumer when it falls behind.
void BM_PushWithConsumer(benchmark::State& state) {
  MpscRing<Record>& ring = *g_ring;
  Record in = MakeRecord(static_cast<uint64_t>(state.thread_index()) << 32);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring.Push(in, env::OnFull::kBlock));
    ++in.words[0];
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PushWithConsumer)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->Setup(StartConsumer)
    ->Teardown(StopConsumer);

}  // namespace
}  // namespace cuflight::inject

BENCHMARK_MAIN();
