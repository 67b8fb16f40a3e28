#include "log_gen.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"
#include "cuflight/report/retarget.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/log_layout.h"
#include "timing_schedule.h"
#include "zstd_file.h"

namespace cuflight::bench {
namespace {

namespace fs = std::filesystem;

// splitmix64: small, fast and deterministic.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t Uniform(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t state_;
};

struct KernelKind {
  std::string name;
  std::string demangled;
  schema::Dim3 block;
  int32_t regs;
  int64_t static_smem;
  int64_t dyn_smem;
  std::array<schema::Dim3, 3> grids;
  schema::OccupancyFields occupancy;
};

// The GPU of every generated process: the calculator's H100 SXM preset, so that the device event
// and the occupancy of each launch come from one table.
const occupancy::DevicePreset& Gpu() {
  static const occupancy::DevicePreset* const preset = occupancy::FindDevicePreset("h100-sxm");
  return *preset;
}

// A kernel event of `kind` with what a launch of it carries apart from its header, stream, ids
// and grid.
schema::OwnedKernelEvent KernelOf(const KernelKind& kind) {
  schema::OwnedKernelEvent k;
  k.name = kind.name;
  k.demangled = kind.demangled;
  k.block = kind.block;
  k.grid = kind.grids[0];
  k.num_regs = kind.regs;
  k.static_shared_bytes = kind.static_smem;
  k.dyn_shared_bytes = kind.dyn_smem;
  k.max_threads_per_block = 1024;
  k.carveout = -1;
  return k;
}

// The per-SM occupancy of `kind` on the GPU, what-ifs included, as the recorder's engine computes
// it (occupancy/engine.h over cuda_occupancy.h); the waves are the launch's (ComputeWaves).
schema::OccupancyFields Occupancy(const KernelKind& kind) {
  static const std::optional<occupancy::DeviceContext> context =
      occupancy::DeviceContext::Make(Gpu().limits);
  occupancy::Result r;
  if (!context ||
      occupancy::Compute(*context, report::LaunchOf(KernelOf(kind), Gpu().limits), &r) !=
          occupancy::Status::kOk) {
    return {};
  }
  return r.fields;
}

std::vector<KernelKind> Kernels(int count) {
  static const char* const kEpilogues[] = {"LinearCombination", "LinearCombinationRelu",
                                           "LinearCombinationGELU", "LinearCombinationClamp"};
  static const char* const kOps[] = {"GeluCUDAKernelImpl", "AddFunctor<float>",
                                     "MulFunctor<c10::Half>", "CUDAFunctor_add<float>",
                                     "silu_kernel", "softmax_warp_forward"};
  std::vector<KernelKind> kinds;
  for (int i = 0; i < count; ++i) {
    KernelKind k;
    if (i % 3 != 2) {
      const int tile = 64 << (i % 3);
      k.name = fmt::format(
          "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShape"
          "ILi{}ELi128ELi32EEENS_9layout8RowMajorEEENS_8epilogue11threadblock8EpilogueILi{}EEELb1EEEE"
          "EvNT_6ParamsE",
          tile, i);
      k.demangled = fmt::format(
          "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::"
          "MmaPipelined<cutlass::gemm::GemmShape<{}, 128, 32>, cutlass::half_t, "
          "cutlass::layout::RowMajor, cutlass::half_t, cutlass::layout::ColumnMajor, float, "
          "cutlass::layout::RowMajor, cutlass::arch::OpClassTensorOp>, "
          "cutlass::epilogue::threadblock::Epilogue<cutlass::epilogue::thread::{}<cutlass::half_t, "
          "8, float, float>, {}>, true>>(cutlass::gemm::kernel::Gemm::Params)",
          tile, kEpilogues[i % 4], i);
      k.block = {static_cast<uint32_t>(128 << (i % 2)), 1, 1};
      k.regs = 128 + 8 * (i % 8);
      k.static_smem = 32768 + 4096 * (i % 4);
      k.dyn_smem = (i % 5) * 16384;
      k.grids = {schema::Dim3{264, 8, 1}, schema::Dim3{132, 16, 1}, schema::Dim3{528, 4, 1}};
    } else {
      k.name = fmt::format(
          "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_{}IfEENS_6detail5ArrayIPcLi{}EEEEEv"
          "iT0_T1_",
          i, 2 + i % 3);
      k.demangled = fmt::format(
          "void at::native::vectorized_elementwise_kernel<4, at::native::{}, "
          "at::detail::Array<char*, {}>>(int, at::native::{}, at::detail::Array<char*, {}>) "
          "[variant {}]",
          kOps[i % 6], 2 + i % 3, kOps[i % 6], 2 + i % 3, i);
      k.block = {128, 1, 1};
      k.regs = 16 + 4 * (i % 4);
      k.static_smem = 0;
      k.dyn_smem = 0;
      k.grids = {schema::Dim3{4096, 1, 1}, schema::Dim3{65535, 1, 1}, schema::Dim3{1024, 1, 1}};
    }
    k.occupancy = Occupancy(k);
    kinds.push_back(std::move(k));
  }
  return kinds;
}

// One process's files: lines to "<base>.jsonl", rotated into numbered segments.
class StreamWriter {
 public:
  StreamWriter(fs::path dir, std::string base, const LogSpec& spec, LogTotals* totals)
      : dir_(std::move(dir)), base_(std::move(base)), spec_(spec), totals_(totals) {}
  ~StreamWriter() {
    if (file_ != nullptr) std::fclose(file_);
  }

