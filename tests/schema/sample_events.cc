#include "sample_events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/encoder.h"
#include "h100_device.h"

namespace cuflight::schema::testing {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Header MakeHeader(uint64_t seq) { return {1'732'000'000'123'456'789 + int64_t(seq), 4242, seq}; }

std::string AllControlCharacters() {
  std::string s;
  for (int c = 0; c < 0x20; ++c) s += static_cast<char>(c);
  s += '\x7f';
  return s;
}

OccupancyFields SampleOccupancy() {
  OccupancyFields o;
  o.max_active_blocks = 3;
  o.active_warps = 24;
  o.max_warps = 64;
  o.occupancy = 0.375;
  o.reg_occupancy = 0.375;
  o.smem_occupancy = 2.0 / 3.0;
  o.warp_occupancy = 1;
  o.block_occupancy = 1;
  o.barrier_occupancy = 1;
  o.limiting_resource = Resource::kRegisters;
  o.limiting_resources = MaskOf(Resource::kRegisters);
  o.allocated_regs_per_block = 21504;
  o.allocated_smem_per_block = 74752;
  o.waves = 1.2345679012345678;
  o.tail_utilization = 0.1;
  o.regs_for_next_block = 80;
  o.smem_for_next_block = 48128;
  o.best_block_size = 128;
  return o;
}

OwnedKernelEvent SampleKernel(uint64_t seq) {
  OwnedKernelEvent k;
  k.header = MakeHeader(seq);
  k.tid = 4243;
  k.device = 1;
  k.context = 0x5555'5555'a0b0'c0d0;
  k.stream = 0x7fff'1234'5678;
  k.correlation_id = 991;
  k.api = "cuLaunchKernel";
  k.name = "_Z6kernelPfi";
  k.demangled = "kernel(float*, int)";
  k.grid = {1024, 2, 1};
  k.block = {256, 1, 1};
  k.num_regs = 84;
  k.static_shared_bytes = 16384;
  k.dyn_shared_bytes = 49152;
  k.local_bytes = 8;
  k.const_bytes = 512;
  k.max_threads_per_block = 1024;
  k.carveout = -1;
  k.occupancy = SampleOccupancy();
  return k;
}

template <class T>
T WithHeader(T event, uint64_t seq) {
  event.header = MakeHeader(seq);
  return event;
}

OwnedStallEvent SampleStall(uint64_t seq) {
  OwnedStallEvent e;
  e.header = MakeHeader(seq);
  e.state = StallState::kStalled;
  e.stall_ms = 10000;
  e.stalled_ms = 12034;
  e.completed = 0;
  e.streams_stalled = 2;
  OwnedStallStream spin;
  spin.device = 1;
  spin.context = 3;
  spin.stream = 14;
  spin.waiting_ms = 12034;
  spin.unfinished = 3;
  OwnedStallLaunch head;
  head.correlation_id = 991;
  head.name = "_Z4spinPVi";
  head.demangled = "spin(int volatile*)";
  head.grid = {1, 1, 1};
  head.block = {32, 1, 1};
  head.occupancy = 0.015625;
  head.age_ms = 12034;
  spin.launches.push_back(head);
  OwnedStallLaunch queued = head;
  queued.correlation_id = 992;
  queued.name = "_Z6kernelPfi";
  queued.demangled = "kernel(float*, int)";
  queued.grid = {1024, 2, 1};
  queued.block = {256, 1, 1};
  queued.occupancy = 0.375;
  queued.age_ms = 12030;
  spin.launches.push_back(queued);
  queued.correlation_id = 995;
  queued.age_ms = 11000;
  spin.launches.push_back(queued);
  e.streams.push_back(spin);
  OwnedStallStream behind;  // waits on the first (an event, a collective)
  behind.device = 0;
  behind.context = 2;
  behind.stream = 7;
  behind.waiting_ms = 10500;
  behind.unfinished = 1;
  OwnedStallLaunch waiting = head;
  waiting.correlation_id = 993;
  waiting.name = "_Z6reducePf";
  waiting.demangled = "reduce(float*)";
  waiting.occupancy = 1;
  waiting.age_ms = 10500;
  behind.launches.push_back(waiting);
  e.streams.push_back(behind);
  return e;
}

}  // namespace

std::vector<std::string> HostileValidStrings() {
  return {
      "",
      "quote\" and backslash\\ and both \\\"",
      AllControlCharacters(),
      "line\nbreak\r\n\ttab",
      std::string("nul\0inside", 10),
      "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80",  // é 日本 😀
      "\xC2\x80 \xEF\xBF\xBF \xF4\x8F\xBF\xBF \xEF\xBF\xBD",    // U+0080 U+FFFF U+10FFFF U+FFFD
      "sep\xE2\x80\xA8para\xE2\x80\xA9"
      "end",  // U+2028 U+2029
      "</script><!-- {\"type\":\"kernel\"} -->",
      std::string(500, 'x') + "\"" + std::string(500, '\\'),
  };
}

