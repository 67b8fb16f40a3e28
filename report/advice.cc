#include "cuflight/report/advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "cuflight/occupancy/engine.h"
#include "cuflight/report/kernel_origin.h"
#include "cuflight/report/retarget.h"
#include "cuflight/report/text_format.h"

namespace cuflight::report {
namespace {

using schema::Resource;

bool InMask(schema::ResourceMask mask, Resource r) { return (mask & schema::MaskOf(r)) != 0; }

double OccupancyOfBlocks(int32_t blocks, int32_t wpb, int32_t max_warps) {
  if (max_warps <= 0) return 0;
  return std::min(1.0, static_cast<double>(blocks) * wpb / max_warps);
}

// "registers", "shared_mem and warps", "registers, warps and blocks".
std::string JoinNames(const std::vector<Resource>& list) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += i + 1 == list.size() ? " and " : ", ";
    out += schema::ResourceName(list[i]);
  }
  return out;
}

std::vector<Resource> LimitingList(const schema::OccupancyFields& f) {
  std::vector<Resource> list;
  for (int i = 0; i < schema::kResourceCount; ++i) {
    const auto r = static_cast<Resource>(i);
    if (InMask(f.limiting_resources, r)) list.push_back(r);
  }
  if (list.empty()) list.push_back(f.limiting_resource);
  return list;
}

bool IsBlockShape(Resource r) {
  return r == Resource::kWarps || r == Resource::kBlocks || r == Resource::kBarriers;
}

// The occupancy engine on the signature's own device, for checking a what-if. Usable only when
// the device event gave the limits and the engine, on the launch the event describes, agrees
// with the event's block count (it would not for a limit only the driver knows).
class WhatIf {
 public:
  explicit WhatIf(const Signature& sig) {
    if (!sig.device_limits) return;
    context_ = occupancy::DeviceContext::Make(*sig.device_limits);
    if (!context_) return;
    launch_ = LaunchOf(sig.first, *sig.device_limits);
    launch_.grid = {0, 0, 0};
    if (occupancy::Compute(*context_, launch_, &base_) != occupancy::Status::kOk) return;
    ok_ = base_.fields.max_active_blocks == sig.fields().max_active_blocks;
  }

  bool ok() const { return ok_; }
  const occupancy::Result& base() const { return base_; }
  const occupancy::LaunchConfig& launch() const { return launch_; }

  // The launch changed by `change`; nullopt when the engine rejects it.
  template <class Change>
  std::optional<occupancy::Result> Try(Change change) const {
    occupancy::LaunchConfig l = launch_;
    change(&l);
    occupancy::Result r;
    if (occupancy::Compute(*context_, l, &r) != occupancy::Status::kOk) return std::nullopt;
    return r;
  }

  // `l` with `total` bytes of shared memory per block (static kept up to `total`, the rest
  // dynamic, opted in when above the limit without opt-in).
  void SetSmem(occupancy::LaunchConfig* l, int64_t total) const {
    l->static_smem = std::min(launch_.static_smem, total);
    l->dyn_smem = total - l->static_smem;
    l->func_max_dyn_smem = total > context_->limits().smem_per_block ? l->dyn_smem : int64_t{-1};
  }

  // A block size (1-D) with strictly higher occupancy than the launch's, and that occupancy.
  std::optional<std::pair<int32_t, double>> BetterBlockSize() const {
    const int32_t best = base_.fields.best_block_size;
    if (best <= 0 || static_cast<uint64_t>(best) == launch_.block.count()) return std::nullopt;
    const auto r = Try([&](occupancy::LaunchConfig* l) {
      l->block = {static_cast<uint32_t>(best), 1, 1};
    });
    if (!r || r->fields.occupancy <= base_.fields.occupancy) return std::nullopt;
    return std::make_pair(best, r->fields.occupancy);
  }

 private:
  std::optional<occupancy::DeviceContext> context_;
  occupancy::LaunchConfig launch_;
  occupancy::Result base_;
  bool ok_ = false;
};

