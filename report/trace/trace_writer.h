// What `cuflight export` puts in a trace, apart from how it is encoded: the tracks, the kernel
// slices and instants, the launches with their flow to the kernel, and the markers. The exporter
// (trace_exporter.h) decides what goes where and when; a TraceWriter encodes it (Perfetto's
// protobuf format: perfetto_proto_writer.h; Chrome trace-event JSON: chrome_json_writer.h).
#ifndef CUFLIGHT_REPORT_TRACE_TRACE_WRITER_H_
#define CUFLIGHT_REPORT_TRACE_TRACE_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cuflight/schema/events.h"

namespace cuflight::trace {

// Trace pids of GPUs and trace tids of streams (the JSON format's numbers; the protobuf format's
// thread descriptors), counted up from these in order of first use.
inline constexpr int64_t kGpuPidBase = int64_t{1} << 30;
inline constexpr int64_t kStreamTidBase = int64_t{1} << 30;
// Trace pids of recorded processes whose real pid another process of the trace already has
// (trace_exporter.h, 7.), counted up from this: above every real pid (Linux's PID_MAX_LIMIT is
// 4 * 1024 * 1024, include/linux/threads.h), below the GPUs'.
inline constexpr int64_t kSharedPidBase = int64_t{1} << 29;

enum class TrackKind : uint8_t {
  kGpu,          // one per GPU, grouping its stream tracks
  kStream,       // one per (GPU, recorded process, stream); a thread of its GPU
  kHostProcess,  // one per recorded process (its real pid, unless another process has it)
  kHostThread,   // one per launching thread (its real tid), in its process
};

struct Track {
  uint64_t uuid = 0;  // unique in the trace, never 0
  TrackKind kind = TrackKind::kGpu;
  int64_t pid = 0;    // kGpu, kStream: the GPU's trace pid; host tracks: the process's trace
                      // pid (its real pid, unless another process of the trace has it)
  int64_t tid = 0;    // kStream: the stream's trace tid; kHostThread: the real tid
  uint64_t parent_uuid = 0;  // kStream: its GPU; kHostThread: its process; else 0
  std::string name;          // e.g. "GPU 0: NVIDIA H100 80GB HBM3", "stream 0x10 (pid 100)"
  // kGpu: GPUs in order of first use; kHostProcess: a rank's place (0: none, no order asked).
  int64_t sort_index = 0;
};

// The names of a kernel, kept once per distinct kernel (KernelRecord::names points here).
struct KernelNames {
  std::string name;       // mangled
  std::string demangled;  // "" when demangling failed
  std::string api;
  const std::string& display() const { return demangled.empty() ? name : demangled; }
};

// A kernel event as the trace shows it: its fields without the strings.
struct KernelRecord {
  const KernelNames* names = nullptr;
  schema::Header header;
  int32_t tid = 0;
  int32_t device = 0;
  uint64_t context = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;
  schema::Dim3 grid;
  schema::Dim3 block;
  std::optional<schema::Dim3> cluster;
  int32_t num_regs = 0;
  int64_t static_shared_bytes = 0;
  int64_t dyn_shared_bytes = 0;
  int64_t local_bytes = 0;
  int32_t max_threads_per_block = 0;
  int32_t carveout = -1;
  bool cooperative = false;
  std::optional<uint64_t> graph_id;
  std::optional<uint64_t> graph_node_id;
  schema::OccupancyFields occupancy;
  // The kernel event's timing_window, set only under sampled timing: false, it was launched
  // outside a timing window and has no GPU time by design (an instant, not a lost record).
  std::optional<bool> timing_window;
};

// A kernel_time as the trace shows it.
struct GpuTime {
  uint64_t correlation_id = 0;
  int32_t pid = 0;
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t duration_ns = 0;
  std::optional<uint64_t> graph_id;
  std::optional<uint64_t> graph_node_id;
};

// An instant that marks something that went wrong (or a stall).
struct Marker {
  int64_t ts_ns = 0;
  std::string name;     // "crash SIGSEGV", "api_error CUDA_ERROR_ILLEGAL_ADDRESS", "lost", "stall"
  std::string detail;   // one line: the signal and address, the failed call and its message, ...
  int32_t pid = 0;
  uint64_t seq = 0;
};

// What an export wrote, for the summary line and the JSON's otherData.
struct ExportCounts {
  uint64_t kernels = 0;        // kernel events in the trace
  uint64_t timed = 0;          // of those, slices (joined to a kernel_time)
  uint64_t untimed = 0;        // of those, instants (no kernel_time)
  uint64_t orphan_times = 0;   // kernel_time events without their kernel, slices of their own
  uint64_t flows = 0;          // launch -> kernel arrows
  uint64_t markers = 0;
  uint64_t launches_given_up = 0;  // untimed because their kernel_time came too late
  uint64_t times_given_up = 0;     // dropped because their kernel came too late
  uint64_t duplicates = 0;         // events read twice (same process and seq), skipped
  uint64_t filtered = 0;           // kernel events the filters left out
};

class TraceWriter {
 public:
  virtual ~TraceWriter() = default;
  // A track, before the first event on it.
  virtual void DefineTrack(const Track& track) = 0;
  // A timed kernel on its stream track, from t.start_ns for t.duration_ns; `flow` (0: none) ends
  // the arrow from its launch.
  virtual void KernelSlice(uint64_t track, const KernelRecord& k, const GpuTime& t,
                           uint64_t flow) = 0;
  // An untimed kernel: an instant on its stream track at its launch (host) time.
  virtual void KernelInstant(uint64_t track, const KernelRecord& k, uint64_t flow) = 0;
  // A kernel_time whose kernel is not in the logs: a slice named by its correlation id.
  virtual void OrphanSlice(uint64_t track, const GpuTime& t) = 0;
  // The launch on its host thread track at its host time; `flow` (0: none) starts the arrow.
  virtual void Launch(uint64_t track, const KernelRecord& k, uint64_t flow) = 0;
  virtual void MarkerInstant(uint64_t track, const Marker& m) = 0;
  // After the last event. False with *error when the output failed.
  virtual bool Finish(const ExportCounts& counts, std::string* error) = 0;
};

}  // namespace cuflight::trace

#endif  // CUFLIGHT_REPORT_TRACE_TRACE_WRITER_H_
