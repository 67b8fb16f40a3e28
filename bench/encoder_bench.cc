// Encoder throughput on the injector's hot path (target: >= 3 M kernel events/s on one core), the
// validator's on the collector's ingest path (target: >= 1.5 M events/s on one core for a 1:1 mix
// of kernel and kernel_time lines), and the decoder's for reference.
//
//   build/release/bin/encoder_bench --benchmark_min_time=0.5 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/line_decoder.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/launch_encoder.h"
#include "cuflight/schema/validator.h"
#include "bench_events.h"

namespace cuflight::schema {
namespace {

using bench::RealisticKernel;

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

// A run of `launch` lines as a producer sends them (docs/protocol.md, "Interned configurations"):
// one thread, one configuration and grid, the time 15 to 23 us apart, seq and correlation id
// counting up. Arg 0: schema::Encode; arg 1: schema::LaunchEncoder, the sender thread's.
void BM_EncodeLaunchRun(benchmark::State& state) {
  const bool fast = state.range(0) == 1;
  LaunchEvent e;
  e.header = {1764374400123456789, 31337, 1048577};
  e.tid = 31342;
  e.correlation_id = 734211;
  e.config = 7;
  e.grid = {132, 1, 1};
  LaunchEncoder encoder(e.header.pid);
  std::array<char, 1024> buf;
  uint64_t rng = 88172645463325252u;  // xorshift64: the gaps between launches
  size_t bytes = 0;
  for (auto _ : state) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    e.header.ts_ns += 15000 + static_cast<int64_t>(rng & 8191);
    ++e.header.seq;
    ++e.correlation_id;
    const size_t n = fast ? encoder.Encode(e, buf.data(), buf.size())
                          : Encode(e, buf.data(), buf.size());
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
    bytes += n;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetLabel(fast ? "LaunchEncoder" : "Encode");
}
BENCHMARK(BM_EncodeLaunchRun)->Arg(0)->Arg(1);

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

// The collector's mix: kernel and kernel_time lines 1:1, as the encoder writes them, with varied
// names (8 kernels, 30 to 250 characters), ids, handles and numbers, so that no two consecutive
// lines are the same. 1024 lines, about 600 KB.
struct IngestLines {
  std::vector<std::string> kernel;
  std::vector<std::string> kernel_time;
  std::vector<std::string> mix;  // kernel, kernel_time, kernel, ...
  size_t mix_bytes = 0;
};

const IngestLines& Lines() {
  static const IngestLines lines = [] {
    static const std::array<std::string, 8> names = {
        "_Z6kernelPfi",
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
        "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedIfEEEEEvNT_6ParamsE",
        "ampere_sgemm_128x64_nn",
        "_ZN5flash12flash_fwd_kernelI23Flash_fwd_kernel_traitsILi128ELi128ELi64ELi4ELb0ELb0EN7cutlass6half_tE"
        "EEvNS_16Flash_fwd_paramsE",
        "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffEEjfLi4EEEEEvT1_",
        "_ZN3cub18DeviceRadixSortOnesweepKernelINS_21DeviceRadixSortPolicyIjNS_8NullTypeEjE9Policy800EEbjS3_jiEEvPT1_",
        "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT",
    };
    IngestLines out;
    KernelEvent k = RealisticKernel();
    KernelTimeEvent t;
    std::array<char, 4096> buf;
    for (uint64_t i = 0; i < 512; ++i) {
      const std::string& name = names[i % names.size()];
      const std::string demangled = "void " + name.substr(0, name.size() * 3 / 2) + "(" +
                                    std::string(name.rbegin(), name.rend()) + ")";
      k.header.seq = 2 * i;
      k.header.ts_ns += 15'731 * static_cast<int64_t>(i);
      k.correlation_id = 734211 + i;
      k.stream = 0x55d1c0f41230 + 0x100 * (i % 5);
      k.name = name;
      k.demangled = demangled;
      k.grid = {static_cast<uint32_t>(1 + i * 37 % 4096), static_cast<uint32_t>(1 + i % 3), 1};
      k.occupancy.occupancy = static_cast<double>(1 + i % 8) / 8;
      k.occupancy.waves = static_cast<double>(k.grid.x) / 132;
      k.cooperative = i % 16 == 0;
      k.graph_id.reset();
      k.graph_node_id.reset();
      if (i % 4 == 0) {
        k.graph_id = 7;
        k.graph_node_id = 0x7f0012340000 + i;
      }
      out.kernel.emplace_back(buf.data(), Encode(k, buf.data(), buf.size()));
      t.header = {k.header.ts_ns + 2'000'000, k.header.pid, 2 * i + 1};
      t.correlation_id = k.correlation_id;
      t.context = k.context;
      t.stream = k.stream;
      t.start_ns = 1732000000200000000 + 1'000'000 * i;
      t.end_ns = t.start_ns + 1000 + i * 977;
      t.duration_ns = t.end_ns - t.start_ns;
      out.kernel_time.emplace_back(buf.data(), Encode(t, buf.data(), buf.size()));
      out.mix.push_back(out.kernel.back());
      out.mix.push_back(out.kernel_time.back());
      out.mix_bytes += out.kernel.back().size() + out.kernel_time.back().size();
    }
    return out;
  }();
  return lines;
}

double MeanSize(const std::vector<std::string>& lines) {
  size_t bytes = 0;
  for (const std::string& line : lines) bytes += line.size();
  return static_cast<double>(bytes) / static_cast<double>(lines.size());
}

void ValidateLines(benchmark::State& state, const std::vector<std::string>& lines) {
  LineInfo info;
  ValidateError error;
  size_t i = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string& line = lines[i];
    i = i + 1 == lines.size() ? 0 : i + 1;
    const Reason reason = Validate(line, &info, &error);
    benchmark::DoNotOptimize(reason);
    benchmark::DoNotOptimize(info.header.seq);
    if (reason != Reason::kOk) state.SkipWithError(std::string(error.message()).c_str());
    bytes += line.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["line_bytes"] = MeanSize(lines);
}

void BM_ValidateKernel(benchmark::State& state) { ValidateLines(state, Lines().kernel); }
BENCHMARK(BM_ValidateKernel);

void BM_ValidateKernelTime(benchmark::State& state) { ValidateLines(state, Lines().kernel_time); }
BENCHMARK(BM_ValidateKernelTime);

// The figure for the collector's target: kernel and kernel_time 1:1.
void BM_ValidateMix(benchmark::State& state) { ValidateLines(state, Lines().mix); }
BENCHMARK(BM_ValidateMix);

// The low-rate types, which take the general path: stats lines (one a second per process) as the
// encoder writes them, 64 of them with varied counters.
void BM_ValidateStats(benchmark::State& state) {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> out;
    std::array<char, 4096> buf;
    StatsEvent s;
    for (uint64_t i = 0; i < 64; ++i) {
      s.header = {1'732'000'000'123'456'789 + static_cast<int64_t>(i) * 1'000'000'000, 31'337,
                  5'000 + 1'000 * i};
      s.emitted = 4'990 + 1'000 * i;
      s.dropped = i % 3;
      s.ring_capacity = 65'536;
      s.interval_ns = 1'000'000'000;
      s.launches = 5'100 + 1'017 * i;
      s.filtered = 107 * i;
      s.dropped_ring_full = i % 3;
      s.ring_high_water = 900 + 13 * i;
      s.cpu_ns = 12'345'678 + 7'919 * i;
      out.emplace_back(buf.data(), Encode(s, buf.data(), buf.size()));
    }
    return out;
  }();
  ValidateLines(state, lines);
}
BENCHMARK(BM_ValidateStats);

// The same mix with a space before each closing brace: valid, but not in the encoder's layout, so
// the expected-order fast path walks each line to its end before the general path validates it
// (the worst case for a line the fast path does not take).
void BM_ValidateMixFallback(benchmark::State& state) {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> out = Lines().mix;
    for (std::string& line : out) line.insert(line.rfind('}'), 1, ' ');
    return out;
  }();
  ValidateLines(state, lines);
}
BENCHMARK(BM_ValidateMixFallback);