std::vector<InvalidUtf8Case> InvalidUtf8Cases() {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  return {
      {"\x80", r},  // lone continuation byte
      {"a\xBF"
       "b",
       "a" + r + "b"},
      {"\x80\x80\x80", r + r + r},
      {"\xC0\xAF", r + r},  // overlong '/'
      {"\xC1\xBF", r + r},
      {"\xE0\x80\xAF", r + r + r},          // overlong, 3 bytes
      {"\xF0\x80\x80\xAF", r + r + r + r},  // overlong, 4 bytes
      {"\xED\xA0\x80", r + r + r},          // surrogate U+D800
      {"\xED\xBF\xBF", r + r + r},          // surrogate U+DFFF
      {"\xF4\x90\x80\x80", r + r + r + r},  // above U+10FFFF
      {"\xF5\x80", r + r},
      {"\xFE\xFF", r + r},
      {"ab\xC3", "ab" + r},  // truncated at the end
      {"ab\xE6\x97", "ab" + r},
      {"ab\xF0\x9F\x98", "ab" + r},
      {"\xE6\x97"
       "a",
       r + "a"},                                 // truncated in the middle
      {"\xF0\x9F\x98\xC3\xA9", r + "\xC3\xA9"},  // truncated, then a valid é
      {"\xC3\xA9\x80\xE6\x97\xA5", "\xC3\xA9" + r + "\xE6\x97\xA5"},
  };
}

