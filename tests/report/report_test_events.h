// Event lines for the report tests, encoded with the schema's own encoder, and a helper that
// writes files.
#ifndef CUFLIGHT_TESTS_REPORT_REPORT_TEST_EVENTS_H_
#define CUFLIGHT_TESTS_REPORT_REPORT_TEST_EVENTS_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuflight/schema/events.h"

namespace cuflight::report::testing {

// One complete line (ending in '\n') for any owned event.
std::string Line(const schema::OwnedEvent& event);

schema::OwnedProcessStartEvent Start(int32_t pid, uint64_t seq, int64_t start_ns,
                                     std::string exe = "/opt/app/bin/trainer");
schema::OwnedDeviceEvent Device(int32_t pid, uint64_t seq, int32_t device, std::string name);

// A kernel launch with the given occupancy fields (everything else plausible).
struct KernelSpec {
  std::string name = "_Z6kernelPf";
  std::string demangled = "kernel(float*)";
  schema::Dim3 grid{1024, 1, 1};
  schema::Dim3 block{256, 1, 1};
  int32_t regs = 32;
  int64_t static_smem = 0;
  int64_t dyn_smem = 0;
  int64_t local_bytes = 0;
  int32_t device = 0;
  uint64_t stream = 0;
  schema::OccupancyFields occupancy;
  std::string api = "cuLaunchKernel";
  // A kernel node of a CUDA graph: both set (as the injector's graph-node events have them).
  std::optional<uint64_t> graph_id;
  std::optional<uint64_t> graph_node_id;
};
schema::OwnedKernelEvent Kernel(int32_t pid, uint64_t seq, int64_t ts_ns, uint64_t correlation_id,
                                const KernelSpec& spec);
schema::OwnedKernelTimeEvent KernelTime(int32_t pid, uint64_t seq, uint64_t correlation_id,
                                        uint64_t duration_ns, uint64_t stream = 0);
// A kernel_time with every field that joins or places it given.
struct TimeSpec {
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t start_ns = 1000000;
  std::optional<uint64_t> graph_id;  // both set for a graph's kernel node
  std::optional<uint64_t> graph_node_id;
};
schema::OwnedKernelTimeEvent KernelTime(int32_t pid, uint64_t seq, uint64_t correlation_id,
                                        uint64_t duration_ns, const TimeSpec& spec);
schema::OwnedApiErrorEvent ApiError(int32_t pid, uint64_t seq, std::string api,
                                    std::string error_name, int32_t code,
                                    std::vector<uint64_t> last_correlation_ids);
schema::OwnedProcessEndEvent End(int32_t pid, uint64_t seq, int32_t exit_code);

// Occupancy fields of a launch of `wpb` warps per block limited by `limiter` at `blocks` per SM
// on an SM of `max_warps` warps; the other resources allow full occupancy.
schema::OccupancyFields Fields(int32_t blocks, int32_t wpb, int32_t max_warps,
                               schema::Resource limiter);

// One process whose kernels share correlation ids, as CUDA does, with GPU times known by hand.
// The kernel nodes of one cuGraphLaunch all carry that launch's correlation id (CUPTI: a kernel
// record's correlationId is its launching API call's; graphNodeId tells the nodes apart), and so
// do the per-device kernels of one cuLaunchCooperativeKernelMultiDevice call.
//  - process_start (seq 0), devices 0 and 1 ("NVIDIA A100", seqs 1 and 2);
//  - a 3-node graph (graph id kGraph; kernels node_a, node_b, node_c, graph node ids
//    kGraphNodes) replayed 4 times on device 0, stream 0x20, correlation ids 101..104; the nodes
//    take 1, 2 and 3 ms (kGraphNodeNs) and run one after the other; each node's kernel event is
//    followed by its kernel_time, as the injector sends them, except in the third replay, where
//    the three kernel events come first and the times follow in reverse order;
//  - one ordinary launch (plain, correlation id 200, device 0, stream 0) taking 7 us, whose
//    kernel_time is a line as written before kernel_time had graph ids (hand-written JSON);
//  - one cuLaunchCooperativeKernelMultiDevice call (coop, correlation id 300) on device 0
//    (stream 0x30) taking 10 us and device 1 (stream 0x31) taking 30 us, the device 1 time first;
//  - process_end.
// Every line (ending in '\n') with its seq, in order; GPU times from `ts_ns` + 1 s.
inline constexpr uint64_t kGraph = 9;
inline constexpr uint64_t kGraphNodes[3] = {0x7f0000000101, 0x7f0000000102, 0x7f0000000103};
inline constexpr uint64_t kGraphNodeNs[3] = {1000000, 2000000, 3000000};
std::vector<std::pair<uint64_t, std::string>> SharedCorrelationLines(int32_t pid, int64_t ts_ns);

// Writes `bytes` to `path` (creating parent directories).
void WriteFile(const std::filesystem::path& path, std::string_view bytes);

// Two processes with the same pid: the first processes of two containers (pid 1 in pid
// namespaces 4026532001 and 4026532002, on one host), each its own stream (instance ids 161 and
// 178, each its own log file, named as docs/collector.md "Files" lays them out), sending the
// same seqs and correlation ids, read in order of file name. Process A (trainer, a_kernel):
// corr 5 (GPU 1 us), corr 6 (2 us), corr 7 (no kernel_time: an instant). Process B (worker,
// b_kernel): corr 5 (3 us), corr 6 (4 us), and a kernel_time of corr 7 (5 us) whose kernel is
// not in the logs. Each file (under <logs>/2025-11-21/): process_start (seq 0), device 0 (seq
// 1), then kernels and times.
void WriteTwoProcessesOfPidOne(const std::filesystem::path& logs);

}  // namespace cuflight::report::testing

#endif  // CUFLIGHT_TESTS_REPORT_REPORT_TEST_EVENTS_H_
