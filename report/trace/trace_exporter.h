// Collector events -> a trace, streamed: what `cuflight export` writes, with memory bounded
// whatever the size of the logs.
//
// Layout (the same in both formats; trace_writer.h):
//  1. One track group per GPU, named "GPU <ordinal>: <device name>" from the device events (GPUs
//     told apart by uuid, or by ordinal and name without one), and in it one track per (recorded
//     process, stream), named "stream 0x<id> (pid <pid>)" ("default stream" for 0; "(pid <pid>
//     #K)" for the K-th process of a pid, 7.). Kernels of one stream that overlap in time (graph
//     branches) go to "... overlap N" tracks beside it, so every track nests.
//  2. A kernel joined to its kernel_time (by process, 7., and schema::JoinKey: correlation_id,
//     graph node and device) is a slice on its stream track from start_ns for duration_ns, with
//     the launch and occupancy fields as arguments; a kernel without one (timing off, or its
//     kernel_time lost) is an instant on the stream track at its host time. A kernel_time whose
//     kernel is not in the logs is a slice "kernel (corr N)" ("kernel (corr N, node M)" for a
//     graph node).
//  3. Host side: one track group per recorded process (its real pid, "<exe> (pid N)"; a process
//     whose attribution names a job or rank "job J rank R: <exe> (pid N) on <host>", ordered by
//     rank), one track per launching thread, and an instant per launch, with a flow arrow to its
//     kernel.
//  4. Markers: an instant for each process_crash ("crash SIGSEGV", on the crashing thread), each
//     api_error that is not a routine failure ("api_error <name>"), each process_lost ("lost"),
//     each stall event ("stall" naming what the first stalled stream waits on, or "stall
//     resolved"), and each line of a type named in kMarkerTypes that this build cannot decode
//     (written by a newer producer), on the process's track.
//  5. Filters (report::LaunchFilter, as `cuflight report` has them): --pid keeps the events of
//     those processes; --kernel and the time window keep kernels by name and launch time, their
//     kernel_time with them, and markers by time. Events read twice (same process and seq: a
//     spill file and the collector's log) count once.
//  6. Streaming: a launch's instant is written when its kernel event is read; its kernel's slice
//     when its kernel_time is (ordinarily a CUPTI buffer flush later). Waiting kernels are held
//     compactly (names once per distinct kernel) and at most ExportLimits::max_pending_launches
//     of them: a kernel whose kernel_time has not come within that many later kernels is written
//     as an instant (counted in launches_given_up), and a kernel_time whose kernel has not come
//     within max_pending_times later ones is dropped (times_given_up). The rest waits for Finish.
//  7. Processes are told apart as the report's model tells them (report::ProcessKeys: the stream
//     its log file's name states, else its latest process_start's pid, start_ns and
//     instance_id), not by pid alone: the first processes of many containers are all pid 1, and
//     pids are reused. Each has its own host tracks, stream tracks, labels, duplicate check and
//     joins. Perfetto and Chrome JSON tell processes apart by pid, so each gets a trace pid of
//     its own: its real pid for the first process of that pid read (a log without shared pids
//     exports as before), the first free from kSharedPidBase for a later one, which is named
//     "pid <pid> #K" (K = 2, 3, ... in order of reading) wherever the real pid is named.
#ifndef CUFLIGHT_REPORT_TRACE_TRACE_EXPORTER_H_
#define CUFLIGHT_REPORT_TRACE_TRACE_EXPORTER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/report/build_report.h"
#include "cuflight/report/join_table.h"
#include "cuflight/report/launch_filter.h"
#include "cuflight/schema/events.h"
#include "trace_writer.h"

namespace cuflight::trace {

// Types of event newer than this build's schema that the export marks (4.), by name: a log
// written by a newer producer holds them as lines of unknown type (logread's on_unknown).
inline constexpr std::array<std::string_view, 1> kMarkerTypes = {"stall"};

struct ExportLimits {
  size_t max_pending_launches = size_t{1} << 18;
  size_t max_pending_times = size_t{1} << 18;
};

class TraceExporter {
 public:
  // `filter` and `writer` must outlive the exporter.
  TraceExporter(report::LaunchFilter* filter, TraceWriter* writer, ExportLimits limits = {});
  ~TraceExporter();

  // Events in any order of files; within a producer's stream, in its order. `file`: the log
  // file the event was read from (logread::Origin::file), whose name states its process
  // (7.); nullptr for events given without one.
  void Add(const schema::OwnedEvent& event, const std::filesystem::path* file = nullptr);
  void AddUnknown(const logread::UnknownEvent& event,
                  const std::filesystem::path* file = nullptr);
  // Writes what still waits (untimed kernels, kernel_times without kernel) and finishes the
  // writer. False with *error when the writer failed.
  bool Finish(std::string* error);

  const ExportCounts& counts() const { return counts_; }
  // Retained state, for the tests of bounded memory.
  size_t pending_launches() const { return pending_.size(); }
  size_t peak_pending_launches() const { return peak_pending_; }
  size_t pending_times() const { return early_times_.size(); }
  size_t distinct_kernels() const { return names_.size(); }