// "75% occupancy (probably enough)", "38% occupancy", "19% occupancy (low, likely
// latency-bound)": about 50% hides latency for most kernels (Volkov, "Better Performance at Lower
// Occupancy", GTC 2010); below about 25% a kernel with little instruction-level parallelism
// usually waits on memory.
std::string Verdict(double occupancy) {
  std::string out = FormatPercent(occupancy) + " occupancy";
  if (occupancy >= kEnoughOccupancy) out += " (probably enough)";
  if (occupancy < kLowOccupancy) out += " (low, likely latency-bound)";
  return out;
}

std::string Blocks(int64_t n) { return fmt::format("{} block{}/SM", n, n == 1 ? "" : "s"); }

// The grid rule: every launch of the signature fits in less than one wave, so all its blocks are
// resident at once and more blocks per SM cannot make it faster. "" when it does not apply.
std::string GridAdvice(const Signature& sig, KernelOrigin origin) {
  const schema::OccupancyFields& f = sig.fields();
  if (sig.waves_max <= 0 || sig.waves_max >= 1 || f.max_active_blocks <= 0) return "";
  // The SMs its waves were counted over: the launch's context's when the event says so (a green
  // context or a limited MPS client: kernel.sm_count), else the device's.
  int64_t sms = sig.first.sm_count ? *sig.first.sm_count
                                   : (sig.device_limits ? sig.device_limits->sm_count : 0);
  const uint64_t first_grid = uint64_t{sig.first.grid.x} * sig.first.grid.y * sig.first.grid.z;
  if (sms <= 0 && f.waves > 0) {
    sms = std::llround(static_cast<double>(first_grid) / (f.waves * f.max_active_blocks));
  }
  if (sms <= 0) return "";
  const int64_t grid = std::llround(sig.waves_max * static_cast<double>(sms) * f.max_active_blocks);
  std::string out =
      fmt::format("grid of {}{} block{} is under one wave ({:.2f} waves of {} SMs x {})",
                  sig.waves_min == sig.waves_max ? "" : "at most ", grid, grid == 1 ? "" : "s",
                  sig.waves_max, sms, Blocks(f.max_active_blocks));
  out += ": every block is already resident, so higher occupancy cannot help";
  if (grid < sms) out += fmt::format("; {} of {} SMs get no block", sms - grid, sms);
  out += origin == KernelOrigin::kUser ? "; launch more blocks (less work per block, split-K)"
         : origin == KernelOrigin::kCublas
             ? "; give it more work per call (a larger or batched GEMM; cuBLAS chooses split-K "
               "itself)"
             : "; give it more work per launch (a larger batch or problem)";
  return out;
}

// The register lever and its cost: a register cap the kernel's code does not fit makes ptxas
// keep the rest in local memory (spills), which can cost more than the occupancy gains.
std::string RegisterLever(const Signature& sig, int32_t regs, int32_t blocks) {
  const int64_t threads = int64_t{sig.block.x} * sig.block.y * sig.block.z;
  return fmt::format(
      "__launch_bounds__({}, {}) or -maxrregcount={} (fewer registers can spill to local "
      "memory; check ptxas -v)",
      threads, blocks, regs);
}

