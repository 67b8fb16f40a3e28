// The validator's expected-order fast path (schema/src/validator_fast_path.h) against its general
// path and against the reference decoder (tests/support/reference_decoder.h): the encoder's kernel
// and kernel_time lines of every shape are accepted by the fast path with exactly the LineInfo the
// general path gives them; any other line (every other type among them) is left to the general
// path, whose verdict is the reference's.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bench_events.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/validator.h"
#include "h100_device.h"
#include "reference_decoder.h"
#include "sample_events.h"
#include "validator_internal.h"

namespace cuflight::schema {
namespace {

using testing::EncodeLine;

std::string Printable(std::string_view line) {
  std::string out;
  for (const char c : line.substr(0, 300)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string WithoutNewline(std::string line) {
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

// `line` with the first `from` replaced by `to`; fails the test when `from` is not there.
std::string Replace(std::string line, std::string_view from, std::string_view to) {
  const size_t at = line.find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in " << Printable(line);
  if (at != std::string::npos) line.replace(at, from.size(), to);
  return line;
}

enum class Path { kFast, kGeneral };

const char* PathName(Path path) { return path == Path::kFast ? "fast" : "general"; }

// The same view: the same bytes of the same line.
bool SameView(std::string_view a, std::string_view b) {
  return a.data() == b.data() && a.size() == b.size();
}

// Runs the fast path, the general path, Validate and the reference decoder on `line`. Checks that a
// line the fast path accepts is accepted by the general path with the same LineInfo, and that
// Validate gives the reference's Reason and the general path's. Returns the path Validate takes.
Path Check(std::string_view line) {
  LineInfo fast;
  const bool accepted = internal::ValidateFastPath(line, &fast);
  LineInfo general;
  ValidateError general_error;
  const Reason general_reason = internal::ValidateGeneralPath(line, &general, &general_error);
  LineInfo info;
  ValidateError error;
  const Reason reason = Validate(line, &info, &error);
  const DecodeResult reference = test_support::ReferenceDecode(line);
  EXPECT_EQ(ReasonName(reason), ReasonName(reference.reason))
      << Printable(line) << "\nreference: " << reference.message
      << "\nValidate: " << error.message();
  EXPECT_EQ(ReasonName(reason), ReasonName(general_reason)) << Printable(line);
  if (reason != Reason::kOk) {
    EXPECT_EQ(error.message(), general_error.message());
  }
  if (!accepted) return Path::kGeneral;

  EXPECT_EQ(ReasonName(general_reason), ReasonName(Reason::kOk))
      << "the fast path accepted a line the general path rejects (" << general_error.message()
      << "): " << Printable(line);
  EXPECT_TRUE(SameView(fast.line, general.line));
  EXPECT_EQ(fast.type_known, general.type_known);
  EXPECT_EQ(fast.type, general.type);
  EXPECT_EQ(fast.header_valid, general.header_valid);
  EXPECT_EQ(fast.header, general.header);
  EXPECT_EQ(fast.type_text, general.type_text);
  if (reference.ok()) {
    EXPECT_EQ(fast.header, *reference.header);
  }
  // The facts (the members the collector acts on) are the same from both paths.
  EXPECT_EQ(fast.fact_present, general.fact_present) << Printable(line);
  EXPECT_EQ(fast.fact_escaped, general.fact_escaped) << Printable(line);
  for (int f = 0; f < kFactCount; ++f) {
    const auto fact = static_cast<Fact>(f);
    if (!fast.Has(fact) || !general.Has(fact)) continue;
    EXPECT_TRUE(SameView(fast.Raw(fact), general.Raw(fact))) << kFactNames[f];
    // The integer facts: a number (not the occupancy, a fraction); a string's or a boolean's
    // (timing_window) value is unspecified (LineInfo::fact_value).
    const char first = fast.Raw(fact).front();
    if ((first == '-' || (first >= '0' && first <= '9')) && fact != Fact::occupancy) {
      EXPECT_EQ(fast.Uint(fact), general.Uint(fact)) << kFactNames[f] << ": " << fast.Raw(fact);
    }
  }
  return Path::kFast;
}

struct Case {
  std::string line;
  Reason expected;
  Path path;
};

void ExpectCases(const std::vector<Case>& cases) {
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Path path = Check(c.line);
    EXPECT_STREQ(PathName(path), PathName(c.path)) << "case " << i << ": " << Printable(c.line);
    EXPECT_EQ(ReasonName(Validate(c.line, nullptr, nullptr)), ReasonName(c.expected))
        << Printable(c.line);
  }
}

// ---------------------------------------------------------------------------------------------
// Events in the shapes the injector and the collector write, with strings that need no escape.

Header MakeHeader(uint64_t seq) { return {1'732'000'000'123'456'789, 31'337, seq}; }

// A CUTLASS GEMM launch on an H100: the benchmarks' event (bench/bench_events.h).
OwnedKernelEvent PlainKernel() {
  OwnedKernelEvent k = bench::RealisticKernel<Owned>();
  k.header = MakeHeader(1'048'576);
  return k;
}

OwnedKernelTimeEvent PlainKernelTime() {
  OwnedKernelTimeEvent t;
  t.header = MakeHeader(1'048'577);
  t.correlation_id = 734'211;
  t.device = 3;
  t.context = 0x55d1'c0a3'b2e0;
  t.stream = 0x55d1'c0f4'1230;
  t.start_ns = 1'732'000'000'200'000'000;
  t.end_ns = 1'732'000'000'200'512'345;
  t.duration_ns = 512'345;
  return t;
}

OwnedDeviceEvent PlainDevice() {
  OwnedDeviceEvent d;
  d.header = MakeHeader(2);
  d.device = 0;
  test_support::SetH100(&d);
  return d;
}

OwnedApiErrorEvent PlainApiError() {
  OwnedApiErrorEvent e;
  e.header = MakeHeader(9);
  e.api = "cuLaunchKernel";
  e.code = 1;
  e.error_name = "CUDA_ERROR_INVALID_VALUE";
  e.message = "invalid argument";
  e.device = 0;
  e.context = 0x55d1'c0a3'b2e0;
  e.stream = 0;
  e.last_correlation_ids = {734'209, 734'210, 734'211};
  return e;
}

OwnedStatsEvent PlainStats() {
  OwnedStatsEvent s;
  s.header = MakeHeader(5000);
  s.emitted = 4990;
  s.dropped = 9;
  s.ring_capacity = 65536;
  s.interval_ns = 1'000'000'000;
  s.launches = 5100;
  s.filtered = 107;
  s.dropped_ring_full = 3;
  s.dropped_disconnected = 0;
  s.dropped_backpressure = 6;
  s.ring_high_water = 812;
  s.cpu_ns = 12'345'678;
  s.timing_dropped = 21;
  return s;
}

OwnedProcessStartEvent PlainProcessStart() {
  OwnedProcessStartEvent p;
  p.header = MakeHeader(0);
  p.exe = "/usr/bin/python3.11";
  p.argv = {"python3", "train.py", "--epochs=3"};
  p.hostname = "gpu-node-17";
  p.start_ns = 1'731'999'999'000'000'000;
  p.cuflight_version = "0.1.0";
  p.cuda_driver_version = 12040;
  p.cupti_version = 22;
  p.ppid = 4242;
  p.uid = 1000;
  p.config = {{"sample", "1"}, {"filter", "gemm"}};
  return p;
}

OwnedProcessEndEvent PlainProcessEnd() {
  OwnedProcessEndEvent e;
  e.header = MakeHeader(5001);
  e.exit_code = 0;
  e.emitted = 5001;
  e.dropped = 9;
  e.launches = 5100;
  e.filtered = 107;
  e.dropped_ring_full = 3;
  e.dropped_disconnected = 0;
  e.dropped_backpressure = 6;
  e.timing_dropped = 21;
  return e;
}

OwnedProcessCrashEvent PlainProcessCrash() {
  OwnedProcessCrashEvent e;
  e.header = MakeHeader(4000);
  e.signal = 11;
  e.signal_name = "SIGSEGV";
  e.code = 1;
  e.addr = 0x7f00'dead'beef;
  e.tid = 31340;
  e.app_handler = false;
  e.emitted = 3999;
  e.dropped = 0;
  e.launches = 4100;
  e.filtered = 0;
  e.dropped_ring_full = 0;
  e.dropped_disconnected = 0;
  e.dropped_backpressure = 0;
  e.timing_dropped = 0;
  return e;
}

OwnedProcessLostEvent PlainProcessLost() {
  OwnedProcessLostEvent e;
  e.header = MakeHeader(77);
  e.last_seq = 76;
  e.reason = LostReason::kDisconnected;
  e.events_stored = 70;
  e.events_lost = 7;
  return e;
}

// A stall: two streams, the first with a launch queued behind the one it waits on.
OwnedStallEvent PlainStall() {
  OwnedStallEvent e;
  e.header = MakeHeader(90);
  e.state = StallState::kStalled;
  e.stall_ms = 10000;
  e.stalled_ms = 12034;
  e.completed = 0;
  e.streams_stalled = 2;
  const auto launch = [](uint64_t id, const char* name, const char* demangled, Dim3 grid,
                         Dim3 block, double occupancy, int64_t age_ms) {
    OwnedStallLaunch l;
    l.correlation_id = id;
    l.name = name;
    l.demangled = demangled;
    l.grid = grid;
    l.block = block;
    l.occupancy = occupancy;
    l.age_ms = age_ms;
    return l;
  };
  const auto stream = [](int32_t device, uint64_t context, uint64_t id, int64_t waiting_ms,
                         int64_t unfinished, std::vector<OwnedStallLaunch> launches) {
    OwnedStallStream s;
    s.device = device;
    s.context = context;
    s.stream = id;
    s.waiting_ms = waiting_ms;
    s.unfinished = unfinished;
    s.launches = std::move(launches);
    return s;
  };
  const OwnedStallLaunch spin =
      launch(991, "_Z4spinPVi", "spin(int volatile*)", {1, 1, 1}, {32, 1, 1}, 0.015625, 12034);
  const OwnedStallLaunch queued =
      launch(992, "_Z6kernelPfi", "kernel(float*, int)", {264, 8, 1}, {256, 1, 1}, 0.375, 12001);
  e.streams.push_back(stream(1, 3, 14, 12034, 2, {spin, queued}));
  const OwnedStallLaunch waiting =
      launch(993, "_Z6reducePf", "reduce(float*)", {1, 1, 1}, {1024, 1, 1}, 1, 10500);
  e.streams.push_back(stream(0, 2, 7, 10500, 1, {waiting}));
  return e;
}

// Every type, with every optional shape the encoder writes.
std::vector<OwnedEvent> PlainEvents() {
  std::vector<OwnedEvent> events;
  OwnedKernelEvent k = PlainKernel();
  events.emplace_back(k);
  k.cooperative = true;
  k.graph_id = 7;
  k.graph_node_id = 0x7f00'1234'0000;
  events.emplace_back(k);
  k.cluster = Dim3{2, 1, 1};
  k.occupancy.has_cluster = true;
  k.occupancy.cluster_occupancy = 0.5;
  k.occupancy.limiting_resource = Resource::kCluster;
  k.occupancy.limiting_resources = 0x3F;  // all six
  events.emplace_back(k);
  k.occupancy.has_cluster = false;  // cluster without cluster_occupancy
  k.occupancy.limiting_resources = 0;
  k.occupancy.regs_for_next_block = -1;  // null
  k.occupancy.smem_for_next_block = -1;
  k.graph_id.reset();
  k.graph_node_id.reset();
  events.emplace_back(k);
  k = PlainKernel();
  k.carveout = 100;
  k.grid = {4'294'967'295, 65535, 65535};
  k.tid = 2'147'483'647;
  k.device = 0;
  k.context = 9'999'999'999'999'999'999u;  // 19 digits
  k.occupancy.occupancy = 0;
  k.occupancy.waves = 0;
  k.occupancy.tail_utilization = 1;
  k.name = "caf\xC3\xA9_\xE6\x97\xA5\xE6\x9C\xAC_\xF0\x9F\x98\x80";  // UTF-8, no escape
  k.demangled = "";
  events.emplace_back(k);
  for (int r = 0; r < kResourceCount; ++r) {
    k.occupancy.limiting_resource = static_cast<Resource>(r);
    k.occupancy.limiting_resources = MaskOf(static_cast<Resource>(r));
    k.occupancy.waves = 123456.75;
    events.emplace_back(k);
  }
  k.header.ts_ns = INT64_MAX;
  k.occupancy.waves = 3.0 / 132;
  events.emplace_back(k);

  // Interned (config_expander.h): the plain kernel's configuration and launches of it.
  {
    OwnedKernelConfigEvent config;
    OwnedLaunchEvent launch;
    Split(PlainKernel(), 5, &config, &launch);
    events.emplace_back(config);
    events.emplace_back(launch);
    launch.graph_id = 7;
    launch.graph_node_id = 0x7f00'1234'0000;
    launch.recovered = true;
    launch.timing_window = false;
    launch.waves = 3.0 / 132;
    launch.config = 9'999'999'999'999'999'999u;
    events.emplace_back(launch);
  }

  events.emplace_back(PlainKernelTime());
  OwnedKernelTimeEvent t = PlainKernelTime();
  t.header = {0, 0, 0};
  t.correlation_id = 0;
  t.duration_ns = 0;
  events.emplace_back(t);
  t = PlainKernelTime();  // a kernel node of a CUDA graph
  t.graph_id = 7;
  t.graph_node_id = 0x7f00'1234'0000;
  events.emplace_back(t);
  t.graph_id = 9'999'999'999'999'999'999u;  // 19 digits: the fast path's longest integer
  t.graph_node_id = 0;
  events.emplace_back(t);

  events.emplace_back(PlainDevice());

  OwnedApiErrorEvent e = PlainApiError();
  events.emplace_back(e);
  e.device = -1;
  e.code = -2'147'483'647 - 1;
  e.last_correlation_ids.clear();
  events.emplace_back(e);

  events.emplace_back(PlainStats());

  OwnedProcessStartEvent p = PlainProcessStart();
  events.emplace_back(p);
  p.argv.clear();
  p.config.clear();
  p.uid = -1;  // null
  events.emplace_back(p);

  OwnedProcessEndEvent end = PlainProcessEnd();
  events.emplace_back(end);
  end.exit_code.reset();
  events.emplace_back(end);
  end.exit_code = -9;
  events.emplace_back(end);

  OwnedProcessCrashEvent crash = PlainProcessCrash();
  events.emplace_back(crash);
  crash.signal = 64;
  crash.signal_name = "SIGRTMAX";
  crash.code = -6;
  crash.addr = 0;
  crash.app_handler = true;
  events.emplace_back(crash);

  OwnedProcessLostEvent lost = PlainProcessLost();
  events.emplace_back(lost);
  lost.last_seq.reset();
  lost.reason = LostReason::kCollectorShutdown;
  events.emplace_back(lost);

  OwnedStallEvent stall = PlainStall();
  events.emplace_back(stall);
  stall.streams[1].launches.clear();  // a stream without listed launches
  events.emplace_back(stall);
  stall.streams.resize(1);
  stall.streams[0].launches.resize(1);
  stall.completed = 12;
  events.emplace_back(stall);
  OwnedStallEvent resolved;
  resolved.header = MakeHeader(91);
  resolved.state = StallState::kResolved;
  resolved.stall_ms = 10000;
  resolved.stalled_ms = 42000;
  resolved.completed = 3;
  events.emplace_back(resolved);
  return events;
}

// The high-rate types take the fast path in every shape; the others take the general path.
TEST(ValidatorFastPathTest, EncoderLinesOfEveryShapeTakeTheFastPath) {
  std::map<EventType, int> per_type;
  for (const OwnedEvent& event : PlainEvents()) {
    const std::string line = EncodeLine(event);
    const EventType type = TypeOf(event);
    ++per_type[type];
    const Path want =
        type == EventType::kKernel || type == EventType::kKernelTime || type == EventType::kLaunch
            ? Path::kFast
            : Path::kGeneral;
    EXPECT_EQ(PathName(Check(line)), PathName(want)) << Printable(line);
    // Also as the collector may see it: without the newline, or with CRLF.
    EXPECT_EQ(PathName(Check(WithoutNewline(line))), PathName(want));
    EXPECT_EQ(PathName(Check(WithoutNewline(line) + "\r\n")), PathName(want));
    LineInfo info;
    EXPECT_EQ(internal::ValidateFastPath(line, &info), want == Path::kFast) << Printable(line);
    if (want == Path::kFast) {
      EXPECT_EQ(info.type, type);
    }
  }
  EXPECT_EQ(per_type.size(), static_cast<size_t>(kEventTypeCount));
  EXPECT_GE(per_type[EventType::kKernel], 3);
}

// The schema tests' samples (hostile strings, extreme numbers, lossy values): whichever path takes
// them, the fast path agrees with the general one, and it takes some of both its types.
TEST(ValidatorFastPathTest, SampleLinesAgree) {
  std::map<EventType, int> fast_per_type;
  int general = 0;
  for (const std::string& line : testing::SampleLines()) {
    if (Check(line) == Path::kFast) {
      LineInfo info;
      internal::ValidateFastPath(line, &info);
      ++fast_per_type[info.type];
    } else {
      ++general;
    }
  }
  EXPECT_EQ(fast_per_type.size(), 3u);  // kernel, kernel_time and launch
  EXPECT_GT(general, 10);  // escapes, 20-digit integers, exponents
}

// The schema tests' mutated lines (written by nlohmann, in another member order): all go to the
// general path, which agrees with Decode.
TEST(ValidatorFastPathTest, MutatedLinesAgree) {
  for (const std::string& line : testing::MutatedLines()) {
    EXPECT_EQ(PathName(Check(line)), PathName(Path::kGeneral)) << Printable(line);
  }
}

// Byte-level damage to one plain line of every type: every prefix, and at every position the byte
// deleted, replaced by each of a set of bytes that keep or break the layout, or one inserted.
TEST(ValidatorFastPathTest, ByteMutationsAgree) {
  std::vector<std::string> lines;
  for (const OwnedEvent& event :
       {OwnedEvent(PlainKernel()), OwnedEvent(PlainKernelTime()), OwnedEvent(PlainDevice()),
        OwnedEvent(PlainApiError()), OwnedEvent(PlainStats()), OwnedEvent(PlainProcessStart()),
        OwnedEvent(PlainProcessEnd()), OwnedEvent(PlainProcessLost()),
        OwnedEvent(PlainProcessCrash()), OwnedEvent(PlainStall())}) {
    lines.push_back(EncodeLine(event));
  }
  const std::string replacements = std::string("\"\\}],0 1-.e:\x80\x01", 14) + '\0';
  const std::string insertions = "\",0 ";
  int fast = 0;
  for (const std::string& line : lines) {
    for (size_t i = 0; i <= line.size(); ++i) {
      fast += Check(std::string_view(line).substr(0, i)) == Path::kFast;
      if (i == line.size()) break;
      std::string changed = line;
      changed.erase(i, 1);
      fast += Check(changed) == Path::kFast;
      for (const char b : replacements) {
        changed = line;
        changed[i] = b;
        fast += Check(changed) == Path::kFast;
      }
      for (const char b : insertions) {
        changed = line;
        changed.insert(i, 1, b);
        fast += Check(changed) == Path::kFast;
      }
    }
  }
  EXPECT_GT(fast, 1000);  // digits replaced by digits, the newline dropped, ...
}

// Each kind of deviation from the encoder's layout or rules goes to the general path, which gives
// Decode's Reason; what stays within them stays on the fast path.
TEST(ValidatorFastPathTest, DeviationsFallBackToTheGeneralPath) {
  const std::string k = WithoutNewline(EncodeLine(PlainKernel()));
  const std::string t = WithoutNewline(EncodeLine(PlainKernelTime()));
  const auto kernel_with = [&k](std::string_view member) {
    return k.substr(0, k.size() - 1) + "," + std::string(member) + "}";
  };
  const std::string graph = WithoutNewline(EncodeLine([] {
    OwnedKernelEvent g = PlainKernel();
    g.graph_id = 7;
    g.graph_node_id = 8;
    return OwnedEvent(g);
  }()));
  const std::string graph_time = WithoutNewline(EncodeLine([] {
    OwnedKernelTimeEvent g = PlainKernelTime();
    g.graph_id = 7;
    g.graph_node_id = 8;
    return OwnedEvent(g);
  }()));
  const std::string cluster = WithoutNewline(EncodeLine([] {
    OwnedKernelEvent c = PlainKernel();
    c.cluster = Dim3{2, 1, 1};
    c.occupancy.has_cluster = true;
    c.occupancy.cluster_occupancy = 0.5;
    return OwnedEvent(c);
  }()));
  const std::string crash = WithoutNewline(EncodeLine(PlainProcessCrash()));
  const std::string stats = WithoutNewline(EncodeLine(PlainStats()));
  const std::string end = WithoutNewline(EncodeLine(PlainProcessEnd()));
  ExpectCases({
      // Layout.
      {k, Reason::kOk, Path::kFast},
      {k + " \t\r\n", Reason::kOk, Path::kFast},
      {" " + k, Reason::kOk, Path::kGeneral},
      {"\xEF\xBB\xBF" + k, Reason::kOk, Path::kGeneral},
      {Replace(k, R"("type":"kernel")", R"("type": "kernel")"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"(,"tid":)", R"(, "tid":)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("tid":31340)", R"("tid" :31340)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("grid":[264,8,1])", R"("grid":[264, 8, 1])"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"(,"best_block_size":128})", R"(,"best_block_size":128 })"), Reason::kOk,
       Path::kGeneral},
      {k + "x", Reason::kMalformedJson, Path::kGeneral},
      {k + "}", Reason::kMalformedJson, Path::kGeneral},
      {k.substr(0, k.size() - 1), Reason::kMalformedJson, Path::kGeneral},
      {Replace(k, R"("tid":31340,"device":0)", R"("device":0,"tid":31340)"), Reason::kOk,
       Path::kGeneral},
      {kernel_with(R"("extra":1)"), Reason::kOk, Path::kGeneral},
      {kernel_with(R"("tid":5)"), Reason::kOk, Path::kGeneral},  // repeated: the last counts
      {kernel_with(R"("tid":-5)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"(,"best_block_size":128)", ""), Reason::kMissingField, Path::kGeneral},
      // optional (event_fields.h): the fast path takes an optional member absent
      {Replace(k, R"(,"cooperative":false)", ""), Reason::kOk, Path::kFast},
      {Replace(t, R"(,"duration_ns":512345)", ""), Reason::kMissingField, Path::kGeneral},
      {t.substr(0, t.size() - 1) + R"(,"device":1})", Reason::kOk, Path::kGeneral},
      // Header.
      {Replace(k, R"("version":1)", R"("version":2)"), Reason::kUnsupportedVersion, Path::kGeneral},
      {Replace(k, R"("version":1)", R"("version":1.0)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("type":"kernel")", R"("type":"kernels")"), Reason::kUnknownType,
       Path::kGeneral},
      {Replace(k, R"("type":"kernel")", R"("type":"kerne\u006c")"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("ts_ns":1732000000123456789)", R"("ts_ns":9223372036854775807)"), Reason::kOk,
       Path::kFast},
      {Replace(k, R"("ts_ns":1732000000123456789)", R"("ts_ns":9223372036854775808)"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("pid":31337)", R"("pid":-31337)"), Reason::kOutOfRange, Path::kGeneral},
      // Member names.
      {Replace(k, R"("tid":)", R"("t\u0069d":)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("tid":)", R"("tie":)"), Reason::kMissingField, Path::kGeneral},
      // Integers.
      {Replace(k, R"("tid":31340)", R"("tid":2147483647)"), Reason::kOk, Path::kFast},
      {Replace(k, R"("tid":31340)", R"("tid":2147483648)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("tid":31340)", R"("tid":9999999999)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("tid":31340)", R"("tid":-1)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("tid":31340)", R"("tid":-0)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("tid":31340)", R"("tid":031340)"), Reason::kMalformedJson, Path::kGeneral},
      {Replace(k, R"("tid":31340)", R"("tid":31340.0)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("tid":31340)", R"("tid":3134e1)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("tid":31340)", R"("tid":"31340")"), Reason::kWrongType, Path::kGeneral},
      {Replace(k, R"("tid":31340)", R"("tid":null)"), Reason::kWrongType, Path::kGeneral},
      {Replace(k, R"("context":94359368479456)", R"("context":18446744073709551615)"), Reason::kOk,
       Path::kGeneral},  // 20 digits
      {Replace(k, R"("context":94359368479456)", R"("context":18446744073709551616)"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("context":94359368479456)", R"("context":123456789012345678901234)"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("carveout":-1)", R"("carveout":100)"), Reason::kOk, Path::kFast},
      {Replace(k, R"("carveout":-1)", R"("carveout":101)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("carveout":-1)", R"("carveout":-2)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("carveout":-1)", R"("carveout":-)"), Reason::kMalformedJson, Path::kGeneral},
      {Replace(k, R"("grid":[264,8,1])", R"("grid":[4294967295,0,1])"), Reason::kOk, Path::kFast},
      {Replace(k, R"("grid":[264,8,1])", R"("grid":[4294967296,8,1])"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(k, R"("grid":[264,8,1])", R"("grid":[264,8])"), Reason::kWrongType, Path::kGeneral},
      {Replace(k, R"("grid":[264,8,1])", R"("grid":[264,8,1,1])"), Reason::kWrongType,
       Path::kGeneral},
      {Replace(k, R"("grid":[264,8,1])", R"("grid":[264,8,-1])"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(k, R"("regs_for_next_block":128)", R"("regs_for_next_block":null)"), Reason::kOk,
       Path::kFast},
      {Replace(k, R"("regs_for_next_block":128)", R"("regs_for_next_block":nul)"),
       Reason::kMalformedJson, Path::kGeneral},
      {Replace(k, R"("regs_for_next_block":128)", R"("regs_for_next_block":-1)"),
       Reason::kOutOfRange, Path::kGeneral},
      // Other numbers.
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":1)"), Reason::kOk, Path::kFast},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":0)"), Reason::kOk, Path::kFast},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":0.99999999999999999999)"), Reason::kOk,
       Path::kFast},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":1.0)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":1.5)"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":0.125e1)"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":1.25e-1)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":-0.125)"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":0.)"), Reason::kMalformedJson,
       Path::kGeneral},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":01)"), Reason::kMalformedJson,
       Path::kGeneral},
      {Replace(k, R"("occupancy":0.125)", R"("occupancy":"0.125")"), Reason::kWrongType,
       Path::kGeneral},
      {Replace(k, R"("waves":14.545454545454545)", R"("waves":1e3)"), Reason::kOk, Path::kGeneral},
      {Replace(k, R"("waves":14.545454545454545)", R"("waves":1000)"), Reason::kOk, Path::kFast},
      {Replace(k, R"("waves":14.545454545454545)", R"("waves":-1)"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(k, R"("waves":14.545454545454545)", R"("waves":014.5)"), Reason::kMalformedJson,
       Path::kGeneral},
      {Replace(k, R"("cooperative":false)", R"("cooperative":true)"), Reason::kOk, Path::kFast},
      {Replace(k, R"("cooperative":false)", R"("cooperative":0)"), Reason::kWrongType,
       Path::kGeneral},
      // Strings and enums.
      {Replace(k, R"("api":"cuLaunchKernel")", R"("api":"cuLaunch\u004bernel")"), Reason::kOk,
       Path::kGeneral},
      {Replace(k, R"("api":"cuLaunchKernel")", R"("api":"cu\"Launch")"), Reason::kOk,
       Path::kGeneral},
      {Replace(k, R"("api":"cuLaunchKernel")", "\"api\":\"cuLaunch\tKernel\""),
       Reason::kMalformedJson, Path::kGeneral},
      {Replace(k, R"("api":"cuLaunchKernel")", "\"api\":\"cuLaunch\xC3\xA9\""), Reason::kOk,
       Path::kFast},
      {Replace(k, R"("api":"cuLaunchKernel")", "\"api\":\"cuLaunch\xC3\""), Reason::kMalformedJson,
       Path::kGeneral},
      {Replace(k, R"("api":"cuLaunchKernel")", "\"api\":\"cuLaunch\xED\xA0\x80\""),
       Reason::kMalformedJson, Path::kGeneral},  // a surrogate in UTF-8
      {Replace(k, R"("api":"cuLaunchKernel")", R"("api":7)"), Reason::kWrongType, Path::kGeneral},
      {Replace(k, R"("limiting_resource":"registers")", R"("limiting_resource":"register")"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("limiting_resource":"registers")", R"("limiting_resource":"shared_mem")"),
       Reason::kOk, Path::kFast},
      {Replace(k, R"("limiting_resources":["registers"])", R"("limiting_resources":[])"),
       Reason::kOk, Path::kFast},
      {Replace(k, R"("limiting_resources":["registers"])",
               R"("limiting_resources":["registers","registers"])"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("limiting_resources":["registers"])",
               R"("limiting_resources":["registers","bogus"])"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(k, R"("limiting_resources":["registers"])",
               R"("limiting_resources":["registers",])"),
       Reason::kMalformedJson, Path::kGeneral},
      {Replace(crash, R"("signal":11)", R"("signal":0)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(crash, R"("signal":11)", R"("signal":65)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(crash, R"("signal":11)", R"("signal":64)"), Reason::kOk, Path::kGeneral},
      {Replace(crash, R"("signal":11)", R"("signal":1)"), Reason::kOk, Path::kGeneral},
      // timing_dropped: optional (lines of earlier encoders lack it). stats, process_end and
      // process_crash lines take the general path, in any order.
      {stats, Reason::kOk, Path::kGeneral},
      {Replace(stats, R"(,"timing_dropped":21)", ""), Reason::kOk, Path::kGeneral},
      {Replace(end, R"(,"timing_dropped":21)", ""), Reason::kOk, Path::kGeneral},
      {Replace(crash, R"(,"timing_dropped":0)", ""), Reason::kOk, Path::kGeneral},
      {Replace(stats, R"("timing_dropped":21)", R"("timing_dropped":18446744073709551615)"),
       Reason::kOk, Path::kGeneral},  // 20 digits
      {Replace(end, R"("timing_dropped":21)", R"("timing_dropped":9999999999999999999)"),
       Reason::kOk, Path::kGeneral},
      {Replace(end, R"("timing_dropped":21)", R"("timing_dropped":18446744073709551616)"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(end, R"("timing_dropped":21)", R"("timing_dropped":-1)"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(end, R"("timing_dropped":21)", R"("timing_dropped":null)"), Reason::kWrongType,
       Path::kGeneral},
      {Replace(end, R"("timing_dropped":21)", R"("timing_dropped":2.0)"), Reason::kOk,
       Path::kGeneral},
      {Replace(end, R"("timing_dropped":21)", R"("timing_dropped":)"), Reason::kMalformedJson,
       Path::kGeneral},
      {Replace(Replace(stats, R"(,"timing_dropped":21)", ""), R"("cpu_ns":12345678)",
               R"("cpu_ns":12345678,"timing_dropped":21)"),
       Reason::kOk, Path::kGeneral},  // after cpu_ns
      {Replace(Replace(end, R"(,"timing_dropped":21)", ""), R"(,"launches":)",
               R"(,"timing_dropped":21,"launches":)"),
       Reason::kOk, Path::kGeneral},
      {Replace(end, R"(,"timing_dropped":21)", R"(,"timing_dropped":21,"timing_dropped":3)"),
       Reason::kOk, Path::kGeneral},  // repeated: the last counts
      // dropped_backpressure: optional (lines of earlier encoders lack it, with or without
      // timing_dropped).
      {Replace(stats, R"(,"dropped_backpressure":6)", ""), Reason::kOk, Path::kGeneral},
      {Replace(end, R"(,"dropped_backpressure":6)", ""), Reason::kOk, Path::kGeneral},
      {Replace(crash, R"(,"dropped_backpressure":0)", ""), Reason::kOk, Path::kGeneral},
      {Replace(Replace(end, R"(,"dropped_backpressure":6)", ""), R"(,"timing_dropped":21)", ""),
       Reason::kOk, Path::kGeneral},
      {Replace(end, R"("dropped_backpressure":6)", R"("dropped_backpressure":9999999999999999999)"),
       Reason::kOk, Path::kGeneral},
      {Replace(end, R"("dropped_backpressure":6)",
               R"("dropped_backpressure":18446744073709551615)"),
       Reason::kOk, Path::kGeneral},  // 20 digits
      {Replace(end, R"("dropped_backpressure":6)",
               R"("dropped_backpressure":18446744073709551616)"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(stats, R"("dropped_backpressure":6)", R"("dropped_backpressure":-6)"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(crash, R"("dropped_backpressure":0)", R"("dropped_backpressure":"0")"),
       Reason::kWrongType, Path::kGeneral},
      {Replace(Replace(end, R"(,"dropped_backpressure":6)", ""), R"("timing_dropped":21)",
               R"("timing_dropped":21,"dropped_backpressure":6)"),
       Reason::kOk, Path::kGeneral},  // after timing_dropped
      // Members that come together.
      {graph, Reason::kOk, Path::kFast},
      {Replace(graph, R"(,"graph_node_id":8)", ""), Reason::kMissingField, Path::kGeneral},
      {Replace(graph, R"(,"graph_id":7)", ""), Reason::kMissingField, Path::kGeneral},
      {t, Reason::kOk, Path::kFast},  // a kernel_time without the graph ids (not a graph node)
      {graph_time, Reason::kOk, Path::kFast},
      {Replace(graph_time, R"(,"graph_node_id":8)", ""), Reason::kMissingField, Path::kGeneral},
      {Replace(graph_time, R"(,"graph_id":7)", ""), Reason::kMissingField, Path::kGeneral},
      {Replace(graph_time, R"("graph_node_id":8)", R"("graph_node_id":-8)"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(graph_time, R"("graph_id":7)", R"("graph_id":"7")"), Reason::kWrongType,
       Path::kGeneral},
      {Replace(graph_time, R"(,"graph_id":7,"graph_node_id":8)",
               R"(,"graph_node_id":8,"graph_id":7)"),
       Reason::kOk, Path::kGeneral},  // not the encoder's order
      {cluster, Reason::kOk, Path::kFast},
      {Replace(cluster, R"(,"cluster_occupancy":0.5)", ""), Reason::kOk, Path::kFast},
      {Replace(cluster, R"(,"cluster":[2,1,1])", ""), Reason::kMissingField, Path::kGeneral},
      {Replace(cluster, R"(,"cluster_occupancy":0.5)", R"(,"cluster_occupancy":2)"),
       Reason::kOutOfRange, Path::kGeneral},
  });
}

// The stall event's nested objects (the general path's, as every type but kernel and kernel_time):
// Decode's Reason for deviations inside a stream or a launch object, and its first fault.
TEST(ValidatorFastPathTest, StallDeviationsTakeTheGeneralPath) {
  const std::string s = WithoutNewline(EncodeLine(PlainStall()));
  ExpectCases({
      {s, Reason::kOk, Path::kGeneral},
      {Replace(s, R"("state":"stalled")", R"("state":"resolved")"), Reason::kOk, Path::kGeneral},
      {Replace(s, R"("state":"stalled")", R"("state":"hung")"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(s, R"("state":"stalled")", R"("state":1)"), Reason::kWrongType, Path::kGeneral},
      {Replace(s, R"("state":"stalled")", R"("state":"stall\u0065d")"), Reason::kOk,
       Path::kGeneral},
      {Replace(s, R"("streams":[{)", R"("streams":[ {)"), Reason::kOk, Path::kGeneral},
      {Replace(s, R"({"device":1,"context":3)", R"({"context":3,"device":1)"), Reason::kOk,
       Path::kGeneral},
      {Replace(s, R"("device":1,)", R"("device":1,"extra":[{}],)"), Reason::kOk, Path::kGeneral},
      {Replace(s, R"("device":1,)", R"("device":1,"device":-1,)"), Reason::kOutOfRange,
       Path::kGeneral},  // repeated in a nested object: the last counts there too
      {Replace(s, R"("device":1,)", R"("device":-1,"device":1,)"), Reason::kOk, Path::kGeneral},
      {Replace(s, R"("device":1,)", R"("d\u0065vice":-1,)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(s, R"("device":1,)", ""), Reason::kMissingField, Path::kGeneral},
      {Replace(s, R"("device":1,)", R"("device":2147483648,)"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(s, R"("waiting_ms":12034)", R"("waiting_ms":1.2e4)"), Reason::kOk, Path::kGeneral},
      {Replace(s, R"("unfinished":2)", R"("unfinished":"2")"), Reason::kWrongType, Path::kGeneral},
      {Replace(s, R"(,"launches":[{"correlation_id":991)", R"(,"launches":{"correlation_id":991)"),
       Reason::kMalformedJson, Path::kGeneral},
      {Replace(s, R"("streams":[)", R"("streams":[1,)"), Reason::kWrongType, Path::kGeneral},
      {Replace(s, R"("streams":[)", R"("streams":{"a":)"), Reason::kMalformedJson, Path::kGeneral},
      {Replace(s, R"("name":"_Z4spinPVi")", R"("name":"_Z4spin\u0050Vi")"), Reason::kOk,
       Path::kGeneral},
      {Replace(s, R"("name":"_Z4spinPVi")", R"("name":7)"), Reason::kWrongType, Path::kGeneral},
      {Replace(s, R"("grid":[1,1,1])", R"("grid":[1,1])"), Reason::kWrongType, Path::kGeneral},
      {Replace(s, R"("grid":[1,1,1])", R"("grid":[1,1,4294967296])"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(s, R"("occupancy":0.015625)", R"("occupancy":1.5)"), Reason::kOutOfRange,
       Path::kGeneral},
      {Replace(s, R"("occupancy":0.015625)", R"("occupancy":1)"), Reason::kOk, Path::kGeneral},
      {Replace(s, R"("age_ms":12034)", R"("age_ms":-1)"), Reason::kOutOfRange, Path::kGeneral},
      {Replace(s, R"(,"age_ms":12034)", ""), Reason::kMissingField, Path::kGeneral},
      // The first fault in Decode's order wins: the first stream before the second, a stream's
      // own members before its launches.
      {Replace(Replace(s, R"("age_ms":12034)", R"("age_ms":-1)"), R"("device":0,)",
               R"("device":"0",)"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(Replace(s, R"("age_ms":12034)", R"("age_ms":"x")"), R"("unfinished":2)",
               R"("unfinished":-2)"),
       Reason::kOutOfRange, Path::kGeneral},
      {Replace(Replace(s, R"("age_ms":12034)", R"("age_ms":"x")"), R"("unfinished":2)",
               R"("unfinished":2)"),
       Reason::kWrongType, Path::kGeneral},
  });
  LineInfo info;
  ValidateError error;
  ASSERT_EQ(Validate(Replace(s, R"("age_ms":10500)", R"("age_ms":-3)"), &info, &error),
            Reason::kOutOfRange);
  EXPECT_EQ(error.message(),
            R"(stall: streams[1]: launches[0]: field "age_ms" must be an integer in )"
            R"([0, 9223372036854775807], got -3)");
  const DecodeResult decoded = Decode(Replace(s, R"("age_ms":10500)", R"("age_ms":-3)"));
  EXPECT_EQ(decoded.message,
            R"(stall: streams[1]: launches[0]: field "age_ms" must be an integer in )"
            R"([0, 9223372036854775807], got -3)");
}

// Lines shorter than the fast path's window, and damaged ends, reach the end of the line safely
// (AddressSanitizer checks the reads): each is its own allocation of exactly its size.
TEST(ValidatorFastPathTest, ReadsNothingPastTheLine) {
  const std::string k = EncodeLine(PlainKernel());
  const std::string t = EncodeLine(PlainKernelTime());
  const std::string graph_time = EncodeLine([] {
    OwnedKernelTimeEvent g = PlainKernelTime();
    g.graph_id = 7;
    g.graph_node_id = 8;
    return OwnedEvent(g);
  }());
  const std::string stall = EncodeLine(PlainStall());
  for (const std::string* line : {&k, &t, &graph_time, &stall}) {
    for (size_t cut = 0; cut <= line->size(); ++cut) {
      const std::vector<char> exact(line->begin(), line->begin() + static_cast<ptrdiff_t>(cut));
      const std::string_view view(exact.data(), exact.size());
      Check(view);
    }
  }
}

}  // namespace
}  // namespace cuflight::schema
