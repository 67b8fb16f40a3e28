// `cuflight export --perfetto FILE.pftrace`: the protobuf trace read back two independent ways.
//  1. A minimal protobuf wire-format decoder written here from the encoding guide
//     (https://protobuf.dev/programming-guides/encoding/: varint, I64, LEN, I32), which turns the
//     file into packets, tracks and events and checks them against values computed by hand from
//     the hand-made log below.
//  2. protoc --decode with kPerfettoSubset below: the messages and fields the export writes,
//     copied from Perfetto's .proto files (their numbers, types and labels as they are there), so
//     a wrong field number or wire type is an unknown field or a parse error. Skipped when
//     protoc is not installed (scripts/setup --tests installs protobuf-compiler).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "collector_test_util.h"
#include "report_test_events.h"
#include "subprocess.h"

namespace cuflight::trace {
namespace {

namespace fs = std::filesystem;
using collector::testing::TempDir;
using cuflight::testing::RunProcess;
using report::testing::Line;

// ---- 1. An independent decoder of the wire format ----

struct WireField {
  uint32_t number = 0;
  uint32_t wire_type = 0;   // 0 varint, 1 I64, 2 LEN, 5 I32
  uint64_t value = 0;       // varint, I64 and I32 values
  std::string bytes;        // LEN
};

// Parses one message's fields; false (with a reason) on any malformed byte.
bool ParseMessage(std::string_view data, std::vector<WireField>* out, std::string* why) {
  size_t i = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= data.size()) return false;
      const auto b = static_cast<uint8_t>(data[i++]);
      *v |= uint64_t{b & 0x7Fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  };
  while (i < data.size()) {
    uint64_t tag = 0;
    if (!varint(&tag)) return (*why = "bad tag varint", false);
    WireField f;
    f.number = static_cast<uint32_t>(tag >> 3);
    f.wire_type = static_cast<uint32_t>(tag & 7);
    if (f.number == 0) return (*why = "field number 0", false);
    switch (f.wire_type) {
      case 0:
        if (!varint(&f.value)) return (*why = "bad varint", false);
        break;
      case 1:
        if (i + 8 > data.size()) return (*why = "short I64", false);
        for (int b = 7; b >= 0; --b) f.value = (f.value << 8) | static_cast<uint8_t>(data[i + b]);
        i += 8;
        break;
      case 2: {
        uint64_t n = 0;
        if (!varint(&n) || n > data.size() - i) return (*why = "bad LEN", false);
        f.bytes = std::string(data.substr(i, n));
        i += n;
        break;
      }
      case 5:
        if (i + 4 > data.size()) return (*why = "short I32", false);
        for (int b = 3; b >= 0; --b) f.value = (f.value << 8) | static_cast<uint8_t>(data[i + b]);
        i += 4;
        break;
      default:
        return (*why = "wire type " + std::to_string(f.wire_type), false);
    }
    out->push_back(std::move(f));
  }
  return true;
}

std::vector<WireField> Parse(std::string_view data) {
  std::vector<WireField> fields;
  std::string why;
  EXPECT_TRUE(ParseMessage(data, &fields, &why)) << why;
  return fields;
}

struct TrackInfo {
  std::string name;
  bool is_process = false;
  bool is_thread = false;
  int64_t pid = 0;
  int64_t tid = 0;
  uint64_t parent = 0;
};

struct EventInfo {
  uint64_t ts = 0;
  uint64_t type = 0;  // 1 begin, 2 end, 3 instant
  uint64_t track = 0;
  std::string name;
  std::vector<std::string> categories;
  std::map<std::string, std::string> args;  // values as text
  std::vector<uint64_t> flows;
  std::vector<uint64_t> terminating_flows;
};

struct Trace {
  std::map<uint64_t, TrackInfo> tracks;
  std::vector<EventInfo> events;
  size_t packets = 0;