std::vector<OwnedEvent> RoundTripEvents() {
  std::vector<OwnedEvent> events;
  uint64_t seq = 0;
  const std::vector<std::string> hostile = HostileValidStrings();

  OwnedProcessStartEvent start;
  start.header = MakeHeader(seq++);
  start.exe = "/usr/bin/python3.11";
  start.argv = {"python3", "train.py", "--lr=3e-4", "a b", ""};
  start.hostname = "gpu-node-17";
  start.start_ns = 1'732'000'000'000'000'000;
  start.cuflight_version = "0.1.0";
  start.cuda_driver_version = 12040;
  start.cupti_version = 22;
  start.ppid = 4100;
  start.uid = 1000;
  start.config = {{"CUFLIGHT_OUTPUT", "/var/lib/cuflight"}, {"CUFLIGHT_SAMPLE", "1"}};
  start.instance_id = 0x9e3779b97f4a7c15u;
  start.pid_ns = 4026531836;  // the initial pid namespace's inode on Linux (PROC_PID_INIT_INO)
  events.emplace_back(start);
  // Sorted by name, as Decode returns them: the environment's upper-case names first.
  start.attribution = {{"RANK", "3"},           {"SLURM_JOB_ID", "4242"},
                       {"WORLD_SIZE", "8"},     {"container_id", std::string(64, 'a')},
                       {"job", "4242"},         {"pod_uid", "0f4e8a2c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"},
                       {"rank", "3"},           {"world_size", "8"}};
  events.emplace_back(WithHeader(start, seq++));
  start.cupti_activity_api = "subscriber";
  start.truncated = {"argv", "exe", "config", "attribution"};
  events.emplace_back(WithHeader(start, seq++));
  start.cupti_activity_api = "global";
  start.attribution.clear();
  start.truncated = {"argv", "exe"};
  events.emplace_back(WithHeader(start, seq++));
  start.truncated.clear();
  start.argv = hostile;
  start.exe = hostile[5];
  start.cuda_driver_version = 0;
  start.cupti_version = 0;
  start.ppid = 0;
  start.uid = -1;  // unknown: null
  // Decode returns the members sorted by name, so the sample is sorted (and unique) too.
  start.config.clear();
  for (size_t i = 0; i < hostile.size(); ++i) {
    start.config.emplace_back(hostile[i], hostile[(i + 1) % hostile.size()]);
  }
  std::sort(start.config.begin(), start.config.end());
  start.attribution = start.config;
  events.emplace_back(WithHeader(start, seq++));
  start.attribution.clear();
  start.argv.clear();
  start.config.clear();
  start.ppid = kI32Max;
  start.uid = kU32Max;
  start.instance_id = kU64Max;
  start.pid_ns = kU64Max;
  start.truncated = hostile;
  events.emplace_back(WithHeader(start, seq++));
  start.truncated.clear();

  OwnedDeviceEvent device;
  device.header = MakeHeader(seq++);
  device.device = 0;
  test_support::SetH100(&device);
  events.emplace_back(device);
  device.uuid = "MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c5d";
  device.pci_bus_id = "00000000:19:00.0";
  events.emplace_back(WithHeader(device, seq++));
  device.pci_bus_id = "";
  device.uuid = "";
  device.max_cluster_size = 0;
  device.smem_per_block_optin = kI64Max;
  events.emplace_back(WithHeader(device, seq++));
  device.recovered = true;  // made by the collector from the producer's black box
  events.emplace_back(WithHeader(device, seq++));
  device.recovered = false;

  OwnedKernelEvent kernel = SampleKernel(seq++);
  events.emplace_back(kernel);
  kernel.occupancy.regs_for_next_block = -1;
  kernel.occupancy.smem_for_next_block = -1;
  kernel.occupancy.limiting_resources = 0;
  kernel.carveout = 100;
  events.emplace_back(WithHeader(kernel, seq++));
  kernel.cluster = Dim3{2, 1, 1};
  kernel.occupancy.has_cluster = true;
  kernel.occupancy.cluster_occupancy = 0.25;
  kernel.occupancy.limiting_resource = Resource::kCluster;
  kernel.occupancy.limiting_resources = 0x3F;
  kernel.api = "cuLaunchKernelEx";
  events.emplace_back(WithHeader(kernel, seq++));
  kernel.occupancy.has_cluster = false;  // cluster set, no cluster occupancy computed
  kernel.occupancy.cluster_occupancy = 0;
  events.emplace_back(WithHeader(kernel, seq++));
  kernel.cluster.reset();  // a node of a CUDA graph, launched cooperatively
  kernel.cooperative = true;
  kernel.graph_id = 12;
  kernel.graph_node_id = 0x7f00'0000'1234;
  events.emplace_back(WithHeader(kernel, seq++));
  kernel.cooperative = false;
  kernel.graph_id.reset();
  kernel.graph_node_id.reset();
  kernel.recovered = true;  // made by the collector from the producer's black box
  events.emplace_back(WithHeader(kernel, seq++));
  kernel.occupancy_source = OccupancySource::kDriver;
  kernel.engine_max_active_blocks = 3;
  events.emplace_back(WithHeader(kernel, seq++));
  kernel.sm_count = 16;  // a green context of 16 SMs
  events.emplace_back(WithHeader(kernel, seq++));
  kernel.sm_count.reset();
  kernel.recovered = false;
  kernel.occupancy_source = OccupancySource::kUnknown;
  kernel.engine_max_active_blocks.reset();
  // Under the sampled timing policy: made inside a timing window, then outside one.
  kernel.timing_window = true;
  events.emplace_back(WithHeader(kernel, seq++));
  kernel.timing_window = false;
  events.emplace_back(WithHeader(kernel, seq++));
  kernel.timing_window.reset();
  for (const std::string& s : hostile) {
    kernel.name = s;
    kernel.demangled = s + s;
    kernel.api = s;
    events.emplace_back(WithHeader(kernel, seq++));
  }
  OwnedKernelEvent extreme = SampleKernel(seq++);
  extreme.header.ts_ns = kI64Max;
  extreme.header.pid = kI32Max;
  extreme.header.seq = kU64Max;
  extreme.tid = kI32Max;
  extreme.device = kI32Max;
  extreme.context = kU64Max;
  extreme.stream = 0;
  extreme.correlation_id = kU64Max;
  extreme.grid = {kU32Max, kU32Max, kU32Max};
  extreme.block = {0, 0, 0};
  extreme.cluster = Dim3{kU32Max, 0, 1};
  extreme.static_shared_bytes = kI64Max;
  extreme.dyn_shared_bytes = 0;
  extreme.local_bytes = kI64Max;
  extreme.const_bytes = kI64Max;
  extreme.cooperative = true;
  extreme.graph_id = kU64Max;
  extreme.graph_node_id = 0;
  OccupancyFields& o = extreme.occupancy;
  o = OccupancyFields{};
  o.max_active_blocks = kI32Max;
  o.occupancy = std::numeric_limits<double>::denorm_min();
  o.reg_occupancy = 1e-300;
  o.smem_occupancy = std::nextafter(1.0, 0.0);
  o.warp_occupancy = 0.1 + 0.2;
  o.block_occupancy = 1e-7;
  o.has_cluster = true;
  o.cluster_occupancy = 1;
  o.waves = 1.7976931348623157e308;
  o.allocated_smem_per_block = kI64Max;
  o.regs_for_next_block = kI32Max;
  o.smem_for_next_block = kI64Max;
  o.limiting_resource = Resource::kBarriers;
  events.emplace_back(extreme);

  OwnedKernelTimeEvent time;
  time.header = MakeHeader(seq++);
  time.correlation_id = 991;
  time.device = 1;
  time.context = 0x5555'5555'a0b0'c0d0;
  time.stream = 0x7fff'1234'5678;
  time.start_ns = 1'732'000'000'200'000'000;
  time.end_ns = 1'732'000'000'200'512'000;
  time.duration_ns = 512'000;
  events.emplace_back(time);
  time.start_ns = kU64Max - 1;
  time.end_ns = kU64Max;
  time.duration_ns = 1;
  events.emplace_back(WithHeader(time, seq++));
  time.graph_id = 12;  // a kernel node of a CUDA graph, as its kernel event above
  time.graph_node_id = 0x7f00'0000'1234;
  events.emplace_back(WithHeader(time, seq++));
  time.graph_id = kU64Max;
  time.graph_node_id = 0;
  events.emplace_back(WithHeader(time, seq++));

  OwnedApiErrorEvent error;
  error.header = MakeHeader(seq++);
  error.api = "cuLaunchKernel";
  error.code = 1;
  error.error_name = "CUDA_ERROR_INVALID_VALUE";
  error.message = "invalid argument";
  error.device = 0;
  error.context = 0x5555'5555'a0b0'c0d0;
  error.stream = 0;
  error.last_correlation_ids = {988, 989, 990, kU64Max};
  events.emplace_back(error);
  error.device = -1;
  error.code = kI32Min;
  error.context = 0;
  error.message = hostile[2];
  error.last_correlation_ids.clear();
  events.emplace_back(WithHeader(error, seq++));

  OwnedStatsEvent stats;
  stats.header = MakeHeader(seq++);
  stats.emitted = 123456;
  stats.dropped = 7;
  stats.ring_capacity = 65536;
  stats.interval_ns = 1'000'000'000;
  stats.launches = 250000;
  stats.filtered = 126001;
  stats.dropped_ring_full = 5;
  stats.dropped_disconnected = 2;
  stats.dropped_backpressure = 7;
  stats.ring_high_water = 61000;
  stats.cpu_ns = 2'500'000'000;
  stats.timing_dropped = 12;
  events.emplace_back(stats);
  stats.emitted = stats.dropped = stats.ring_capacity = kU64Max;
  stats.interval_ns = kI64Max;
  stats.launches = stats.filtered = stats.dropped_ring_full = kU64Max;
  stats.dropped_disconnected = stats.ring_high_water = stats.cpu_ns = kU64Max;
  stats.dropped_backpressure = kU64Max;
  stats.timing_dropped = kU64Max;
  events.emplace_back(WithHeader(stats, seq++));
  // Kernel timing stopped: records stopped arriving with launches since, and never enabled.
  stats.timing_stopped = 4096;
  stats.timing_stopped_reason = TimingStoppedReason::kRecordsStopped;
  events.emplace_back(WithHeader(stats, seq++));
  stats.timing_stopped = 0;
  stats.timing_stopped_reason = TimingStoppedReason::kUnavailable;
  events.emplace_back(WithHeader(stats, seq++));
  stats.timing_stopped = 0;
  stats.timing_stopped_reason = TimingStoppedReason::kNone;
  // The timing policy, and the sampled policy's windows.
  stats.timing_policy = TimingPolicy::kAll;
  events.emplace_back(WithHeader(stats, seq++));
  stats.timing_policy = TimingPolicy::kSampled;
  stats.timing_windows = 12;
  stats.timing_window_ns = 1'200'000'000;
  stats.launches_in_window = kU64Max;
  events.emplace_back(WithHeader(stats, seq++));
  stats.timing_policy = TimingPolicy::kOff;
  stats.timing_windows = stats.timing_window_ns = stats.launches_in_window = 0;
  events.emplace_back(WithHeader(stats, seq++));
  stats.timing_policy = TimingPolicy::kUnknown;
  // Yielded to another CUPTI tool: off CUPTI now, and once before.
  stats.yields = 2;
  stats.yielded_ns = 61'000'000'000;
  stats.launches_yielded = 3;
  stats.yielded = true;
  events.emplace_back(WithHeader(stats, seq++));
  stats.yields = stats.yielded_ns = stats.launches_yielded = 0;
  stats.yielded = false;

  OwnedProcessEndEvent end;
  end.header = MakeHeader(seq++);
  end.exit_code = 0;
  end.emitted = 123999;
  end.dropped = 7;
  end.launches = 251000;
  end.filtered = 126001;
  end.dropped_ring_full = 5;
  end.dropped_disconnected = 2;
  end.dropped_backpressure = 3;
  end.timing_dropped = 40;
  events.emplace_back(end);
  end.exit_code = std::nullopt;
  events.emplace_back(WithHeader(end, seq++));
  end.exit_code = kI32Min;
  end.emitted = kU64Max;
  end.dropped = kU64Max;
  end.launches = end.filtered = end.dropped_ring_full = end.dropped_disconnected = kU64Max;
  end.dropped_backpressure = kU64Max;
  end.timing_dropped = kU64Max;
  events.emplace_back(WithHeader(end, seq++));
  end.timing_stopped = kU64Max;
  end.timing_stopped_reason = TimingStoppedReason::kUnavailable;
  events.emplace_back(WithHeader(end, seq++));
  end.timing_stopped = 0;
  end.timing_stopped_reason = TimingStoppedReason::kNone;
  end.timing_policy = TimingPolicy::kSampled;
  end.timing_windows = 3;
  end.timing_window_ns = 300'000'000;
  end.launches_in_window = 4000;
  events.emplace_back(WithHeader(end, seq++));
  end.timing_policy = TimingPolicy::kUnknown;
  end.timing_windows = end.timing_window_ns = end.launches_in_window = 0;
  end.yields = kU64Max;
  end.yielded_ns = kU64Max;
  end.launches_yielded = 0;
  events.emplace_back(WithHeader(end, seq++));
  end.yields = end.yielded_ns = 0;

  OwnedProcessLostEvent lost;
  lost.header = MakeHeader(seq - 1);
  lost.last_seq = seq - 1;
  lost.reason = LostReason::kDisconnected;
  lost.events_stored = seq - 3;
  lost.events_lost = 2;
  events.emplace_back(lost);
  lost.header.seq = 0;
  lost.last_seq.reset();  // nothing received
  lost.reason = LostReason::kCollectorShutdown;
  lost.events_stored = 0;
  lost.events_lost = 0;
  events.emplace_back(lost);
  lost.header.seq = kU64Max;
  lost.last_seq = kU64Max;
  lost.events_stored = kU64Max;
  lost.events_lost = kU64Max;
  events.emplace_back(lost);
  lost.events_recovered = 0;  // a black box was read; nothing in it was missing from the log
  events.emplace_back(lost);
  lost.header.seq = 90;
  lost.last_seq = 90;
  lost.events_stored = 91;
  lost.events_lost = 0;
  lost.events_recovered = kU64Max;
  events.emplace_back(lost);

  OwnedProcessCrashEvent crash;
  crash.header = MakeHeader(seq++);
  crash.signal = 11;
  crash.signal_name = "SIGSEGV";
  crash.code = 1;  // SEGV_MAPERR
  crash.addr = 0x10;
  crash.tid = 4243;
  crash.emitted = 500;
  crash.dropped = 3;
  crash.launches = 800;
  crash.filtered = 300;
  crash.dropped_ring_full = 1;
  crash.dropped_disconnected = 2;
  crash.dropped_backpressure = 4;
  crash.timing_dropped = 1;
  events.emplace_back(crash);
  crash.signal = 6;
  crash.signal_name = "SIGABRT";
  crash.code = -6;  // SI_TKILL: raise() from abort()
  crash.addr = 0;
  crash.app_handler = true;
  events.emplace_back(WithHeader(crash, seq++));
  crash.timing_stopped = 17;
  crash.timing_stopped_reason = TimingStoppedReason::kRecordsStopped;
  events.emplace_back(WithHeader(crash, seq++));
  crash.timing_stopped = 0;
  crash.timing_stopped_reason = TimingStoppedReason::kNone;
  crash.timing_policy = TimingPolicy::kSampled;
  crash.timing_windows = 1;
  crash.timing_window_ns = 100'000'000;
  crash.launches_in_window = 9;
  events.emplace_back(WithHeader(crash, seq++));
  crash.timing_policy = TimingPolicy::kUnknown;
  crash.timing_windows = crash.timing_window_ns = crash.launches_in_window = 0;
  crash.signal = 64;
  crash.code = kI32Min;
  crash.addr = kU64Max;
  crash.tid = kI32Max;
  crash.emitted = crash.dropped = crash.launches = crash.filtered = kU64Max;
  crash.dropped_ring_full = crash.dropped_disconnected = crash.timing_dropped = kU64Max;
  crash.dropped_backpressure = kU64Max;
  events.emplace_back(WithHeader(crash, seq++));

  OwnedStallEvent stall = SampleStall(seq++);
  events.emplace_back(stall);
  stall.streams[0].launches[0].name = hostile[0];
  stall.streams[0].launches[0].demangled = hostile[1];
  stall.streams[0].launches.erase(stall.streams[0].launches.begin() + 1,
                                  stall.streams[0].launches.end());
  stall.streams[1].launches.clear();  // a stream whose launches were not kept
  stall.completed = 17;
  events.emplace_back(WithHeader(stall, seq++));
  // Seen from a synchronising call (evidence sync_call), with the stream's last launches, one of
  // them a graph launch whose running node a forced flush showed; and that flush's cost.
  OwnedStallEvent from_sync = SampleStall(seq++);
  from_sync.streams[0].evidence = std::string(kStallEvidenceSyncCall);
  from_sync.streams[0].launches_from = std::string(kStallLaunchesFromRecent);
  from_sync.streams[0].sync_api = "cuStreamSynchronize";
  from_sync.streams[0].sync_tid = 4242;
  from_sync.streams[0].sync_waited_ms = 11500;
  from_sync.streams[0].launches[1].graph_launch = true;
  from_sync.streams[0].launches[1].graph_exec_id = 12;
  from_sync.streams[0].launches[2].graph_launch = true;
  from_sync.streams[0].launches[2].graph_id = 12;
  from_sync.streams[0].launches[2].graph_node_id = 0x7f00'1234'0001;
  from_sync.streams[1].evidence = std::string(kStallEvidenceTimingRecords);
  from_sync.flush_incomplete = 2000;
  from_sync.flush_incomplete_streams = 2;
  events.emplace_back(from_sync);
  OwnedStallEvent resolved;
  resolved.state = StallState::kResolved;
  resolved.stall_ms = 10000;
  resolved.stalled_ms = 42123;
  resolved.completed = 5;
  events.emplace_back(WithHeader(resolved, seq++));
  OwnedStallEvent extreme_stall = SampleStall(seq++);
  extreme_stall.stall_ms = extreme_stall.stalled_ms = kI64Max;
  extreme_stall.completed = kU64Max;
  extreme_stall.streams_stalled = kI32Max;
  extreme_stall.streams[0].device = kI32Max;
  extreme_stall.streams[0].context = kU64Max;
  extreme_stall.streams[0].stream = kU64Max;
  extreme_stall.streams[0].waiting_ms = kI64Max;
  extreme_stall.streams[0].unfinished = kI64Max;
  OwnedStallLaunch& edge = extreme_stall.streams[0].launches[0];
  edge.correlation_id = kU64Max;
  edge.grid = {kU32Max, kU32Max, kU32Max};
  edge.block = {0, 0, 0};
  edge.occupancy = std::numeric_limits<double>::denorm_min();
  edge.age_ms = kI64Max;
  extreme_stall.streams[1].launches[0].occupancy = 1;
  events.emplace_back(extreme_stall);

  // Every kernel above interned (config_expander.h): its kernel_config and its launch, every
  // shape of each (cluster, graph node, extreme values, hostile names) included.
  std::vector<OwnedKernelEvent> kernels;
  for (const OwnedEvent& event : events) {
    if (const auto* k = std::get_if<OwnedKernelEvent>(&event)) kernels.push_back(*k);
  }
  uint64_t id = 1;
  for (const OwnedKernelEvent& k : kernels) {
    OwnedKernelConfigEvent config;
    OwnedLaunchEvent launch;
    Split(k, id++, &config, &launch);
    events.emplace_back(WithHeader(config, seq++));
    events.emplace_back(WithHeader(launch, seq++));
  }
  OwnedKernelConfigEvent last_id;
  OwnedLaunchEvent last_launch;
  Split(kernels.front(), kU64Max, &last_id, &last_launch);
  events.emplace_back(WithHeader(last_id, seq++));
  events.emplace_back(WithHeader(last_launch, seq++));
  // Per-grid figures derived from the description's wave (config_expander.h, point 1a): a launch
  // of blocks (2048 over a wave of 1056) and one of clusters (1000 blocks in clusters of 2, 7
  // resident: 500 / 7), each without waves and tail_utilization.
  for (const bool clusters : {false, true}) {
    OwnedKernelEvent k = kernels.front();
    k.grid = {clusters ? 1000u : 2048u, 1, 1};
    k.cluster = clusters ? std::optional<Dim3>(Dim3{2, 1, 1}) : std::nullopt;
    k.occupancy.has_cluster = clusters;
    k.occupancy.waves = clusters ? 500.0 / 7 : 2048.0 / 1056;
    k.occupancy.tail_utilization = clusters ? 3.0 / 7 : 992.0 / 1056;
    OwnedKernelConfigEvent config;
    OwnedLaunchEvent launch;
    Split(k, id++, &config, &launch, WaveShape{clusters ? 7u : 1056u, clusters});
    events.emplace_back(WithHeader(config, seq++));
    events.emplace_back(WithHeader(launch, seq++));
  }
  return events;
}