// What a user can change about a library's or a generator's kernel, which cannot be rebuilt with
// other register limits.
std::string_view LibraryLevers(KernelOrigin origin) {
  switch (origin) {
    case KernelOrigin::kCublas:
      return "cuBLAS picks the kernel from the GEMM's shape, data type and math mode: change the "
             "shape or batch (dimensions that are multiples of 16 use tensor cores), the data type, "
             "or in PyTorch torch.backends.cuda.matmul.allow_tf32 / "
             "torch.set_float32_matmul_precision; cuBLASLt callers can try other algorithms from "
             "cublasLtMatmulAlgoGetHeuristic";
    case KernelOrigin::kCudnn:
      return "cuDNN picks the algorithm: torch.backends.cudnn.benchmark = True has it time the "
             "candidates for your shapes; the memory format (channels_last) and data type change "
             "the candidates";
    case KernelOrigin::kCutlass:
      return "the tile shape, stages and schedule are the instantiation's template arguments: try "
             "another configuration (the CUTLASS profiler times them), or the calling library's "
             "kernel choice";
    case KernelOrigin::kFlashAttention:
      return "its tiles are fixed per head dimension and GPU: what changes its launch is the head "
             "dimension, batch x heads and sequence length, or the attention backend "
             "(torch.nn.attention.sdpa_kernel)";
    case KernelOrigin::kTriton:
      return "its Triton config sets this: num_warps, num_stages and the BLOCK sizes "
             "(torch.compile(mode=\"max-autotune\") searches them; for your own kernel, the "
             "@triton.autotune configs)";
    case KernelOrigin::kPyTorch:
      return "what you control is the operation (torch.compile fuses elementwise ones), the data "
             "type and the tensors' layout";
    case KernelOrigin::kNccl:
      return "NCCL sizes its blocks itself (NCCL_NTHREADS, NCCL_MIN_NCHANNELS)";
    case KernelOrigin::kUser:
      break;
  }
  return "";
}

// Kernels built around tensor-core MMA tiles: one or two large blocks per SM is their design.
bool TensorCoreLibrary(KernelOrigin origin) {
  return origin == KernelOrigin::kCublas || origin == KernelOrigin::kCudnn ||
         origin == KernelOrigin::kCutlass || origin == KernelOrigin::kFlashAttention;
}

// A library's or a generator's kernel below full occupancy: the fact, whether it matters, and
// what the user can change instead of registers and launch bounds.
std::string LibraryAdvice(const Signature& sig, KernelOrigin origin) {
  const schema::OccupancyFields& f = sig.fields();
  std::string out = FormatPercent(f.occupancy) + " occupancy";
  if (f.occupancy >= kEnoughOccupancy) out += " (probably enough)";
  const std::vector<Resource> limits = LimitingList(f);
  out += fmt::format("; {} limit {}", JoinNames(limits), Blocks(f.max_active_blocks));
  if (sig.spills()) out += fmt::format(", {} B/thread spilled", sig.first.local_bytes);
  if (f.occupancy >= kEnoughOccupancy) return out;
  out += fmt::format(": a {} kernel, not rebuilt with your flags", KernelOriginName(origin));
  if (TensorCoreLibrary(origin)) {
    out += "; tensor-core kernels run one or two large blocks per SM by design";
  }
  out += "; check with Nsight Compute's achieved occupancy and stall reasons whether it matters";
  out += "; ";
  out += LibraryLevers(origin);
  return out;
}

std::string SmemLever(const Signature& sig) {
  return sig.first.dyn_shared_bytes > 0 ? "less dynamic shared memory (smaller tiles)"
                                        : "smaller __shared__ tiles";
}

// Registers bind and the kernel already uses local memory: fewer registers would spill more.
std::string SpillingRegisters(const Signature& sig) {
  const schema::OccupancyFields& f = sig.fields();
  std::string out = fmt::format(
      "{}; registers limit {}, and it already spills {} B/thread: fewer registers would spill "
      "more",
      Verdict(f.occupancy), Blocks(f.max_active_blocks), sig.first.local_bytes);
  if (f.occupancy >= kEnoughOccupancy) {
    out += "; allowing more registers (-maxrregcount, __launch_bounds__) may remove the spill";
  } else {
    out += "; cut per-thread state (smaller tiles, fewer live values) instead";
  }
  return out;
}