  std::vector<const EventInfo*> Named(std::string_view name, uint64_t type) const {
    std::vector<const EventInfo*> out;
    for (const EventInfo& e : events) {
      if (e.name == name && e.type == type) out.push_back(&e);
    }
    return out;
  }
  const TrackInfo& TrackOf(const EventInfo& e) const { return tracks.at(e.track); }
};

// Field numbers as Perfetto's protos give them (kPerfettoSubset below, with its sources).
Trace Decode(const std::string& file_bytes) {
  Trace t;
  std::map<uint64_t, std::string> names, categories, arg_names;
  bool first = true;
  for (const WireField& p : Parse(file_bytes)) {
    EXPECT_EQ(p.number, 1u);  // Trace.packet
    EXPECT_EQ(p.wire_type, 2u);
    ++t.packets;
    const std::vector<WireField> packet = Parse(p.bytes);
    uint64_t seq_id = 0, flags = 0, ts = 0;
    const WireField* event = nullptr;
    for (const WireField& f : packet) {
      if (f.number == 10) seq_id = f.value;
      if (f.number == 13) flags = f.value;
      if (f.number == 8) ts = f.value;
      if (f.number == 11) event = &f;
      if (f.number == 12) {  // InternedData
        for (const WireField& entry : Parse(f.bytes)) {
          uint64_t iid = 0;
          std::string name;
          for (const WireField& g : Parse(entry.bytes)) {
            if (g.number == 1) iid = g.value;
            if (g.number == 2) name = g.bytes;
          }
          auto& table = entry.number == 1 ? categories : entry.number == 2 ? names : arg_names;
          EXPECT_TRUE(entry.number >= 1 && entry.number <= 3) << entry.number;
          EXPECT_TRUE(table.emplace(iid, name).second) << "iid " << iid << " interned twice";
        }
      }
      if (f.number == 60) {  // TrackDescriptor
        TrackInfo info;
        uint64_t uuid = 0;
        for (const WireField& g : Parse(f.bytes)) {
          if (g.number == 1) uuid = g.value;
          if (g.number == 2) info.name = g.bytes;
          if (g.number == 5) info.parent = g.value;
          if (g.number == 3 || g.number == 4) {
            (g.number == 3 ? info.is_process : info.is_thread) = true;
            for (const WireField& d : Parse(g.bytes)) {
              if (d.number == 1) info.pid = static_cast<int64_t>(d.value);
              if (d.number == 2 && g.number == 4) info.tid = static_cast<int64_t>(d.value);
            }
          }
        }
        t.tracks[uuid] = info;
      }
    }
    EXPECT_EQ(seq_id, 1u);
    if (first) {
      EXPECT_TRUE(flags & 1) << "the first packet clears the incremental state";
    }
    first = false;
    if (event == nullptr) continue;
    EXPECT_TRUE(flags & 2) << "an event packet uses interned data";
    EventInfo e;
    e.ts = ts;
    for (const WireField& f : Parse(event->bytes)) {
      switch (f.number) {
        case 9: e.type = f.value; break;
        case 11: e.track = f.value; break;
        case 10:
          EXPECT_TRUE(names.count(f.value)) << "name iid " << f.value << " used before interned";
          e.name = names[f.value];
          break;
        case 23: e.name = f.bytes; break;
        case 3: e.categories.push_back(categories.at(f.value)); break;
        case 47:
          EXPECT_EQ(f.wire_type, 1u);  // fixed64
          e.flows.push_back(f.value);
          break;
        case 48:
          EXPECT_EQ(f.wire_type, 1u);
          e.terminating_flows.push_back(f.value);
          break;
        case 4: {
          std::string name, value;
          for (const WireField& a : Parse(f.bytes)) {
            if (a.number == 1) name = arg_names.at(a.value);
            if (a.number == 2) value = a.value ? "true" : "false";
            if (a.number == 3 || a.number == 4) value = std::to_string(static_cast<int64_t>(a.value));
            if (a.number == 5) {
              double d;
              std::memcpy(&d, &a.value, 8);
              value = std::to_string(d);
            }
            if (a.number == 6) value = a.bytes;
          }
          e.args[name] = value;
          break;
        }
        default: ADD_FAILURE() << "unexpected TrackEvent field " << f.number;
      }
    }
    EXPECT_TRUE(e.type == 2 || t.tracks.count(e.track)) << "event on an undefined track";
    t.events.push_back(std::move(e));
  }
  return t;
}

// ---- The hand-made log ----

// pid 100 ("trainer"), H100, two streams. Host times from kT0; GPU times by hand.
constexpr int64_t kT0 = 1'700'000'000'000'000'000;
constexpr int32_t kPid = 100;

std::string Log() {
  using namespace report::testing;
  std::string s = Line(Start(kPid, 0, kT0, "/opt/bin/trainer")) +
                  Line(Device(kPid, 1, 0, "NVIDIA H100 80GB HBM3"));
  KernelSpec gemm;
  gemm.name = "_Z4gemmv";
  gemm.demangled = "gemm()";
  gemm.stream = 0x10;
  gemm.occupancy = Fields(4, 8, 64, schema::Resource::kRegisters);
  KernelSpec relu = gemm;
  relu.name = "_Z4reluv";
  relu.demangled = "relu()";
  relu.stream = 0x20;
  s += Line(Kernel(kPid, 2, kT0 + 1000, 7, gemm));    // corr 7: timed
  s += Line(Kernel(kPid, 3, kT0 + 2000, 8, relu));    // corr 8: never timed
  TimeSpec at;
  at.stream = 0x10;
  at.start_ns = static_cast<uint64_t>(kT0 + 5000);
  s += Line(KernelTime(kPid, 4, 7, 2500, at));        // 5000 .. 7500
  s += Line(ApiError(kPid, 5, "cuLaunchKernel", "CUDA_ERROR_ILLEGAL_ADDRESS", 700, {8}));
  schema::OwnedStallEvent stall;  // relu (corr 8) has not finished for 12 s
  stall.header = {kT0 + 9000, kPid, 6};
  stall.state = schema::StallState::kStalled;
  stall.stall_ms = 10000;
  stall.stalled_ms = 12000;
  stall.streams_stalled = 1;
  schema::OwnedStallStream& waiting = stall.streams.emplace_back();
  waiting.device = 0;
  waiting.context = 1;
  waiting.stream = 0x20;
  waiting.waiting_ms = 12000;
  waiting.unfinished = 1;
  schema::OwnedStallLaunch& waits = waiting.launches.emplace_back();
  waits.correlation_id = 8;
  waits.name = relu.name;
  waits.demangled = relu.demangled;
  waits.grid = relu.grid;
  waits.block = relu.block;
  waits.occupancy = 0.5;
  waits.age_ms = 12000;
  s += Line(stall);
  schema::OwnedProcessCrashEvent crash;
  crash.header = {kT0 + 10000, kPid, 7};
  crash.signal = 11;
  crash.signal_name = "SIGSEGV";
  crash.code = 1;
  crash.tid = 100;
  s += Line(crash);
  return s;
}

std::string ReadAll(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class PerfettoProtoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    logs_ = dir_.path() / "logs" / "2023-11-14";
    fs::create_directories(logs_);
    std::ofstream(logs_ / "node1-trainer-100-5.jsonl", std::ios::binary) << Log();
  }
  fs::path Export(const std::vector<std::string>& extra = {}) {
    const fs::path out = dir_.path() / "trace.pftrace";
    std::vector<std::string> args = {"export", "--perfetto", out.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back((dir_.path() / "logs").string());
    const auto r = RunProcess(CUFLIGHT_CLI_PATH, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    last_err_ = r.err;
    return out;
  }
  TempDir dir_;
  fs::path logs_;
  std::string last_err_;
};

TEST_F(PerfettoProtoTest, SlicesInstantsFlowsAndMarkersAsComputedByHand) {
  const Trace t = Decode(ReadAll(Export()));
  EXPECT_NE(last_err_.find("2 kernels (1 timed, 1 without timing)"), std::string::npos) << last_err_;
  EXPECT_NE(last_err_.find("Perfetto protobuf"), std::string::npos) << last_err_;

  // The GPU is a process track; each stream a thread of it; the host process and thread.
  std::map<std::string, const TrackInfo*> by_name;
  for (const auto& [uuid, info] : t.tracks) by_name[info.name] = &info;
  ASSERT_TRUE(by_name.count("GPU 0: NVIDIA H100 80GB HBM3"));
  ASSERT_TRUE(by_name.count("stream 0x10 (pid 100)"));
  ASSERT_TRUE(by_name.count("stream 0x20 (pid 100)"));
  ASSERT_TRUE(by_name.count("trainer (pid 100)"));
  ASSERT_TRUE(by_name.count("thread 100"));
  const TrackInfo& gpu = *by_name["GPU 0: NVIDIA H100 80GB HBM3"];
  EXPECT_TRUE(gpu.is_process);
  EXPECT_EQ(gpu.pid, int64_t{1} << 30);
  const TrackInfo& s10 = *by_name["stream 0x10 (pid 100)"];
  EXPECT_TRUE(s10.is_thread);
  EXPECT_EQ(s10.pid, gpu.pid);
  EXPECT_TRUE(by_name["trainer (pid 100)"]->is_process);
  EXPECT_EQ(by_name["thread 100"]->pid, 100);
  EXPECT_EQ(by_name["thread 100"]->tid, 100);

  // gemm: a slice from its GPU start (kT0 + 5000) to its end (kT0 + 7500) on stream 0x10.
  const auto begins = t.Named("gemm()", 1);
  ASSERT_EQ(begins.size(), 1u);
  const EventInfo& b = *begins[0];
  EXPECT_EQ(b.ts, static_cast<uint64_t>(kT0 + 5000));
  EXPECT_EQ(t.TrackOf(b).name, "stream 0x10 (pid 100)");
  EXPECT_EQ(b.categories, std::vector<std::string>{"kernel"});
  EXPECT_EQ(b.args.at("correlation_id"), "7");
  EXPECT_EQ(b.args.at("duration_ns"), "2500");
  EXPECT_EQ(b.args.at("limiting_resource"), "registers");
  EXPECT_EQ(b.args.at("max_active_blocks"), "4");
  EXPECT_EQ(std::stod(b.args.at("occupancy")), 0.5);  // 4 blocks x 8 warps / 64
  EXPECT_EQ(b.args.at("block"), "256x1x1");
  const EventInfo* end = nullptr;
  for (const EventInfo& e : t.events) {
    if (e.type == 2 && e.track == b.track) end = &e;
  }
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->ts, static_cast<uint64_t>(kT0 + 7500));

  // Its launch: an instant on thread 100 at kT0 + 1000 whose flow ends at the slice.
  const auto launches = t.Named("gemm()", 3);
  ASSERT_EQ(launches.size(), 1u);
  const EventInfo& l = *launches[0];
  EXPECT_EQ(l.ts, static_cast<uint64_t>(kT0 + 1000));
  EXPECT_EQ(t.TrackOf(l).name, "thread 100");
  EXPECT_EQ(l.categories, std::vector<std::string>{"launch"});
  ASSERT_EQ(l.flows.size(), 1u);
  EXPECT_EQ(b.terminating_flows, l.flows);

  // relu never timed: an instant on stream 0x20 at its launch, "timed" false, its flow too.
  std::vector<const EventInfo*> relu;
  for (const EventInfo* e : t.Named("relu()", 3)) relu.push_back(e);
  ASSERT_EQ(relu.size(), 2u);  // the launch and the kernel
  const EventInfo* kernel = t.TrackOf(*relu[0]).name == "stream 0x20 (pid 100)" ? relu[0] : relu[1];
  const EventInfo* launch = kernel == relu[0] ? relu[1] : relu[0];
  EXPECT_EQ(t.TrackOf(*kernel).name, "stream 0x20 (pid 100)");
  EXPECT_EQ(kernel->ts, static_cast<uint64_t>(kT0 + 2000));
  EXPECT_EQ(kernel->args.at("timed"), "false");
  EXPECT_EQ(kernel->terminating_flows, launch->flows);
  EXPECT_NE(kernel->terminating_flows, l.flows);

  // Markers: the api_error and the stall on the process, the crash on its thread.
  const auto api = t.Named("api_error CUDA_ERROR_ILLEGAL_ADDRESS", 3);
  ASSERT_EQ(api.size(), 1u);
  EXPECT_EQ(t.TrackOf(*api[0]).name, "trainer (pid 100)");
  EXPECT_EQ(api[0]->categories, std::vector<std::string>{"marker"});
  EXPECT_NE(api[0]->args.at("detail").find("cuLaunchKernel returned CUDA_ERROR_ILLEGAL_ADDRESS (700)"),
            std::string::npos);
  const auto stall = t.Named("stall", 3);
  ASSERT_EQ(stall.size(), 1u);
  EXPECT_EQ(stall[0]->ts, static_cast<uint64_t>(kT0 + 9000));
  EXPECT_EQ(stall[0]->args.at("seq"), "6");
  const auto crash = t.Named("crash SIGSEGV", 3);
  ASSERT_EQ(crash.size(), 1u);
  EXPECT_EQ(crash[0]->ts, static_cast<uint64_t>(kT0 + 10000));
  EXPECT_EQ(t.TrackOf(*crash[0]).name, "thread 100");
}

// The two processes of pid 1 (report::testing::WriteTwoProcessesOfPidOne) in the protobuf form:
// two process descriptors, pid 1 "trainer (pid 1)" and pid 536870912 (2^29, the first trace pid
// for a process whose pid another has) "worker (pid 1 #2)", each with its own launching thread
// (tid 1 in both: report_test_events' kernels are launched by thread 1) and stream thread; each
// kernel slice's flow starts at a launch on its own process's thread.
TEST(PerfettoProtoPidTest, ProcessesSharingAPidAreTwoProcessDescriptors) {
  TempDir dir;
  report::testing::WriteTwoProcessesOfPidOne(dir.path() / "logs");
  const fs::path out = dir.path() / "t.pftrace";
  const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                            {"export", "--perfetto", out.string(), (dir.path() / "logs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Trace t = Decode(ReadAll(out));
  constexpr int64_t kB = int64_t{1} << 29;
  std::map<int64_t, std::string> processes;  // host pid -> name
  std::map<uint64_t, int64_t> thread_pid;    // host thread track -> its process's pid
  std::set<std::string> streams;
  for (const auto& [uuid, info] : t.tracks) {
    if (info.is_process && info.pid < (int64_t{1} << 30)) {
      EXPECT_TRUE(processes.emplace(info.pid, info.name).second) << info.name;
    }
    if (info.is_thread && info.pid < (int64_t{1} << 30)) {
      EXPECT_EQ(info.tid, 1);
      thread_pid[uuid] = info.pid;
    }
    if (info.is_thread && info.pid >= (int64_t{1} << 30)) streams.insert(info.name);
  }
  EXPECT_EQ(processes, (std::map<int64_t, std::string>{{1, "trainer (pid 1)"},
                                                        {kB, "worker (pid 1 #2)"}}));
  EXPECT_EQ(thread_pid.size(), 2u);
  EXPECT_EQ(streams,
            (std::set<std::string>{"default stream (pid 1)", "default stream (pid 1 #2)"}));
  // flow id -> pid of the thread whose launch starts it.
  std::map<uint64_t, int64_t> launched_by;
  for (const EventInfo& e : t.events) {
    if (!thread_pid.count(e.track)) continue;
    for (uint64_t f : e.flows) launched_by[f] = thread_pid[e.track];
  }
  std::map<std::string, std::set<int64_t>> slice_host;  // kernel name -> launching pids
  for (const EventInfo& e : t.events) {
    if (e.type != 1 || e.terminating_flows.empty()) continue;
    for (uint64_t f : e.terminating_flows) slice_host[e.name].insert(launched_by.at(f));
  }
  EXPECT_EQ(slice_host, (std::map<std::string, std::set<int64_t>>{{"a_kernel()", {1}},
                                                                   {"b_kernel()", {kB}}}));
}

TEST_F(PerfettoProtoTest, FiltersKeepKernelsByNameAndTimeAndMarkersByTime) {
  // --kernel relu: gemm and its kernel_time are left out; markers stay.
  Trace t = Decode(ReadAll(Export({"--kernel", "relu"})));
  EXPECT_TRUE(t.Named("gemm()", 1).empty());
  EXPECT_TRUE(t.Named("gemm()", 3).empty());
  EXPECT_EQ(t.Named("relu()", 3).size(), 2u);
  EXPECT_EQ(t.Named("crash SIGSEGV", 3).size(), 1u);
  for (const EventInfo& e : t.events) EXPECT_EQ(e.name.rfind("kernel (corr", 0), std::string::npos);

  // Launches until kT0 + 1500 (seconds since the epoch, as the flag takes them): gemm only;
  // markers after it are left out.
  t = Decode(ReadAll(Export({"--until", "1700000000.0000015"})));
  EXPECT_EQ(t.Named("gemm()", 1).size(), 1u);
  EXPECT_TRUE(t.Named("relu()", 3).empty());
  EXPECT_TRUE(t.Named("crash SIGSEGV", 3).empty());
  EXPECT_TRUE(t.Named("stall", 3).empty());

  // Another pid: nothing but no error.
  t = Decode(ReadAll(Export({"--pid", "4242"})));
  EXPECT_TRUE(t.events.empty());
}

// ---- 2. protoc against the .proto text ----

// The messages the export writes, as Perfetto defines them: copied (fields used only; numbers,
// types and labels unchanged) from github.com/google/perfetto,
//   protos/perfetto/trace/trace.proto (016d1f43): Trace.packet = 1
//   protos/perfetto/trace/trace_packet.proto (02603952): timestamp = 8,
//     trusted_packet_sequence_id = 10, track_event = 11, interned_data = 12,
//     sequence_flags = 13 (SequenceFlags: SEQ_INCREMENTAL_STATE_CLEARED = 1,
//     SEQ_NEEDS_INCREMENTAL_STATE = 2), track_descriptor = 60
//   protos/perfetto/trace/track_event/track_descriptor.proto (077b18e7): uuid = 1, name = 2,
//     process = 3, thread = 4, parent_uuid = 5
//   .../track_event/process_descriptor.proto (35ecffba): pid = 1, process_name = 6
//   .../track_event/thread_descriptor.proto (1e2582a8): pid = 1, tid = 2, thread_name = 5
//   .../track_event/track_event.proto (005055c9): category_iids = 3, debug_annotations = 4,
//     type = 9 (TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3), name_iid = 10,
//     track_uuid = 11, name = 23, flow_ids = 47 (fixed64), terminating_flow_ids = 48 (fixed64);
//     EventCategory and EventName: iid = 1, name = 2
//   .../track_event/debug_annotation.proto (0c460ef3): name_iid = 1, bool_value = 2,
//     uint_value = 3, int_value = 4, double_value = 5, string_value = 6; DebugAnnotationName:
//     iid = 1, name = 2
//   protos/perfetto/trace/interned_data/interned_data.proto (d3151b19): event_categories = 1,
//     event_names = 2, debug_annotation_names = 3
constexpr const char* kPerfettoSubset = R"(syntax = "proto2";
package perfetto.protos;
message Trace { repeated TracePacket packet = 1; }
message TracePacket {
  optional uint64 timestamp = 8;
  oneof data {
    TrackEvent track_event = 11;
    TrackDescriptor track_descriptor = 60;
  }
  oneof optional_trusted_packet_sequence_id { uint32 trusted_packet_sequence_id = 10; }
  optional InternedData interned_data = 12;
  enum SequenceFlags {
    SEQ_UNSPECIFIED = 0;
    SEQ_INCREMENTAL_STATE_CLEARED = 1;
    SEQ_NEEDS_INCREMENTAL_STATE = 2;
  }
  optional uint32 sequence_flags = 13;
}
message TrackDescriptor {
  optional uint64 uuid = 1;
  optional uint64 parent_uuid = 5;
  optional string name = 2;
  optional ProcessDescriptor process = 3;
  optional ThreadDescriptor thread = 4;
}
message ProcessDescriptor {
  optional int32 pid = 1;
  optional string process_name = 6;
}
message ThreadDescriptor {
  optional int32 pid = 1;
  optional int32 tid = 2;
  optional string thread_name = 5;
}
message TrackEvent {
  repeated uint64 category_iids = 3;
  oneof name_field {
    uint64 name_iid = 10;
    string name = 23;
  }
  enum Type {
    TYPE_UNSPECIFIED = 0;
    TYPE_SLICE_BEGIN = 1;
    TYPE_SLICE_END = 2;
    TYPE_INSTANT = 3;
    TYPE_COUNTER = 4;
  }
  optional Type type = 9;
  optional uint64 track_uuid = 11;
  repeated fixed64 flow_ids = 47;
  repeated fixed64 terminating_flow_ids = 48;
  repeated DebugAnnotation debug_annotations = 4;
}
message EventCategory {
  optional uint64 iid = 1;
  optional string name = 2;
}
message EventName {
  optional uint64 iid = 1;
  optional string name = 2;
}
message DebugAnnotation {
  oneof name_field {
    uint64 name_iid = 1;
    string name = 10;
  }
  oneof value {
    bool bool_value = 2;
    uint64 uint_value = 3;
    int64 int_value = 4;
    double double_value = 5;
    string string_value = 6;
  }
}
message DebugAnnotationName {
  optional uint64 iid = 1;
  optional string name = 2;
}
message InternedData {
  repeated EventCategory event_categories = 1;
  repeated EventName event_names = 2;
  repeated DebugAnnotationName debug_annotation_names = 3;
}
)";

// Output of `command` (stdout and stderr) and its exit status.
std::pair<std::string, int> Shell(const std::string& command) {
  std::string out;
  std::FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {"", -1};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {out, status};
}

TEST_F(PerfettoProtoTest, ProtocDecodesItWithPerfettosFieldsAndNothingUnknown) {
  if (Shell("command -v protoc").second != 0) {
    GTEST_SKIP() << "protoc is not installed (scripts/setup --tests installs protobuf-compiler)";
  }
  const fs::path trace = Export();
  const auto [raw, raw_status] = Shell("protoc --decode_raw < " + trace.string());
  EXPECT_EQ(raw_status, 0) << raw;

  std::ofstream(dir_.path() / "perfetto_subset.proto") << kPerfettoSubset;
  const auto [text, status] =
      Shell("protoc --proto_path=" + dir_.path().string() +
            " --decode=perfetto.protos.Trace perfetto_subset.proto < " + trace.string());
  ASSERT_EQ(status, 0) << text;
  // protoc prints a field it cannot place by its number ("47: 0x...").
  EXPECT_FALSE(std::regex_search(text, std::regex(R"(^\s*[0-9]+\s*[:{])", std::regex::multiline)))
      << text;
  for (const char* want :
       {"trusted_packet_sequence_id: 1", "sequence_flags: 1", "sequence_flags: 2",
        "process_name: \"GPU 0: NVIDIA H100 80GB HBM3\"", "thread_name: \"stream 0x10 (pid 100)\"",
        "type: TYPE_SLICE_BEGIN", "type: TYPE_SLICE_END", "type: TYPE_INSTANT",
        "timestamp: 1700000000000005000", "timestamp: 1700000000000007500",
        "terminating_flow_ids: 1", "flow_ids: 1", "name: \"gemm()\"",
        "string_value: \"registers\"", "uint_value: 2500", "double_value: 0.5",
        "name: \"crash SIGSEGV\"", "name: \"stall\""}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text.substr(0, 4000);
  }
}

}  // namespace
}  // namespace cuflight::trace
