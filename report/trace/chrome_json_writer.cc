#include "chrome_json_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace cuflight::trace {
namespace {

// A JSON string (RFC 8259): quotes, backslash and control characters escaped. The decoder hands
// out valid UTF-8 only (ill-formed input becomes U+FFFD), so the other bytes go as they are.
void Str(std::string* out, std::string_view s) {
  out->push_back('"');
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20) {
      switch (c) {
        case '\n':
          out->append("\\n");
          break;
        case '\t':
          out->append("\\t");
          break;
        case '\r':
          out->append("\\r");
          break;
        default:
          fmt::format_to(std::back_inserter(*out), "\\u{:04x}", u);
      }
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

// A finite double as its shortest round-trip text, as nlohmann/json writes it.
void Num(std::string* out, double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v > -1e15 && v < 1e15) {
    fmt::format_to(std::back_inserter(*out), "{}.0", static_cast<int64_t>(v));
    return;
  }
  fmt::format_to(std::back_inserter(*out), "{}", v);
}

template <class T>
void Int(std::string* out, T v) {
  fmt::format_to(std::back_inserter(*out), "{}", v);
}

void Key(std::string* out, std::string_view key) {
  out->push_back(',');
  Str(out, key);
  out->push_back(':');
}

void Dim(std::string* out, const schema::Dim3& d) {
  fmt::format_to(std::back_inserter(*out), "[{},{},{}]", d.x, d.y, d.z);
}

std::string Hex(uint64_t v) { return fmt::format("{:#x}", v); }

double Micros(int64_t ns, int64_t base_ns) { return static_cast<double>(ns - base_ns) / 1000.0; }

}  // namespace

ChromeJsonWriter::ChromeJsonWriter(OutputFile* out, int64_t base_ns) : out_(out), base_ns_(base_ns) {
  buf_ = "{\"traceEvents\":[";
}

void ChromeJsonWriter::Begin() {
  if (!first_) buf_.push_back(',');
  first_ = false;
  buf_.push_back('\n');
}

void ChromeJsonWriter::End() {
  if (buf_.size() >= (size_t{1} << 16)) {
    out_->Write(buf_);
    buf_.clear();
  }
}

void ChromeJsonWriter::DefineTrack(const Track& track) {
  tracks_[track.uuid] = {track.pid, track.tid};
  const bool process = track.kind == TrackKind::kGpu || track.kind == TrackKind::kHostProcess;
  Begin();
  fmt::format_to(std::back_inserter(buf_), R"({{"ph":"M","name":"{}","pid":{},"tid":{},"args":{{"name":)",
                 process ? "process_name" : "thread_name", track.pid, process ? 0 : track.tid);
  Str(&buf_, track.name);
  buf_.append("}}");
  if (track.kind == TrackKind::kGpu ||
      (track.kind == TrackKind::kHostProcess && track.sort_index != 0)) {
    Begin();
    fmt::format_to(std::back_inserter(buf_),
                   R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})",
                   track.pid, track.sort_index);
  }
  End();
}