std::vector<OwnedEvent> LossyEvents() {
  std::vector<OwnedEvent> events;
  uint64_t seq = 1000;
  for (const InvalidUtf8Case& c : InvalidUtf8Cases()) {
    OwnedProcessStartEvent start;
    start.header = MakeHeader(seq++);
    start.exe = c.input;
    start.argv = {c.input, "ok", c.input + c.input};
    start.hostname = c.input;
    start.cuflight_version = c.input;
    start.config = {{c.input, c.input}};
    events.emplace_back(start);

    OwnedKernelEvent kernel = SampleKernel(seq++);
    kernel.api = c.input;
    kernel.name = c.input;
    kernel.demangled = "void f<" + c.input + ">()";
    events.emplace_back(kernel);

    OwnedApiErrorEvent error;
    error.header = MakeHeader(seq++);
    error.api = c.input;
    error.error_name = c.input;
    error.message = c.input;
    events.emplace_back(error);

    OwnedDeviceEvent device;
    device.header = MakeHeader(seq++);
    device.name = c.input;
    device.uuid = c.input;
    events.emplace_back(device);
  }
  for (const double bad : {kNaN, kInf, -kInf, -0.5, 1.5, -0.0}) {
    OwnedKernelEvent kernel = SampleKernel(seq++);
    kernel.cluster = Dim3{2, 1, 1};
    OccupancyFields& o = kernel.occupancy;
    o.has_cluster = true;
    o.occupancy = o.reg_occupancy = o.smem_occupancy = o.warp_occupancy = bad;
    o.block_occupancy = o.barrier_occupancy = o.cluster_occupancy = bad;
    o.waves = o.tail_utilization = bad;
    o.regs_for_next_block = -7;
    o.smem_for_next_block = std::numeric_limits<int64_t>::min();
    events.emplace_back(kernel);
  }
  return events;
}