  bool Write(const schema::OwnedEvent& event, std::string* error) {
    if (!Open(error)) return false;
    const size_t n = schema::Encode(event, buf_.data(), buf_.size());
    if (n == 0) {
      *error = "an event did not encode";
      return false;
    }
    if (std::fwrite(buf_.data(), 1, n, file_) != n) {
      *error = fmt::format("{}: write failed: {}", Active().native(), std::strerror(errno));
      return false;
    }
    bytes_in_file_ += n;
    totals_->bytes += n;
    ++totals_->events;
    if (spec_.rotate_bytes > 0 && bytes_in_file_ >= spec_.rotate_bytes) return Rotate(error);
    return true;
  }

  // Counts the files begun: a file's lines are one sequence of interned configurations.
  uint64_t file_serial() const { return segment_; }

  bool Close(std::string* error) {
    if (file_ == nullptr) return true;
    const bool ok = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!ok) *error = fmt::format("{}: close failed", Active().native());
    totals_->files.push_back(Active());
    return ok;
  }

 private:
  fs::path Active() const { return dir_ / schema::ActiveFileName(base_); }

  bool Open(std::string* error) {
    if (file_ != nullptr) return true;
    file_ = std::fopen(Active().c_str(), "wb");
    if (file_ == nullptr) {
      *error = fmt::format("{}: cannot create: {}", Active().native(), std::strerror(errno));
      return false;
    }
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
    bytes_in_file_ = 0;
    return true;
  }

  bool Rotate(std::string* error) {
    if (std::fclose(file_) != 0) {
      file_ = nullptr;
      *error = fmt::format("{}: close failed", Active().native());
      return false;
    }
    file_ = nullptr;
    ++segment_;
    const fs::path plain = dir_ / schema::SegmentFileName(base_, segment_, false);
    std::error_code ec;
    fs::rename(Active(), plain, ec);
    if (ec) {
      *error = fmt::format("{}: rename failed: {}", plain.native(), ec.message());
      return false;
    }
    if (!spec_.compress) {
      totals_->files.push_back(plain);
      return true;
    }
    const fs::path compressed = dir_ / schema::SegmentFileName(base_, segment_, true);
    if (!logstore::CompressFileAtomically(plain, compressed, spec_.zstd_level, error)) {
      return false;
    }
    fs::remove(plain, ec);
    totals_->files.push_back(compressed);
    return true;
  }

  fs::path dir_;
  std::string base_;
  const LogSpec& spec_;
  LogTotals* totals_;
  std::FILE* file_ = nullptr;
  uint64_t bytes_in_file_ = 0;
  uint64_t segment_ = 0;
  std::vector<char> buf_ = std::vector<char>(1 << 16);
};

// process_start's config under a timing policy other than kAll (log_gen.h, 3a): the library's
// (env::Describe), with the defaults but for the timing settings, the collector a fleet node's
// (docs/fleet.md) and the form of the launches.
std::vector<std::pair<std::string, std::string>> ConfigOf(const LogSpec& spec) {
  env::Config config;
  config.collector_path = "/run/cuflight/collector.sock";
  config.timing = spec.timing;
  config.timing_window_ms = spec.timing_window_ms;
  config.timing_period_ms = spec.timing_period_ms;
  config.timing_new_configs = spec.timing_new_configs;
  config.intern_configs = spec.intern;
  return env::Describe(config);
}

