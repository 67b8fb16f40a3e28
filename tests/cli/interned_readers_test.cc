// Every reader on one recording in both forms (docs/protocol.md, "Interned configurations"): the
// same events written as whole `kernel` lines, and written interned (a kernel_config describing
// each configuration once, a short `launch` per launch, the descriptions repeated at the start of
// every log file before their first launch there, as the collector writes them). Each reader
// must give the same answers on both:
//  - `cuflight report` (text, JSON, CSV, HTML), `cuflight export --perfetto` (JSON and protobuf),
//    `cuflight tail --from-start` (text and --json), `cuflight export --jsonl` (the interned
//    logs give byte for byte the whole lines);
//  - the OTLP exporter (exporter/, with the tests' receiver), record for record;
//  - the collector's /metrics, both forms sent through its socket;
//  - the log reader on spill files (the injector's SpillWriter), also rotated with the
//    descriptions repeated in each file;
//  - the OTLP exporter restarted with its cursor between a description and its launches.
// Where answers legitimately differ (bytes and line counters, the interning counters) the test
// says so where it leaves them out.
//
// The recording: three processes. pid 4101 on two devices (gemm and attention kernels on
// device 0, a gemm on device 1, a 3-node graph replayed twice in each file, kernel_time for most
// launches, an api_error, a stats event), its stream rotated once so that its configurations
// are used in both files; pid 4102 (two kernels, a stall and its resolution, a crash); pid 4103
// (launches without timing, exit 1). The whole form is the expansion of the interned one,
// schema::Expand(schema::Split(k)), seq for seq: a description's seq is a gap in the whole form.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "app.h"
#include "collector_process.h"
#include "collector_test_util.h"
#include "cuflight/exporter/exporter.h"
#include "cuflight/metrics/metrics.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/log_layout.h"
#include "cuflight/spill/spill_writer.h"
#include "device_query.h"
#include "otlp_receiver.h"
#include "report_test_events.h"

namespace cuflight::cli {
namespace {

namespace fs = std::filesystem;
using collector::testing::ChildProcess;
using collector::testing::RawClient;
using collector::testing::RunningCollector;
using collector::testing::TempDir;
using collector::testing::WaitUntil;
using exporter::testing::OtlpReceiver;
using exporter::testing::ReceivedRecord;
using report::testing::Line;

constexpr std::chrono::seconds kDeadline{30};
constexpr int64_t kStartNs = 1'795'900'000'000'000'000;  // 2026-11-29

// ---- the recording ----

// One producer's events in the order sent, as the interning producer numbers them: a
// configuration's description takes the seq before its first launch's.
class Producer {
 public:
  Producer(int32_t pid, std::string exe, int64_t start_ns)
      : pid_(pid), exe_(std::move(exe)), start_ns_(start_ns), clock_(start_ns) {
    schema::OwnedProcessStartEvent s = report::testing::Start(pid, 0, start_ns, exe_);
    s.instance_id = 0x1000 + static_cast<uint64_t>(pid);
    host_ = s.hostname;
    Add(schema::OwnedEvent(std::move(s)));
  }

  // Any event but a kernel: its pid, seq and time set here.
  void Add(schema::OwnedEvent event) {
    std::visit(
        [&](auto& e) {
          e.header.pid = pid_;
          e.header.seq = next_seq_++;
          e.header.ts_ns = clock_ += 1'000'000;
        },
        event);
    items_.push_back({std::move(event), 0, file_});
  }
  // A launch: described first when its configuration is new to the process.
  void Launch(schema::OwnedKernelEvent k) {
    k.header.pid = pid_;
    k.header.ts_ns = clock_ += 1'000'000;
    schema::OwnedKernelConfigEvent config;
    schema::OwnedLaunchEvent launch;
    schema::Split(k, 0, &config, &launch);
    config.header = {};
    const std::string key = Line(schema::OwnedEvent(config));
    auto [it, added] = ids_.try_emplace(key, ids_.size() + 1);
    if (added) {
      config.config = it->second;
      config.header = {k.header.ts_ns, pid_, next_seq_++};
      descriptions_[it->second] = config;
    }
    k.header.seq = next_seq_++;
    schema::Split(k, it->second, &config, &launch);
    items_.push_back({schema::OwnedEvent(std::move(launch)), it->second, file_});
  }
  // The collector rotates the process's log: what follows is in a new file.
  void Rotate() { ++file_; }
  uint64_t Correlation() { return ++correlation_; }
  int32_t pid() const { return pid_; }

  // The log files: relative path -> content, whole or interned.
  std::map<std::string, std::string> Files(bool interned) const {
    const std::string date = schema::StartDate(start_ns_);
    const std::string base =
        schema::StreamBaseName(host_, exe_, pid_, start_ns_, 0x1000 + pid_, "u1000");
    std::map<std::string, std::string> out;
    std::set<uint64_t> described;
    for (int file = 0; file <= file_; ++file) {
      const std::string name = file < file_ ? schema::SegmentFileName(base, file + 1, false)
                                            : schema::ActiveFileName(base);
      std::string& text = out[date + "/" + name];
      described.clear();
      for (const Item& item : items_) {
        if (item.file != file) continue;
        if (item.config != 0 && interned && described.insert(item.config).second) {
          text += Line(schema::OwnedEvent(descriptions_.at(item.config)));
        }
        text += interned || item.config == 0 ? Line(item.event) : Line(Whole(item));
      }
    }
    return out;
  }
  // The lines as sent on one connection: interned, each description once before its first
  // launch; whole, with `renumber` every seq renumbered without the descriptions' gaps (the seqs
  // the library numbers when it does not intern; a collector counts a gap as lost events).
  std::vector<std::string> Wire(bool interned, bool renumber = true) const {
    std::vector<std::string> out;
    std::set<uint64_t> described;
    uint64_t seq = 0;
    for (const Item& item : items_) {
      if (interned) {
        if (item.config != 0 && described.insert(item.config).second) {
          out.push_back(Line(schema::OwnedEvent(descriptions_.at(item.config))));
        }
        out.push_back(Line(item.event));
        continue;
      }
      schema::OwnedEvent e = item.config == 0 ? item.event : Whole(item);
      if (renumber) std::visit([&](auto& ev) { ev.header.seq = seq++; }, e);
      out.push_back(Line(e));
    }
    return out;
  }
  // The spill-file identity of the process.
  spill::SpillWriterOptions SpillOptions(const std::string& dir) const {
    spill::SpillWriterOptions o;
    o.dir = dir;
    o.host = host_;
    o.exe = exe_;
    o.pid = pid_;
    o.start_ns = start_ns_;
    o.rotate_bytes = 0;
    return o;
  }

