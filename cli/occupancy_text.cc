#include "occupancy_text.h"

#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "cuflight/occupancy/device_presets.h"
#include "cuflight/report/text_format.h"
#include "cuflight/report/text_table.h"

namespace cuflight::cli {
namespace {

using occupancy::kUnlimited;
using occupancy::Resource;
using schema::ResourceName;

constexpr size_t kWidth = 100;
constexpr size_t kLabelWidth = 9;    // "device", "launch", then the text
constexpr size_t kTotalsWidth = 22;  // "max active blocks/SM" and its value

std::string Percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

using report::Plural;
using report::TextTable;

std::string Kib(int64_t bytes) {
  if (bytes == 0) return "0";
  return bytes % 1024 == 0 ? fmt::format("{}K", bytes / 1024) : fmt::format("{}B", bytes);
}

std::string Triple(const occupancy::Dim3& d) { return fmt::format("{},{},{}", d.x, d.y, d.z); }

// "label    item, item, item", wrapped at kWidth with continuation lines indented under the first
// item. Items are never split; `separator` follows every item but the last.
std::string Wrapped(std::string_view label, const std::vector<std::string>& items,
                    std::string_view separator = ",") {
  const std::string indent(kLabelWidth, ' ');
  std::string out = fmt::format("{:<{}}", label, kLabelWidth);
  size_t line_length = out.size();
  for (size_t i = 0; i < items.size(); ++i) {
    const bool last = i + 1 == items.size();
    const std::string item = last ? items[i] : items[i] + std::string(separator);
    if (i > 0) {
      if (line_length + 1 + item.size() > kWidth) {
        out += "\n" + indent;
        line_length = indent.size();
      } else {
        out += ' ';
        ++line_length;
      }
    }
    out += item;
    line_length += item.size();
  }
  return out + "\n";
}

bool Limits(const schema::OccupancyFields& f, Resource r) {
  return (f.limiting_resources & schema::MaskOf(r)) != 0;
}

std::string ResourceList(const schema::OccupancyFields& f, Resource skip) {
  std::string out;
  int count = 0;
  for (int i = 0; i < schema::kResourceCount; ++i) {
    const auto r = static_cast<Resource>(i);
    if (r == skip || !Limits(f, r)) continue;
    if (count++ > 0) out += " and ";
    out += ResourceName(r);
  }
  return out;
}

std::string DeviceSection(const OccupancyReport& report) {
  const occupancy::DeviceLimits& l = report.limits;
  std::vector<std::string> items = {
      fmt::format("{}: {}", report.device_key, report.device_name),
      fmt::format("cc {}.{}", l.cc_major, l.cc_minor),
      Plural(l.sm_count, "SM", "SMs"),
      fmt::format("{} threads/SM", l.max_threads_per_sm),
      fmt::format("{} blocks/SM", l.max_blocks_per_sm),
      fmt::format("{} regs/SM", l.regs_per_sm),
      fmt::format("{} B smem/SM", l.smem_per_sm),
      fmt::format("{} B smem/block opt-in", l.smem_per_block_optin),
  };
  std::string out = Wrapped("device", items);
  if (!report.overrides.empty()) {
    std::vector<std::string> overrides = report.overrides;
    overrides.front() = "overrides: " + overrides.front();
    out += Wrapped("", overrides);
  }
  return out;
}

std::string LaunchSection(const OccupancyReport& report) {
  const occupancy::LaunchConfig& l = report.launch;
  std::vector<std::string> items = {
      fmt::format("block {} ({}, {})", Triple(l.block),
                  Plural(int64_t(l.block.count()), "thread", "threads"),
                  Plural(report.result.warps_per_block, "warp", "warps")),
      fmt::format("{} regs/thread", l.regs_per_thread),
      fmt::format("smem {} B static + {} B dynamic", l.static_smem, l.dyn_smem),
      l.carveout < 0 ? std::string("carveout default") : fmt::format("carveout {}%", l.carveout),
  };
  if (report.has_grid) {
    items.push_back(fmt::format("grid {} ({})", Triple(l.grid),
                                Plural(int64_t(l.grid.count()), "block", "blocks")));
  }
  if (l.is_cluster()) {
    items.push_back(fmt::format("cluster {} ({}{})", Triple(l.cluster),
                                Plural(int64_t(l.cluster.count()), "block", "blocks"),
                                l.non_portable_cluster_size_allowed ? ", non-portable" : ""));
    if (l.max_active_clusters > 0) {
      items.push_back(fmt::format("{} active clusters max", l.max_active_clusters));
    }
  }
  if (l.func_max_threads_per_block > 0) {
    items.push_back(
        fmt::format("max {} threads/block (__launch_bounds__)", l.func_max_threads_per_block));
  }
  if (l.func_max_dyn_smem >= 0) {
    items.push_back(fmt::format("max dynamic smem {} B", l.func_max_dyn_smem));
  }
  std::string out = Wrapped("launch", items);
  if (!report.launch_failure.empty()) {
    std::vector<std::string> words;
    std::string_view rest = report.launch_failure;
    words.push_back("THE LAUNCH CANNOT RUN:");
    while (!rest.empty()) {
      const size_t space = rest.find(' ');
      if (space != 0) words.emplace_back(rest.substr(0, space));
      if (space == std::string_view::npos) break;
      rest.remove_prefix(space + 1);
    }
    out += Wrapped("", words, "");
  }
  return out;
}

std::string ResourceTable(const OccupancyReport& report) {
  const occupancy::Result& r = report.result;
  const schema::OccupancyFields& f = r.fields;
  const occupancy::DeviceLimits& d = report.limits;
  auto blocks_of = [&](Resource res) { return r.blocks_per_sm[static_cast<int>(res)]; };

  TextTable table({{"resource"},
                   {"used per block"},
                   {"available per SM"},
                   {"blocks/SM", TextTable::Align::kRight},
                   {"occupancy", TextTable::Align::kRight},
                   {""}});
  auto add = [&](Resource res, std::string used, std::string available, std::string occupancy,
                 std::string blocks_text = "") {
    const int32_t blocks = blocks_of(res);
    if (blocks_text.empty()) {
      blocks_text = blocks == kUnlimited ? std::string("unlimited") : std::to_string(blocks);
    }
    table.AddRow({std::string(ResourceName(res)), std::move(used), std::move(available),
                  std::move(blocks_text), std::move(occupancy), Limits(f, res) ? "<- limits" : ""});
  };

  const int64_t requested_regs =
      int64_t{report.launch.regs_per_thread} * static_cast<int64_t>(report.launch.block.count());
  add(Resource::kRegisters,
      requested_regs == f.allocated_regs_per_block
          ? fmt::format("{} regs", f.allocated_regs_per_block)
          : fmt::format("{} regs ({} asked)", f.allocated_regs_per_block, requested_regs),
      fmt::format("{} regs", d.regs_per_sm), Percent(f.reg_occupancy));
  add(Resource::kSharedMem,
      d.reserved_smem_per_block > 0
          ? fmt::format("{} B ({} reserved)", f.allocated_smem_per_block, d.reserved_smem_per_block)
          : fmt::format("{} B", f.allocated_smem_per_block),
      fmt::format("{} B carveout", r.smem_config_bytes), Percent(f.smem_occupancy));
  add(Resource::kWarps, Plural(r.warps_per_block, "warp", "warps"),
      Plural(f.max_warps, "warp", "warps"), Percent(f.warp_occupancy));
  add(Resource::kBlocks, "1 block", Plural(d.max_blocks_per_sm, "block", "blocks"),
      Percent(f.block_occupancy));
  const int32_t barrier_blocks = blocks_of(Resource::kBarriers);
  add(Resource::kBarriers, "1 barrier",
      barrier_blocks == kUnlimited ? std::string("not a limit before cc 9.0")
                                   : Plural(barrier_blocks, "barrier", "barriers"),
      Percent(f.barrier_occupancy));
  if (report.launch.is_cluster()) {
    // Clusters are placed GPU-wide, so the blocks they allow per SM are an average.
    const int max_clusters = report.launch.max_active_clusters;
    const uint64_t cluster_size = report.launch.cluster.count();
    std::string average;
    if (max_clusters > 0 && d.sm_count > 0 && f.max_active_blocks > 0) {
      average = fmt::format("{:.2f} avg", static_cast<double>(max_clusters) *
                                              static_cast<double>(cluster_size) / d.sm_count);
    }
    add(Resource::kCluster, fmt::format("{} blocks/cluster", cluster_size),
        max_clusters > 0 ? fmt::format("{} clusters/GPU", max_clusters)
                         : std::string("driver only (note)"),
        f.has_cluster ? Percent(f.cluster_occupancy)
                      : fmt::format("<={}", Percent(f.occupancy)),
        average);
  }
  return table.Render();
}

std::string Line(std::string_view label, std::string_view value) {
  return fmt::format("{:<{}}{}\n", label, kTotalsWidth, value);
}

std::string TotalsSection(const OccupancyReport& report) {
  const schema::OccupancyFields& f = report.result.fields;
  const occupancy::LaunchConfig& l = report.launch;
  std::string out;
  out += Line("max active blocks/SM", std::to_string(f.max_active_blocks));
  out += Line("active warps/SM", fmt::format("{} of {}", f.active_warps, f.max_warps));
  out += Line("occupancy", f.has_cluster && f.cluster_occupancy < f.occupancy
                               ? fmt::format("{} per SM, {} GPU-wide with cluster placement",
                                             Percent(f.occupancy), Percent(f.cluster_occupancy))
                               : Percent(f.occupancy));
  std::string limiting(ResourceName(f.limiting_resource));
  const std::string ties = ResourceList(f, f.limiting_resource);
  if (!ties.empty()) limiting += " (tied with " + ties + ")";
  out += Line("limiting resource", limiting);
  if (report.has_grid) {
    if (f.waves <= 0) {
      out += Line("waves", "none: no block fits on an SM");
    } else {
      const bool by_cluster =
          f.limiting_resource == Resource::kCluster && l.max_active_clusters > 0 && l.is_cluster();
      const std::string per_wave =
          by_cluster
              ? fmt::format("{} clusters of {} per wave", l.max_active_clusters, l.cluster.count())
              : fmt::format("{} SMs x {} = {} blocks per wave", report.limits.sm_count,
                            f.max_active_blocks,
                            int64_t{report.limits.sm_count} * f.max_active_blocks);
      out += Line("waves", fmt::format("{:.2f} ({})", f.waves, per_wave));
      out += Line("tail utilization",
                  fmt::format("{} of the last wave's slots busy", Percent(f.tail_utilization)));
    }
  }
  return out;
}

std::string WhatIfSection(const OccupancyReport& report) {
  const schema::OccupancyFields& f = report.result.fields;
  const int32_t next = f.max_active_blocks + 1;
  const std::string next_blocks = Plural(next, "block/SM", "blocks/SM");
  std::string out = "what if\n";
  if (f.regs_for_next_block >= 0) {
    out += fmt::format("  registers: <= {} regs/thread would fit {}\n", f.regs_for_next_block,
                       next_blocks);
  } else {
    const std::string others = ResourceList(f, Resource::kRegisters);
    out += others.empty()
               ? fmt::format("  registers: no register count fits {}\n", next_blocks)
               : fmt::format("  registers: fewer registers cannot fit {}; {} would still limit\n",
                             next_blocks, others);
  }
  if (f.smem_for_next_block >= 0) {
    const occupancy::DeviceLimits& d = report.limits;
    out += fmt::format("  shared memory: <= {} B/block (static + dynamic) would fit {}{}\n",
                       f.smem_for_next_block, next_blocks,
                       f.smem_for_next_block > d.smem_per_block
                           ? fmt::format(" (above {} B with --max-dyn-smem)", d.smem_per_block)
                           : "");
  } else {
    const std::string others = ResourceList(f, Resource::kSharedMem);
    out += others.empty()
               ? fmt::format("  shared memory: no shared memory size fits {}\n", next_blocks)
               : fmt::format(
                     "  shared memory: less shared memory cannot fit {}; {} would still limit\n",
                     next_blocks, others);
  }
  // The smallest 1-D size reaching the best occupancy of the sweep (the sweep section, when
  // printed, lists them all); a sweep-only report is already at that size.
  const int32_t best = report.best_block_size;
  const uint64_t threads = report.launch.block.count();
  if (report.sweep_only) {
    // The sweep above answers it.
  } else if (best > 0 && report.best_block_occupancy > f.occupancy) {
    out += fmt::format(
        "  best block size: {} threads (occupancy {}; the smallest size reaching it)\n", best,
        Percent(report.best_block_occupancy));
  } else if (best > 0 && static_cast<uint64_t>(best) < threads) {
    out += fmt::format(
        "  best block size: none gives more than this launch's {}; {} threads reach it too\n",
        Percent(f.occupancy), best);
  } else if (best > 0) {
    out += fmt::format("  best block size: none gives more than this launch's {}\n",
                       Percent(f.occupancy));
  } else {
    out += "  best block size: none, no block size fits on an SM\n";
  }
  return out;
}

// Every 1-D block size: "threads  warps  blocks/SM  active warps  occupancy  limited by", the
// smallest size reaching the best occupancy marked, then one line naming it.
std::string SweepSection(const OccupancyReport& report) {
  if (report.sweep.empty()) return "";
  const occupancy::LaunchConfig& l = report.launch;
  std::string out = fmt::format(
      "block sizes (1-D blocks; {} regs/thread, smem {} B static + {} B dynamic per block{})\n",
      l.regs_per_thread, l.static_smem, l.dyn_smem,
      l.func_max_threads_per_block > 0
          ? fmt::format(", up to the function's {} threads", l.func_max_threads_per_block)
          : std::string());
  TextTable table({{"threads", TextTable::Align::kRight},
                   {"warps", TextTable::Align::kRight},
                   {"blocks/SM", TextTable::Align::kRight},
                   {"active warps", TextTable::Align::kRight},
                   {"occupancy", TextTable::Align::kRight},
                   {"limited by"},
                   {""}});
  std::vector<std::string> ties;
  const int warp = std::max(1, report.limits.warp_size);
  for (const occupancy::SweepPoint& p : report.sweep) {
    const bool best = p.threads == report.best_block_size;
    const bool tie = !best && report.best_block_size > 0 &&
                     p.occupancy == report.best_block_occupancy;
    if (tie) ties.push_back(std::to_string(p.threads));
    table.AddRow({std::to_string(p.threads), std::to_string((p.threads + warp - 1) / warp),
                  std::to_string(p.max_active_blocks), std::to_string(p.active_warps),
                  Percent(p.occupancy),
                  p.max_active_blocks > 0 || p.limiting_resource != Resource::kOther
                      ? std::string(ResourceName(p.limiting_resource))
                      : std::string(),
                  best ? "<- best (smallest)" : tie ? "= best" : ""});
  }
  out += table.Render();
  if (report.best_block_size <= 0) {
    return out + "best block size: none, no block size fits on an SM\n";
  }
  out += fmt::format("best block size: {} threads, occupancy {}", report.best_block_size,
                     Percent(report.best_block_occupancy));
  if (!ties.empty()) {
    out += fmt::format(" (also reached by {} {})",
                       ties.size() == 1 ? "size" : "sizes", fmt::join(ties, ", "));
  }
  return out + "\n";
}

}  // namespace

std::string NotesSection(const OccupancyReport& report) {
  std::string out;
  for (const std::string& note : report.notes) {
    for (const std::string& line : report::WrapWords(note, kWidth, "note: ", "      ")) {
      out += line + "\n";
    }
  }
  return out;
}

std::string RenderOccupancyText(const OccupancyReport& report) {
  const std::string detail = LaunchSection(report) + "\n" + ResourceTable(report) + "\n" +
                             TotalsSection(report) + "\n" + WhatIfSection(report);
  if (report.sweep_only) {
    return NotesSection(report) + DeviceSection(report) + "\n" + SweepSection(report) +
           fmt::format("\nat {} threads per block:\n", report.launch.block.count()) + detail;
  }
  return NotesSection(report) + DeviceSection(report) + detail +
         (report.show_sweep ? "\n" + SweepSection(report) : std::string());
}

std::string RenderDevicePresetsText() {
  TextTable table({{"key"},
                   {"cc"},
                   {"SMs", TextTable::Align::kRight},
                   {"thr/SM", TextTable::Align::kRight},
                   {"blk/SM", TextTable::Align::kRight},
                   {"regs/SM", TextTable::Align::kRight},
                   {"smem/SM", TextTable::Align::kRight},
                   {"opt-in", TextTable::Align::kRight},
                   {"rsvd", TextTable::Align::kRight},
                   {"name"}});
  TextTable aliases({{"key"}, {"aliases"}});
  for (const occupancy::DevicePreset& p : occupancy::DevicePresets()) {
    const occupancy::DeviceLimits& l = p.limits;
    table.AddRow({std::string(p.key), fmt::format("{}.{}", l.cc_major, l.cc_minor),
                  std::to_string(l.sm_count), std::to_string(l.max_threads_per_sm),
                  std::to_string(l.max_blocks_per_sm), std::to_string(l.regs_per_sm),
                  Kib(l.smem_per_sm), Kib(l.smem_per_block_optin), Kib(l.reserved_smem_per_block),
                  std::string(p.name)});
    if (!p.aliases.empty()) {
      std::string list(p.aliases);
      for (size_t at = list.find(','); at != std::string::npos; at = list.find(',', at + 2)) {
        list.replace(at, 1, ", ");
      }
      aliases.AddRow({std::string(p.key), std::move(list)});
    }
  }
  return table.Render() +
         "thr/SM, blk/SM: resident threads and blocks per SM; smem/SM: shared memory per SM;\n"
         "opt-in: shared memory per block with opt-in; rsvd: reserved per block; K = 1024 bytes\n"
         "\naliases (also accepted by --device, in any case)\n" +
         aliases.Render(2) +
         "\n--device current[:N] reads GPU N (default 0) of this machine through the CUDA driver\n";
}

}  // namespace cuflight::cli