// The same mix through Decode, for comparison.
void BM_DecodeMix(benchmark::State& state) {
  const std::vector<std::string>& lines = Lines().mix;
  size_t i = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string& line = lines[i];
    i = i + 1 == lines.size() ? 0 : i + 1;
    DecodeResult result = Decode(line);
    benchmark::DoNotOptimize(result);
    if (!result.ok()) state.SkipWithError(result.message.c_str());
    bytes += line.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["line_bytes"] = MeanSize(lines);
}
BENCHMARK(BM_DecodeMix);

// The same mix through LineDecoder (how the report tools read logs): Validate, then the typed
// fields read from the checked member texts, into one reused result.
void BM_LineDecoderMix(benchmark::State& state) {
  const std::vector<std::string>& lines = Lines().mix;
  LineDecoder decoder;
  DecodeResult result;
  size_t i = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string& line = lines[i];
    i = i + 1 == lines.size() ? 0 : i + 1;
    if (decoder.Decode(line, &result) != Reason::kOk) state.SkipWithError(result.message.c_str());
    benchmark::DoNotOptimize(result);
    bytes += line.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["line_bytes"] = MeanSize(lines);
  state.counters["fast_lines"] = static_cast<double>(decoder.fast_lines());
}
BENCHMARK(BM_LineDecoderMix);

}  // namespace
}  // namespace cuflight::schema

BENCHMARK_MAIN();
