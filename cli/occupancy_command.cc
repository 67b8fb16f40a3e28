#include "occupancy_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>

#include "arg_parse.h"
#include "cuflight/occupancy/device_presets.h"
#include "cuflight/occupancy/engine.h"
#include "cuflight/report/device_spec.h"
#include "cuflight/report/text_format.h"
#include "occupancy_json.h"
#include "occupancy_ptxas.h"
#include "occupancy_text.h"
#include "usage_error.h"

namespace cuflight::cli {
namespace {

using occupancy::DeviceLimits;
using occupancy::Dim3;
using occupancy::LaunchConfig;
using occupancy::Resource;
using report::Plural;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// maxThreadsDim and maxGridSize are the same on every GPU since compute capability 3.0.
constexpr std::array<int64_t, 3> kMaxBlockDim = {1024, 1024, 64};
constexpr std::array<int64_t, 3> kMaxGridDim = {kInt32Max, 65535, 65535};
// Register counts ptxas can assign to one thread.
constexpr int64_t kMaxRegsPerThread = 255;
// Generous sanity ceilings for device-limit overrides; the engine rejects what its
// architecture tables cannot model.
constexpr int64_t kMaxOverrideBytes = int64_t{16} << 20;
constexpr int64_t kMaxOverrideRegs = int64_t{1} << 20;
constexpr int kMaxDeviceOrdinal = 1023;

// A device limit settable from the command line on top of the preset.
struct LimitFlag {
  const char* name;
  const char* help;
  std::string_view unit;
  int64_t min;
  int64_t max;
  bool bytes;
  void (*apply)(DeviceLimits*, int64_t);
};

const LimitFlag kLimitFlags[] = {
    {"--sm-count", "Multiprocessors on the device (multiProcessorCount)", "SMs", 1, 65535, false,
     [](DeviceLimits* l, int64_t v) { l->sm_count = static_cast<int>(v); }},
    {"--device-max-threads-per-block", "Threads per block the device allows (maxThreadsPerBlock)",
     "threads per block", 1, 65536, false,
     [](DeviceLimits* l, int64_t v) { l->max_threads_per_block = static_cast<int>(v); }},
    {"--max-threads-per-sm", "Resident threads per SM (maxThreadsPerMultiProcessor)",
     "threads per SM", 1, 65536, false,
     [](DeviceLimits* l, int64_t v) { l->max_threads_per_sm = static_cast<int>(v); }},
    {"--max-blocks-per-sm", "Resident blocks per SM (maxBlocksPerMultiProcessor)", "blocks per SM",
     1, 1024, false,
     [](DeviceLimits* l, int64_t v) { l->max_blocks_per_sm = static_cast<int>(v); }},
    {"--regs-per-sm", "32-bit registers per SM (regsPerMultiprocessor)", "registers per SM", 1,
     kMaxOverrideRegs, false,
     [](DeviceLimits* l, int64_t v) { l->regs_per_sm = static_cast<int>(v); }},
    {"--regs-per-block", "32-bit registers per block (regsPerBlock)", "registers per block", 1,
     kMaxOverrideRegs, false,
     [](DeviceLimits* l, int64_t v) { l->regs_per_block = static_cast<int>(v); }},
    {"--smem-per-sm", "Shared memory per SM, bytes (sharedMemPerMultiprocessor)", "bytes per SM", 1,
     kMaxOverrideBytes, true, [](DeviceLimits* l, int64_t v) { l->smem_per_sm = v; }},
    {"--smem-per-block", "Shared memory per block without opt-in, bytes (sharedMemPerBlock)",
     "bytes per block", 1, kMaxOverrideBytes, true,
     [](DeviceLimits* l, int64_t v) { l->smem_per_block = v; }},
    {"--smem-per-block-optin", "Opt-in shared memory per block, bytes (sharedMemPerBlockOptin)",
     "bytes per block", 0, kMaxOverrideBytes, true,
     [](DeviceLimits* l, int64_t v) { l->smem_per_block_optin = v; }},
    {"--reserved-smem", "Shared memory the driver reserves per block, bytes", "bytes per block", 0,
     kMaxOverrideBytes, true, [](DeviceLimits* l, int64_t v) { l->reserved_smem_per_block = v; }},
    {"--warp-size", "Threads per warp (warpSize)", "threads per warp", 1, 1024, false,
     [](DeviceLimits* l, int64_t v) { l->warp_size = static_cast<int>(v); }},
    {"--max-cluster-size", "Largest portable thread block cluster, blocks", "blocks per cluster", 0,
     64, false, [](DeviceLimits* l, int64_t v) { l->max_cluster_size = static_cast<int>(v); }},
    {"--max-cluster-size-non-portable", "Largest cluster with the non-portable attribute, blocks",
     "blocks per cluster", 0, 64, false,
     [](DeviceLimits* l, int64_t v) { l->max_cluster_size_non_portable = static_cast<int>(v); }},
};
constexpr size_t kLimitFlagCount = std::size(kLimitFlags);

struct NamedDevice {
  std::string key;
  std::string name;
  DeviceLimits limits;
  std::string note;  // which preset a name or compute capability named; "" for a key
  // A compute capability no preset has: the limits of kDeviceFlagsForCc must be given.
  bool needs_limits = false;
};

NamedDevice ResolveDevice(std::string_view spec, DeviceQuery& query) {
  constexpr std::string_view kCurrent = "current";
  if (spec.starts_with(kCurrent) &&
      (spec.size() == kCurrent.size() || spec[kCurrent.size()] == ':')) {
    int ordinal = 0;
    if (spec.size() > kCurrent.size()) {
      try {
        ordinal = static_cast<int>(
            ParseInteger("--device", spec.substr(kCurrent.size() + 1), {0, kMaxDeviceOrdinal, ""}));
      } catch (const UsageError&) {
        throw UsageError(fmt::format("--device {} is not a device: N in current:N must be 0..{}",
                                     spec, kMaxDeviceOrdinal));
      }
    }
    QueriedDevice queried;
    std::string error;
    if (!query.Query(ordinal, &queried, &error)) {
      throw UsageError(fmt::format("--device {}: {}", spec, error));
    }
    return {fmt::format("current:{}", ordinal), queried.name, queried.limits, ""};
  }
  const report::ResolvedPreset resolved = report::ResolveDevicePreset(spec);
  if (resolved.preset == nullptr && resolved.unmatched_cc) {
    // A compute capability no preset has: the device is that capability with limits the user
    // gives (see kDeviceFlagsForCc); the caller checks that they were given.
    DeviceLimits limits;
    limits.cc_major = resolved.cc_major;
    limits.cc_minor = resolved.cc_minor;
    limits.max_threads_per_block = 1024;  // every GPU since cc 2.0
    limits.regs_per_block = 65536;        // every GPU since cc 3.0
    limits.smem_per_block = 48 * 1024;    // the limit without opt-in, every GPU since cc 2.0
    limits.reserved_smem_per_block = resolved.cc_major >= 8 ? 1024 : 0;  // 1 KiB from cc 8.0
    SetClusterLimits(&limits);
    return {fmt::format("cc-{}.{}", resolved.cc_major, resolved.cc_minor),
            fmt::format("compute capability {}.{}, limits as given", resolved.cc_major,
                        resolved.cc_minor),
            limits, "", true};
  }
  if (resolved.preset == nullptr) {
    throw UsageError("--device " + resolved.error + ", or current[:N] for a GPU of this machine" +
                     resolved.hint);
  }
  const occupancy::DevicePreset& p = *resolved.preset;
  return {std::string(p.key), std::string(p.name), p.limits, resolved.note};
}

// The device-limit flags a compute capability without a preset needs; the others default to
// what every GPU of cc 3.0 and later reports (see ResolveDevice).
constexpr std::array<std::string_view, 6> kDeviceFlagsForCc = {
    "--sm-count",    "--max-threads-per-sm", "--max-blocks-per-sm",
    "--regs-per-sm", "--smem-per-sm",        "--smem-per-block-optin"};

// The value of --launch-bounds: __launch_bounds__(max_threads, min_blocks); min_blocks 0 when
// only MAX was given.
struct LaunchBounds {
  int max_threads = 0;
  int min_blocks = 0;
};

LaunchBounds ParseLaunchBounds(std::string_view text, const DeviceLimits& d,
                               const std::string& owner) {
  const std::string expected =
      fmt::format("MAX[,MINBLOCKS] as in __launch_bounds__(MAX, MINBLOCKS), {} MAX 1..{} and "
                  "MINBLOCKS 1..{}",
                  owner, d.max_threads_per_block, d.max_blocks_per_sm);
  const size_t comma = text.find(',');
  LaunchBounds b;
  b.max_threads = static_cast<int>(
      ParseInteger("--launch-bounds", text.substr(0, comma),
                   {1, d.max_threads_per_block, "threads per block (MAX)", owner}));
  if (comma != std::string_view::npos) {
    b.min_blocks = static_cast<int>(
        ParseInteger("--launch-bounds", text.substr(comma + 1),
                     {1, d.max_blocks_per_sm, "blocks per SM (MINBLOCKS)", owner}));
  }
  if (text.find(',', comma == std::string_view::npos ? comma : comma + 1) !=
      std::string_view::npos) {
    throw UsageError(fmt::format("--launch-bounds {} is not {}", text, expected));
  }
  return b;
}

// The text --ptxas names: "-" is standard input, a value with ptxas's words is the text itself,
// anything else a file to read.
std::string ReadAll(std::istream& in) {
  std::string text;
  std::array<char, 4096> chunk;
  while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
    text.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  return text;
}

std::string PtxasText(std::string_view value, std::istream& in) {
  if (value == "-") return ReadAll(in);
  if (value.find("registers") != std::string_view::npos ||
      value.find("REG:") != std::string_view::npos) {
    return std::string(value);
  }
  std::ifstream file{std::string(value)};
  if (!file) {
    throw UsageError(fmt::format(
        "--ptxas {}: not ptxas output (no \"Used N registers\") and not a readable file; give "
        "the text, a file of it, or - to read standard input",
        value));
  }
  return ReadAll(file);
}

// The kernel of ptxas's output the user means: the only one, or the one --ptxas-kernel names (its
// mangled name equal to, else containing, the text).
PtxasKernel PickPtxasKernel(const std::vector<PtxasKernel>& kernels, std::string_view source,
                            const std::optional<std::string>& wanted) {
  if (kernels.empty()) {
    throw UsageError(fmt::format(
        "--ptxas {}: no \"Used N registers\" line: give what ptxas -v prints (nvcc -Xptxas -v "
        "or --resource-usage), e.g. \"ptxas info : Used 92 registers, 16640 bytes smem\"",
        source.size() > 40 ? std::string(source.substr(0, 40)) + "..." : std::string(source)));
  }
  std::vector<std::string> names;
  for (const PtxasKernel& k : kernels) names.push_back(k.name.empty() ? "(unnamed)" : k.name);
  if (!wanted) {
    if (kernels.size() == 1) return kernels.front();
    throw UsageError(fmt::format(
        "--ptxas: the output has {} kernels: pick one with --ptxas-kernel NAME (part of its name): "
        "{}",
        kernels.size(), fmt::join(names, ", ")));
  }
  for (const PtxasKernel& k : kernels) {
    if (k.name == *wanted) return k;
  }
  const PtxasKernel* found = nullptr;
  for (const PtxasKernel& k : kernels) {
    if (k.name.find(*wanted) == std::string::npos) continue;
    if (found != nullptr) {
      throw UsageError(fmt::format(
          "--ptxas-kernel {} matches more than one kernel of the ptxas output: {}", *wanted,
          fmt::join(names, ", ")));
    }
    found = &k;
  }
  if (found == nullptr) {
    throw UsageError(fmt::format("--ptxas-kernel {} names no kernel of the ptxas output: {}",
                                 *wanted, fmt::join(names, ", ")));
  }
  return *found;
}

std::string DeviceOwner(const NamedDevice& device) {
  return fmt::format("device {} allows", device.key);
}

// A byte count as a flag value: "96K" for a multiple of 1024, else the bytes.
std::string BytesFlag(int64_t bytes) {
  return bytes % 1024 == 0 ? fmt::format("{}K", bytes / 1024) : fmt::format("{}", bytes);
}

Dim3 ToDim3(const std::array<int64_t, 3>& parts) {
  return {static_cast<uint32_t>(parts[0]), static_cast<uint32_t>(parts[1]),
          static_cast<uint32_t>(parts[2])};
}

// Why no block of the launch can be resident, for a launch the engine gave 0 blocks per SM.
std::string ExplainFailure(const OccupancyReport& report) {
  const LaunchConfig& l = report.launch;
  const DeviceLimits& d = report.limits;
  const occupancy::Result& r = report.result;
  const uint64_t threads = l.block.count();
  if (l.func_max_threads_per_block > 0 &&
      threads > static_cast<uint64_t>(l.func_max_threads_per_block)) {
    return fmt::format(
        "a block of {} threads exceeds the function's limit of {} (--max-threads-per-block, "
        "__launch_bounds__)",
        threads, l.func_max_threads_per_block);
  }
  if (l.func_max_dyn_smem >= 0 && l.dyn_smem > l.func_max_dyn_smem) {
    return fmt::format(
        "{} B of dynamic shared memory exceed the function's limit of {} B (--max-dyn-smem)",
        l.dyn_smem, l.func_max_dyn_smem);
  }
  if (l.func_max_dyn_smem < 0 && l.static_smem + l.dyn_smem > d.smem_per_block) {
    return fmt::format(
        "{} B of shared memory per block exceed the {} B allowed without opt-in; raise the "
        "function's limit with --max-dyn-smem (cudaFuncSetAttribute "
        "MaxDynamicSharedMemorySize)",
        l.static_smem + l.dyn_smem, d.smem_per_block);
  }
  if (r.blocks_per_sm[static_cast<int>(Resource::kRegisters)] == 0) {
    return fmt::format(
        "{} regs/thread x {} threads need {} registers per block after allocation; the device "
        "has {} per block and {} per SM",
        l.regs_per_thread, threads, r.fields.allocated_regs_per_block, d.regs_per_block,
        d.regs_per_sm);
  }
  std::string zero;
  for (int i = 0; i < schema::kResourceCount; ++i) {
    if (r.blocks_per_sm[i] != 0) continue;
    if (!zero.empty()) zero += ", ";
    zero += schema::ResourceName(static_cast<Resource>(i));
  }
  return fmt::format("no block fits on an SM ({} allow{} none)", zero,
                     zero.find(',') == std::string::npos ? "s" : "");
}

}  // namespace

OccupancyCommand::OccupancyCommand(CLI::App* parent) : limit_flags_(kLimitFlagCount) {
  app_ = parent->add_subcommand(
      "occupancy",
      "Occupancy calculator: how many blocks of a launch fit on one SM, what limits it, and what "
      "change would fit one more. Runs on any machine; no GPU needed.");
  app_->footer(
      "Examples:\n"
      "  cuflight occupancy --device a100 --regs 40 --threads 256\n"
      "  cuflight occupancy --device rtx4090 --regs 72            (every block size)\n"
      "  cuflight occupancy --device h100 --launch-bounds 256,2 --threads 256\n"
      "  nvcc -Xptxas -v ... 2>&1 | cuflight occupancy --device l40 --ptxas - --threads 128\n"
      "  cuflight occupancy --device h100 --regs 128 --block 128,2,1 --dyn-smem 96K "
      "--max-dyn-smem 96K --grid 1320\n"
      "  cuflight occupancy --device current --regs 32 --threads 512 --json\n"
      "  cuflight occupancy --list-devices\n"
      "Exit status: 0 with a result (even one that says the launch cannot run), 2 on bad input.");
  auto text = [&](TextFlag* flag, const char* name, const char* type, const char* help,
                  const char* group) {
    flag->option = app_->add_option(name, flag->text, help)->type_name(type)->group(group);
  };
  constexpr const char* kDevice = "Device";
  constexpr const char* kLaunch = "Launch";
  constexpr const char* kFunction = "Function attributes";
  constexpr const char* kOverrides = "Device limit overrides (applied on top of --device)";
  constexpr const char* kOutput = "Output";

  text(&device_, "--device", "KEY",
       "GPU: a preset key or alias (see --list-devices), a name --list-devices or cuflight "
       "report prints, a compute capability (sm_90, cc 9.0: the first preset of it, named in a "
       "note; one without a preset takes its limits from --sm-count ... --smem-per-block-optin), "
       "or current[:N] for GPU N of this machine, read through the CUDA driver",
       kDevice);
  app_->add_flag("--list-devices", list_devices_, "List the device presets and exit")
      ->group(kDevice);

  text(&regs_, "--regs", "N",
       "Registers per thread, 0..255 (CU_FUNC_ATTRIBUTE_NUM_REGS; ptxas -v's \"92 registers\")",
       kFunction);
  text(&ptxas_, "--ptxas", "TEXT|FILE|-",
       "What ptxas -v printed (nvcc -Xptxas -v; or cuobjdump --dump-resource-usage): the text, "
       "a file of it, or - for standard input; gives --regs and --static-smem",
       kFunction);
  text(&ptxas_kernel_, "--ptxas-kernel", "NAME",
       "With --ptxas output of several kernels: the one to use (its name or part of it)",
       kFunction);
  text(&launch_bounds_, "--launch-bounds", "MAX[,MINBLOCKS]",
       "__launch_bounds__(MAX, MINBLOCKS): the function's thread limit, and the register cap "
       "ptxas derives from it (an estimate; without --regs, the registers used)",
       kFunction);
  text(&static_smem_, "--static-smem", "BYTES",
       "Static shared memory per block: bytes, or K/KB/KiB (1024-based), e.g. 96K, or ptxas -v's "
       "\"16640 bytes smem\" (default 0)",
       kFunction);
  text(&max_threads_per_block_, "--max-threads-per-block", "N",
       "The function's thread limit from __launch_bounds__ (default: the device's)", kFunction);
  text(&max_dyn_smem_, "--max-dyn-smem", "BYTES",
       "The function's MaxDynamicSharedMemorySize attribute, bytes (default: the device's "
       "per-block limit without opt-in minus --static-smem)",
       kFunction);
  text(&carveout_, "--carveout", "PCT",
       "PreferredSharedMemoryCarveout, percent 0..100, or -1 for no preference (default)",
       kFunction);

  text(&threads_, "--threads", "N",
       "Threads per block, shorthand for --block N,1,1. Without --threads and --block: every "
       "block size, and the smallest reaching the best occupancy",
       kLaunch);
  app_->add_flag("--sweep", sweep_,
                 "Also print the occupancy of every block size from the warp size to the limit")
      ->group(kLaunch);
  text(&block_, "--block", "X,Y,Z", "Block dimensions X[,Y[,Z]], or XxYxZ (16x16)", kLaunch);
  text(&dyn_smem_, "--dyn-smem", "BYTES", "Dynamic shared memory per block, bytes (default 0)",
       kLaunch);
  text(&grid_, "--grid", "N|X,Y,Z", "Grid size N or X,Y,Z: adds waves and tail utilization",
       kLaunch);
  text(&cluster_, "--cluster", "X,Y,Z", "Thread block cluster dimensions X[,Y[,Z]] (cc 9.0+)",
       kLaunch);
  app_->add_flag("--non-portable-cluster", non_portable_cluster_,
                 "The function allows non-portable cluster sizes (up to 16 on cc 9.0 and 10.0)")
      ->group(kLaunch);
  text(&max_active_clusters_, "--max-active-clusters", "N",
       "cuOccupancyMaxActiveClusters for this launch, when known from a GPU", kLaunch);

  text(&cc_, "--cc", "M.m", "Compute capability MAJOR.MINOR", kOverrides);
  for (size_t i = 0; i < kLimitFlagCount; ++i) {
    text(&limit_flags_[i], kLimitFlags[i].name, kLimitFlags[i].bytes ? "BYTES" : "N",
         kLimitFlags[i].help, kOverrides);
  }

  app_->add_flag("--json", json_, "Print one JSON object (or, with --list-devices, an array)")
      ->group(kOutput);
}

bool OccupancyCommand::Selected() const { return app_->parsed(); }

std::string OccupancyCommand::HintForUnknownFlag(std::string_view flag) {
  if (flag == "--min-blocks-per-sm" || flag == "--min-blocks" ||
      flag == "--min-blocks-per-multiprocessor") {
    return "; __launch_bounds__'s minBlocksPerMultiprocessor is --launch-bounds MAX,MINBLOCKS "
           "(--max-blocks-per-sm is a device limit)";
  }
  if (flag == "--maxrregcount" || flag == "--max-regs") {
    return "; for -maxrregcount N give --regs N (the registers the kernel would then use at most)";
  }
  return "";
}

OccupancyReport OccupancyCommand::Compute(DeviceQuery& device_query, std::istream& in) const {
  if (!device_.Given()) {
    throw UsageError(
        "--device is required: a preset key (see --list-devices) or current[:N] for a GPU of this "
        "machine");
  }
  if (!regs_.Given() && !ptxas_.Given() && !launch_bounds_.Given()) {
    throw UsageError(
        "--regs is required: registers per thread, 0..255 (from ptxas -v; or give its output with "
        "--ptxas, or --launch-bounds for the cap ptxas would target)");
  }
  if (regs_.Given() && ptxas_.Given()) {
    throw UsageError("--regs and --ptxas both given: --ptxas gives the registers; use one");
  }
  if (static_smem_.Given() && ptxas_.Given()) {
    throw UsageError(
        "--static-smem and --ptxas both given: --ptxas gives the static shared memory; use one");
  }
  if (ptxas_kernel_.Given() && !ptxas_.Given()) {
    throw UsageError("--ptxas-kernel needs --ptxas");
  }
  if (launch_bounds_.Given() && max_threads_per_block_.Given()) {
    throw UsageError(
        "--launch-bounds and --max-threads-per-block both given: --launch-bounds MAX sets the "
        "function's thread limit; use one");
  }
  if (threads_.Given() && block_.Given()) {
    throw UsageError("--threads and --block both given: use one of them");
  }
  NamedDevice device = ResolveDevice(device_.text, device_query);
  OccupancyReport report;
  if (!device.note.empty()) report.notes.push_back(device.note);
  if (device.needs_limits) {
    std::vector<std::string> missing;
    for (const std::string_view flag : kDeviceFlagsForCc) {
      const auto given = std::find_if(
          std::begin(kLimitFlags), std::end(kLimitFlags),
          [&](const LimitFlag& f) { return flag == f.name; });
      if (!limit_flags_[static_cast<size_t>(given - std::begin(kLimitFlags))].Given()) {
        missing.emplace_back(flag);
      }
    }
    if (!missing.empty()) {
      throw UsageError(fmt::format(
          "--device {}: compute capability {}.{} has no preset: give its limits with "
          "--sm-count N --max-threads-per-sm N --max-blocks-per-sm N --regs-per-sm N "
          "--smem-per-sm BYTES --smem-per-block-optin BYTES (missing: {}); they are what "
          "cudaGetDeviceProperties reports on the GPU (multiProcessorCount, "
          "maxThreadsPerMultiProcessor, ...), or the CUDA Programming Guide's table \"Technical "
          "Specifications per Compute Capability\" and the product's SM count",
          device_.text, device.limits.cc_major, device.limits.cc_minor, fmt::join(missing, " ")));
    }
  }

  // Device: the preset or queried limits, then each override on top.
  DeviceLimits& d = device.limits;
  if (cc_.Given()) {
    const ComputeCapability cc = ParseComputeCapability("--cc", cc_.text);
    d.cc_major = cc.major;
    d.cc_minor = cc.minor;
    SetClusterLimits(&d);  // explicit --max-cluster-size* below still win
    report.overrides.push_back(fmt::format("--cc {}", cc_.text));
  }
  for (size_t i = 0; i < kLimitFlagCount; ++i) {
    if (!limit_flags_[i].Given()) continue;
    const LimitFlag& flag = kLimitFlags[i];
    const Allowed allowed{flag.min, flag.max, flag.unit, "allowed"};
    const int64_t value = flag.bytes ? ParseBytes(flag.name, limit_flags_[i].text, allowed)
                                     : ParseInteger(flag.name, limit_flags_[i].text, allowed);
    flag.apply(&d, value);
    report.overrides.push_back(fmt::format("{} {}", flag.name, value));
  }
  if (const occupancy::Status s = occupancy::DeviceContext::Validate(d);
      s != occupancy::Status::kOk) {
    throw UsageError(fmt::format("--device {}{}{}: unusable device limits: {}", device_.text,
                                 report.overrides.empty() ? "" : " with ",
                                 fmt::join(report.overrides, " "), occupancy::StatusMessage(s)));
  }
  const std::string owner = DeviceOwner(device);

  // Launch: every value checked against the device, each error naming its flag.
  LaunchConfig l;
  std::optional<int> regs;
  if (regs_.Given()) {
    regs = static_cast<int>(ParseInteger("--regs", StripPtxasUnit(regs_.text),
                                         {0, kMaxRegsPerThread, "registers per thread"}));
    report.regs_source = "--regs";
  }
  std::optional<PtxasKernel> ptxas;
  if (ptxas_.Given()) {
    ptxas = PickPtxasKernel(ParsePtxasOutput(PtxasText(ptxas_.text, in)), ptxas_.text,
                            ptxas_kernel_.Given() ? std::optional(ptxas_kernel_.text)
                                                  : std::nullopt);
    if (ptxas->registers > kMaxRegsPerThread) {
      ThrowOutOfRange("--ptxas", fmt::format("{} registers", ptxas->registers),
                      "0..255 registers per thread");
    }
    if (ptxas->static_smem > d.smem_per_block) {
      ThrowOutOfRange("--ptxas", fmt::format("{} bytes smem", ptxas->static_smem),
                      fmt::format("{} 0..{} bytes of static shared memory per block", owner,
                                  d.smem_per_block));
    }
    regs = ptxas->registers;
    l.static_smem = ptxas->static_smem;
    report.regs_source = "--ptxas";
    report.ptxas_kernel = ptxas->name;
    std::string what = fmt::format("ptxas: {}{} registers, {} B static shared memory",
                                   ptxas->name.empty() ? "" : ptxas->name + ": ",
                                   ptxas->registers, ptxas->static_smem);
    if (!ptxas->arch.empty()) what += fmt::format(", compiled for {}", ptxas->arch);
    const std::string device_arch = fmt::format("sm_{}{}", d.cc_major, d.cc_minor);
    if (!ptxas->arch.empty() && !ptxas->arch.starts_with(device_arch)) {
      what += fmt::format(
          " (this device is {}: a build for it may use a different number of registers)",
          device_arch);
    }
    if (ptxas->spill_stores > 0 || ptxas->spill_loads > 0) {
      what += fmt::format(
          "; it already spills ({} B stores, {} B loads to local memory): fewer registers would "
          "spill more",
          ptxas->spill_stores, ptxas->spill_loads);
    }
    report.notes.push_back(what);
  }

  const int64_t max_threads = d.max_threads_per_block;
  if (launch_bounds_.Given()) {
    const LaunchBounds bounds = ParseLaunchBounds(launch_bounds_.text, d, owner);
    const std::optional<occupancy::DeviceContext> bounds_context =
        occupancy::DeviceContext::Make(d);
    if (!bounds_context) {
      throw UsageError(fmt::format("--device {}: unusable device limits", device_.text));
    }
    const int min_blocks = std::max(1, bounds.min_blocks);
    const int32_t cap =
        occupancy::LaunchBoundsRegisterLimit(*bounds_context, bounds.max_threads, min_blocks);
    l.func_max_threads_per_block = bounds.max_threads;
    report.launch_bounds_threads = bounds.max_threads;
    report.launch_bounds_min_blocks = bounds.min_blocks;
    report.launch_bounds_register_limit = cap;
    const std::string spelled =
        bounds.min_blocks > 0
            ? fmt::format("__launch_bounds__({}, {})", bounds.max_threads, bounds.min_blocks)
            : fmt::format("__launch_bounds__({})", bounds.max_threads);
    std::string note;
    if (cap < 0) {
      note = fmt::format("{}: no register count lets {} blocks of {} threads share the register "
                         "file of {} registers",
                         spelled, min_blocks, bounds.max_threads, d.regs_per_sm);
    } else {
      note = fmt::format(
          "{}: ptxas would target at most {} registers per thread, so that {} of {} threads fit "
          "the {} registers of an SM (an estimate of ptxas's rule, CUDA Programming Guide "
          "\"Launch Bounds\"; ptxas -v of the build tells the registers it used)",
          spelled, cap, Plural(min_blocks, "block", "blocks"), bounds.max_threads, d.regs_per_sm);
      if (!regs) {
        regs = cap;
        report.regs_source = "--launch-bounds";
        note += fmt::format("; computed with {}, the most it allows: give --regs or --ptxas for "
                            "what the kernel uses",
                            cap);
      } else if (*regs > cap) {
        note += fmt::format(
            "; computed with {} instead of the {} given: ptxas would cut the other {} per thread, "
            "spilling what does not fit to local memory (check \"spill stores\" in ptxas -v)",
            cap, *regs, *regs - cap);
        regs = cap;
        report.regs_source = "--launch-bounds";
      }
    }
    const int64_t min_threads = int64_t{min_blocks} * bounds.max_threads;
    if (min_blocks > d.max_blocks_per_sm || min_threads > d.max_threads_per_sm) {
      note += fmt::format(
          "; {} of {} threads cannot be resident together on this device ({} threads and {} "
          "blocks per SM) whatever the registers",
          Plural(min_blocks, "block", "blocks"), bounds.max_threads, d.max_threads_per_sm,
          d.max_blocks_per_sm);
    }
    report.notes.push_back(note);
  }
  l.regs_per_thread = regs.value_or(0);

  if (threads_.Given()) {
    const int64_t n =
        ParseInteger("--threads", threads_.text,
                     {1, std::min(max_threads, kMaxBlockDim[0]), "threads per block", owner});
    l.block = {static_cast<uint32_t>(n), 1, 1};
  } else if (block_.Given()) {
    const std::string allowed =
        fmt::format("{} blocks of X 1..{}, Y 1..{}, Z 1..{} and 1..{} threads in all", owner,
                    kMaxBlockDim[0], kMaxBlockDim[1], kMaxBlockDim[2], max_threads);
    const auto dims = ParseTriple("--block", block_.text, allowed);
    int64_t product = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 1 || dims[i] > kMaxBlockDim[i]) {
        ThrowOutOfRange("--block", block_.text, allowed);
      }
      product *= dims[i];
    }
    if (product > max_threads) {
      ThrowOutOfRange("--block", fmt::format("{} ({} threads)", block_.text, product), allowed);
    }
    l.block = ToDim3(dims);
  } else {
    report.sweep_only = true;
  }
  report.show_sweep = report.sweep_only || sweep_;

  const int64_t optin = std::max(d.smem_per_block, d.smem_per_block_optin);
  if (static_smem_.Given()) {
    l.static_smem =
        ParseBytes("--static-smem", StripPtxasUnit(static_smem_.text),
                   {0, d.smem_per_block, "bytes of static shared memory per block", owner});
  }
  const std::string dyn_unit =
      l.static_smem == 0 ? std::string("bytes per block (the opt-in limit)")
                         : fmt::format("bytes per block (opt-in limit {} B - {} B --static-smem)",
                                       optin, l.static_smem);
  if (dyn_smem_.Given()) {
    l.dyn_smem =
        ParseBytes("--dyn-smem", dyn_smem_.text, {0, optin - l.static_smem, dyn_unit, owner});
  }
  if (max_dyn_smem_.Given()) {
    l.func_max_dyn_smem = ParseBytes("--max-dyn-smem", max_dyn_smem_.text,
                                     {0, optin - l.static_smem, dyn_unit, owner});
  }
  if (max_threads_per_block_.Given()) {
    l.func_max_threads_per_block =
        static_cast<int>(ParseInteger("--max-threads-per-block", max_threads_per_block_.text,
                                      {1, max_threads, "threads per block", owner}));
  }
  if (carveout_.Given()) {
    l.carveout = static_cast<int>(
        ParseInteger("--carveout", carveout_.text, {-1, 100, "percent (-1 for no preference)"}));
  }

  if (grid_.Given()) {
    const std::string allowed = fmt::format("allowed N or X,Y,Z with X 1..{}, Y 1..{}, Z 1..{}",
                                            kMaxGridDim[0], kMaxGridDim[1], kMaxGridDim[2]);
    const auto dims = ParseTriple("--grid", grid_.text, allowed);
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 1 || dims[i] > kMaxGridDim[i]) ThrowOutOfRange("--grid", grid_.text, allowed);
    }
    l.grid = ToDim3(dims);
    report.has_grid = true;
  }

  l.non_portable_cluster_size_allowed = non_portable_cluster_;
  if (cluster_.Given()) {
    if (d.max_cluster_size <= 0) {
      throw UsageError(fmt::format(
          "--cluster {} needs thread block clusters (compute capability 9.0 or newer): device {} "
          "is {}.{}",
          cluster_.text, device.key, d.cc_major, d.cc_minor));
    }
    const int64_t max_size = non_portable_cluster_
                                 ? std::max(d.max_cluster_size, d.max_cluster_size_non_portable)
                                 : d.max_cluster_size;
    std::string allowed = fmt::format("{} 1..{} blocks per cluster", owner, max_size);
    if (!non_portable_cluster_ && d.max_cluster_size_non_portable > d.max_cluster_size) {
      allowed += fmt::format(" ({} with --non-portable-cluster)", d.max_cluster_size_non_portable);
    }
    const auto dims = ParseTriple("--cluster", cluster_.text, allowed);
    int64_t product = 1;
    for (int64_t dim : dims) {
      if (dim < 1 || dim > max_size) ThrowOutOfRange("--cluster", cluster_.text, allowed);
      product *= dim;
    }
    if (product > max_size) {
      ThrowOutOfRange("--cluster", fmt::format("{} ({} blocks)", cluster_.text, product), allowed);
    }
    l.cluster = ToDim3(dims);
    if (report.has_grid && (l.grid.x % l.cluster.x != 0 || l.grid.y % l.cluster.y != 0 ||
                            l.grid.z % l.cluster.z != 0)) {
      throw UsageError(fmt::format(
          "--grid {} is not a multiple of --cluster {}: each grid dimension must divide evenly",
          grid_.text, cluster_.text));
    }
  } else if (non_portable_cluster_) {
    throw UsageError("--non-portable-cluster needs --cluster");
  }
  if (max_active_clusters_.Given()) {
    if (!cluster_.Given()) throw UsageError("--max-active-clusters needs --cluster");
    l.max_active_clusters =
        static_cast<int>(ParseInteger("--max-active-clusters", max_active_clusters_.text,
                                      {1, kInt32Max, "clusters (cuOccupancyMaxActiveClusters)"}));
  }

  const std::optional<occupancy::DeviceContext> context = occupancy::DeviceContext::Make(d);
  if (!context) {
    throw UsageError(fmt::format("--device {}: unusable device limits", device_.text));
  }
  {
    std::array<occupancy::SweepPoint, occupancy::kMaxSweepPoints> points;
    const int n = occupancy::SweepBlockSizes(*context, l, points.data(),
                                             static_cast<int>(points.size()));
    report.sweep.assign(points.begin(), points.begin() + n);
    report.best_block_size = occupancy::SmallestBestBlockSize(points.data(), n);
    for (const occupancy::SweepPoint& p : report.sweep) {
      if (p.threads == report.best_block_size) report.best_block_occupancy = p.occupancy;
    }
    if (report.sweep_only) {
      // The detail below is for the size the sweep recommends (or the smallest, when none fits).
      const int32_t size = report.best_block_size > 0 ? report.best_block_size
                           : n > 0                    ? report.sweep.front().threads
                                                      : d.warp_size;
      l.block = {static_cast<uint32_t>(size), 1, 1};
    }
  }
  if (const occupancy::Status s = occupancy::Compute(*context, l, &report.result);
      s != occupancy::Status::kOk) {
    throw UsageError(
        fmt::format("the occupancy engine rejected the launch: {}", occupancy::StatusMessage(s)));
  }
  // Dynamic shared memory above what a function may use without opting in, and no opt-in: the
  // launch fails as given; say so first, with what it would give opted in to what it asks.
  if (l.func_max_dyn_smem < 0 && l.static_smem + l.dyn_smem > d.smem_per_block) {
    LaunchConfig opted = l;
    opted.func_max_dyn_smem = l.dyn_smem;
    occupancy::Result with;
    if (occupancy::Compute(*context, opted, &with) == occupancy::Status::kOk) {
      report.opted_in = with;
      const schema::OccupancyFields& f = with.fields;
      report.notes.insert(
          report.notes.begin(),
          fmt::format(
              "{} of shared memory per block is above the {} a function may use without opting "
              "in, and this one has not opted in (--max-dyn-smem; cudaFuncSetAttribute "
              "MaxDynamicSharedMemorySize): the launch cannot run as given. Opted in "
              "(--max-dyn-smem {}), it would fit {} block{}/SM, occupancy {}{}",
              report::FormatBytes(l.static_smem + l.dyn_smem),
              report::FormatBytes(d.smem_per_block), BytesFlag(l.dyn_smem), f.max_active_blocks,
              f.max_active_blocks == 1 ? "" : "s", fmt::format("{:.1f}%", f.occupancy * 100.0),
              f.max_active_blocks > 0 && f.occupancy < 1.0
                  ? fmt::format(", limited by {}", schema::ResourceName(f.limiting_resource))
                  : std::string()));
    }
  }
  if (l.is_cluster() && l.max_active_clusters <= 0 && report.result.fields.max_active_blocks > 0) {
    const int64_t per_sm_bound =
        int64_t{report.result.fields.max_active_blocks} * d.sm_count /
        static_cast<int64_t>(l.cluster.count());
    report.notes.push_back(fmt::format(
        "clusters: how many clusters of {} fit at once depends on how the GPU places them across "
        "its GPCs, which only the driver knows; on a machine with the GPU, "
        "cudaOccupancyMaxActiveClusters(&n, kernel, &config) (cuOccupancyMaxActiveClusters in the "
        "driver API) gives it: pass it with --max-active-clusters N. Until then the figures "
        "below are an upper bound: at most {} clusters ({} blocks/SM x {} SMs / {})",
        l.cluster.count(), per_sm_bound, report.result.fields.max_active_blocks, d.sm_count,
        l.cluster.count()));
  }

  report.device_key = std::move(device.key);
  report.device_name = std::move(device.name);
  report.limits = d;
  report.launch = l;
  if (report.result.fields.max_active_blocks == 0) report.launch_failure = ExplainFailure(report);
  return report;
}

int OccupancyCommand::Run(DeviceQuery& device_query, std::istream& in, std::ostream& out) const {
  if (list_devices_) {
    if (json_) {
      out << DevicePresetsToJson().dump() << '\n';
    } else {
      out << RenderDevicePresetsText();
    }
    return kExitOk;
  }
  const OccupancyReport report = Compute(device_query, in);
  if (json_) {
    out << OccupancyReportToJson(report).dump() << '\n';
  } else {
    out << RenderOccupancyText(report);
  }
  return kExitOk;
}

}  // namespace cuflight::cli
