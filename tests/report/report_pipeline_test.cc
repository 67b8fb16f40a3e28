// `cuflight report` over logs the real pipeline wrote: transport::Sender producers (the
// injector's own sender) -> collector::Collector in this process -> a log directory with rotated,
// zstd-compressed segments, and a producer whose connection drops without process_end so that
// the collector appends process_lost.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "collector_test_util.h"
#include "cuflight/transport/sender.h"
#include "report_cli_run.h"
#include "report_test_events.h"

namespace cuflight::report {
namespace {

namespace fs = std::filesystem;
using collector::testing::FindLog;
using collector::testing::RunningCollector;
using collector::testing::TempDir;
using collector::testing::TestOptions;
using collector::testing::WaitUntil;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::Device;
using testing::End;
using testing::Fields;
using testing::Kernel;
using testing::KernelSpec;
using testing::KernelTime;
using testing::Line;
using testing::CliRun;
using testing::Report;
using testing::Start;


// A producer: preamble lines (process_start, device) and the rest, each with its seq, sent
// through a Sender and flushed until the collector acknowledged everything.
void Produce(const fs::path& socket, const std::vector<std::pair<uint64_t, std::string>>& preamble,
             const std::vector<std::pair<uint64_t, std::string>>& lines) {
  transport::SenderOptions options;
  options.socket_path = socket.string();
  options.flush_interval = std::chrono::milliseconds(2);
  transport::Sender sender(options);
  ASSERT_TRUE(sender.ok());
  for (const auto& [seq, line] : preamble) ASSERT_TRUE(sender.AddPreamble(seq, line));
  for (const auto& [seq, line] : lines) {
    ASSERT_TRUE(sender.Enqueue(seq, line));
    sender.Poll(std::chrono::steady_clock::now());
  }
  ASSERT_TRUE(sender.Flush(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  // The sender is destroyed here: its connection closes, with or without process_end sent.
}

std::string ReadAll(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ReportPipeline, RotatedZstdSegmentsAndALostProcess) {
  TempDir dir;
  collector::CollectorOptions options = TestOptions(dir.path());
  options.rotate_bytes = 4096;  // a few kernel events per segment
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);

  const int32_t pid = static_cast<int32_t>(getpid());
  constexpr int64_t kStartA = 1763708400000000000;
  constexpr int64_t kStartB = kStartA + 1;

  // Process A: 20 launches of one kernel timed 1..20 us, then process_end.
  KernelSpec a;
  a.name = "_Z5stepAPf";
  a.demangled = "stepA(float*)";
  a.occupancy = Fields(6, 8, 64, schema::Resource::kRegisters);
  a.occupancy.regs_for_next_block = 32;
  std::vector<std::pair<uint64_t, std::string>> lines;
  uint64_t seq = 2;
  for (uint64_t i = 1; i <= 20; ++i) {
    lines.emplace_back(seq, Line(Kernel(pid, seq, kStartA + static_cast<int64_t>(i), i, a)));
    ++seq;
    lines.emplace_back(seq, Line(KernelTime(pid, seq, i, i * 1000)));
    ++seq;
  }
  lines.emplace_back(seq, Line(End(pid, seq, 0)));
  Produce(options.socket,
          {{0, Line(Start(pid, 0, kStartA, "/opt/app/bin/trainA"))},
           {1, Line(Device(pid, 1, 0, "NVIDIA A100"))}},
          lines);
  ASSERT_TRUE(WaitUntil([&] { return running.collector()->sink_stats().segments_compressed >= 1; }));

  // Process B: three launches on one stream, the last never finishes; no process_end.
  KernelSpec b;
  b.name = "_Z5stepBPf";
  b.demangled = "stepB(float*)";
  b.stream = 0x10;
  b.occupancy = Fields(8, 8, 64, schema::Resource::kWarps);
  lines.clear();
  lines.emplace_back(2, Line(Kernel(pid, 2, kStartB + 1, 1, b)));
  lines.emplace_back(3, Line(KernelTime(pid, 3, 1, 5000, 0x10)));
  lines.emplace_back(4, Line(Kernel(pid, 4, kStartB + 2, 2, b)));
  lines.emplace_back(5, Line(KernelTime(pid, 5, 2, 7000, 0x10)));
  lines.emplace_back(6, Line(Kernel(pid, 6, kStartB + 3, 3, b)));
  Produce(options.socket,
          {{0, Line(Start(pid, 0, kStartB, "/opt/app/bin/trainB"))},
           {1, Line(Device(pid, 1, 0, "NVIDIA A100"))}},
          lines);
  ASSERT_TRUE(WaitUntil([&] {
    const fs::path log = FindLog(options.log_dir, "trainB", pid);
    return !log.empty() && ReadAll(log).find("\"process_lost\"") != std::string::npos;
  }));
  ASSERT_EQ(running.Stop(), 0);

  const CliRun r = Report({options.log_dir.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_GE(j["read"]["compressed_files"].get<int>(), 1);
  EXPECT_EQ(j["read"]["torn_lines"], 0);
  EXPECT_EQ(j["read"]["rejected_lines"], 0);
  // A: 2 + 40 + 1 events; B: 2 + 5 + process_lost.
  EXPECT_EQ(j["read"]["events"], 43 + 8);
  ASSERT_EQ(j["processes"].size(), 2u);
  EXPECT_EQ(j["processes"][0]["exe"], "/opt/app/bin/trainA");
  EXPECT_EQ(j["processes"][0]["ending"], "ended");
  EXPECT_EQ(j["processes"][1]["exe"], "/opt/app/bin/trainB");
  EXPECT_EQ(j["processes"][1]["ending"], "lost");

  ASSERT_EQ(j["review"].size(), 1u);
  const json& lost = j["review"][0];
  EXPECT_EQ(lost["pid"], pid);
  EXPECT_EQ(lost["start_ns"], kStartB);
  EXPECT_EQ(lost["lost"]["reason"], "disconnected");
  EXPECT_EQ(lost["lost"]["last_seq"], 6);
  EXPECT_EQ(lost["lost"]["events_lost"], 0);
  ASSERT_EQ(lost["streams"].size(), 1u);
  EXPECT_EQ(lost["streams"][0]["stream"], 0x10);
  const json& launches = lost["streams"][0]["last_launches"];
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0]["finished"], true);
  EXPECT_EQ(launches[1]["finished"], true);
  // Killed without a flush: whether the last one finished is unknown (null), not false.
  EXPECT_TRUE(launches[2]["finished"].is_null()) << launches[2].dump();
  EXPECT_EQ(launches[2]["correlation_id"], 3);

  // A's durations 1..20 us: total 210 us, mean 10.5 us, p50 rank 10 = 10 us, p99 rank 20 = 20 us.
  ASSERT_EQ(j["signatures"].size(), 2u);
  const json& step_a = j["signatures"][0];
  EXPECT_EQ(step_a["demangled"], "stepA(float*)");
  EXPECT_EQ(step_a["launches"], 20);
  EXPECT_EQ(step_a["gpu_time"]["total_ns"], 210000);
  EXPECT_EQ(step_a["gpu_time"]["mean_ns"], 10500.0);
  EXPECT_EQ(step_a["gpu_time"]["p50_ns"], 10000);
  EXPECT_EQ(step_a["gpu_time"]["p99_ns"], 20000);
  const json& step_b = j["signatures"][1];
  EXPECT_EQ(step_b["launches"], 3);
  EXPECT_EQ(step_b["timed_launches"], 2);

  const CliRun text = Report({options.log_dir.string(), "--color", "never"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("2 processes (1 did not end normally)"));
  // Start, device and 5 events stored; seqs 0..6 all present; after 6 the log cannot say.
  EXPECT_EQ(lost["ending_detail"],
            "lost: the connection ended without process_end (killed, or no exit flush); 7 events "
            "stored up to seq 6, none missing before it; whether it sent more after seq 6 is "
            "unknown");
  EXPECT_THAT(text.out, HasSubstr("trainB on node1: lost: the connection ended without "));
  EXPECT_THAT(text.out, HasSubstr("device 0, stream 16: 3 launches:"));
  EXPECT_THAT(text.out, HasSubstr("unknown: no kernel_time, and the log cannot tell"));
}

// A json signature of `j` by demangled name (null when absent).
const json* SignatureNamed(const json& j, const std::string& demangled) {
  for (const json& s : j["signatures"]) {
    if (s["demangled"] == demangled) return &s;
  }
  return nullptr;
}

// A 3-node CUDA graph replayed 4 times, its nodes taking 1, 2 and 3 ms, through the real
// pipeline (testing::SharedCorrelationLines): all nodes of a replay share its correlation id, so
// only a join per node gives each kernel its own time: by hand 4 x 1 = 4 ms, 4 x 2 = 8 ms and
// 4 x 3 = 12 ms (a join per correlation id would give node_a's 1 ms to every node: 4 ms each).
// The multi-device cooperative launch joins per device (10 and 30 us: 40 us in all, not 20), and
// the ordinary launch's old-format kernel_time line still joins (7 us).
TEST(ReportPipeline, GraphNodesAndDevicesSharingACorrelationIdJoinEach) {
  TempDir dir;
  const collector::CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  const int32_t pid = static_cast<int32_t>(getpid());
  constexpr int64_t kStart = 1763708400000000000;
  std::vector<std::pair<uint64_t, std::string>> lines =
      testing::SharedCorrelationLines(pid, kStart);
  const std::vector<std::pair<uint64_t, std::string>> preamble(lines.begin(), lines.begin() + 3);
  lines.erase(lines.begin(), lines.begin() + 3);
  Produce(options.socket, preamble, lines);
  ASSERT_TRUE(WaitUntil([&] {
    const fs::path log = FindLog(options.log_dir, "trainer", pid);
    return !log.empty() && ReadAll(log).find("\"process_end\"") != std::string::npos;
  }));
  ASSERT_EQ(running.Stop(), 0);

  const CliRun r = Report({options.log_dir.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["read"]["rejected_lines"], 0);
  ASSERT_EQ(j["processes"].size(), 1u);
  // 12 graph kernels, 1 ordinary, 2 cooperative: every one timed.
  EXPECT_EQ(j["processes"][0]["kernels"], 15);
  EXPECT_EQ(j["processes"][0]["timed_kernels"], 15);
  EXPECT_EQ(j["totals"]["timed_launches"], 15);
  const struct {
    const char* name;
    uint64_t total_ns;
    uint64_t each_ns;
  } nodes[] = {{"node_a()", 4000000, 1000000},
               {"node_b()", 8000000, 2000000},
               {"node_c()", 12000000, 3000000}};
  for (const auto& node : nodes) {
    const json* s = SignatureNamed(j, node.name);
    ASSERT_NE(s, nullptr) << node.name;
    EXPECT_EQ((*s)["launches"], 4) << node.name;
    EXPECT_EQ((*s)["timed_launches"], 4) << node.name;
    EXPECT_EQ((*s)["gpu_time"]["total_ns"], node.total_ns) << node.name;
    EXPECT_EQ((*s)["gpu_time"]["min_ns"], node.each_ns) << node.name;
    EXPECT_EQ((*s)["gpu_time"]["max_ns"], node.each_ns) << node.name;
  }
  const json* coop = SignatureNamed(j, "coop()");
  ASSERT_NE(coop, nullptr);
  EXPECT_EQ((*coop)["launches"], 2);
  EXPECT_EQ((*coop)["timed_launches"], 2);
  EXPECT_EQ((*coop)["gpu_time"]["total_ns"], 40000);
  EXPECT_EQ((*coop)["gpu_time"]["min_ns"], 10000);
  EXPECT_EQ((*coop)["gpu_time"]["max_ns"], 30000);
  const json* plain = SignatureNamed(j, "plain()");
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ((*plain)["timed_launches"], 1);
  EXPECT_EQ((*plain)["gpu_time"]["total_ns"], 7000);
  // Sorted by GPU time: node_c, node_b, node_a, coop, plain.
  ASSERT_EQ(j["signatures"].size(), 5u);
  EXPECT_EQ(j["signatures"][0]["demangled"], "node_c()");
  EXPECT_EQ(j["signatures"][2]["demangled"], "node_a()");
}

}  // namespace
}  // namespace cuflight::report