OwnedKernelEvent RealisticKernel() {
  OwnedKernelEvent k = SampleKernel(17);
  k.name =
      "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedIfEENS_8epilogue"
      "EEEEEvNT_6ParamsE";
  k.demangled =
      "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::"
      "MmaPipelined<float>, cutlass::epilogue::threadblock::Epilogue<float, 128, 4>, "
      "true>>(cutlass::gemm::kernel::Gemm::Params)";
  return k;
}

std::vector<std::string> SampleLines() {
  std::vector<std::string> lines;
  for (const OwnedEvent& event : RoundTripEvents()) lines.push_back(EncodeLine(event));
  for (const OwnedEvent& event : LossyEvents()) lines.push_back(EncodeLine(event));
  lines.push_back(EncodeLine(RealisticKernel()));
  return lines;
}

std::vector<std::string> MutatedLines() {
  using nlohmann::json;
  const std::vector<json> values = {nullptr,
                                    true,
                                    false,
                                    "x",
                                    "",
                                    "registers",
                                    "disconnected",
                                    "collector_shutdown",
                                    json::array(),
                                    json::object(),
                                    json::object({{"CUFLIGHT_SAMPLE", "1"}}),
                                    json::object({{"CUFLIGHT_SAMPLE", 1}}),
                                    json::array({"registers"}),
                                    json::array({"registers", "registers"}),
                                    json::array({"bogus"}),
                                    json::array({"a", "b"}),
                                    json::array({1, 2, 3}),
                                    json::array({0, 0, 0}),
                                    json::array({1, 2, -1}),
                                    json::array({4294967295u, 1, 1}),
                                    json::array({4294967296u, 1, 1}),
                                    json::array({1.5, 1, 1}),
                                    json::array({1, 2}),
                                    json::array({1, "x"}),
                                    json::array({18446744073709551615u}),
                                    -1,
                                    0,
                                    1,
                                    2,
                                    100,
                                    101,
                                    -2,
                                    0.5,
                                    1.5,
                                    2.0,
                                    -0.5,
                                    1.0,
                                    2147483647,
                                    2147483648LL,
                                    -2147483648LL,
                                    -2147483649LL,
                                    4294967295LL,
                                    4294967296LL,
                                    9223372036854775807LL,
                                    9223372036854775808ULL,
                                    18446744073709551615ULL,
                                    1.8446744073709552e19,
                                    1e300,
                                    -1e300};
  std::vector<json> samples;
  for (const OwnedEvent& event : RoundTripEvents()) {
    const json doc = json::parse(EncodeLine(event));
    // One sample per type, plus the kernel with a cluster and the kernel in a graph.
    bool seen = false;
    for (const json& s : samples) {
      seen |= s["type"] == doc["type"] && s.contains("cluster") == doc.contains("cluster") &&
              s.contains("graph_id") == doc.contains("graph_id");
    }
    if (!seen) samples.push_back(doc);
  }
  std::vector<std::string> lines;
  for (const json& sample : samples) {
    lines.push_back(sample.dump() + "\n");
    for (const auto& [key, unused] : sample.items()) {
      json removed = sample;
      removed.erase(key);
      lines.push_back(removed.dump() + "\n");
      for (const json& value : values) {
        json changed = sample;
        changed[key] = value;
        lines.push_back(changed.dump() + "\n");
      }
    }
    // The stall event's nested objects: each member of its first stream, and of that stream's
    // first launch, removed or replaced in turn.
    if (sample["type"] != "stall") continue;
    for (const json::json_pointer& object :
         {json::json_pointer("/streams/0"), json::json_pointer("/streams/0/launches/0")}) {
      for (const auto& [key, unused] : sample.at(object).items()) {
        json removed = sample;
        removed.at(object).erase(key);
        lines.push_back(removed.dump() + "\n");
        for (const json& value : values) {
          json changed = sample;
          changed.at(object)[key] = value;
          lines.push_back(changed.dump() + "\n");
        }
      }
    }
  }
  return lines;
}