 private:
  struct Pending {
    KernelRecord kernel;
    uint64_t flow = 0;
    uint32_t process = 0;  // index into processes_
  };
  // A join table entry: small, so the table stays in cache; the record lives in records_.
  struct Waiting {
    uint64_t seq = 0;
    uint32_t record = 0;  // index into records_; kHidden: left out by the filters (its
                          // kernel_time is dropped with it)
  };
  static constexpr uint32_t kHidden = UINT32_MAX;
  struct Device {
    std::string name;
    std::string uuid;
  };
  struct StreamLanes {
    std::vector<uint64_t> tracks;   // lane 0 first
    std::vector<int64_t> ends;      // each lane's latest end
  };
  // A recorded process's host track: its name and, for a rank of a job, its place.
  struct ProcessLabel {
    std::string name;
    std::string rank;        // attribution "rank"; "" none
    int64_t sort_index = 0;  // 0: none
  };
  static constexpr int64_t kRankSortBase = int64_t{1} << 20;
  // `who`: "pid N", or "pid N #K" for the K-th process of pid N (7.).
  static ProcessLabel ProcessLabelOf(const schema::OwnedProcessStartEvent& s,
                                     const std::string& who);
  // A recorded process (report::ProcessKey) and what the trace holds of it.
  struct Process {
    int32_t pid = 0;        // the real pid
    int64_t trace_pid = 0;  // its host tracks' pid: unique in the trace (7.)
    std::string who;        // "pid N" or "pid N #K"
    std::optional<ProcessLabel> label;  // from its process_start
    uint64_t host_track = 0;            // 0: not defined yet
    std::map<uint64_t, uint64_t> seen;  // seq ranges [first, last] read
    std::optional<bool> selected;       // its process_start matched --job/--rank/--pod
  };
  struct NameKey {
    std::string_view name;  // mangled
    std::string_view api;
    bool operator==(const NameKey&) const = default;
  };
  struct NameKeyHash {
    size_t operator()(const NameKey& k) const;
  };

  // The process that sent the current file's events of `pid`, made on first sight.
  uint32_t ProcessOf(int32_t pid);
  // A join key's process: its trace pid, so that a log without shared pids is joined (and its
  // waiting kernels written at Finish) exactly as when processes were keyed by pid.
  size_t JoinProcess(uint32_t process) const;
  void SetFile(const std::filesystem::path* file);
  void OnKernel(uint32_t process, const schema::OwnedKernelEvent& e);
  void OnTime(uint32_t process, const schema::OwnedKernelTimeEvent& e);
  void Mark(uint32_t process, Marker marker, int32_t tid);

  const KernelNames* NamesOf(const schema::OwnedKernelEvent& e);
  // The GPU's track uuid and trace pid.
  std::pair<uint64_t, int64_t> GpuTrack(uint32_t process, int32_t device);
  uint64_t StreamTrack(uint32_t process, int32_t device, uint64_t stream, int64_t start,
                       int64_t end);
  uint64_t HostProcessTrack(uint32_t process);
  uint64_t HostThreadTrack(uint32_t process, int32_t tid);
  void Timed(const Pending& p, const GpuTime& t);
  void Untimed(const Pending& p);
  uint32_t Store(const Pending& p);
  void Release(uint32_t record);
  void Orphan(uint32_t process, const GpuTime& t);

  report::LaunchFilter* filter_;
  TraceWriter* writer_;
  ExportLimits limits_;
  ExportCounts counts_;
  uint64_t next_uuid_ = 1;
  uint64_t next_flow_ = 1;
  static constexpr uint32_t kNoProcess = UINT32_MAX;
  report::ProcessKeys keys_;
  const std::filesystem::path* file_ = nullptr;
  uint32_t file_process_ = kNoProcess;  // the current file's process, once its name states it
  std::map<report::ProcessKey, uint32_t> process_index_;
  std::deque<Process> processes_;
  std::map<int32_t, int32_t> processes_of_pid_;  // real pid -> processes seen with it
  std::map<int64_t, uint32_t> trace_pids_;       // host trace pid -> its process
  int64_t next_shared_pid_ = kSharedPidBase;
  std::map<std::pair<uint32_t, int32_t>, Device> devices_;  // (process, ordinal)
  std::map<std::string, std::pair<uint64_t, int64_t>> gpus_;  // key -> (uuid, trace pid)
  // (process, ordinal) -> (uuid, trace pid) of its GPU once placed: a lookup per kernel.
  std::map<std::pair<uint32_t, int32_t>, std::pair<uint64_t, int64_t>> gpu_of_device_;
  // (gpu, process, stream)
  std::map<std::tuple<uint64_t, uint32_t, uint64_t>, StreamLanes> streams_;
  int64_t next_stream_tid_ = kStreamTidBase;
  std::map<std::pair<uint32_t, int32_t>, uint64_t> host_threads_;  // (process, tid)
  std::deque<KernelNames> name_storage_;
  std::unordered_map<NameKey, const KernelNames*, NameKeyHash> names_;
  report::JoinTable<Waiting> pending_;
  std::vector<Pending> records_;      // waiting kernels, reused through free_records_
  std::vector<uint32_t> free_records_;
  std::deque<std::pair<report::JoinKey, uint64_t>> pending_order_;  // (key, seq)
  size_t peak_pending_ = 0;
  std::unordered_map<report::JoinKey, GpuTime, report::JoinKeyHash> early_times_;
  std::deque<report::JoinKey> early_order_;
};

}  // namespace cuflight::trace

#endif  // CUFLIGHT_REPORT_TRACE_TRACE_EXPORTER_H_