void ChromeJsonWriter::KernelArgs(const KernelRecord& k) {
  const schema::OccupancyFields& o = k.occupancy;
  std::string& b = buf_;
  b.append("\"args\":{\"name\":");
  Str(&b, k.names->display());
  Key(&b, "mangled");
  Str(&b, k.names->name);
  Key(&b, "api");
  Str(&b, k.names->api);
  Key(&b, "pid");
  Int(&b, k.header.pid);
  Key(&b, "tid");
  Int(&b, k.tid);
  Key(&b, "device");
  Int(&b, k.device);
  Key(&b, "stream");
  Str(&b, Hex(k.stream));
  Key(&b, "context");
  Str(&b, Hex(k.context));
  Key(&b, "correlation_id");
  Int(&b, k.correlation_id);
  Key(&b, "grid");
  Dim(&b, k.grid);
  Key(&b, "block");
  Dim(&b, k.block);
  Key(&b, "regs");
  Int(&b, k.num_regs);
  Key(&b, "static_smem");
  Int(&b, k.static_shared_bytes);
  Key(&b, "dyn_smem");
  Int(&b, k.dyn_shared_bytes);
  Key(&b, "smem");
  Int(&b, k.static_shared_bytes + k.dyn_shared_bytes);
  Key(&b, "local_bytes");
  Int(&b, k.local_bytes);
  Key(&b, "max_threads_per_block");
  Int(&b, k.max_threads_per_block);
  Key(&b, "carveout");
  Int(&b, k.carveout);
  Key(&b, "cooperative");
  b.append(k.cooperative ? "true" : "false");
  if (k.timing_window) {
    // Under sampled timing (trace_writer.h, KernelRecord::timing_window).
    Key(&b, "timing_window");
    b.append(*k.timing_window ? "true" : "false");
  }
  Key(&b, "max_active_blocks");
  Int(&b, o.max_active_blocks);
  Key(&b, "active_warps");
  Int(&b, o.active_warps);
  Key(&b, "max_warps");
  Int(&b, o.max_warps);
  Key(&b, "occupancy");
  Num(&b, o.occupancy);
  Key(&b, "limiting_resource");
  Str(&b, schema::ResourceName(o.limiting_resource));
  Key(&b, "limiting_resources");
  b.push_back('[');
  bool first = true;
  for (int i = 0; i < schema::kResourceCount; ++i) {
    if ((o.limiting_resources & schema::MaskOf(static_cast<schema::Resource>(i))) == 0) continue;
    if (!first) b.push_back(',');
    first = false;
    Str(&b, schema::ResourceName(static_cast<schema::Resource>(i)));
  }
  b.push_back(']');
  Key(&b, "reg_occupancy");
  Num(&b, o.reg_occupancy);
  Key(&b, "smem_occupancy");
  Num(&b, o.smem_occupancy);
  Key(&b, "warp_occupancy");
  Num(&b, o.warp_occupancy);
  Key(&b, "block_occupancy");
  Num(&b, o.block_occupancy);
  Key(&b, "barrier_occupancy");
  Num(&b, o.barrier_occupancy);
  Key(&b, "allocated_regs_per_block");
  Int(&b, o.allocated_regs_per_block);
  Key(&b, "allocated_smem_per_block");
  Int(&b, o.allocated_smem_per_block);
  Key(&b, "waves");
  Num(&b, o.waves);
  Key(&b, "tail_utilization");
  Num(&b, o.tail_utilization);
  Key(&b, "regs_for_next_block");
  if (o.regs_for_next_block < 0) {
    b.append("null");
  } else {
    Int(&b, o.regs_for_next_block);
  }
  Key(&b, "smem_for_next_block");
  if (o.smem_for_next_block < 0) {
    b.append("null");
  } else {
    Int(&b, o.smem_for_next_block);
  }
  Key(&b, "best_block_size");
  Int(&b, o.best_block_size);
  if (k.cluster) {
    Key(&b, "cluster");
    Dim(&b, *k.cluster);
    if (o.has_cluster) {
      Key(&b, "cluster_occupancy");
      Num(&b, o.cluster_occupancy);
    }
  }
  if (k.graph_id) {
    Key(&b, "graph_id");
    Int(&b, *k.graph_id);
  }
  if (k.graph_node_id) {
    Key(&b, "graph_node_id");
    Int(&b, *k.graph_node_id);
  }
}

void ChromeJsonWriter::Flow(char phase, uint64_t flow, const std::pair<int64_t, int64_t>& at,
                            int64_t ts_ns) {
  Begin();
  fmt::format_to(std::back_inserter(buf_), R"({{"ph":"{}",)", phase);
  if (phase == 'f') buf_.append(R"("bp":"e",)");
  fmt::format_to(std::back_inserter(buf_), R"("cat":"flow","name":"launch","id":{},"pid":{},"tid":{},"ts":)",
                 flow, at.first, at.second);
  Num(&buf_, Micros(ts_ns, base_ns_));
  buf_.push_back('}');
}

void ChromeJsonWriter::KernelSlice(uint64_t track, const KernelRecord& k, const GpuTime& t,
                                   uint64_t flow) {
  const auto& at = tracks_[track];
  Begin();
  buf_.append(R"({"ph":"X","cat":"kernel","name":)");
  Str(&buf_, k.names->display());
  fmt::format_to(std::back_inserter(buf_), R"(,"pid":{},"tid":{},"ts":)", at.first, at.second);
  Num(&buf_, Micros(static_cast<int64_t>(t.start_ns), base_ns_));
  buf_.append(",\"dur\":");
  Num(&buf_, static_cast<double>(t.duration_ns) / 1000.0);
  buf_.push_back(',');
  KernelArgs(k);
  fmt::format_to(std::back_inserter(buf_),
                 R"(,"timed":true,"start_ns":{},"end_ns":{},"duration_ns":{}}}}})", t.start_ns,
                 t.end_ns, t.duration_ns);
  if (flow != 0) Flow('f', flow, at, static_cast<int64_t>(t.start_ns));
  End();
}

void ChromeJsonWriter::KernelInstant(uint64_t track, const KernelRecord& k, uint64_t flow) {
  const auto& at = tracks_[track];
  Begin();
  buf_.append(R"({"ph":"i","s":"t","cat":"kernel","name":)");
  Str(&buf_, k.names->display());
  fmt::format_to(std::back_inserter(buf_), R"(,"pid":{},"tid":{},"ts":)", at.first, at.second);
  Num(&buf_, Micros(k.header.ts_ns, base_ns_));
  buf_.push_back(',');
  KernelArgs(k);
  buf_.append(R"(,"timed":false}})");
  if (flow != 0) Flow('f', flow, at, k.header.ts_ns);
  End();
}