std::string EncodeLine(const OwnedEvent& event) {
  std::string line(1 << 20, '\0');
  size_t n = 0;
  if (const auto* start = std::get_if<OwnedProcessStartEvent>(&event)) {
    // The injector's view of argv and config: arrays of string_views into memory it owns.
    const std::vector<std::string_view> argv(start->argv.begin(), start->argv.end());
    const std::vector<std::pair<std::string_view, std::string_view>> config(
        start->config.begin(), start->config.end());
    const std::vector<std::pair<std::string_view, std::string_view>> attribution(
        start->attribution.begin(), start->attribution.end());
    const std::vector<std::string_view> truncated(start->truncated.begin(), start->truncated.end());
    ProcessStartEvent view{start->header,
                           start->exe,
                           argv,
                           start->hostname,
                           start->start_ns,
                           start->cuflight_version,
                           start->cuda_driver_version,
                           start->cupti_version,
                           start->ppid,
                           start->uid,
                           config,
                           start->instance_id,
                           start->pid_ns,
                           attribution,
                           start->cupti_activity_api,
                           truncated};
    n = Encode(view, line.data(), line.size());
  } else if (const auto* k = std::get_if<OwnedKernelEvent>(&event)) {
    KernelEvent view{k->header,
                     k->tid,
                     k->device,
                     k->context,
                     k->stream,
                     k->correlation_id,
                     k->api,
                     k->name,
                     k->demangled,
                     k->grid,
                     k->block,
                     k->cluster,
                     k->num_regs,
                     k->static_shared_bytes,
                     k->dyn_shared_bytes,
                     k->local_bytes,
                     k->const_bytes,
                     k->max_threads_per_block,
                     k->carveout,
                     k->cooperative,
                     k->graph_id,
                     k->graph_node_id,
                     k->occupancy,
                     k->occupancy_source,
                     k->engine_max_active_blocks,
                     k->sm_count,
                     k->recovered,
                     k->timing_window};
    n = Encode(view, line.data(), line.size());
  } else if (const auto* stall = std::get_if<OwnedStallEvent>(&event)) {
    // The injector's view: spans over arrays of views.
    std::vector<std::vector<StallLaunch>> launches;
    std::vector<StallStream> streams;
    for (const OwnedStallStream& s : stall->streams) {
      std::vector<StallLaunch>& views = launches.emplace_back();
      for (const OwnedStallLaunch& l : s.launches) {
        views.push_back({l.correlation_id, l.name, l.demangled, l.grid, l.block, l.occupancy,
                         l.age_ms, l.graph_launch, l.graph_exec_id, l.graph_id,
                         l.graph_node_id});
      }
    }
    for (size_t i = 0; i < stall->streams.size(); ++i) {
      const OwnedStallStream& s = stall->streams[i];
      streams.push_back({s.device, s.context, s.stream, s.waiting_ms, s.unfinished, launches[i],
                         s.evidence, s.launches_from, s.sync_api, s.sync_tid,
                         s.sync_waited_ms});
    }
    StallEvent view{stall->header,    stall->state,           stall->stall_ms, stall->stalled_ms,
                    stall->completed, stall->streams_stalled, streams, stall->flush_incomplete,
                    stall->flush_incomplete_streams};
    n = Encode(view, line.data(), line.size());
  } else {
    n = Encode(event, line.data(), line.size());
  }
  EXPECT_GT(n, 0u) << "event type " << EventTypeName(TypeOf(event));
  line.resize(n);
  return line;
}

}  // namespace cuflight::schema::testing
