#include "perfetto_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace cuflight::run {
namespace {

using nlohmann::json;

json DimJson(const schema::Dim3& d) { return json::array({d.x, d.y, d.z}); }

std::string Hex(uint64_t v) { return fmt::format("{:#x}", v); }

std::string KernelName(const schema::OwnedKernelEvent& k) {
  return k.demangled.empty() ? k.name : k.demangled;
}

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

json OptionalInt(int64_t v) { return v < 0 ? json(nullptr) : json(v); }

json KernelArgs(const schema::OwnedKernelEvent& k) {
  const schema::OccupancyFields& o = k.occupancy;
  json limiting = json::array();
  for (int i = 0; i < schema::kResourceCount; ++i) {
    if ((o.limiting_resources & schema::MaskOf(static_cast<schema::Resource>(i))) != 0) {
      limiting.push_back(schema::ResourceName(static_cast<schema::Resource>(i)));
    }
  }
  json args = {
      {"name", KernelName(k)},
      {"mangled", k.name},
      {"api", k.api},
      {"pid", k.header.pid},
      {"tid", k.tid},
      {"device", k.device},
      {"stream", Hex(k.stream)},
      {"context", Hex(k.context)},
      {"correlation_id", k.correlation_id},
      {"grid", DimJson(k.grid)},
      {"block", DimJson(k.block)},
      {"regs", k.num_regs},
      {"static_smem", k.static_shared_bytes},
      {"dyn_smem", k.dyn_shared_bytes},
      {"smem", k.static_shared_bytes + k.dyn_shared_bytes},
      {"local_bytes", k.local_bytes},
      {"max_threads_per_block", k.max_threads_per_block},
      {"carveout", k.carveout},
      {"cooperative", k.cooperative},
      {"max_active_blocks", o.max_active_blocks},
      {"active_warps", o.active_warps},
      {"max_warps", o.max_warps},
      {"occupancy", o.occupancy},
      {"limiting_resource", schema::ResourceName(o.limiting_resource)},
      {"limiting_resources", limiting},
      {"reg_occupancy", o.reg_occupancy},
      {"smem_occupancy", o.smem_occupancy},
      {"warp_occupancy", o.warp_occupancy},
      {"block_occupancy", o.block_occupancy},
      {"barrier_occupancy", o.barrier_occupancy},
      {"allocated_regs_per_block", o.allocated_regs_per_block},
      {"allocated_smem_per_block", o.allocated_smem_per_block},
      {"waves", o.waves},
      {"tail_utilization", o.tail_utilization},
      {"regs_for_next_block", OptionalInt(o.regs_for_next_block)},
      {"smem_for_next_block", OptionalInt(o.smem_for_next_block)},
      {"best_block_size", o.best_block_size},
  };
  if (k.cluster) {
    args["cluster"] = DimJson(*k.cluster);
    if (o.has_cluster) args["cluster_occupancy"] = o.cluster_occupancy;
  }
  if (k.graph_id) args["graph_id"] = *k.graph_id;
  if (k.graph_node_id) args["graph_node_id"] = *k.graph_node_id;
  return args;
}

// Microseconds since `base_ns`.
double Micros(int64_t ns, int64_t base_ns) { return static_cast<double>(ns - base_ns) / 1000.0; }

json Metadata(const char* what, int64_t pid, int64_t tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

void PerfettoTraceBuilder::Add(const schema::OwnedEvent& event) {
  if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&event)) {
    if (k->correlation_id == 0) {
      uncorrelated_.push_back(*k);
    } else {
      kernels_[{k->header.pid, schema::JoinKeyOf(*k)}] = *k;
    }
  } else if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&event)) {
    times_[{t->header.pid, schema::JoinKeyOf(*t)}] = *t;
  } else if (const auto* d = std::get_if<schema::OwnedDeviceEvent>(&event)) {
    devices_[{d->header.pid, d->device}] = Device{d->name, d->uuid};
  } else if (const auto* s = std::get_if<schema::OwnedProcessStartEvent>(&event)) {
    process_names_[s->header.pid] = Basename(s->exe);
  }
}

