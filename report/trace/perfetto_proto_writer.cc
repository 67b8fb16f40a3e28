#include "perfetto_proto_writer.h"

#include <fmt/format.h>

#include <array>
#include <string_view>

namespace cuflight::trace {
namespace {

constexpr uint64_t kSequence = 1;

// Argument names by PerfettoProtoWriter::Arg (index 0 unused: iids start at 1).
constexpr std::array<std::string_view, 24> kArgNames = {
    "",         "correlation_id", "api",        "pid",          "device",
    "stream",   "grid",           "block",      "regs",         "smem",
    "dyn_smem", "local_bytes",    "occupancy",  "limiting_resource", "max_active_blocks",
    "active_warps", "waves",      "graph_node_id", "duration_ns", "timed",
    "detail",   "seq",            "mangled",    "timing_window"};

constexpr std::array<std::string_view, 4> kCategoryNames = {"", "kernel", "launch", "marker"};

// "264x8x1" into `buf` (no allocation).
std::string_view DimText(const schema::Dim3& d, char (&buf)[48]) {
  const auto r = fmt::format_to_n(buf, sizeof(buf), "{}x{}x{}", d.x, d.y, d.z);
  return {buf, static_cast<size_t>(r.out - buf)};
}

}  // namespace

PerfettoProtoWriter::PerfettoProtoWriter(OutputFile* out) : out_(out) {
  static_assert(kArgNames.size() == kArgCount);
}

void PerfettoProtoWriter::Emit(ProtoWriter& packet, uint64_t flags) {
  packet.Varint(pf::kSequenceId, kSequence);
  if (first_packet_) flags |= pf::kSeqIncrementalStateCleared;
  first_packet_ = false;
  if (flags != 0) packet.Varint(pf::kSequenceFlags, flags);
  // Trace.packet: one length-delimited field per packet, so packets stream one after another.
  frame_.Clear();
  frame_.Message(pf::kTracePacket, packet);
  out_->Write(frame_.bytes());
  packet.Clear();
}

void PerfettoProtoWriter::DefineTrack(const Track& track) {
  descriptor_.Clear();
  process_.Clear();
  descriptor_.Varint(pf::kTdUuid, track.uuid);
  if (track.parent_uuid != 0) descriptor_.Varint(pf::kTdParentUuid, track.parent_uuid);
  switch (track.kind) {
    case TrackKind::kGpu:
    case TrackKind::kHostProcess:
      process_.Int(pf::kPdPid, track.pid);
      process_.String(pf::kPdProcessName, track.name);
      descriptor_.Message(pf::kTdProcess, process_);
      break;
    case TrackKind::kStream:
    case TrackKind::kHostThread:
      process_.Int(pf::kThdPid, track.pid);
      process_.Int(pf::kThdTid, track.tid);
      process_.String(pf::kThdThreadName, track.name);
      descriptor_.Message(pf::kTdThread, process_);
      break;
  }
  descriptor_.String(pf::kTdName, track.name);
  packet_.Message(pf::kTrackDescriptor, descriptor_);
  Emit(packet_, 0);
}

uint64_t PerfettoProtoWriter::NameIid(std::string_view name) {
  const auto [it, added] = names_.try_emplace(std::string(name), next_name_iid_);
  if (added) ++next_name_iid_;
  if (added) {
    entry_.Clear();
    entry_.Varint(pf::kInternedIid, it->second);
    entry_.String(pf::kInternedName, name);
    interned_.Message(pf::kIdEventNames, entry_);
  }
  return it->second;
}

uint64_t PerfettoProtoWriter::KernelNameIid(const KernelNames* names) {
  const auto it = kernel_names_.find(names);
  if (it != kernel_names_.end()) return it->second;
  // Distinct kernels of one name (other api) share the name's iid.
  const uint64_t iid = NameIid(names->display());
  kernel_names_.emplace(names, iid);
  return iid;
}

void PerfettoProtoWriter::StartEvent(uint64_t ts_ns, uint64_t track, uint64_t type) {
  event_.Clear();
  interned_.Clear();
  timestamp_ = ts_ns;
  if (!args_interned_) {
    // Every argument name and category at once, in the first event's packet.
    for (uint64_t i = 1; i < kArgCount; ++i) {
      entry_.Clear();
      entry_.Varint(pf::kInternedIid, i);
      entry_.String(pf::kInternedName, kArgNames[i]);
      interned_.Message(pf::kIdDebugAnnotationNames, entry_);
    }
    for (uint64_t i = 1; i < kCategoryNames.size(); ++i) {
      entry_.Clear();
      entry_.Varint(pf::kInternedIid, i);
      entry_.String(pf::kInternedName, kCategoryNames[i]);
      interned_.Message(pf::kIdEventCategories, entry_);
    }
    args_interned_ = true;
  }
  event_.Varint(pf::kTeType, type);
  event_.Varint(pf::kTeTrackUuid, track);
}

void PerfettoProtoWriter::Category(enum Category category) {
  event_.Varint(pf::kTeCategoryIids, category);
}

void PerfettoProtoWriter::UintArg(Arg arg, uint64_t v) {
  annotation_.Clear();
  annotation_.Varint(pf::kDaNameIid, arg);
  annotation_.Varint(pf::kDaUint, v);
  event_.Message(pf::kTeDebugAnnotations, annotation_);
}

void PerfettoProtoWriter::IntArg(Arg arg, int64_t v) {
  annotation_.Clear();
  annotation_.Varint(pf::kDaNameIid, arg);
  annotation_.Int(pf::kDaInt, v);
  event_.Message(pf::kTeDebugAnnotations, annotation_);
}

void PerfettoProtoWriter::DoubleArg(Arg arg, double v) {
  annotation_.Clear();
  annotation_.Varint(pf::kDaNameIid, arg);
  annotation_.Double(pf::kDaDouble, v);
  event_.Message(pf::kTeDebugAnnotations, annotation_);
}

void PerfettoProtoWriter::StringArg(Arg arg, std::string_view v) {
  annotation_.Clear();
  annotation_.Varint(pf::kDaNameIid, arg);
  annotation_.String(pf::kDaString, v);
  event_.Message(pf::kTeDebugAnnotations, annotation_);
}

void PerfettoProtoWriter::BoolArg(Arg arg, bool v) {
  annotation_.Clear();
  annotation_.Varint(pf::kDaNameIid, arg);
  annotation_.Bool(pf::kDaBool, v);
  event_.Message(pf::kTeDebugAnnotations, annotation_);
}

void PerfettoProtoWriter::KernelArgs(const KernelRecord& k) {
  const schema::OccupancyFields& o = k.occupancy;
  UintArg(kArgCorrelationId, k.correlation_id);
  IntArg(kArgPid, k.header.pid);
  char dim[48];
  StringArg(kArgGrid, DimText(k.grid, dim));
  StringArg(kArgBlock, DimText(k.block, dim));
  IntArg(kArgRegs, k.num_regs);
  IntArg(kArgSmem, k.static_shared_bytes + k.dyn_shared_bytes);
  IntArg(kArgDynSmem, k.dyn_shared_bytes);
  IntArg(kArgLocalBytes, k.local_bytes);
  DoubleArg(kArgOccupancy, o.occupancy);
  StringArg(kArgLimitingResource, schema::ResourceName(o.limiting_resource));
  IntArg(kArgMaxActiveBlocks, o.max_active_blocks);
  IntArg(kArgActiveWarps, o.active_warps);
  DoubleArg(kArgWaves, o.waves);
  if (k.graph_node_id) UintArg(kArgGraphNodeId, *k.graph_node_id);
  // Under sampled timing: an instant with false was outside a timing window (no GPU time was
  // measured for it, by design), with true its kernel_time was lost.
  if (k.timing_window) BoolArg(kArgTimingWindow, *k.timing_window);
}

void PerfettoProtoWriter::EndEvent() {
  packet_.Varint(pf::kTimestamp, timestamp_);
  packet_.Message(pf::kTrackEvent, event_);
  if (!interned_.empty()) packet_.Message(pf::kInternedData, interned_);
  Emit(packet_, pf::kSeqNeedsIncrementalState);
}

void PerfettoProtoWriter::KernelSlice(uint64_t track, const KernelRecord& k, const GpuTime& t,
                                      uint64_t flow) {
  StartEvent(t.start_ns, track, pf::kTypeSliceBegin);
  Category(kCatKernel);
  event_.Varint(pf::kTeNameIid, KernelNameIid(k.names));
  if (flow != 0) event_.Fixed64(pf::kTeTerminatingFlowIds, flow);
  KernelArgs(k);
  UintArg(kArgDurationNs, t.duration_ns);
  EndEvent();
  StartEvent(t.end_ns, track, pf::kTypeSliceEnd);
  EndEvent();
}

void PerfettoProtoWriter::KernelInstant(uint64_t track, const KernelRecord& k, uint64_t flow) {
  StartEvent(static_cast<uint64_t>(k.header.ts_ns), track, pf::kTypeInstant);
  Category(kCatKernel);
  event_.Varint(pf::kTeNameIid, KernelNameIid(k.names));
  if (flow != 0) event_.Fixed64(pf::kTeTerminatingFlowIds, flow);
  KernelArgs(k);
  BoolArg(kArgTimed, false);
  EndEvent();
}

void PerfettoProtoWriter::OrphanSlice(uint64_t track, const GpuTime& t) {
  StartEvent(t.start_ns, track, pf::kTypeSliceBegin);
  Category(kCatKernel);
  event_.String(pf::kTeName, t.graph_node_id ? fmt::format("kernel (corr {}, node {})",
                                                          t.correlation_id, *t.graph_node_id)
                                             : fmt::format("kernel (corr {})", t.correlation_id));
  UintArg(kArgCorrelationId, t.correlation_id);
  IntArg(kArgPid, t.pid);
  UintArg(kArgDurationNs, t.duration_ns);
  if (t.graph_node_id) UintArg(kArgGraphNodeId, *t.graph_node_id);
  EndEvent();
  StartEvent(t.end_ns, track, pf::kTypeSliceEnd);
  EndEvent();
}

void PerfettoProtoWriter::Launch(uint64_t track, const KernelRecord& k, uint64_t flow) {
  StartEvent(static_cast<uint64_t>(k.header.ts_ns), track, pf::kTypeInstant);
  Category(kCatLaunch);
  event_.Varint(pf::kTeNameIid, KernelNameIid(k.names));
  if (flow != 0) event_.Fixed64(pf::kTeFlowIds, flow);
  UintArg(kArgCorrelationId, k.correlation_id);
  StringArg(kArgApi, k.names->api);
  IntArg(kArgDevice, k.device);
  UintArg(kArgStream, k.stream);
  EndEvent();
}

void PerfettoProtoWriter::MarkerInstant(uint64_t track, const Marker& m) {
  StartEvent(static_cast<uint64_t>(m.ts_ns), track, pf::kTypeInstant);
  Category(kCatMarker);
  event_.Varint(pf::kTeNameIid, NameIid(m.name));
  StringArg(kArgDetail, m.detail);
  UintArg(kArgSeq, m.seq);
  EndEvent();
}

bool PerfettoProtoWriter::Finish(const ExportCounts&, std::string* error) {
  return out_->Close(error);
}

}  // namespace cuflight::trace