// The stats, process_end and process_crash members of the timing policy at `now_ns` (3a); none
// under kAll, as before the option.
template <class Event>
void FillTiming(const LogSpec& spec, TimingSchedule* windows, int64_t now_ns, Event* e) {
  if (spec.timing == schema::TimingPolicy::kAll) return;
  e->timing_policy = spec.timing;
  if (windows == nullptr) return;
  windows->AdvanceTo(now_ns);
  e->timing_windows = windows->windows();
  e->timing_window_ns = windows->window_ns(now_ns);
  e->launches_in_window = windows->launches_in_window();
}

bool WriteProcess(const fs::path& dir, const LogSpec& spec, int index,
                  const std::vector<KernelKind>& kinds, LogTotals* totals, std::string* error) {
  Rng rng(0xC0FFEEull + static_cast<uint64_t>(index));
  const int32_t pid = 4000 + index;
  const int64_t start_ns = spec.start_ns + index * 1'000'000;
  const std::string exe = "/usr/bin/python3.11";
  const std::string base = schema::StreamBaseName("node1", exe, pid, start_ns);
  const fs::path day = dir / schema::StartDate(start_ns);
  std::error_code ec;
  fs::create_directories(day, ec);
  if (ec) {
    *error = fmt::format("{}: cannot create: {}", day.native(), ec.message());
    return false;
  }
  StreamWriter out(day, base, spec, totals);
  uint64_t seq = 0;
  int64_t now = start_ns;
  auto note_ts = [&](int64_t ts) {
    if (totals->first_ts_ns == 0 || ts < totals->first_ts_ns) totals->first_ts_ns = ts;
    totals->last_ts_ns = std::max(totals->last_ts_ns, ts);
  };

  schema::OwnedProcessStartEvent start;
  start.header = {now, pid, seq++};
  start.exe = exe;
  start.argv = {exe, "train.py", "--epochs", "3"};
  start.hostname = "node1";
  start.start_ns = start_ns;
  start.cuflight_version = "0.1.0";
  start.cuda_driver_version = 13000;
  start.cupti_version = 26;
  start.instance_id = 0;
  if (spec.timing != schema::TimingPolicy::kAll) start.config = ConfigOf(spec);
  if (!out.Write(start, error)) return false;
  note_ts(now);

  schema::OwnedDeviceEvent device;
  device.header = {now, pid, seq++};
  device.device = 0;
  device.name = "NVIDIA H100 80GB HBM3";
  device.uuid = "GPU-5a1c0b7e-2f0d-4c1e-9d3a-0123456789ab";
  const occupancy::DeviceLimits& gpu = Gpu().limits;
  device.cc_major = gpu.cc_major;
  device.cc_minor = gpu.cc_minor;
  device.sm_count = gpu.sm_count;
  device.max_threads_per_block = gpu.max_threads_per_block;
  device.max_threads_per_sm = gpu.max_threads_per_sm;
  device.max_blocks_per_sm = gpu.max_blocks_per_sm;
  device.regs_per_sm = gpu.regs_per_sm;
  device.regs_per_block = gpu.regs_per_block;
  device.smem_per_sm = gpu.smem_per_sm;
  device.smem_per_block = gpu.smem_per_block;
  device.smem_per_block_optin = gpu.smem_per_block_optin;
  device.reserved_smem_per_block = gpu.reserved_smem_per_block;
  device.max_cluster_size = gpu.max_cluster_size;
  if (!out.Write(device, error)) return false;

  // Interned configurations (6.): per (kernel, stream), its description and the file (serial)
  // that last received it; id 0: not described yet. Ids count from 1 in the order first used.
  struct Described {
    uint64_t id = 0;
    uint64_t file_serial = UINT64_MAX;
    schema::OwnedKernelConfigEvent config;
  };
  std::vector<Described> described(spec.intern ? kinds.size() * static_cast<size_t>(spec.streams)
                                               : 0);
  uint64_t next_config_id = 1;
  schema::OwnedKernelConfigEvent unused;
  schema::OwnedLaunchEvent launch;
  // `kernel` whole, or as its launch after its description when the file does not hold that yet
  // (`d` made by Split with the seq `config_seq` when new). A description that fills a file is
  // written again at the start of the next, where the launch goes.
  // `wave` is the wave the engine counted the launch's figures in: the description says it and
  // the launch leaves the figures to the reader, as the producer sends it (waves.h; Split, 1a).
  auto write_launch = [&](const schema::OwnedKernelEvent& kernel, Described* d,
                          uint64_t config_seq, schema::WaveShape wave) -> bool {
    if (d == nullptr) return out.Write(kernel, error);
    if (d->id == 0) {
      d->id = next_config_id++;
      schema::Split(kernel, d->id, &d->config, &launch, wave);
      d->config.header.seq = config_seq;
    }
    while (d->file_serial != out.file_serial()) {
      d->file_serial = out.file_serial();
      if (!out.Write(d->config, error)) return false;
      ++totals->descriptions;
    }
    schema::Split(kernel, d->id, &unused, &launch, wave);
    return out.Write(launch, error);
  };

  // The sampled policy's windows (3a), from the process's start; the phase, unless given, drawn
  // from a generator of its own so that the launches are those of kAll.
  std::optional<TimingSchedule> windows;
  if (spec.timing == schema::TimingPolicy::kSampled) {
    TimingSchedule::Options o;
    o.window_ns = int64_t{spec.timing_window_ms} * 1'000'000;
    o.period_ns = int64_t{spec.timing_period_ms} * 1'000'000;
    o.new_configs = spec.timing_new_configs;
    const uint64_t drawn = Rng(0x7135EDull + static_cast<uint64_t>(index)).Next() %
                           static_cast<uint64_t>(std::max<int64_t>(1, o.period_ns));
    o.phase_ns = spec.timing_phase_ns >= 0 ? spec.timing_phase_ns : static_cast<int64_t>(drawn);
    windows.emplace(o, start_ns);
  }
  std::vector<int64_t> busy_until(static_cast<size_t>(spec.streams), 0);
  std::deque<schema::OwnedKernelTimeEvent> pending;
  schema::OwnedKernelEvent k;
  k.tid = pid + 1;
  k.device = 0;
  k.context = 1;
  k.api = "cudaLaunchKernel";
  k.carveout = -1;
  k.max_threads_per_block = 1024;
  k.occupancy_source = schema::OccupancySource::kDriver;
  auto flush = [&](bool all) -> bool {
    while (!pending.empty() &&
           (all || static_cast<int64_t>(pending.front().end_ns) <= now)) {
      schema::OwnedKernelTimeEvent& t = pending.front();
      t.header = {now, pid, seq++};
      if (!out.Write(t, error)) return false;
      ++totals->timed;
      if (windows) windows->OnRecord(t.correlation_id);
      pending.pop_front();
    }
    return true;
  };
  uint64_t correlation = 0;
  for (uint64_t i = 0; i < spec.launches; ++i) {
    now += spec.launch_gap_ns / 2 + rng.Uniform(0, spec.launch_gap_ns);
    const size_t kind_index = static_cast<size_t>(rng.Next() % kinds.size());
    const KernelKind& kind = kinds[kind_index];
    const size_t grid_index = static_cast<size_t>(rng.Next() % kind.grids.size());
    const size_t stream = static_cast<size_t>(i % static_cast<uint64_t>(spec.streams));
    // An interned configuration first described now takes a seq of its own, below its launch's
    // (the producer's preamble line).
    Described* d = spec.intern
                       ? &described[kind_index * static_cast<size_t>(spec.streams) + stream]
                       : nullptr;
    const uint64_t config_seq = d != nullptr && d->id == 0 ? seq++ : 0;
    k.header = {now, pid, seq++};
    k.stream = 7 + stream;
    k.correlation_id = ++correlation;
    k.name = kind.name;
    k.demangled = kind.demangled;
    k.grid = kind.grids[grid_index];
    k.block = kind.block;
    k.num_regs = kind.regs;
    k.static_shared_bytes = kind.static_smem;
    k.dyn_shared_bytes = kind.dyn_smem;
    k.const_bytes = 616;
    k.occupancy = kind.occupancy;
    const schema::WaveShape wave = occupancy::ComputeWaves(
        Gpu().limits.sm_count, report::LaunchOf(k, Gpu().limits), &k.occupancy);
    // A timing configuration is the function and its grid here: one device, and each kernel's
    // block, cluster (none) and dynamic shared memory fixed.
    if (windows) {
      k.timing_window = windows->OnLaunch(kind_index * kind.grids.size() + grid_index,
                                          k.correlation_id, now);
      totals->in_window += *k.timing_window ? 1 : 0;
    }
    if (!write_launch(k, d, config_seq, wave)) return false;
    ++totals->launches;
    note_ts(now);
    const bool lost = spec.untimed_every != 0 && (i + 1) % spec.untimed_every == 0;
    const bool timed = spec.timing == schema::TimingPolicy::kAll ? !lost
                       : spec.timing == schema::TimingPolicy::kSampled
                           ? *k.timing_window && !lost
                           : false;
    if (timed || spec.timing != schema::TimingPolicy::kAll) {
      // The kernel runs whether or not it is timed; under kAll a lost one is not drawn, as
      // before the option.
      schema::OwnedKernelTimeEvent t;
      t.correlation_id = k.correlation_id;
      t.device = 0;
      t.context = 1;
      t.stream = k.stream;
      const int64_t begin = std::max(now + 4000, busy_until[stream]);
      const int64_t end = begin + rng.Uniform(spec.min_kernel_ns, spec.max_kernel_ns);
      busy_until[stream] = end;
      t.start_ns = static_cast<uint64_t>(begin);
      t.end_ns = static_cast<uint64_t>(end);
      t.duration_ns = t.end_ns - t.start_ns;
      if (timed) {
        note_ts(end);
        pending.push_back(std::move(t));
      }
    }
    if (spec.api_error_every > 0 && (i + 1) % spec.api_error_every == 0) {
      schema::OwnedApiErrorEvent e;
      e.header = {now, pid, seq++};
      e.api = "cuLaunchKernel";
      e.code = 1;
      e.error_name = "CUDA_ERROR_INVALID_VALUE";
      e.message = "invalid argument";
      e.device = 0;
      e.context = 1;
      e.stream = k.stream;
      e.last_correlation_ids = {k.correlation_id};
      if (!out.Write(e, error)) return false;
      ++totals->api_errors;
    }
    if (spec.stall_every > 0 && (i + 1) % spec.stall_every == 0) {
      // A stall report naming the stream's latest launch as the one it waits on.
      schema::OwnedStallEvent st;
      st.header = {now, pid, seq++};
      st.state = schema::StallState::kStalled;
      st.stall_ms = 10000;
      st.stalled_ms = 12000;
      st.streams_stalled = 1;
      schema::OwnedStallStream& waiting = st.streams.emplace_back();
      waiting.device = 0;
      waiting.context = 1;
      waiting.stream = k.stream;
      waiting.waiting_ms = 12000;
      waiting.unfinished = 1;
      schema::OwnedStallLaunch& waits = waiting.launches.emplace_back();
      waits.correlation_id = k.correlation_id;
      waits.name = k.name;
      waits.demangled = k.demangled;
      waits.grid = k.grid;
      waits.block = k.block;
      waits.occupancy = k.occupancy.occupancy;
      waits.age_ms = 12000;
      if (!out.Write(st, error)) return false;
      ++totals->stalls;
    }
    if ((i + 1) % spec.flush_every == 0 && !flush(false)) return false;
    if ((i + 1) % 100'000 == 0) {
      schema::OwnedStatsEvent s;
      s.header = {now, pid, seq++};
      s.emitted = seq;
      s.ring_capacity = 65536;
      s.interval_ns = 1'000'000'000;
      s.launches = i + 1;
      FillTiming(spec, windows ? &*windows : nullptr, now, &s);
      if (!out.Write(s, error)) return false;
    }
  }
  now += 1'000'000;
  if (!flush(true)) return false;
  if (spec.crash || index < spec.crash_count) {
    schema::OwnedProcessCrashEvent c;
    c.header = {now, pid, seq++};
    c.signal = 11;
    c.signal_name = "SIGSEGV";
    c.code = 1;
    c.addr = 0x10;
    c.tid = pid + 1;
    c.emitted = seq;
    c.launches = spec.launches;
    FillTiming(spec, windows ? &*windows : nullptr, now, &c);
    if (!out.Write(c, error)) return false;
  } else {
    schema::OwnedProcessEndEvent e;
    e.header = {now, pid, seq++};
    e.exit_code = 0;
    e.emitted = seq;
    e.launches = spec.launches;
    FillTiming(spec, windows ? &*windows : nullptr, now, &e);
    if (!out.Write(e, error)) return false;
  }
  if (windows) totals->timing_windows += windows->windows();
  note_ts(now);
  return out.Close(error);
}

}  // namespace

bool WriteLogs(const fs::path& dir, const LogSpec& spec, LogTotals* totals, std::string* error) {
  *totals = LogTotals{};
  const std::vector<KernelKind> kinds = Kernels(std::max(spec.kernels, 1));
  for (int p = 0; p < spec.processes; ++p) {
    if (!WriteProcess(dir, spec, p, kinds, totals, error)) return false;
  }
  return true;
}

}  // namespace cuflight::bench
