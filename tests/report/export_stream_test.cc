// `cuflight export` streaming: the JSON form's flows and markers, compression by suffix, and the
// exporter's retained state on generated logs of growing size (bench/log_gen): what it holds
// depends on the distance between a kernel and its kernel_time, never on the log's size.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "collector_test_util.h"
#include "cuflight/logread/log_reader.h"
#include "cuflight/report/launch_filter.h"
#include "log_gen.h"
#include "report_test_events.h"
#include "subprocess.h"
#include "trace_exporter.h"
#include "zstd_file.h"

namespace cuflight::trace {
namespace {

namespace fs = std::filesystem;
using collector::testing::TempDir;
using cuflight::testing::RunProcess;
using nlohmann::json;

std::string ReadAll(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Gunzip(const std::string& bytes) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);  // gzip wrapper (zlib.h, inflateInit2)
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  char buf[1 << 16];
  int r;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    r = inflate(&z, Z_NO_FLUSH);
    EXPECT_TRUE(r == Z_OK || r == Z_STREAM_END) << r;
    out.append(buf, sizeof(buf) - z.avail_out);
  } while (r == Z_OK);
  inflateEnd(&z);
  return out;
}

std::string Unzstd(const fs::path& file) {
  std::string out;
  std::string error;
  EXPECT_TRUE(logstore::DecompressFile(
      file, [&](std::string_view c) { out.append(c); }, &error))
      << error;
  return out;
}

// A small generated log: 1 process, 2 streams, 200 launches, every 50th untimed, an api_error
// every 60 and a stall line every 70, a crash at the end.
bench::LogTotals SmallLog(const fs::path& dir) {
  bench::LogSpec spec;
  spec.launches = 200;
  spec.streams = 2;
  spec.kernels = 3;
  spec.flush_every = 16;
  spec.untimed_every = 50;
  spec.api_error_every = 60;
  spec.stall_every = 70;
  spec.crash = true;
  spec.rotate_bytes = 0;
  bench::LogTotals totals;
  std::string error;
  EXPECT_TRUE(bench::WriteLogs(dir, spec, &totals, &error)) << error;
  return totals;
}

TEST(ExportStreamTest, JsonHasAFlowFromEachLaunchToItsKernelAndAMarkerForEachFailureAndStall) {
  TempDir dir;
  const bench::LogTotals totals = SmallLog(dir.path() / "logs");
  ASSERT_EQ(totals.launches, 200u);
  ASSERT_EQ(totals.timed, 196u);  // 200 less every 50th
  ASSERT_EQ(totals.api_errors, 3u);
  ASSERT_EQ(totals.stalls, 2u);
  const fs::path out = dir.path() / "trace.json";
  const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                            {"export", "--perfetto", out.string(), (dir.path() / "logs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("200 kernels (196 timed, 4 without timing)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("6 markers"), std::string::npos) << r.err;  // 3 + 2 + the crash
  const json trace = json::parse(ReadAll(out));

  std::map<uint64_t, json> starts, finishes;
  std::map<std::string, int> markers;
  std::map<std::pair<int64_t, int64_t>, std::vector<json>> kernels;  // (pid, tid) -> events
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "s") {
      EXPECT_TRUE(starts.emplace(e["id"].get<uint64_t>(), e).second);
    }
    if (ph == "f") {
      EXPECT_EQ(e["bp"], "e");
      EXPECT_TRUE(finishes.emplace(e["id"].get<uint64_t>(), e).second);
    }
    if (e.value("cat", "") == "marker") ++markers[e["name"].get<std::string>()];
    if (e.value("cat", "") == "kernel") {
      kernels[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back(e);
    }
  }
  EXPECT_EQ(starts.size(), 200u);
  EXPECT_EQ(finishes.size(), 200u);
  // Every arrow starts at a launch (a host pid) and ends on a GPU stream, where a kernel of its
  // launch's correlation id starts at that time.
  for (const auto& [id, s] : starts) {
    ASSERT_TRUE(finishes.count(id)) << id;
    const json& f = finishes[id];
    EXPECT_EQ(s["pid"], 4000);
    EXPECT_GE(f["pid"].get<int64_t>(), int64_t{1} << 30);
    bool found = false;
    for (const json& k : kernels[{f["pid"].get<int64_t>(), f["tid"].get<int64_t>()}]) {
      if (k["ts"] == f["ts"]) found = true;
    }
    EXPECT_TRUE(found) << f.dump();
  }
  EXPECT_EQ(markers["api_error CUDA_ERROR_INVALID_VALUE"], 3);
  EXPECT_EQ(markers["stall"], 2);
  EXPECT_EQ(markers["crash SIGSEGV"], 1);
  EXPECT_EQ(trace["otherData"]["flows"], 200);
  EXPECT_EQ(trace["otherData"]["markers"], 6);
}

