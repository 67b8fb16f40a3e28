// The trace as Chrome trace-event JSON (the "JSON trace format" ui.perfetto.dev and
// chrome://tracing open), written as it comes:
//   {"traceEvents":[ ...events... ],"displayTimeUnit":"ns","otherData":{...}}
//  1. Tracks are metadata events ("ph":"M"): process_name and process_sort_index for a GPU (its
//     trace pid), thread_name for a stream (the GPU's pid, the stream's trace tid),
//     process_name for a recorded process and thread_name for its threads (real pid and tid).
//  2. A kernel slice is a complete event ("ph":"X", "cat":"kernel"); an untimed kernel an
//     instant ("ph":"i", "s":"t", "cat":"kernel") with args "timed": false; a launch an instant
//     ("cat":"launch") on its thread; the arrow from a launch to its kernel a pair of flow events
//     ("ph":"s" at the launch, "ph":"f" with "bp":"e" at the kernel, "cat":"flow"); a marker an
//     instant ("cat":"marker"), thread-scoped on a crashing thread, else process-scoped.
//  3. Timestamps are microseconds (the format's unit) from `base_ns`, which the caller sets at or
//     before the earliest timestamp in the trace (the export floors the earliest to a whole
//     microsecond), so doubles keep nanosecond precision; otherData.time_base_ns holds it.
//  4. Events are in the order the exporter makes them (not sorted: the viewers sort).
#ifndef CUFLIGHT_REPORT_TRACE_CHROME_JSON_WRITER_H_
#define CUFLIGHT_REPORT_TRACE_CHROME_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

#include "output_file.h"
#include "trace_writer.h"

namespace cuflight::trace {

class ChromeJsonWriter final : public TraceWriter {
 public:
  // `out` must be open and outlive the writer.
  ChromeJsonWriter(OutputFile* out, int64_t base_ns);

  void DefineTrack(const Track& track) override;
  void KernelSlice(uint64_t track, const KernelRecord& k, const GpuTime& t, uint64_t flow) override;
  void KernelInstant(uint64_t track, const KernelRecord& k, uint64_t flow) override;
  void OrphanSlice(uint64_t track, const GpuTime& t) override;
  void Launch(uint64_t track, const KernelRecord& k, uint64_t flow) override;
  void MarkerInstant(uint64_t track, const Marker& m) override;
  bool Finish(const ExportCounts& counts, std::string* error) override;

 private:
  void Begin();  // the separator before an event
  void End();
  void KernelArgs(const KernelRecord& k);
  void Flow(char phase, uint64_t flow, const std::pair<int64_t, int64_t>& at, int64_t ts_ns);

  OutputFile* out_;
  int64_t base_ns_;
  std::string buf_;
  bool first_ = true;
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> tracks_;  // uuid -> (pid, tid)
};

// Finds the time base for ChromeJsonWriter: a writer that writes nothing and keeps the earliest
// timestamp of every event given (run the exporter over the logs once with it, then again with
// the JSON writer).
class EarliestTimestamp final : public TraceWriter {
 public:
  void DefineTrack(const Track&) override {}
  void KernelSlice(uint64_t, const KernelRecord& k, const GpuTime& t, uint64_t) override;
  void KernelInstant(uint64_t, const KernelRecord& k, uint64_t) override { See(k.header.ts_ns); }
  void OrphanSlice(uint64_t, const GpuTime& t) override { See(static_cast<int64_t>(t.start_ns)); }
  void Launch(uint64_t, const KernelRecord& k, uint64_t) override { See(k.header.ts_ns); }
  void MarkerInstant(uint64_t, const Marker& m) override { See(m.ts_ns); }
  bool Finish(const ExportCounts&, std::string*) override { return true; }

  // The earliest timestamp floored to a whole microsecond; 0 when nothing was given.
  int64_t base_ns() const;

 private:
  void See(int64_t ns);
  bool any_ = false;
  int64_t earliest_ = 0;
};

}  // namespace cuflight::trace

#endif  // CUFLIGHT_REPORT_TRACE_CHROME_JSON_WRITER_H_
