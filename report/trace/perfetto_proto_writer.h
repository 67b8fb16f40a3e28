// The trace in Perfetto's protobuf format (a `Trace` message: repeated TracePacket), written as it
// comes, for ui.perfetto.dev and trace_processor. Field numbers are those of Perfetto's protos
// (protos/perfetto/trace/trace.proto, trace_packet.proto, track_event/track_event.proto,
// track_descriptor.proto, process_descriptor.proto, thread_descriptor.proto,
// debug_annotation.proto, interned_data/interned_data.proto); tests/report/perfetto_proto_test.cc
// holds them against that text with protoc.
//
//  1. Every packet is on one packet sequence (trusted_packet_sequence_id 1). The first sets
//     SEQ_INCREMENTAL_STATE_CLEARED; packets that use interned data set
//     SEQ_NEEDS_INCREMENTAL_STATE.
//  2. Tracks are TrackDescriptor packets: a GPU is a process (ProcessDescriptor with its trace
//     pid), a stream a thread of it (ThreadDescriptor with the GPU's pid and the stream's trace
//     tid), a recorded process and its threads with their real pid and tid.
//  3. A kernel slice is a TYPE_SLICE_BEGIN at its GPU start and a TYPE_SLICE_END at its end on
//     its stream track, with the launch's flow id in terminating_flow_ids; an untimed kernel, a
//     launch and a marker are TYPE_INSTANT events; a launch carries its flow id in flow_ids.
//  4. Event names (kernel names, launch and marker names), categories ("kernel", "launch",
//     "marker") and argument names are interned (InternedData, emitted in the packet that first
//     uses them); an orphan kernel_time's slice, named by its correlation id, carries its name.
//  5. Timestamps are the log's nanoseconds since the Unix epoch, in the trace's default clock:
//     the trace has no other clock to relate them to.
#ifndef CUFLIGHT_REPORT_TRACE_PERFETTO_PROTO_WRITER_H_
#define CUFLIGHT_REPORT_TRACE_PERFETTO_PROTO_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "output_file.h"
#include "proto_writer.h"
#include "trace_writer.h"

namespace cuflight::trace {

// Field numbers used, with the message they belong to (see the protos named above).
namespace pf {
inline constexpr uint32_t kTracePacket = 1;            // Trace.packet
inline constexpr uint32_t kTimestamp = 8;              // TracePacket.timestamp
inline constexpr uint32_t kSequenceId = 10;            // TracePacket.trusted_packet_sequence_id
inline constexpr uint32_t kTrackEvent = 11;            // TracePacket.track_event
inline constexpr uint32_t kInternedData = 12;          // TracePacket.interned_data
inline constexpr uint32_t kSequenceFlags = 13;         // TracePacket.sequence_flags
inline constexpr uint32_t kTrackDescriptor = 60;       // TracePacket.track_descriptor
inline constexpr uint64_t kSeqIncrementalStateCleared = 1;  // TracePacket.SequenceFlags
inline constexpr uint64_t kSeqNeedsIncrementalState = 2;
inline constexpr uint32_t kTdUuid = 1;                 // TrackDescriptor.uuid
inline constexpr uint32_t kTdName = 2;                 // TrackDescriptor.name
inline constexpr uint32_t kTdProcess = 3;              // TrackDescriptor.process
inline constexpr uint32_t kTdThread = 4;               // TrackDescriptor.thread
inline constexpr uint32_t kTdParentUuid = 5;           // TrackDescriptor.parent_uuid
inline constexpr uint32_t kPdPid = 1;                  // ProcessDescriptor.pid
inline constexpr uint32_t kPdProcessName = 6;          // ProcessDescriptor.process_name
inline constexpr uint32_t kThdPid = 1;                 // ThreadDescriptor.pid
inline constexpr uint32_t kThdTid = 2;                 // ThreadDescriptor.tid
inline constexpr uint32_t kThdThreadName = 5;          // ThreadDescriptor.thread_name
inline constexpr uint32_t kTeCategoryIids = 3;         // TrackEvent.category_iids
inline constexpr uint32_t kTeDebugAnnotations = 4;     // TrackEvent.debug_annotations
inline constexpr uint32_t kTeType = 9;                 // TrackEvent.type
inline constexpr uint32_t kTeNameIid = 10;             // TrackEvent.name_iid
inline constexpr uint32_t kTeTrackUuid = 11;           // TrackEvent.track_uuid
inline constexpr uint32_t kTeName = 23;                // TrackEvent.name
inline constexpr uint32_t kTeFlowIds = 47;             // TrackEvent.flow_ids (fixed64)
inline constexpr uint32_t kTeTerminatingFlowIds = 48;  // TrackEvent.terminating_flow_ids
inline constexpr uint64_t kTypeSliceBegin = 1;         // TrackEvent.Type
inline constexpr uint64_t kTypeSliceEnd = 2;
inline constexpr uint64_t kTypeInstant = 3;
inline constexpr uint32_t kDaNameIid = 1;              // DebugAnnotation.name_iid
inline constexpr uint32_t kDaBool = 2;                 // DebugAnnotation.bool_value
inline constexpr uint32_t kDaUint = 3;                 // DebugAnnotation.uint_value
inline constexpr uint32_t kDaInt = 4;                  // DebugAnnotation.int_value
inline constexpr uint32_t kDaDouble = 5;               // DebugAnnotation.double_value
inline constexpr uint32_t kDaString = 6;               // DebugAnnotation.string_value
inline constexpr uint32_t kIdEventCategories = 1;      // InternedData.event_categories
inline constexpr uint32_t kIdEventNames = 2;           // InternedData.event_names
inline constexpr uint32_t kIdDebugAnnotationNames = 3;  // InternedData.debug_annotation_names
inline constexpr uint32_t kInternedIid = 1;            // EventCategory / EventName /
inline constexpr uint32_t kInternedName = 2;           // DebugAnnotationName: iid, name
}  // namespace pf

class PerfettoProtoWriter final : public TraceWriter {
 public:
  // `out` must be open and outlive the writer.
  explicit PerfettoProtoWriter(OutputFile* out);