 private:
  struct Item {
    schema::OwnedEvent event;  // a launch when config != 0
    uint64_t config = 0;
    int file = 0;
  };
  schema::OwnedEvent Whole(const Item& item) const {
    schema::OwnedKernelEvent k;
    schema::Expand(descriptions_.at(item.config), std::get<schema::OwnedLaunchEvent>(item.event),
                   &k);
    return schema::OwnedEvent(std::move(k));
  }

  int32_t pid_;
  std::string exe_;
  std::string host_;
  int64_t start_ns_;
  int64_t clock_;
  uint64_t next_seq_ = 0;
  uint64_t correlation_ = 0;
  int file_ = 0;
  std::vector<Item> items_;
  std::map<std::string, uint64_t> ids_;
  std::map<uint64_t, schema::OwnedKernelConfigEvent> descriptions_;
};

report::testing::KernelSpec Spec(std::string name, std::string demangled, int32_t device,
                                 uint64_t stream, int32_t regs, schema::Resource limiter,
                                 int32_t blocks) {
  report::testing::KernelSpec s;
  s.name = std::move(name);
  s.demangled = std::move(demangled);
  s.device = device;
  s.stream = stream;
  s.regs = regs;
  s.dyn_smem = limiter == schema::Resource::kSharedMem ? 98304 : 0;
  s.occupancy = report::testing::Fields(blocks, 8, 64, limiter);
  s.occupancy.waves = 1.25;
  s.occupancy.tail_utilization = 0.25;
  return s;
}

schema::OwnedKernelEvent KernelOf(Producer& p, const report::testing::KernelSpec& spec,
                                  uint64_t correlation, schema::Dim3 grid) {
  report::testing::KernelSpec s = spec;
  s.grid = grid;
  return report::testing::Kernel(p.pid(), 0, 0, correlation, s);
}

// A kernel and (unless `untimed`) its kernel_time of `ns` on its stream.
void Timed(Producer& p, const report::testing::KernelSpec& spec, schema::Dim3 grid, uint64_t ns,
           bool untimed = false) {
  const uint64_t corr = p.Correlation();
  p.Launch(KernelOf(p, spec, corr, grid));
  if (untimed) return;
  report::testing::TimeSpec t;
  t.device = spec.device;
  t.stream = spec.stream;
  t.start_ns = 5'000'000 + corr * 100'000;
  p.Add(schema::OwnedEvent(report::testing::KernelTime(p.pid(), 0, corr, ns, t)));
}

void GraphReplay(Producer& p, int replay) {
  const uint64_t corr = p.Correlation();
  static const char* kNodes[3] = {"_Z6node_av", "_Z6node_bv", "_Z6node_cv"};
  static const char* kDemangled[3] = {"node_a()", "node_b()", "node_c()"};
  for (int n = 0; n < 3; ++n) {
    report::testing::KernelSpec s =
        Spec(kNodes[n], kDemangled[n], 0, 0x20, 40 + 8 * n, schema::Resource::kWarps, 4);
    s.api = "cuGraphLaunch";
    s.graph_id = report::testing::kGraph;
    s.graph_node_id = report::testing::kGraphNodes[n];
    p.Launch(KernelOf(p, s, corr, {64u * (n + 1), 1, 1}));
    report::testing::TimeSpec t;
    t.stream = 0x20;
    t.start_ns = 90'000'000 + static_cast<uint64_t>(replay) * 10'000'000 + n * 1'000'000;
    t.graph_id = report::testing::kGraph;
    t.graph_node_id = report::testing::kGraphNodes[n];
    p.Add(schema::OwnedEvent(
        report::testing::KernelTime(p.pid(), 0, corr, report::testing::kGraphNodeNs[n], t)));
  }
}

schema::OwnedStallEvent Stall(const report::testing::KernelSpec& spec, uint64_t corr,
                              bool resolved) {
  schema::OwnedStallEvent e;
  e.state = resolved ? schema::StallState::kResolved : schema::StallState::kStalled;
  e.stall_ms = 5000;
  e.stalled_ms = resolved ? 13000 : 7000;
  if (!resolved) {
    e.streams_stalled = 1;
    schema::OwnedStallStream s;
    s.device = spec.device;
    s.context = 0x1000;
    s.stream = spec.stream;
    s.waiting_ms = 7000;
    s.unfinished = 1;
    schema::OwnedStallLaunch l;
    l.correlation_id = corr;
    l.name = spec.name;
    l.demangled = spec.demangled;
    l.grid = {128, 1, 1};
    l.block = spec.block;
    l.occupancy = spec.occupancy.occupancy;
    l.age_ms = 7000;
    s.launches.push_back(l);
    e.streams.push_back(s);
  } else {
    e.completed = 1;
  }
  return e;
}

std::vector<Producer> Recording() {
  using schema::Resource;
  const auto gemm = Spec("_Z4gemmPf", "gemm(float*)", 0, 0x10, 128, Resource::kRegisters, 2);
  const auto attn = Spec("_Z4attnPf", "attn(float*)", 0, 0x10, 64, Resource::kSharedMem, 1);
  const auto gemm1 = Spec("_Z4gemmPf", "gemm(float*)", 1, 0x11, 128, Resource::kRegisters, 2);
  const auto late = Spec("_Z4latev", "late()", 0, 0x10, 32, Resource::kBlocks, 8);
  std::vector<Producer> p;
  p.emplace_back(4101, "/opt/app/bin/trainer", kStartNs);
  p[0].Add(schema::OwnedEvent(report::testing::Device(4101, 0, 0, "NVIDIA A100")));
  p[0].Add(schema::OwnedEvent(report::testing::Device(4101, 0, 1, "NVIDIA A100")));
  for (int i = 0; i < 6; ++i) {
    Timed(p[0], gemm, {256u + 64u * (i % 2), 1, 1}, 40'000 + 1000 * i);
    Timed(p[0], attn, {108, 4, 1}, 90'000 + 3000 * i, i == 5);
    Timed(p[0], gemm1, {512, 1, 1}, 41'000);
  }
  GraphReplay(p[0], 0);
  GraphReplay(p[0], 1);
  p[0].Rotate();  // the same configurations again in the next file, a new one there too
  for (int i = 0; i < 4; ++i) {
    Timed(p[0], attn, {108, 4, 1}, 95'000);
    Timed(p[0], gemm, {256, 1, 1}, 39'000);
    Timed(p[0], late, {16, 1, 1}, 2'000);
  }
  GraphReplay(p[0], 2);
  GraphReplay(p[0], 3);
  p[0].Add(schema::OwnedEvent(report::testing::ApiError(4101, 0, "cuMemcpyDtoH_v2",
                                                        "CUDA_ERROR_ILLEGAL_ADDRESS", 700, {3, 4})));
  schema::OwnedStatsEvent stats;
  stats.launches = 70;
  stats.emitted = 70;
  p[0].Add(schema::OwnedEvent(stats));
  p[0].Add(schema::OwnedEvent(report::testing::End(4101, 0, 0)));

  const auto conv = Spec("_Z4convPf", "conv(float*)", 0, 0x10, 96, Resource::kRegisters, 3);
  const auto hang = Spec("_Z4hangv", "hang()", 0, 0x30, 32, Resource::kWarps, 8);
  p.emplace_back(4102, "/opt/app/bin/trainer", kStartNs + 1'000'000'000);
  p[1].Add(schema::OwnedEvent(report::testing::Device(4102, 0, 0, "NVIDIA A100")));
  for (int i = 0; i < 5; ++i) Timed(p[1], conv, {200, 1, 1}, 70'000 + 500 * i);
  Timed(p[1], hang, {128, 1, 1}, 0, true);
  const uint64_t hang_corr = 6;
  p[1].Add(schema::OwnedEvent(Stall(hang, hang_corr, false)));
  p[1].Add(schema::OwnedEvent(Stall(hang, hang_corr, true)));
  Timed(p[1], conv, {200, 1, 1}, 71'000);
  schema::OwnedProcessCrashEvent crash;
  crash.signal = 11;
  crash.signal_name = "SIGSEGV";
  crash.code = 1;
  crash.tid = 4102;
  crash.addr = 0x10;
  crash.launches = 7;
  crash.emitted = 7;
  p[1].Add(schema::OwnedEvent(crash));

  const auto eval = Spec("_Z4evalv", "eval()", 0, 0, 48, Resource::kBlocks, 16);
  p.emplace_back(4103, "/opt/app/bin/eval", kStartNs + 2'000'000'000);
  p[2].Add(schema::OwnedEvent(report::testing::Device(4103, 0, 0, "NVIDIA A100")));
  for (int i = 0; i < 4; ++i) Timed(p[2], eval, {32u * (i + 1), 1, 1}, 0, true);
  p[2].Add(schema::OwnedEvent(report::testing::End(4103, 0, 1)));
  return p;
}

// The recording written under dir/whole and dir/interned.
struct Written {
  fs::path whole;
  fs::path interned;
};
Written WriteRecording(const std::vector<Producer>& producers, const fs::path& dir) {
  Written w{dir / "whole", dir / "interned"};
  for (const Producer& p : producers) {
    for (const bool interned : {false, true}) {
      for (const auto& [name, text] : p.Files(interned)) {
        report::testing::WriteFile((interned ? w.interned : w.whole) / name, text);
      }
    }
  }
  return w;
}

// ---- running the readers ----

class NoDevice : public DeviceQuery {
 public:
  bool Query(int, QueriedDevice*, std::string* error) override {
    *error = "no device";
    return false;
  }
};

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun Cuflight(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"cuflight"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  NoDevice query;
  const int code = RunCli(static_cast<int>(argv.size()), argv.data(), out, err, query);
  return {code, out.str(), err.str()};
}

// `text` with every occurrence of `from` replaced by `to`.
std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::string ReadAll(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every log file's lines, concatenated in the log reader's order (ExpandLogPaths: a stream's
// segments, then its active file).
std::string Concatenated(const fs::path& dir) {
  const CliRun r = Cuflight({"export", "--jsonl", "-", dir.string()});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

class InternedReaders : public ::testing::Test {
 protected:
  void SetUp() override {
    producers_ = Recording();
    written_ = WriteRecording(producers_, dir_.path());
  }
  // `cuflight ARGS... DIR` on both forms, the directory's name replaced by DIR in the output.
  std::pair<CliRun, CliRun> Both(std::vector<std::string> args) {
    std::pair<CliRun, CliRun> runs;
    for (const bool interned : {false, true}) {
      const fs::path dir = interned ? written_.interned : written_.whole;
      std::vector<std::string> a = args;
      a.push_back(dir.string());
      CliRun r = Cuflight(a);
      r.out = Replace(r.out, dir.string(), "DIR");
      r.err = Replace(r.err, dir.string(), "DIR");
      (interned ? runs.second : runs.first) = r;
    }
    return runs;
  }

  TempDir dir_;
  std::vector<Producer> producers_;
  Written written_;
};

// The interned logs really are interned, and the whole ones are not: the comparison compares
// something.
TEST_F(InternedReaders, TheTwoFormsDiffer) {
  const Producer& p = producers_[0];
  const auto whole = p.Files(false);
  const auto interned = p.Files(true);
  ASSERT_EQ(whole.size(), 2u);  // a closed segment and the active file
  for (const auto& [name, text] : interned) {
    EXPECT_EQ(text.find("\"type\":\"kernel\""), std::string::npos) << name;
    EXPECT_NE(text.find("\"type\":\"kernel_config\""), std::string::npos) << name;
    EXPECT_LT(text.size(), whole.at(name).size()) << name;
  }
  for (const auto& [name, text] : whole) {
    EXPECT_EQ(text.find("\"type\":\"launch\""), std::string::npos) << name;
  }
  // The active file describes again the configurations of the first file it uses (attn first).
  const std::string active = interned.rbegin()->second;
  const std::string first = active.substr(0, active.find('\n'));
  EXPECT_NE(first.find("\"type\":\"kernel_config\""), std::string::npos) << first;
  EXPECT_NE(first.find("attn"), std::string::npos) << first;
}

TEST_F(InternedReaders, ReportTextJsonCsvAndHtmlAreTheSame) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"report"},
                                             {"report", "--json"},
                                             {"report", "--csv"},
                                             {"report", "--per-process"},
                                             {"report", "--html", "-"},
                                             {"report", "--kernel", "gemm", "--json"}}) {
    auto [whole, interned] = Both(args);
    // What legitimately differs: the lines read (JSON "lines", the HTML page's "N lines"), the
    // interned logs holding one kernel_config line more per configuration and file: 114 event
    // lines and 15 descriptions (6 in each of 4101's two files, 2 of 4102, 1 of 4103).
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"\"lines\": 129,", "\"lines\": 114,"}, {"129 lines", "114 lines"}}) {
      interned.out = Replace(interned.out, from, to);
    }
    ASSERT_EQ(whole.code, 0) << whole.err;
    ASSERT_EQ(interned.code, 0) << interned.err;
    EXPECT_GT(whole.out.size(), 200u);
    EXPECT_EQ(whole.out, interned.out) << args.back();
    // Notes are the same too: the descriptions are not counted as events, nor rejected.
    EXPECT_EQ(whole.err, interned.err) << args.back();
  }
}

TEST_F(InternedReaders, PerfettoExportIsTheSameInJsonAndProtobuf) {
  for (const std::string name : {"trace.json", "trace.pftrace"}) {
    std::string outputs[2];
    for (const bool interned : {false, true}) {
      const fs::path dir = interned ? written_.interned : written_.whole;
      const fs::path out = dir_.path() / ((interned ? "i-" : "w-") + name);
      const CliRun r = Cuflight({"export", "--perfetto", out.string(), dir.string()});
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_NE(r.err.find("53 kernels"), std::string::npos) << r.err;
      outputs[interned] = ReadAll(out);
    }
    EXPECT_GT(outputs[0].size(), 1000u);
    EXPECT_EQ(outputs[0], outputs[1]) << name;
  }
}

// --jsonl: the interned logs give the whole lines, byte for byte; the whole logs give themselves.
TEST_F(InternedReaders, ExportJsonlOfTheInternedLogsIsTheWholeLines) {
  std::string expected;
  for (const Producer& p : producers_) {
    for (const auto& [name, text] : p.Files(false)) expected += text;
  }
  const std::string whole = Concatenated(written_.whole);
  const std::string interned = Concatenated(written_.interned);
  EXPECT_EQ(whole.size(), expected.size());
  EXPECT_EQ(interned, whole);
  EXPECT_EQ(interned.find("kernel_config"), std::string::npos);
  EXPECT_EQ(interned.find("\"type\":\"launch\""), std::string::npos);
  // The same filters as the trace export: --pid and --kernel (with each kernel's kernel_time).
  const auto [w, i] = Both({"export", "--jsonl", "-", "--pid", "4102", "--kernel", "conv"});
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_EQ(w.out, i.out);
  std::istringstream lines(i.out);
  std::map<std::string, int> types;
  for (std::string line; std::getline(lines, line);) {
    const schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << line;
    EXPECT_EQ(schema::HeaderOf(d.event).pid, 4102);
    ++types[std::string(schema::EventTypeName(schema::TypeOf(d.event)))];
  }
  // 6 conv launches and their 6 times; hang() and its stall are the stall's: kept (not a kernel).
  EXPECT_EQ(types["kernel"], 6);
  EXPECT_EQ(types["kernel_time"], 6);
  EXPECT_EQ(types["process_start"], 1);
  EXPECT_EQ(types["stall"], 2);
}

// `cuflight tail --from-start` prints the same lines for both forms (sorted: it reads the files
// in the order of their inodes, which differ between the two directories); --json prints the
// whole kernel line for each launch.
TEST_F(InternedReaders, TailPrintsTheSameEvents) {
  for (const bool json : {false, true}) {
    std::vector<std::string> printed[2];
    for (const bool interned : {false, true}) {
      const fs::path dir = interned ? written_.interned : written_.whole;
      const fs::path out = dir_.path() / (std::string(interned ? "i" : "w") + (json ? "j" : "t"));
      std::vector<std::string> args = {"tail", "--log-dir", dir.string(), "--from-start",
                                       "--interval", "20"};
      if (json) args.push_back("--json");
      ChildProcess tail(CUFLIGHT_CLI_PATH, args, out);
      ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
      tail.Signal(SIGINT);
      ASSERT_EQ(tail.Wait(kDeadline), 0) << tail.Output();
      std::istringstream lines(tail.Output());
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("cuflight tail:", 0) == 0) {
          // The stalled-now header and the following line; no note of a refused launch.
          EXPECT_EQ(line.find("note"), std::string::npos) << line;
          continue;
        }
        printed[interned].push_back(line);
      }
      std::sort(printed[interned].begin(), printed[interned].end());
    }
    EXPECT_GT(printed[0].size(), 100u);
    EXPECT_EQ(printed[0], printed[1]) << (json ? "--json" : "text");
  }
}

// tail started after the descriptions were written: a launch appended later names one it did
// not read; it reads the file's start for it and prints the whole kernel event.
TEST_F(InternedReaders, TailFollowingFromTheEndFindsEarlierDescriptions) {
  const auto files = producers_[2].Files(true);
  const fs::path file = written_.interned / files.begin()->first;
  const fs::path out = dir_.path() / "tail-end";
  ChildProcess tail(CUFLIGHT_CLI_PATH,
                    {"tail", "--log-dir", written_.interned.string(), "--interval", "20"}, out);
  ASSERT_TRUE(tail.WaitForOutput("following", kDeadline)) << tail.Output();
  // Another launch of eval()'s configuration (its id, 1, described at the file's start).
  std::string last_launch;
  {
    std::istringstream lines(files.begin()->second);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("\"type\":\"launch\"") != std::string::npos) last_launch = line;
    }
  }
  schema::DecodeResult d = schema::Decode(last_launch);
  ASSERT_TRUE(d.ok()) << last_launch;
  auto& launch = std::get<schema::OwnedLaunchEvent>(d.event);
  launch.header.seq += 100;
  launch.correlation_id = 777;
  {
    std::ofstream append(file, std::ios::app);
    append << Line(d.event);
  }
  ASSERT_TRUE(tail.WaitForOutput("corr 777", kDeadline)) << tail.Output();
  tail.Signal(SIGINT);
  ASSERT_EQ(tail.Wait(kDeadline), 0);
  const std::string output = tail.Output();
  EXPECT_NE(output.find("kernel eval()"), std::string::npos) << output;
  EXPECT_EQ(output.find("note"), std::string::npos) << output;
}

// ---- the OTLP exporter ----

// Stream, seq, event name, and a roll-up's body (a stream's roll-ups carry no seq).
using RecordKey = std::tuple<std::string, uint64_t, std::string, std::string>;

// Every record the exporter sends for the logs under `logs` until `ends` processes ended; a
// record per launch when `every_launch`, else the roll-ups (one per kernel, at each end).
std::map<RecordKey, ReceivedRecord> ExportAll(const fs::path& logs, size_t ends,
                                              bool every_launch = true) {
  OtlpReceiver receiver;
  exporter::ExportOptions options;
  options.endpoint = receiver.endpoint() + "/v1/logs";
  options.scan_interval = std::chrono::milliseconds(20);
  options.every_launch = every_launch;
  options.rollup_interval = std::chrono::milliseconds(3'600'000);
  options.resource_wait = std::chrono::milliseconds(0);
  options.cursor_file = logs.parent_path() / (logs.filename().string() + "-cursor.json");
  exporter::ExportMetrics metrics;
  collector::testing::CapturedLog log;
  std::string error;
  auto exp =
      exporter::Exporter::Start(options, logs, std::nullopt, &metrics, log.logger(), &error);
  EXPECT_NE(exp, nullptr) << error;
  if (!exp) return {};
  EXPECT_TRUE(WaitUntil(
      [&] {
        size_t n = 0;
        for (const ReceivedRecord& r : receiver.Accepted()) {
          n += r.event_name == "cuflight.process_end" || r.event_name == "cuflight.process_crash";
        }
        return n == ends;
      },
      kDeadline));
  exp->Stop();
  EXPECT_EQ(metrics.Get().lines_skipped, 0u);
  std::map<RecordKey, ReceivedRecord> out;
  for (ReceivedRecord r : receiver.Accepted()) {
    const bool rollup = r.event_name == "cuflight.kernel_rollup";
    const RecordKey key{r.stream(), r.seq(), r.event_name, rollup ? r.body : ""};
    EXPECT_TRUE(out.emplace(key, r).second) << "twice: " << r.event_name << " " << r.seq();
  }
  return out;
}

TEST_F(InternedReaders, TheOtlpExporterSendsTheSameRecords) {
  const auto whole = ExportAll(written_.whole, 3);  // 4101 and 4103 ended, 4102 crashed
  const auto interned = ExportAll(written_.interned, 3);
  ASSERT_GT(whole.size(), 80u);
  ASSERT_EQ(whole.size(), interned.size());
  size_t kernels = 0;
  for (const auto& [key, w] : whole) {
    const auto it = interned.find(key);
    ASSERT_NE(it, interned.end()) << std::get<2>(key) << " seq " << std::get<1>(key);
    const ReceivedRecord& i = it->second;
    EXPECT_EQ(w.body, i.body) << std::get<2>(key);  // the self-contained kernel line
    EXPECT_EQ(w.attributes, i.attributes) << std::get<2>(key);
    EXPECT_EQ(w.resource, i.resource) << std::get<2>(key);
    EXPECT_EQ(w.time_unix_nano, i.time_unix_nano) << std::get<2>(key);
    kernels += std::get<2>(key) == "cuflight.kernel";
  }
  EXPECT_EQ(kernels, 53u);
}

// The exporter restarted with its cursor after a kernel_config and before the launches that
// name it (exporter.h, design note 2): after the restart every launch is exported, expanded to
// its whole kernel line, none twice and none lost, across the rotation that follows too.
TEST(OtlpExporterRestart, LaunchesAfterTheCursorFindTheirDescriptionBeforeIt) {
  using schema::Resource;
  TempDir dir;
  Producer p(4201, "/opt/app/bin/serve", kStartNs);
  p.Add(schema::OwnedEvent(report::testing::Device(4201, 0, 0, "NVIDIA A100")));
  const auto gemm = Spec("_Z4gemmPf", "gemm(float*)", 0, 0x10, 128, Resource::kRegisters, 2);
  const auto attn = Spec("_Z4attnPf", "attn(float*)", 0, 0x10, 64, Resource::kSharedMem, 1);
  Timed(p, gemm, {256, 1, 1}, 40'000);
  Timed(p, attn, {108, 4, 1}, 90'000);  // the cursor: after attn's description, before it
  for (int i = 0; i < 3; ++i) Timed(p, attn, {108, 4, 1}, 90'000);
  p.Rotate();
  for (int i = 0; i < 3; ++i) Timed(p, gemm, {256, 1, 1}, 40'000);
  p.Add(schema::OwnedEvent(report::testing::End(4201, 0, 0)));
  const auto interned = p.Files(true);
  const auto whole = p.Files(false);
  ASSERT_EQ(interned.size(), 2u);
  const fs::path logs = dir.path() / "logs";
  const std::string segment = interned.begin()->first;  // <date>/<base>.000001.jsonl
  const std::string active = interned.rbegin()->first;  // <date>/<base>.jsonl
  const std::string first = interned.at(segment);
  // The first file up to and with attn's description (its second kernel_config line).
  ASSERT_NE(first.find("attn"), std::string::npos);
  const size_t config = first.rfind('\n', first.find("attn")) + 1;  // the line naming it first
  ASSERT_EQ(first.compare(config, 23, "{\"type\":\"kernel_config\""), 0) << first.substr(config);
  const size_t cut = first.find('\n', config) + 1;
  ASSERT_EQ(first.compare(cut, 16, "{\"type\":\"launch\""), 0) << first.substr(cut);
  report::testing::WriteFile(logs / active, first.substr(0, cut));

  OtlpReceiver receiver;
  exporter::ExportOptions options;
  options.endpoint = receiver.endpoint() + "/v1/logs";
  options.scan_interval = std::chrono::milliseconds(20);
  options.every_launch = true;
  options.rollup_interval = std::chrono::milliseconds(0);
  options.resource_wait = std::chrono::milliseconds(0);
  options.cursor_file = dir.path() / "cursor.json";
  collector::testing::CapturedLog log;
  exporter::ExportMetrics metrics;
  std::string error;
  {
    auto exp =
        exporter::Exporter::Start(options, logs, std::nullopt, &metrics, log.logger(), &error);
    ASSERT_NE(exp, nullptr) << error;
    // process_start, device, gemm's kernel and kernel_time: 4 records.
    ASSERT_TRUE(WaitUntil([&] { return receiver.Accepted().size() == 4; }, kDeadline));
    exp->Stop();
  }
  // The cursor is where the scenario says: the end of attn's description.
  const std::string cursor = ReadAll(options.cursor_file);
  EXPECT_NE(cursor.find("\"offset\":" + std::to_string(cut)), std::string::npos) << cursor;

  // The collector goes on: the rest of the file, a rotation, the new active file.
  {
    std::ofstream append(logs / active, std::ios::app);
    append << first.substr(cut);
  }
  fs::rename(logs / active, logs / segment);
  report::testing::WriteFile(logs / active, interned.at(active));
  {
    auto exp =
        exporter::Exporter::Start(options, logs, std::nullopt, &metrics, log.logger(), &error);
    ASSERT_NE(exp, nullptr) << error;
    ASSERT_TRUE(WaitUntil(
        [&] {
          for (const ReceivedRecord& r : receiver.Accepted()) {
            if (r.event_name == "cuflight.process_end") return true;
          }
          return false;
        },
        kDeadline));
    exp->Stop();
  }
  EXPECT_EQ(metrics.Get().lines_skipped, 0u) << log.text();
  // Every kernel record once, its body the whole kernel line; every whole line a record.
  std::map<uint64_t, std::string> kernels;
  for (const ReceivedRecord& r : receiver.Accepted()) {
    if (r.event_name != "cuflight.kernel") continue;
    EXPECT_TRUE(kernels.emplace(r.seq(), r.body).second) << "twice: seq " << r.seq();
  }
  std::map<uint64_t, std::string> expected;
  for (const auto& [name, text] : whole) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const schema::DecodeResult d = schema::Decode(line);
      ASSERT_TRUE(d.ok()) << line;
      if (schema::TypeOf(d.event) == schema::EventType::kKernel) {
        expected[schema::HeaderOf(d.event).seq] = line;
      }
    }
  }
  EXPECT_EQ(expected.size(), 8u);  // 1 + 1 + 3 gemm and attn launches, then 3 gemm
  EXPECT_EQ(kernels, expected);
}

// Under sampled a launch made outside a timing window says no kernel_time will come
// (timing_window false): the exporter keeps no join for it. One gemm launch in a window, then
// 16,400 outside one (more than the exporter's joins per stream, 16,384), then the windowed
// launch's kernel_time (40 us, an activity flush after them): the process's roll-up still counts
// that time under gemm, in both forms (kept alongside the others, its join would have been pushed
// out and its time left out of the roll-up).
TEST(OtlpExporterSampled, ATimeAfterManyLaunchesOutsideAWindowIsRolledUpUnderItsKernel) {
  using schema::Resource;
  Producer p(4301, "/opt/app/bin/serve", kStartNs);
  p.Add(schema::OwnedEvent(report::testing::Device(4301, 0, 0, "NVIDIA A100")));
  const auto gemm = Spec("_Z4gemmPf", "gemm(float*)", 0, 0x10, 128, Resource::kRegisters, 2);
  const uint64_t timed = p.Correlation();
  schema::OwnedKernelEvent k = KernelOf(p, gemm, timed, {256, 1, 1});
  k.timing_window = true;
  p.Launch(k);
  for (int i = 0; i < 16'400; ++i) {
    schema::OwnedKernelEvent u = KernelOf(p, gemm, p.Correlation(), {256, 1, 1});
    u.timing_window = false;
    p.Launch(u);
  }
  report::testing::TimeSpec t;
  t.stream = gemm.stream;
  p.Add(schema::OwnedEvent(report::testing::KernelTime(4301, 0, timed, 40'000, t)));
  p.Add(schema::OwnedEvent(report::testing::End(4301, 0, 0)));
  for (const bool interned : {false, true}) {
    SCOPED_TRACE(interned ? "interned" : "whole");
    TempDir dir;
    const fs::path logs = dir.path() / "logs";
    for (const auto& [name, text] : p.Files(interned)) {
      report::testing::WriteFile(logs / name, text);
    }
    const auto records = ExportAll(logs, 1, /*every_launch=*/false);  // one roll-up, at the end
    uint64_t launches = 0;
    uint64_t timed_launches = 0;
    uint64_t gpu_time_ns = 0;
    for (const auto& [key, r] : records) {
      if (r.event_name != "cuflight.kernel_rollup") continue;
      EXPECT_EQ(r.attributes.at("cuflight.kernel.name"), "gemm(float*)");
      launches += std::stoull(r.attributes.at("cuflight.rollup.launches"));
      timed_launches += std::stoull(r.attributes.at("cuflight.rollup.timed_launches"));
      gpu_time_ns += std::stoull(r.attributes.at("cuflight.rollup.gpu_time_ns"));
    }
    EXPECT_EQ(launches, 16'401u);
    EXPECT_EQ(timed_launches, 1u);
    EXPECT_EQ(gpu_time_ns, 40'000u);
  }
}

// ---- the collector's /metrics ----

// The /metrics samples of a collector that received every producer's wire lines in `interned`
// form, comments left out.
std::vector<std::string> MetricsAfter(const std::vector<Producer>& producers, bool interned) {
  TempDir dir;
  const collector::CollectorOptions options = collector::testing::TestOptions(dir.path());
  collector::Metrics metrics;
  {
    RunningCollector running(options, &metrics);
    EXPECT_NE(running.collector(), nullptr);
    for (const Producer& p : producers) {
      RawClient client = RawClient::Unix(options.socket);
      std::string text;
      const std::vector<std::string> lines = p.Wire(interned);
      for (const std::string& l : lines) text += l;
      EXPECT_TRUE(client.Send(text));
      EXPECT_TRUE(client.WaitAck(lines.size() - 1)) << p.pid();
    }
    running.Stop();
    EXPECT_EQ(running.stats().lines_rejected, 0u);
  }
  std::vector<std::string> out;
  std::istringstream text(metrics.Render());
  for (std::string line; std::getline(text, line);) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

TEST_F(InternedReaders, TheCollectorsMetricsAreTheSame) {
  // What differs as it must, counted apart here: events received and stored by type (53 kernel
  // lines whole; 53 launches and 10 kernel_config lines interned: gemm, attn, gemm on device 1,
  // late and the 3 graph nodes of 4101, conv and hang of 4102, eval of 4103) and the bytes
  // written to the logs (fewer interned).
  std::string joined[2];
  std::map<std::string, std::string> by_type[2];
  uint64_t written[2] = {0, 0};
  for (const bool interned : {false, true}) {
    for (const std::string& l : MetricsAfter(producers_, interned)) {
      if (l.rfind("cuflight_log_written_bytes_total ", 0) == 0) {
        written[interned] = std::stoull(l.substr(l.find(' ') + 1));
        continue;
      }
      const bool typed = l.rfind("cuflight_events_received_total{", 0) == 0 ||
                         l.rfind("cuflight_events_stored_total{", 0) == 0;
      if (typed && (l.find("\"kernel\"") != std::string::npos ||
                    l.find("\"kernel_config\"") != std::string::npos ||
                    l.find("\"launch\"") != std::string::npos)) {
        by_type[interned][l.substr(0, l.find(' '))] = l.substr(l.find(' ') + 1);
        continue;
      }
      joined[interned] += l + "\n";
    }
  }
  EXPECT_EQ(joined[0], joined[1]);
  EXPECT_GT(written[1], 0u);
  EXPECT_LT(written[1], written[0]);
  for (const std::string what : {"received", "stored"}) {
    const std::string family = "cuflight_events_" + what + "_total{type=";
    EXPECT_EQ(by_type[0][family + "\"kernel\"}"], "53");
    EXPECT_EQ(by_type[0][family + "\"launch\"}"], "0");
    EXPECT_EQ(by_type[0][family + "\"kernel_config\"}"], "0");
    EXPECT_EQ(by_type[1][family + "\"kernel\"}"], "0");
    EXPECT_EQ(by_type[1][family + "\"launch\"}"], "53");
    EXPECT_EQ(by_type[1][family + "\"kernel_config\"}"], "10");
  }
  EXPECT_NE(joined[1].find("cuflight_kernel_name_launches_total{kernel=\"gemm(float*)\""),
            std::string::npos)
      << joined[1];
}

// ---- spill files ----

// The interned lines as the injector spills them (one file per process, the descriptions before
// their first launch) read by the log reader: the same report as the whole lines spilled.
TEST_F(InternedReaders, SpillFilesReadTheSame) {
  std::string json[2];
  for (const bool interned : {false, true}) {
    const fs::path dir = dir_.path() / (interned ? "spill-interned" : "spill-whole");
    for (const Producer& p : producers_) {
      spill::SpillWriter writer(p.SpillOptions(dir.string()));
      for (const std::string& line : p.Wire(interned, false)) ASSERT_TRUE(writer.WriteLine(line));
    }
    const CliRun r = Cuflight({"report", "--json", dir.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err.find("rejected"), std::string::npos) << r.err;
    json[interned] = Replace(r.out, dir.string(), "DIR");
  }
  // The lines read differ: 114 events, and 10 descriptions in the interned spill (one per
  // configuration: each process's spill here is one file).
  json[1] = Replace(json[1], "\"lines\": 124,", "\"lines\": 114,");
  EXPECT_EQ(json[0], json[1]);
}

// Spill files rotated every 4 KiB, each new file describing again the configurations it uses
// before their first launch there (as the injector's transport repeats its preamble): read back,
// the same lines as the whole collector logs.
TEST_F(InternedReaders, RotatedSpillFilesDescribeAgainAndReadTheSame) {
  const fs::path dir = dir_.path() / "spill-rotated";
  uint64_t rotations = 0;
  int descriptions_written = 0;
  for (const Producer& p : producers_) {
    spill::SpillWriterOptions options = p.SpillOptions(dir.string());
    options.rotate_bytes = 4096;
    spill::SpillWriter writer(options);
    std::map<uint64_t, std::string> descriptions;
    std::set<uint64_t> described;
    uint64_t file = 0;
    for (const std::string& line : p.Wire(true, false)) {
      const schema::DecodeResult d = schema::Decode(line);
      ASSERT_TRUE(d.ok()) << line;
      if (const auto* c = std::get_if<schema::OwnedKernelConfigEvent>(&d.event)) {
        descriptions[c->config] = line;
        continue;
      }
      const uint64_t n = writer.PrepareLine(line.size());
      ASSERT_NE(n, 0u) << writer.message();
      if (n != file) {  // a new file: nothing described in it yet
        file = n;
        described.clear();
      }
      if (const auto* l = std::get_if<schema::OwnedLaunchEvent>(&d.event)) {
        if (described.insert(l->config).second) {
          ASSERT_TRUE(writer.AppendLine(descriptions.at(l->config)));
          ++descriptions_written;
        }
      }
      ASSERT_TRUE(writer.AppendLine(line));
    }
    rotations += writer.stats().rotations;
  }
  EXPECT_GE(rotations, 4u);
  EXPECT_GT(descriptions_written, 10);  // more than once each of the 10 configurations
  EXPECT_EQ(Concatenated(dir), Concatenated(written_.whole));
}

// --jsonl to a .zst file: compressed (zstd's frame magic), and itself a log the reader reads back
// to the same lines; --since/--until keep the events in the window: pid 4102's, every one of
// them (its events are 1 to 18 ms after its start at 1795900001 s; 4101's are before, 4103's
// after 1795900002 s).
TEST_F(InternedReaders, ExportJsonlCompressedAndInATimeWindow) {
  const fs::path out = dir_.path() / "events.jsonl.zst";
  const CliRun r = Cuflight({"export", "--jsonl", out.string(), written_.interned.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("114 events of 114"), std::string::npos) << r.err;
  const std::string bytes = ReadAll(out);
  ASSERT_GE(bytes.size(), 4u);
  EXPECT_EQ(bytes.substr(0, 4), std::string("\x28\xB5\x2F\xFD"));
  EXPECT_EQ(Concatenated(out), Concatenated(written_.whole));

  const auto [w, i] =
      Both({"export", "--jsonl", "-", "--since", "1795900001", "--until", "1795900002"});
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_EQ(w.out, i.out);
  std::string expected;
  for (const auto& [name, text] : producers_[1].Files(false)) expected += text;
  EXPECT_EQ(i.out, expected);
}

// ---- bad input ----

TEST(ExportJsonl, BadInputExitsTwoWithOneLine) {
  TempDir dir;
  report::testing::WriteFile(dir.path() / "a.jsonl", Line(schema::OwnedEvent(
                                                         report::testing::Start(1, 0, kStartNs))));
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"export", (dir.path() / "a.jsonl").string()},
           {"export", "--jsonl", "-", (dir.path() / "missing").string()},
           {"export", "--jsonl", "-", "--perfetto", "x.json", (dir.path() / "a.jsonl").string()},
           {"export", "--jsonl", "-", "--format", "json", (dir.path() / "a.jsonl").string()},
           {"export", "--jsonl", (dir.path() / "no/such/dir/x.jsonl").string(),
            (dir.path() / "a.jsonl").string()}}) {
    const CliRun r = Cuflight(args);
    EXPECT_EQ(r.code, 2) << args[1] << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

}  // namespace
// The report keys what a configuration's launches share by the configuration (logread's
// Origin::config), and a signature's key holds the device's model: a device event read after
// the first launches of a configuration must give its later launches the model, as it does to
// the same launches read whole. Two launches before the device event (no model: ""), three after
// ("NVIDIA A100"): two signatures of gemm, in both forms.
TEST(InternedReport, ADeviceEventAfterTheFirstLaunchesGivesTheLaterOnesItsModel) {
  TempDir dir;
  const auto gemm =
      Spec("_Z4gemmPf", "gemm(float*)", 0, 0x10, 128, schema::Resource::kRegisters, 2);
  Producer p(4201, "/opt/app/bin/late_device", kStartNs);
  Timed(p, gemm, {256, 1, 1}, 40'000);
  Timed(p, gemm, {256, 1, 1}, 41'000);
  p.Add(schema::OwnedEvent(report::testing::Device(4201, 0, 0, "NVIDIA A100")));
  for (int i = 0; i < 3; ++i) Timed(p, gemm, {256, 1, 1}, 50'000);
  p.Add(schema::OwnedEvent(report::testing::End(4201, 0, 0)));
  const Written w = WriteRecording({p}, dir.path());
  for (const fs::path& logs : {w.whole, w.interned}) {
    SCOPED_TRACE(logs.native());
    const CliRun r = Cuflight({"report", "--csv", logs.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    // RenderCsv's columns: device_model the 3rd, launches the 11th; no field here holds a comma.
    std::map<std::string, std::string> launches;  // device model -> launches
    std::istringstream rows(r.out);
    std::string row;
    std::getline(rows, row);  // the header
    while (std::getline(rows, row)) {
      std::vector<std::string> cells;
      std::istringstream fields(row);
      for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
      ASSERT_GT(cells.size(), 10u) << row;
      launches[cells[2]] = cells[10];
    }
    EXPECT_EQ(launches, (std::map<std::string, std::string>{{"", "2"}, {"NVIDIA A100", "3"}}));
  }
}

}  // namespace cuflight::cli
