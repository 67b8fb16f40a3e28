#include "report_test_events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "cuflight/schema/encoder.h"

namespace cuflight::report::testing {

std::string Line(const schema::OwnedEvent& event) {
  std::vector<char> buf(1 << 16);
  const size_t n = std::visit([&](const auto& e) { return schema::Encode(e, buf.data(), buf.size()); },
                              event);
  EXPECT_GT(n, 0u);
  return std::string(buf.data(), n);
}

schema::OwnedProcessStartEvent Start(int32_t pid, uint64_t seq, int64_t start_ns, std::string exe) {
  schema::OwnedProcessStartEvent e;
  e.header = {start_ns, pid, seq};
  e.exe = std::move(exe);
  e.argv = {e.exe};
  e.hostname = "node1";
  e.start_ns = start_ns;
  e.cuflight_version = "0.1.0";
  return e;
}

schema::OwnedDeviceEvent Device(int32_t pid, uint64_t seq, int32_t device, std::string name) {
  schema::OwnedDeviceEvent e;
  e.header = {1, pid, seq};
  e.device = device;
  e.name = std::move(name);
  e.cc_major = 8;
  e.sm_count = 108;
  e.max_threads_per_block = 1024;
  e.max_threads_per_sm = 2048;
  e.max_blocks_per_sm = 32;
  e.regs_per_sm = 65536;
  e.regs_per_block = 65536;
  e.smem_per_sm = 167936;
  e.smem_per_block = 49152;
  e.smem_per_block_optin = 166912;
  e.reserved_smem_per_block = 1024;
  return e;
}

schema::OwnedKernelEvent Kernel(int32_t pid, uint64_t seq, int64_t ts_ns, uint64_t correlation_id,
                                const KernelSpec& spec) {
  schema::OwnedKernelEvent e;
  e.header = {ts_ns, pid, seq};
  e.tid = pid;
  e.device = spec.device;
  e.context = 0x1000;
  e.stream = spec.stream;
  e.correlation_id = correlation_id;
  e.api = spec.api;
  e.name = spec.name;
  e.demangled = spec.demangled;
  e.grid = spec.grid;
  e.block = spec.block;
  e.num_regs = spec.regs;
  e.static_shared_bytes = spec.static_smem;
  e.dyn_shared_bytes = spec.dyn_smem;
  e.local_bytes = spec.local_bytes;
  e.max_threads_per_block = 1024;
  e.occupancy = spec.occupancy;
  e.graph_id = spec.graph_id;
  e.graph_node_id = spec.graph_node_id;
  return e;
}

schema::OwnedKernelTimeEvent KernelTime(int32_t pid, uint64_t seq, uint64_t correlation_id,
                                        uint64_t duration_ns, uint64_t stream) {
  schema::OwnedKernelTimeEvent e;
  e.header = {2, pid, seq};
  e.correlation_id = correlation_id;
  e.stream = stream;
  e.start_ns = 1000000;
  e.end_ns = e.start_ns + duration_ns;
  e.duration_ns = duration_ns;
  return e;
}

schema::OwnedKernelTimeEvent KernelTime(int32_t pid, uint64_t seq, uint64_t correlation_id,
                                        uint64_t duration_ns, const TimeSpec& spec) {
  schema::OwnedKernelTimeEvent e = KernelTime(pid, seq, correlation_id, duration_ns, spec.stream);
  e.device = spec.device;
  e.start_ns = spec.start_ns;
  e.end_ns = spec.start_ns + duration_ns;
  e.graph_id = spec.graph_id;
  e.graph_node_id = spec.graph_node_id;
  return e;
}

schema::OwnedApiErrorEvent ApiError(int32_t pid, uint64_t seq, std::string api,
                                    std::string error_name, int32_t code,
                                    std::vector<uint64_t> last_correlation_ids) {
  schema::OwnedApiErrorEvent e;
  e.header = {3, pid, seq};
  e.api = std::move(api);
  e.code = code;
  e.error_name = std::move(error_name);
  e.message = "an illegal memory access was encountered";
  e.device = 0;
  e.last_correlation_ids = std::move(last_correlation_ids);
  return e;
}

schema::OwnedProcessEndEvent End(int32_t pid, uint64_t seq, int32_t exit_code) {
  schema::OwnedProcessEndEvent e;
  e.header = {4, pid, seq};
  e.exit_code = exit_code;
  return e;
}

schema::OccupancyFields Fields(int32_t blocks, int32_t wpb, int32_t max_warps,
                               schema::Resource limiter) {
  schema::OccupancyFields f;
  f.max_active_blocks = blocks;
  f.active_warps = blocks * wpb;
  f.max_warps = max_warps;
  f.occupancy = std::min(1.0, static_cast<double>(blocks * wpb) / max_warps);
  f.reg_occupancy = f.smem_occupancy = f.warp_occupancy = f.block_occupancy =
      f.barrier_occupancy = 1.0;
  const double occ = f.occupancy;
  switch (limiter) {
    case schema::Resource::kRegisters: f.reg_occupancy = occ; break;
    case schema::Resource::kSharedMem: f.smem_occupancy = occ; break;
    case schema::Resource::kWarps: f.warp_occupancy = occ; break;
    case schema::Resource::kBlocks: f.block_occupancy = occ; break;
    case schema::Resource::kBarriers: f.barrier_occupancy = occ; break;
    case schema::Resource::kCluster: break;
    case schema::Resource::kOther: break;
  }
  f.limiting_resource = limiter;
  f.limiting_resources = schema::MaskOf(limiter);
  f.waves = 2.0;
  f.tail_utilization = 1.0;
  return f;
}

std::vector<std::pair<uint64_t, std::string>> SharedCorrelationLines(int32_t pid, int64_t ts_ns) {
  std::vector<std::pair<uint64_t, std::string>> lines;
  uint64_t seq = 0;
  auto add = [&](const schema::OwnedEvent& e) {
    lines.emplace_back(seq, Line(e));
    ++seq;
  };
  add(Start(pid, seq, ts_ns));
  add(Device(pid, seq, 0, "NVIDIA A100"));
  add(Device(pid, seq, 1, "NVIDIA A100"));
  const auto gpu_base = static_cast<uint64_t>(ts_ns) + 1000000000;
  const char* names[3][2] = {
      {"_Z6node_av", "node_a()"}, {"_Z6node_bv", "node_b()"}, {"_Z6node_cv", "node_c()"}};
  for (uint64_t replay = 0; replay < 4; ++replay) {
    const uint64_t corr = 101 + replay;
    std::vector<schema::OwnedKernelTimeEvent> times;
    uint64_t start = gpu_base + replay * 10000000;  // a replay every 10 ms
    for (int n = 0; n < 3; ++n) {
      KernelSpec k;
      k.name = names[n][0];
      k.demangled = names[n][1];
      k.stream = 0x20;
      k.api = "cuGraphLaunch";
      k.graph_id = kGraph;
      k.graph_node_id = kGraphNodes[n];
      k.occupancy = Fields(8, 8, 64, schema::Resource::kWarps);
      TimeSpec t;
      t.stream = 0x20;
      t.start_ns = start;
      t.graph_id = kGraph;
      t.graph_node_id = kGraphNodes[n];
      start += kGraphNodeNs[n];
      const int64_t launched = ts_ns + static_cast<int64_t>(replay * 10 + n);
      if (replay == 2) {
        add(Kernel(pid, seq, launched, corr, k));
        times.push_back(KernelTime(pid, 0, corr, kGraphNodeNs[n], t));
      } else {
        add(Kernel(pid, seq, launched, corr, k));
        add(KernelTime(pid, seq, corr, kGraphNodeNs[n], t));
      }
    }
    for (auto it = times.rbegin(); it != times.rend(); ++it) {
      it->header.seq = seq;
      add(*it);
    }
  }
  KernelSpec plain;
  plain.name = "_Z5plainv";
  plain.demangled = "plain()";
  plain.occupancy = Fields(4, 8, 64, schema::Resource::kRegisters);
  add(Kernel(pid, seq, ts_ns + 100, 200, plain));
  const uint64_t plain_start = gpu_base + 50000000;
  lines.emplace_back(
      seq, R"({"type":"kernel_time","version":1,"ts_ns":2,"pid":)" + std::to_string(pid) +
               R"(,"seq":)" + std::to_string(seq) +
               R"(,"correlation_id":200,"device":0,"context":4096,"stream":0,"start_ns":)" +
               std::to_string(plain_start) + R"(,"end_ns":)" + std::to_string(plain_start + 7000) +
               R"(,"duration_ns":7000})"
               "\n");
  ++seq;
  KernelSpec coop;
  coop.name = "_Z4coopv";
  coop.demangled = "coop()";
  coop.api = "cuLaunchCooperativeKernelMultiDevice";
  coop.occupancy = Fields(2, 8, 64, schema::Resource::kBlocks);
  coop.device = 0;
  coop.stream = 0x30;
  add(Kernel(pid, seq, ts_ns + 200, 300, coop));
  coop.device = 1;
  coop.stream = 0x31;
  add(Kernel(pid, seq, ts_ns + 200, 300, coop));
  TimeSpec on1;
  on1.device = 1;
  on1.stream = 0x31;
  on1.start_ns = gpu_base + 60000000;
  add(KernelTime(pid, seq, 300, 30000, on1));
  TimeSpec on0;
  on0.device = 0;
  on0.stream = 0x30;
  on0.start_ns = gpu_base + 60000000;
  add(KernelTime(pid, seq, 300, 10000, on0));
  add(End(pid, seq, 0));
  return lines;
}

void WriteFile(const std::filesystem::path& path, std::string_view bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// The processes and events as report_test_events.h lists them.
void WriteTwoProcessesOfPidOne(const std::filesystem::path& logs) {
  constexpr int64_t kStart = 1'763'708'400'000'000'000;  // 2025-11-21T07:00:00Z
  const std::filesystem::path day = logs / "2025-11-21";
  struct Proc {
    std::string file, exe, mangled, kernel;
    uint64_t instance_id, pid_ns;
  };
  auto write = [&](const Proc& p, const std::vector<std::pair<uint64_t, uint64_t>>& times,
                   std::optional<uint64_t> untimed_corr, std::optional<uint64_t> orphan_corr) {
    schema::OwnedProcessStartEvent start = Start(1, 0, kStart, p.exe);
    start.instance_id = p.instance_id;
    start.pid_ns = p.pid_ns;
    std::string text = Line(start) + Line(Device(1, 1, 0, "NVIDIA A100"));
    uint64_t seq = 2;
    KernelSpec spec;
    spec.name = p.mangled;
    spec.demangled = p.kernel;
    for (const auto& [corr, ns] : times) {
      text += Line(Kernel(1, seq++, kStart + static_cast<int64_t>(corr), corr, spec));
      TimeSpec at;
      at.start_ns = static_cast<uint64_t>(kStart) + corr * 1000000;
      text += Line(KernelTime(1, seq++, corr, ns, at));
    }
    // Launched after the GPU times above end (10 ms): an instant on the stream's first lane.
    if (untimed_corr) text += Line(Kernel(1, seq++, kStart + 10'000'000, *untimed_corr, spec));
    if (orphan_corr) {
      TimeSpec at;
      at.start_ns = static_cast<uint64_t>(kStart) + *orphan_corr * 1000000;
      text += Line(KernelTime(1, seq++, *orphan_corr, 5000, at));
    }
    WriteFile(day / p.file, text);
  };
  write({"node1-trainer-1-1763708400000000000-161-u0.jsonl", "/opt/a/trainer", "_Z8a_kernelv",
         "a_kernel()", 161, 4026532001},
        {{5, 1000}, {6, 2000}}, 7, std::nullopt);
  write({"node1-worker-1-1763708400000000000-178-u0.jsonl", "/opt/b/worker", "_Z8b_kernelv",
         "b_kernel()", 178, 4026532002},
        {{5, 3000}, {6, 4000}}, std::nullopt, 7);
}

}  // namespace cuflight::report::testing