  void DefineTrack(const Track& track) override;
  void KernelSlice(uint64_t track, const KernelRecord& k, const GpuTime& t, uint64_t flow) override;
  void KernelInstant(uint64_t track, const KernelRecord& k, uint64_t flow) override;
  void OrphanSlice(uint64_t track, const GpuTime& t) override;
  void Launch(uint64_t track, const KernelRecord& k, uint64_t flow) override;
  void MarkerInstant(uint64_t track, const Marker& m) override;
  bool Finish(const ExportCounts& counts, std::string* error) override;

 private:
  // Argument names, interned as DebugAnnotationName iids 1.. in this order.
  enum Arg : uint64_t {
    kArgCorrelationId = 1,
    kArgApi,
    kArgPid,
    kArgDevice,
    kArgStream,
    kArgGrid,
    kArgBlock,
    kArgRegs,
    kArgSmem,
    kArgDynSmem,
    kArgLocalBytes,
    kArgOccupancy,
    kArgLimitingResource,
    kArgMaxActiveBlocks,
    kArgActiveWarps,
    kArgWaves,
    kArgGraphNodeId,
    kArgDurationNs,
    kArgTimed,
    kArgDetail,
    kArgSeq,
    kArgMangled,
    kArgTimingWindow,
    kArgCount,
  };
  enum Category : uint64_t { kCatKernel = 1, kCatLaunch, kCatMarker };

  // Starts a TrackEvent packet at `ts_ns`.
  void StartEvent(uint64_t ts_ns, uint64_t track, uint64_t type);
  // The iid of an event name, interning it (in the packet being built) the first time.
  uint64_t NameIid(std::string_view name);
  uint64_t KernelNameIid(const KernelNames* names);
  void Category(Category category);
  void UintArg(Arg arg, uint64_t v);
  void IntArg(Arg arg, int64_t v);
  void DoubleArg(Arg arg, double v);
  void StringArg(Arg arg, std::string_view v);
  void BoolArg(Arg arg, bool v);
  void KernelArgs(const KernelRecord& k);
  void EndEvent();
  // Frames `packet` as a Trace.packet and writes it; `flags`: its sequence_flags (0: none).
  void Emit(ProtoWriter& packet, uint64_t flags);

  OutputFile* out_;
  bool first_packet_ = true;
  bool args_interned_ = false;
  bool categories_interned_ = false;
  ProtoWriter packet_;
  ProtoWriter event_;
  ProtoWriter interned_;
  ProtoWriter entry_;
  ProtoWriter annotation_;
  ProtoWriter descriptor_;
  ProtoWriter process_;
  ProtoWriter frame_;
  std::unordered_map<std::string, uint64_t> names_;  // event name -> iid
  std::unordered_map<const KernelNames*, uint64_t> kernel_names_;  // -> iid of its display name
  uint64_t timestamp_ = 0;
  uint64_t next_name_iid_ = 1;
};

}  // namespace cuflight::trace

#endif  // CUFLIGHT_REPORT_TRACE_PERFETTO_PROTO_WRITER_H_