PerfettoCounts PerfettoTraceBuilder::counts() const {
  PerfettoCounts c;
  c.kernels = kernels_.size() + uncorrelated_.size();
  for (const auto& [key, k] : kernels_) {
    if (times_.count(key) != 0) ++c.timed;
  }
  c.untimed = c.kernels - c.timed;
  for (const auto& [key, t] : times_) {
    if (kernels_.count(key) == 0) ++c.orphan_times;
  }
  return c;
}

json PerfettoTraceBuilder::Build() const {
  // The time base: the earliest timestamp placed, floored to a microsecond.
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (const auto& [key, t] : times_) earliest = std::min(earliest, static_cast<int64_t>(t.start_ns));
  for (const auto& [key, k] : kernels_) earliest = std::min(earliest, k.header.ts_ns);
  for (const auto& k : uncorrelated_) earliest = std::min(earliest, k.header.ts_ns);
  const int64_t base = earliest == std::numeric_limits<int64_t>::max() ? 0 : earliest / 1000 * 1000;

  json metadata = json::array();
  json events = json::array();

  // GPU trace processes and stream threads, numbered in order of first use.
  std::map<std::string, int64_t> gpu_pids;
  std::map<std::tuple<int64_t, int32_t, uint64_t>, int64_t> stream_tids;
  auto gpu_pid = [&](int32_t pid, int32_t ordinal) {
    const auto found = devices_.find({pid, ordinal});
    const Device device = found != devices_.end() ? found->second : Device{};
    const std::string key =
        device.uuid.empty() ? fmt::format("{}|{}", ordinal, device.name) : device.uuid;
    const auto [it, added] =
        gpu_pids.emplace(key, kGpuPidBase + static_cast<int64_t>(gpu_pids.size()));
    if (added) {
      metadata.push_back(Metadata(
          "process_name", it->second, 0,
          device.name.empty() ? fmt::format("GPU {}", ordinal)
                              : fmt::format("GPU {}: {}", ordinal, device.name)));
      metadata.push_back({{"ph", "M"},
                          {"name", "process_sort_index"},
                          {"pid", it->second},
                          {"tid", 0},
                          {"args", {{"sort_index", it->second - kGpuPidBase}}}});
    }
    return it->second;
  };
  auto stream_tid = [&](int64_t gpu, int32_t pid, uint64_t stream) {
    const auto [it, added] = stream_tids.emplace(
        std::make_tuple(gpu, pid, stream), kStreamTidBase + static_cast<int64_t>(stream_tids.size()));
    if (added) {
      metadata.push_back(Metadata(
          "thread_name", gpu, it->second,
          stream == 0 ? fmt::format("default stream (pid {})", pid)
                      : fmt::format("stream {} (pid {})", Hex(stream), pid)));
    }
    return it->second;
  };

  // Host processes and launching threads.
  std::map<int32_t, bool> host_named;
  std::map<std::pair<int32_t, int32_t>, bool> thread_named;
  auto host_launch = [&](const schema::OwnedKernelEvent& k) {
    const int32_t pid = k.header.pid;
    if (host_named.emplace(pid, true).second) {
      const auto name = process_names_.find(pid);
      metadata.push_back(Metadata(
          "process_name", pid, 0,
          name != process_names_.end() ? fmt::format("{} (pid {})", name->second, pid)
                                       : fmt::format("pid {}", pid)));
    }
    if (thread_named.emplace(std::make_pair(pid, k.tid), true).second) {
      metadata.push_back(Metadata("thread_name", pid, k.tid, fmt::format("thread {}", k.tid)));
    }
    events.push_back({{"ph", "i"},
                      {"s", "t"},
                      {"cat", "launch"},
                      {"name", KernelName(k)},
                      {"pid", pid},
                      {"tid", k.tid},
                      {"ts", Micros(k.header.ts_ns, base)},
                      {"args",
                       {{"api", k.api},
                        {"correlation_id", k.correlation_id},
                        {"device", k.device},
                        {"stream", Hex(k.stream)},
                        {"grid", DimJson(k.grid)},
                        {"block", DimJson(k.block)}}}});
  };
  auto untimed = [&](const schema::OwnedKernelEvent& k) {
    const int64_t gpu = gpu_pid(k.header.pid, k.device);
    json args = KernelArgs(k);
    args["timed"] = false;
    events.push_back({{"ph", "i"},
                      {"s", "t"},
                      {"cat", "kernel"},
                      {"name", KernelName(k)},
                      {"pid", gpu},
                      {"tid", stream_tid(gpu, k.header.pid, k.stream)},
                      {"ts", Micros(k.header.ts_ns, base)},
                      {"args", std::move(args)}});
    host_launch(k);
  };

  for (const auto& [key, k] : kernels_) {
    const auto t = times_.find(key);
    if (t == times_.end()) {
      untimed(k);
      continue;
    }
    const schema::OwnedKernelTimeEvent& time = t->second;
    const int64_t gpu = gpu_pid(k.header.pid, time.device);
    json args = KernelArgs(k);
    args["timed"] = true;
    args["start_ns"] = time.start_ns;
    args["end_ns"] = time.end_ns;
    args["duration_ns"] = time.duration_ns;
    events.push_back({{"ph", "X"},
                      {"cat", "kernel"},
                      {"name", KernelName(k)},
                      {"pid", gpu},
                      {"tid", stream_tid(gpu, k.header.pid, time.stream)},
                      {"ts", Micros(static_cast<int64_t>(time.start_ns), base)},
                      {"dur", static_cast<double>(time.duration_ns) / 1000.0},
                      {"args", std::move(args)}});
    host_launch(k);
  }
  for (const schema::OwnedKernelEvent& k : uncorrelated_) untimed(k);
  for (const auto& [key, time] : times_) {
    if (kernels_.count(key) != 0) continue;
    const int64_t gpu = gpu_pid(time.header.pid, time.device);
    json args = {{"pid", time.header.pid},
                 {"correlation_id", time.correlation_id},
                 {"device", time.device},
                 {"stream", Hex(time.stream)},
                 {"start_ns", time.start_ns},
                 {"end_ns", time.end_ns},
                 {"duration_ns", time.duration_ns},
                 {"timed", true}};
    std::string name = fmt::format("kernel (corr {})", time.correlation_id);
    if (time.graph_id) args["graph_id"] = *time.graph_id;
    if (time.graph_node_id) {
      args["graph_node_id"] = *time.graph_node_id;
      name = fmt::format("kernel (corr {}, node {})", time.correlation_id, *time.graph_node_id);
    }
    events.push_back({{"ph", "X"},
                      {"cat", "kernel"},
                      {"name", std::move(name)},
                      {"pid", gpu},
                      {"tid", stream_tid(gpu, time.header.pid, time.stream)},
                      {"ts", Micros(static_cast<int64_t>(time.start_ns), base)},
                      {"dur", static_cast<double>(time.duration_ns) / 1000.0},
                      {"args", std::move(args)}});
  }

  std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
    return std::make_tuple(a["ts"].get<double>(), a["pid"].get<int64_t>(), a["tid"].get<int64_t>()) <
           std::make_tuple(b["ts"].get<double>(), b["pid"].get<int64_t>(), b["tid"].get<int64_t>());
  });
  json trace_events = std::move(metadata);
  for (json& e : events) trace_events.push_back(std::move(e));

  const PerfettoCounts c = counts();
  return {{"traceEvents", std::move(trace_events)},
          {"displayTimeUnit", "ns"},
          {"otherData",
           {{"producer", "cuflight"},
            {"time_base_ns", base},
            {"kernels", c.kernels},
            {"timed_kernels", c.timed},
            {"untimed_kernels", c.untimed},
            {"kernel_times_without_kernel", c.orphan_times}}}};
}

}  // namespace cuflight::run