// Two or more resources allow the same block count: changing one alone gains nothing.
std::string TieAdvice(const Signature& sig, const std::vector<Resource>& tied,
                      const WhatIf& what_if) {
  const schema::OccupancyFields& f = sig.fields();
  const int32_t n = f.max_active_blocks;
  const int32_t wpb = sig.warps_per_block;
  std::string out =
      fmt::format("{}; {} {} limit {}: changing one alone gains nothing", Verdict(f.occupancy),
                  JoinNames(tied), tied.size() == 2 ? "both" : "all", Blocks(n));
  const bool regs = std::find(tied.begin(), tied.end(), Resource::kRegisters) != tied.end();
  const bool smem = std::find(tied.begin(), tied.end(), Resource::kSharedMem) != tied.end();
  const bool shape = std::any_of(tied.begin(), tied.end(), IsBlockShape);
  const std::string prefix = f.occupancy >= kEnoughOccupancy ? "if latency-bound, " : "";
  if (regs && sig.spills()) {
    out += fmt::format("; it already spills {} B/thread, so fewer registers would spill more",
                       sig.first.local_bytes);
    return out;
  }
  if (!what_if.ok()) return out;
  if (!shape && regs && smem && tied.size() == 2) {
    // Each resource's own what-if with the other out of the way, then both together.
    const auto without_smem =
        what_if.Try([&](occupancy::LaunchConfig* l) { what_if.SetSmem(l, 0); });
    const auto without_regs =
        what_if.Try([](occupancy::LaunchConfig* l) { l->regs_per_thread = 0; });
    if (!without_smem || !without_regs) return out;
    const int32_t r = without_smem->fields.regs_for_next_block;
    const int64_t s = without_regs->fields.smem_for_next_block;
    if (r < 0 || s < 0) return out;
    const auto both = what_if.Try([&](occupancy::LaunchConfig* l) {
      l->regs_per_thread = r;
      what_if.SetSmem(l, s);
    });
    if (!both || both->fields.max_active_blocks <= n) return out;
    out += fmt::format("; {}<= {} regs/thread and <= {}/block together would fit {} ({}): {}, {}",
                       prefix, r, FormatBytes(s), n + 1,
                       FormatPercent(OccupancyOfBlocks(n + 1, wpb, f.max_warps)),
                       RegisterLever(sig, r, n + 1), SmemLever(sig));
    return out;
  }
  if (const auto better = what_if.BetterBlockSize()) {
    out += fmt::format("; {}blocks of {} threads would reach {}", prefix, better->first,
                       FormatPercent(better->second));
  }
  return out;
}

}  // namespace

int32_t WarpsPerBlock(const schema::OccupancyFields& f, const schema::Dim3& block, int warp_size) {
  if (f.max_active_blocks > 0 && f.active_warps > 0) return f.active_warps / f.max_active_blocks;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  const uint64_t ws = warp_size > 0 ? static_cast<uint64_t>(warp_size) : 32;
  return static_cast<int32_t>(std::min<uint64_t>((threads + ws - 1) / ws, INT32_MAX));
}

std::array<ResourceLimit, schema::kResourceCount> ResourceLimits(const schema::OccupancyFields& f,
                                                                 int32_t wpb) {
  const std::array<double, schema::kResourceCount> occ = {
      f.reg_occupancy,   f.smem_occupancy,    f.warp_occupancy,
      f.block_occupancy, f.barrier_occupancy, f.cluster_occupancy, f.occupancy};
  std::array<ResourceLimit, schema::kResourceCount> out{};
  for (int i = 0; i < schema::kResourceCount; ++i) {
    const auto r = static_cast<Resource>(i);
    ResourceLimit& limit = out[static_cast<size_t>(i)];
    limit.occupancy = occ[static_cast<size_t>(i)];
    if ((r == Resource::kCluster && !f.has_cluster) ||
        (r == Resource::kOther && !InMask(f.limiting_resources, r))) {
      limit.applies = false;
      limit.occupancy = 0;
      continue;
    }
    if (InMask(f.limiting_resources, r)) {
      limit.blocks_per_sm = f.max_active_blocks;
    } else if (limit.occupancy < 1.0 && wpb > 0 && f.max_warps > 0) {
      limit.blocks_per_sm = static_cast<int32_t>(
          std::lround(limit.occupancy * f.max_warps / static_cast<double>(wpb)));
    }
  }
  return out;
}

