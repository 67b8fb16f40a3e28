#include "cuflight/report/advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

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

// The resources tied with `limiter` at the binding block count, other than `limiter`.
std::vector<Resource> TiedWith(const schema::OccupancyFields& f, Resource limiter) {
  std::vector<Resource> tied;
  for (int i = 0; i < schema::kResourceCount; ++i) {
    const auto r = static_cast<Resource>(i);
    if (r != limiter && InMask(f.limiting_resources, r)) tied.push_back(r);
  }
  return tied;
}

std::string TieSuffix(const schema::OccupancyFields& f, Resource limiter) {
  const std::vector<Resource> tied = TiedWith(f, limiter);
  if (tied.empty()) return "";
  return fmt::format("; {} also limit{} it to {} blocks", JoinNames(tied),
                     tied.size() == 1 ? "s" : "", f.max_active_blocks);
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
  const schema::OccupancyFields& f = sig.fields();
  const int32_t n = f.max_active_blocks;
  const int32_t wpb = sig.warps_per_block;
  const Resource lim = f.limiting_resource;
  if (n <= 0) {
    std::vector<Resource> zero;
    for (int i = 0; i < schema::kResourceCount; ++i) {
      const auto r = static_cast<Resource>(i);
      if (InMask(f.limiting_resources, r)) zero.push_back(r);
    }
    if (zero.empty()) zero.push_back(lim);
    return fmt::format("cannot run: {} allow{} no block on an SM", JoinNames(zero),
                       zero.size() == 1 ? "s" : "");
  }
  if (f.occupancy >= 1.0) {
    if (sig.spills()) {
      return fmt::format("full occupancy; {} B/thread spilled to local memory",
                         sig.first.local_bytes);
    }
    return "";
  }
  const std::string occ = FormatPercent(f.occupancy);
  const std::string next_occ = FormatPercent(OccupancyOfBlocks(n + 1, wpb, f.max_warps));
  const int64_t threads = int64_t{sig.block.x} * sig.block.y * sig.block.z;
  auto best_suffix = [&]() -> std::string {
    if (f.best_block_size <= 0 || f.best_block_size == threads) return "";
    return fmt::format("; blocks of {} threads reach the best occupancy", f.best_block_size);
  };
  switch (lim) {
    case Resource::kRegisters: {
      std::string line = fmt::format("registers limit {} blocks/SM ({})", n, occ);
      if (f.regs_for_next_block >= 0) {
        line += fmt::format("; <= {} regs/thread would fit {} ({})", f.regs_for_next_block, n + 1,
                            next_occ);
      } else {
        line += TieSuffix(f, lim);
      }
      return line;
    }
    case Resource::kSharedMem: {
      const int64_t smem = sig.first.static_shared_bytes + sig.first.dyn_shared_bytes;
      std::string line =
          fmt::format("{} smem per block limits {} blocks/SM ({})", FormatBytes(smem), n, occ);
      if (f.smem_for_next_block >= 0) {
        line += fmt::format("; <= {} per block would fit {} ({})",
                            FormatBytes(f.smem_for_next_block), n + 1, next_occ);
      } else {
        line += TieSuffix(f, lim);
      }
      return line;
    }
    case Resource::kWarps:
      return fmt::format("warps limit {} blocks/SM of {} warps ({}){}{}", n, wpb, occ,
                         TieSuffix(f, lim), best_suffix());
    case Resource::kBlocks:
      return fmt::format("block slots limit {} blocks/SM of {} warps ({}){}{}", n, wpb, occ,
                         TieSuffix(f, lim), best_suffix());
    case Resource::kBarriers:
      return fmt::format("barriers limit {} blocks/SM ({}){}{}", n, occ, TieSuffix(f, lim),
                         best_suffix());
    case Resource::kCluster:
      return fmt::format("cluster placement limits occupancy to {}",
                         FormatPercent(f.has_cluster ? f.cluster_occupancy : f.occupancy));
    case Resource::kOther:
      return fmt::format(
          "the CUDA driver allows {} blocks/SM ({}), fewer than registers, shared memory, warps "
          "and block slots give: a limit no function attribute shows (e.g. named barriers)",
          n, occ);
  }
  return "";
}

}  // namespace cuflight::report