void ChromeJsonWriter::OrphanSlice(uint64_t track, const GpuTime& t) {
  const auto& at = tracks_[track];
  Begin();
  buf_.append(R"({"ph":"X","cat":"kernel","name":)");
  Str(&buf_, t.graph_node_id
                 ? fmt::format("kernel (corr {}, node {})", t.correlation_id, *t.graph_node_id)
                 : fmt::format("kernel (corr {})", t.correlation_id));
  fmt::format_to(std::back_inserter(buf_), R"(,"pid":{},"tid":{},"ts":)", at.first, at.second);
  Num(&buf_, Micros(static_cast<int64_t>(t.start_ns), base_ns_));
  buf_.append(",\"dur\":");
  Num(&buf_, static_cast<double>(t.duration_ns) / 1000.0);
  fmt::format_to(std::back_inserter(buf_),
                 R"(,"args":{{"pid":{},"correlation_id":{},"device":{},"stream":"{}","start_ns":{},)"
                 R"("end_ns":{},"duration_ns":{},"timed":true)",
                 t.pid, t.correlation_id, t.device, Hex(t.stream), t.start_ns, t.end_ns,
                 t.duration_ns);
  if (t.graph_id) fmt::format_to(std::back_inserter(buf_), R"(,"graph_id":{})", *t.graph_id);
  if (t.graph_node_id) {
    fmt::format_to(std::back_inserter(buf_), R"(,"graph_node_id":{})", *t.graph_node_id);
  }
  buf_.append("}}");
  End();
}

void ChromeJsonWriter::Launch(uint64_t track, const KernelRecord& k, uint64_t flow) {
  const auto& at = tracks_[track];
  Begin();
  buf_.append(R"({"ph":"i","s":"t","cat":"launch","name":)");
  Str(&buf_, k.names->display());
  fmt::format_to(std::back_inserter(buf_), R"(,"pid":{},"tid":{},"ts":)", at.first, at.second);
  Num(&buf_, Micros(k.header.ts_ns, base_ns_));
  buf_.append(R"(,"args":{"api":)");
  Str(&buf_, k.names->api);
  fmt::format_to(std::back_inserter(buf_), R"(,"correlation_id":{},"device":{},"stream":"{}","grid":)",
                 k.correlation_id, k.device, Hex(k.stream));
  Dim(&buf_, k.grid);
  buf_.append(",\"block\":");
  Dim(&buf_, k.block);
  buf_.append("}}");
  if (flow != 0) Flow('s', flow, at, k.header.ts_ns);
  End();
}

void ChromeJsonWriter::MarkerInstant(uint64_t track, const Marker& m) {
  const auto& at = tracks_[track];
  Begin();
  fmt::format_to(std::back_inserter(buf_), R"({{"ph":"i","s":"{}","cat":"marker","name":)",
                 at.second != 0 ? "t" : "p");
  Str(&buf_, m.name);
  fmt::format_to(std::back_inserter(buf_), R"(,"pid":{},"tid":{},"ts":)", at.first, at.second);
  Num(&buf_, Micros(m.ts_ns, base_ns_));
  buf_.append(R"(,"args":{"detail":)");
  Str(&buf_, m.detail);
  fmt::format_to(std::back_inserter(buf_), R"(,"seq":{}}}}})", m.seq);
  End();
}

bool ChromeJsonWriter::Finish(const ExportCounts& c, std::string* error) {
  fmt::format_to(std::back_inserter(buf_),
                 "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{{\"producer\":\"cuflight\","
                 "\"time_base_ns\":{},\"kernels\":{},\"timed_kernels\":{},\"untimed_kernels\":{},"
                 "\"kernel_times_without_kernel\":{},\"flows\":{},\"markers\":{},"
                 "\"launches_given_up\":{},\"kernel_times_given_up\":{}}}}}\n",
                 base_ns_, c.kernels, c.timed, c.untimed, c.orphan_times, c.flows, c.markers,
                 c.launches_given_up, c.times_given_up);
  out_->Write(buf_);
  buf_.clear();
  return out_->Close(error);
}

void EarliestTimestamp::KernelSlice(uint64_t, const KernelRecord& k, const GpuTime& t, uint64_t) {
  See(static_cast<int64_t>(t.start_ns));
  See(k.header.ts_ns);
}

void EarliestTimestamp::See(int64_t ns) {
  if (!any_ || ns < earliest_) earliest_ = ns;
  any_ = true;
}

int64_t EarliestTimestamp::base_ns() const {
  if (!any_) return 0;
  // Floored to a whole microsecond (toward minus infinity).
  return earliest_ >= 0 ? earliest_ / 1000 * 1000 : (earliest_ - 999) / 1000 * 1000;
}

}  // namespace cuflight::trace