TEST(ExportStreamTest, GzipAndZstdByTheSuffixHoldTheSameTrace) {
  TempDir dir;
  SmallLog(dir.path() / "logs");
  auto run = [&](const std::string& name) {
    const fs::path out = dir.path() / name;
    const auto r = RunProcess(CUFLIGHT_CLI_PATH, {"export", "--perfetto", out.string(),
                                                  (dir.path() / "logs").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  };
  const std::string json_plain = ReadAll(run("t.json"));
  ASSERT_FALSE(json_plain.empty());
  EXPECT_EQ(json_plain.front(), '{');
  EXPECT_EQ(Gunzip(ReadAll(run("t.json.gz"))), json_plain);
  EXPECT_EQ(Unzstd(run("t.json.zst")), json_plain);
  const std::string proto = ReadAll(run("t.pftrace"));
  ASSERT_FALSE(proto.empty());
  EXPECT_EQ(proto[0], '\x0a');  // Trace.packet: field 1, length-delimited
  EXPECT_EQ(Gunzip(ReadAll(run("t.pftrace.gz"))), proto);
  // --format overrides the name; no file is left behind by a failed export.
  const fs::path forced = dir.path() / "named.trace";
  auto r = RunProcess(CUFLIGHT_CLI_PATH, {"export", "--perfetto", forced.string(), "--format",
                                          "json", (dir.path() / "logs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadAll(forced), json_plain);
  r = RunProcess(CUFLIGHT_CLI_PATH, {"export", "--perfetto", forced.string(), "--format", "xml",
                                     (dir.path() / "logs").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--format 'xml'"), std::string::npos) << r.err;
  const fs::path bad = dir.path() / "notes.jsonl";
  std::ofstream(bad) << "not a log\n";
  r = RunProcess(CUFLIGHT_CLI_PATH,
                 {"export", "--perfetto", (dir.path() / "x.pftrace").string(), bad.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(fs::exists(dir.path() / "x.pftrace"));
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

// The two processes of pid 1 of report::testing::WriteTwoProcessesOfPidOne, each its own host
// process: A keeps trace pid 1; B, the second process of pid 1, gets the first free trace pid
// from 2^29 (536870912) and is named "(pid 1 #2)". Each kernel_time joins its own process's
// kernel; B's corr 7 time is an orphan slice, never joined to A's corr 7.
TEST(ExportStreamTest, ProcessesSharingAPidStayApart) {
  TempDir dir;
  report::testing::WriteTwoProcessesOfPidOne(dir.path() / "logs");

  const fs::path out = dir.path() / "trace.json";
  const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                            {"export", "--perfetto", out.string(), (dir.path() / "logs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 5 kernels: 4 timed, A's corr 7 without; B's corr 7 time is an orphan.
  EXPECT_NE(r.err.find("5 kernels (4 timed, 1 without timing)"), std::string::npos) << r.err;
  const json trace = json::parse(ReadAll(out));
  EXPECT_EQ(trace["otherData"]["kernel_times_without_kernel"], 1);

  constexpr int64_t kB = int64_t{1} << 29;
  std::map<int64_t, std::string> host_names, stream_names;  // trace pid / tid -> name
  std::map<uint64_t, int64_t> flow_host;                   // flow id -> its launch's trace pid
  std::map<uint64_t, json> flow_end;                       // flow id -> its "f"
  std::vector<json> slices, instants;
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    const int64_t pid = e["pid"].get<int64_t>();
    if (ph == "M" && e["name"] == "process_name" && pid < (int64_t{1} << 30)) {
      EXPECT_TRUE(host_names.emplace(pid, e["args"]["name"]).second) << e.dump();
    }
    if (ph == "M" && e["name"] == "thread_name" && pid >= (int64_t{1} << 30)) {
      stream_names[e["tid"].get<int64_t>()] = e["args"]["name"];
    }
    if (ph == "s") flow_host[e["id"].get<uint64_t>()] = pid;
    if (ph == "f") flow_end[e["id"].get<uint64_t>()] = e;
    if (e.value("cat", "") == "kernel" && ph == "X") slices.push_back(e);
    if (e.value("cat", "") == "kernel" && ph == "i") instants.push_back(e);
  }
  EXPECT_EQ(host_names, (std::map<int64_t, std::string>{{1, "trainer (pid 1)"},
                                                          {kB, "worker (pid 1 #2)"}}));
  std::set<std::string> streams;
  for (const auto& [tid, name] : stream_names) streams.insert(name);
  EXPECT_EQ(streams,
            (std::set<std::string>{"default stream (pid 1)", "default stream (pid 1 #2)"}));
  // Each slice is its own process's kernel, joined to its own kernel_time: (host trace pid of
  // its launch, name, corr) -> duration (us).
  std::map<std::tuple<int64_t, std::string, uint64_t>, double> joined;
  int orphans = 0;
  for (const json& s : slices) {
    const uint64_t corr = s["args"]["correlation_id"];
    if (s["name"] == "kernel (corr 7)") {
      ++orphans;
      EXPECT_EQ(s["dur"].get<double>(), 5.0);
      EXPECT_EQ(stream_names[s["tid"].get<int64_t>()], "default stream (pid 1 #2)");
      continue;
    }
    int64_t host = -1;
    for (const auto& [id, f] : flow_end) {
      if (f["pid"] == s["pid"] && f["tid"] == s["tid"] && f["ts"] == s["ts"]) host = flow_host[id];
    }
    joined[{host, s["name"], corr}] = s["dur"].get<double>();
  }
  EXPECT_EQ(orphans, 1);
  const std::map<std::tuple<int64_t, std::string, uint64_t>, double> expected = {
      {{1, "a_kernel()", 5}, 1.0},
      {{1, "a_kernel()", 6}, 2.0},
      {{kB, "b_kernel()", 5}, 3.0},
      {{kB, "b_kernel()", 6}, 4.0}};
  EXPECT_EQ(joined, expected);
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["name"], "a_kernel()");
  EXPECT_EQ(instants[0]["args"]["correlation_id"], 7);
  EXPECT_EQ(stream_names[instants[0]["tid"].get<int64_t>()], "default stream (pid 1)");
}

// --jsonl --kernel a_kernel over the two processes of pid 1 (WriteTwoProcessesOfPidOne): A's
// kernels and their kernel_times are written; B's kernel_times are not, though their correlation
// ids (5, 6, 7) are those of A's kernels kept (a filter joining by pid alone writes them all).
// The other events pass (no --since/--until).
TEST(ExportStreamTest, JsonlKeepsTheKernelTimesOfItsOwnProcessOnly) {
  TempDir dir;
  report::testing::WriteTwoProcessesOfPidOne(dir.path() / "logs");
  const fs::path out = dir.path() / "a.jsonl";
  const auto r = RunProcess(CUFLIGHT_CLI_PATH, {"export", "--jsonl", out.string(), "--kernel",
                                                "a_kernel", (dir.path() / "logs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines;  // "<exe or kernel> <type> <corr>", in order
  std::istringstream in(ReadAll(out));
  std::string exe;
  for (std::string line; std::getline(in, line);) {
    const json e = json::parse(line);
    const std::string type = e["type"];
    if (type == "process_start") exe = e["exe"];
    lines.push_back(exe + " " + type +
                    (e.contains("correlation_id") ? " " + e["correlation_id"].dump() : ""));
  }
  const std::vector<std::string> expected = {
      "/opt/a/trainer process_start", "/opt/a/trainer device",
      "/opt/a/trainer kernel 5",      "/opt/a/trainer kernel_time 5",
      "/opt/a/trainer kernel 6",      "/opt/a/trainer kernel_time 6",
      "/opt/a/trainer kernel 7",      "/opt/b/worker process_start",
      "/opt/b/worker device"};
  EXPECT_EQ(lines, expected);
}

// A writer that keeps nothing: the exporter's own state is what is measured.
class CountingWriter final : public TraceWriter {
 public:
  void DefineTrack(const Track&) override { ++tracks; }
  void KernelSlice(uint64_t, const KernelRecord&, const GpuTime&, uint64_t) override { ++slices; }
  void KernelInstant(uint64_t, const KernelRecord&, uint64_t) override { ++instants; }
  void OrphanSlice(uint64_t, const GpuTime&) override { ++orphans; }
  void Launch(uint64_t, const KernelRecord&, uint64_t) override { ++launches; }
  void MarkerInstant(uint64_t, const Marker&) override { ++markers; }
  bool Finish(const ExportCounts&, std::string*) override { return true; }
  uint64_t tracks = 0, slices = 0, instants = 0, orphans = 0, launches = 0, markers = 0;
};

struct ExportRun {
  CountingWriter writer;
  ExportCounts counts;
  size_t peak_pending = 0;
  size_t distinct_kernels = 0;
  size_t pending_after = 0;
};

void ExportLog(const fs::path& dir, ExportLimits limits, ExportRun* run) {
  std::vector<fs::path> files;
  std::string error;
  ASSERT_TRUE(logread::ExpandLogPaths({dir.string()}, &files, &error)) << error;
  report::ReportOptions none;
  report::LaunchFilter filter(none);
  TraceExporter exporter(&filter, &run->writer, limits);
  logread::ReadSummary summary;
  logread::ReadOptions read;
  read.on_unknown = [&](const logread::UnknownEvent& e, const logread::Origin&) {
    exporter.AddUnknown(e);
  };
  ASSERT_TRUE(logread::ReadLogFiles(
      files, [&](const schema::OwnedEvent& e, const logread::Origin&) { exporter.Add(e); }, read,
      &summary, &error))
      << error;
  run->peak_pending = exporter.peak_pending_launches();
  run->distinct_kernels = exporter.distinct_kernels();
  ASSERT_TRUE(exporter.Finish(&error)) << error;
  run->counts = exporter.counts();
  run->pending_after = exporter.pending_launches() + exporter.pending_times();
}

// 20,000 and 200,000 launches with kernel_times flushed every 4,096 launches: the exporter holds
// at most the launches of one flush (plus those whose kernel has not ended at the flush),
// whatever the size of the log. Kernels last 1-5 us and each of the 4 streams gets a launch every
// 40-120 us, so at a flush at most the last kernel of each stream is still running.
TEST(ExportStreamTest, RetainedStateDependsOnTheFlushDistanceNotOnTheLogSize) {
  std::vector<size_t> peaks;
  for (const uint64_t launches : {20'000u, 200'000u}) {
    TempDir dir;
    bench::LogSpec spec;
    spec.launches = launches;
    spec.flush_every = 4096;
    spec.min_kernel_ns = 1000;
    spec.max_kernel_ns = 5000;
    spec.rotate_bytes = 16u << 20;
    bench::LogTotals totals;
    std::string error;
    ASSERT_TRUE(bench::WriteLogs(dir.path(), spec, &totals, &error)) << error;
    ExportRun run;
    ExportLog(dir.path(), {}, &run);
    EXPECT_EQ(run.counts.kernels, launches);
    EXPECT_EQ(run.counts.timed, launches);
    EXPECT_EQ(run.writer.slices, launches);
    EXPECT_EQ(run.writer.launches, launches);
    EXPECT_EQ(run.counts.launches_given_up, 0u);
    EXPECT_EQ(run.distinct_kernels, 40u);
    EXPECT_EQ(run.pending_after, 0u);
    EXPECT_LE(run.peak_pending, 4096u + 4);
    EXPECT_GE(run.peak_pending, 4096u);
    peaks.push_back(run.peak_pending);
  }
  EXPECT_LE(peaks[1], peaks[0] + 4);
}

// With room for fewer waiting launches than a flush holds, the oldest are written untimed, and
// their late kernel_times dropped when they in turn wait too long: each counted, none lost.
TEST(ExportStreamTest, ALaunchWaitingTooLongIsWrittenUntimedAndCounted) {
  TempDir dir;
  bench::LogSpec spec;
  spec.launches = 10'000;
  spec.flush_every = 4096;
  spec.rotate_bytes = 0;
  bench::LogTotals totals;
  std::string error;
  ASSERT_TRUE(bench::WriteLogs(dir.path(), spec, &totals, &error)) << error;
  ExportRun run;
  ExportLimits limits;
  limits.max_pending_launches = 1000;
  limits.max_pending_times = 1000;
  ExportLog(dir.path(), limits, &run);
  EXPECT_LE(run.peak_pending, 1000u);
  EXPECT_GT(run.counts.launches_given_up, 0u);
  EXPECT_EQ(run.counts.kernels, 10'000u);
  EXPECT_EQ(run.counts.timed + run.counts.untimed, 10'000u);
  EXPECT_EQ(run.counts.untimed, run.counts.launches_given_up);
  // A given-up launch's kernel_time finds no kernel: it waits, and is dropped or becomes an
  // orphan slice at the end; every kernel_time is accounted for.
  EXPECT_EQ(run.counts.timed + run.counts.times_given_up + run.counts.orphan_times, 10'000u);
  EXPECT_EQ(run.writer.instants, run.counts.untimed);
}

// Under sampled, a launch made outside a timing window says no kernel_time will come
// (timing_window false): written at once as an instant, it does not wait. With room for 8
// waiting launches, 40 launches of which the 1st, 11th, 21st and 31st are in a window, their
// times after all 40: the four are still joined (kept waiting alongside the others, each would
// have been pushed out by the 8 launches after it and written untimed).
TEST(ExportStreamTest, LaunchesOutsideAWindowAreWrittenAtOnce) {
  TempDir dir;
  constexpr int32_t kPid = 100;
  constexpr int64_t kStart = 1763708400000000000;  // 2025-11-21T07:00:00Z
  schema::OwnedProcessStartEvent start = report::testing::Start(kPid, 0, kStart);
  start.config = {{"timing", "sampled"}};
  std::string log = report::testing::Line(start) +
                    report::testing::Line(report::testing::Device(kPid, 1, 0, "NVIDIA A100"));
  uint64_t seq = 2;
  for (uint64_t i = 1; i <= 40; ++i) {
    schema::OwnedKernelEvent k = report::testing::Kernel(
        kPid, seq++, kStart + static_cast<int64_t>(i) * 1000, i, report::testing::KernelSpec{});
    k.timing_window = i % 10 == 1;
    log += report::testing::Line(k);
  }
  for (uint64_t i = 1; i <= 40; i += 10) {
    log += report::testing::Line(report::testing::KernelTime(kPid, seq++, i, 10000));
  }
  log += report::testing::Line(report::testing::End(kPid, seq++, 0));
  report::testing::WriteFile(dir.path() / "a.jsonl", log);

  ExportRun run;
  ExportLimits limits;
  limits.max_pending_launches = 8;
  ExportLog(dir.path(), limits, &run);
  EXPECT_EQ(run.counts.kernels, 40u);
  EXPECT_EQ(run.counts.timed, 4u);
  EXPECT_EQ(run.counts.untimed, 36u);
  EXPECT_EQ(run.counts.launches_given_up, 0u);
  EXPECT_EQ(run.counts.orphan_times + run.counts.times_given_up, 0u);
  EXPECT_EQ(run.writer.slices, 4u);
  EXPECT_EQ(run.writer.instants, 36u);
  EXPECT_EQ(run.peak_pending, 4u);  // the four in windows, no other
  EXPECT_EQ(run.pending_after, 0u);
}

}  // namespace
}  // namespace cuflight::trace