std::string Advice(const Signature& sig) {
  const KernelOrigin origin = ClassifyKernel(sig.display_name());
  const schema::OccupancyFields& f = sig.fields();
  const int32_t n = f.max_active_blocks;
  const int32_t wpb = sig.warps_per_block;
  const Resource lim = f.limiting_resource;
  if (n <= 0) {
    const std::vector<Resource> zero = LimitingList(f);
    return fmt::format("cannot run: {} allow{} no block on an SM", JoinNames(zero),
                       zero.size() == 1 ? "s" : "");
  }
  if (std::string grid = GridAdvice(sig, origin); !grid.empty()) return grid;
  if (f.occupancy >= 1.0) {
    if (sig.spills()) {
      return fmt::format("full occupancy; {} B/thread spilled to local memory",
                         sig.first.local_bytes);
    }
    return "";
  }
  if (lim == Resource::kCluster) {
    return fmt::format("cluster placement limits occupancy to {}",
                       FormatPercent(f.has_cluster ? f.cluster_occupancy : f.occupancy));
  }
  if (lim == Resource::kOther) {
    return fmt::format(
        "the CUDA driver allows {} ({}), fewer than registers, shared memory, warps and block "
        "slots give: a limit no function attribute shows (e.g. named barriers)",
        Blocks(n), FormatPercent(f.occupancy));
  }
  if (origin != KernelOrigin::kUser) return LibraryAdvice(sig, origin);
  const WhatIf what_if(sig);
  const std::vector<Resource> tied = LimitingList(f);
  if (tied.size() > 1) return TieAdvice(sig, tied, what_if);

  const std::string verdict = Verdict(f.occupancy);
  const std::string prefix = f.occupancy >= kEnoughOccupancy ? "if latency-bound, " : "";
  const std::string next_occ = FormatPercent(OccupancyOfBlocks(n + 1, wpb, f.max_warps));
  switch (lim) {
    case Resource::kRegisters: {
      if (sig.spills()) return SpillingRegisters(sig);
      std::string line = fmt::format("{}; registers limit {}", verdict, Blocks(n));
      if (f.regs_for_next_block >= 0) {
        line += fmt::format("; {}<= {} regs/thread would fit {} ({}): {}", prefix,
                            f.regs_for_next_block, n + 1, next_occ,
                            RegisterLever(sig, f.regs_for_next_block, n + 1));
      }
      return line;
    }
    case Resource::kSharedMem: {
      const int64_t smem = sig.first.static_shared_bytes + sig.first.dyn_shared_bytes;
      std::string line =
          fmt::format("{}; {} smem/block limits {}", verdict, FormatBytes(smem), Blocks(n));
      if (f.smem_for_next_block >= 0) {
        line += fmt::format("; {}<= {}/block would fit {} ({}): {}", prefix,
                            FormatBytes(f.smem_for_next_block), n + 1, next_occ, SmemLever(sig));
      }
      if (sig.spills()) line += fmt::format("; it also spills {} B/thread", sig.first.local_bytes);
      return line;
    }
    default: {
      // Warps, block slots or barriers: the block size sets them.
      std::string line =
          fmt::format("{}; {} limit {} of {} warp{}", verdict,
                      lim == Resource::kBlocks ? std::string("block slots")
                                               : std::string(schema::ResourceName(lim)),
                      Blocks(n), wpb, wpb == 1 ? "" : "s");
      if (what_if.ok()) {
        if (const auto better = what_if.BetterBlockSize()) {
          line += fmt::format("; {}blocks of {} threads would reach {}", prefix, better->first,
                              FormatPercent(better->second));
        }
      }
      if (sig.spills()) line += fmt::format("; it also spills {} B/thread", sig.first.local_bytes);
      return line;
    }
  }
}

}  // namespace cuflight::report
