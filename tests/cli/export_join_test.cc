// `cuflight export --perfetto` and `cuflight tail` (its filter and its lines) over kernels that
// share a correlation id, as CUDA graph replays and multi-device cooperative launches make them:
// each kernel execution is joined to its own kernel_time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "collector_test_util.h"
#include "cuflight/schema/decoder.h"
#include "event_filter.h"
#include "event_text.h"
#include "report_test_events.h"
#include "subprocess.h"

namespace cuflight::cli {
namespace {

using collector::testing::TempDir;
using cuflight::testing::RunProcess;
using nlohmann::json;

// Kernels sharing a correlation id (report::testing::SharedCorrelationLines): a 3-node graph
// replayed 4 times is 12 slices, each node's with its own duration (1, 2 and 3 ms), and the
// multi-device cooperative launch one slice per device; the ordinary launch's old-format
// kernel_time still joins. Nothing is left as an instant or an orphan time.
TEST(ExportJoinTest, EveryGraphNodeAndDeviceOfOneCorrelationIdIsItsOwnSlice) {
  TempDir dir;
  const std::filesystem::path day = dir.path() / "logs" / "2025-11-21";
  std::filesystem::create_directories(day);
  constexpr int64_t kStart = 1'763'708'400'000'000'000;
  std::string text;
  for (const auto& [seq, line] : report::testing::SharedCorrelationLines(100, kStart)) {
    text += line;
  }
  std::ofstream(day / "node1-trainer-100-5.jsonl", std::ios::binary) << text;
  const std::filesystem::path out = dir.path() / "trace.json";
  const auto r = RunProcess(CUFLIGHT_CLI_PATH,
                            {"export", "--perfetto", out.string(), (dir.path() / "logs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("15 kernels (15 timed, 0 without timing)"), std::string::npos) << r.err;
  std::ifstream in(out);
  const json trace = json::parse(in);
  EXPECT_EQ(trace["otherData"]["kernel_times_without_kernel"], 0);
  std::map<std::string, std::vector<double>> durations;  // slice name -> dur (us), by ts
  std::map<std::string, std::set<uint64_t>> node_ids;
  int slices = 0;
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e.at("ph").get<std::string>();
    if (ph == "i" && e.at("cat") == "kernel") ADD_FAILURE() << "untimed: " << e.dump();
    if (ph != "X") continue;
    ++slices;
    const std::string name = e["name"];
    durations[name].push_back(e["dur"].get<double>());
    if (e["args"].contains("graph_node_id")) {
      EXPECT_EQ(e["args"]["graph_id"], report::testing::kGraph);
      node_ids[name].insert(e["args"]["graph_node_id"].get<uint64_t>());
    }
  }
  EXPECT_EQ(slices, 15);
  EXPECT_EQ(durations["node_a()"], std::vector<double>(4, 1000.0));
  EXPECT_EQ(durations["node_b()"], std::vector<double>(4, 2000.0));
  EXPECT_EQ(durations["node_c()"], std::vector<double>(4, 3000.0));
  EXPECT_EQ(durations["plain()"], std::vector<double>{7.0});
  std::vector<double> coop = durations["coop()"];
  std::sort(coop.begin(), coop.end());
  EXPECT_EQ(coop, (std::vector<double>{10.0, 30.0}));
  EXPECT_EQ(node_ids["node_a()"], std::set<uint64_t>{report::testing::kGraphNodes[0]});
  EXPECT_EQ(node_ids["node_b()"], std::set<uint64_t>{report::testing::kGraphNodes[1]});
  EXPECT_EQ(node_ids["node_c()"], std::set<uint64_t>{report::testing::kGraphNodes[2]});
}

// `cuflight tail --kernel`: a kernel_time is shown when its own kernel was, per graph node. In the
// third replay the kernels come first and the times in reverse order (node_c's first), so a
// filter remembering correlation ids alone would show node_c's time there and hide node_b's.
TEST(TailFilterTest, ShowsTheKernelTimeOfEachShownGraphNodeOnly) {
  EventFilter filter("^node_b", {}, "");
  std::vector<std::string> shown;  // "kernel <node>" or "time <node>"
  for (const auto& [seq, line] : report::testing::SharedCorrelationLines(100, 1)) {
    const schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    if (!filter.Accept(d.event, 0)) continue;
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&d.event)) {
      shown.push_back("kernel " + k->demangled);
    } else if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&d.event)) {
      ASSERT_TRUE(t->graph_node_id.has_value());
      EXPECT_EQ(*t->graph_node_id, report::testing::kGraphNodes[1]);
      EXPECT_EQ(t->duration_ns, report::testing::kGraphNodeNs[1]);
      shown.push_back("time");
    } else {
      ADD_FAILURE() << "shown: " << line;
    }
  }
  const std::vector<std::string> one = {"kernel node_b()", "time"};
  std::vector<std::string> expected;
  for (int replay = 0; replay < 4; ++replay) {
    expected.insert(expected.end(), one.begin(), one.end());
  }
  EXPECT_EQ(shown, expected);
}

// `cuflight tail --kernel` under sampled: a launch made outside a timing window says no
// kernel_time will come (timing_window false), so the filter keeps no place for its time. One
// launch in a window, then more launches outside one than the filter keeps places for
// (EventFilter::kMaxPending), then the windowed launch's kernel_time (an activity flush after
// them): still shown, as its kernel was.
TEST(TailFilterTest, LaunchesOutsideAWindowKeepNoPlaceForATime) {
  EventFilter filter("^gemm", {}, "");
  report::testing::KernelSpec gemm;
  gemm.demangled = "gemm(float*)";
  uint64_t seq = 2;
  schema::OwnedKernelEvent timed = report::testing::Kernel(100, seq++, 1, 1, gemm);
  timed.timing_window = true;
  ASSERT_TRUE(filter.Accept(timed, 0));
  for (uint64_t i = 0; i < EventFilter::kMaxPending + 10; ++i) {
    schema::OwnedKernelEvent k = report::testing::Kernel(100, seq++, 2, 2 + i, gemm);
    k.timing_window = false;
    ASSERT_TRUE(filter.Accept(k, 0));
  }
  EXPECT_TRUE(filter.Accept(report::testing::KernelTime(100, seq++, 1, 5000), 0));
}

// `cuflight tail`'s line names a graph node's ids after its correlation id, on the kernel and the
// kernel_time alike; an ordinary launch's lines have none.
TEST(TailTextTest, GraphNodeIdsFollowTheCorrelationId) {
  std::vector<std::string> texts;
  for (const auto& [seq, line] : report::testing::SharedCorrelationLines(100, 1)) {
    const schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    if (std::holds_alternative<schema::OwnedKernelEvent>(d.event) ||
        std::holds_alternative<schema::OwnedKernelTimeEvent>(d.event)) {
      texts.push_back(EventText(d.event));
    }
  }
  ASSERT_EQ(texts.size(), 30u);  // 24 graph events, 2 plain, 4 coop
  // 0x7f0000000101 = 139637976727809.
  EXPECT_NE(texts[0].find(" kernel node_a() "), std::string::npos) << texts[0];
  EXPECT_NE(texts[0].find(" corr 101 graph 9 node 139637976727809"), std::string::npos) << texts[0];
  EXPECT_NE(texts[1].find(" kernel_time corr 101 graph 9 node 139637976727809 device 0 "),
            std::string::npos)
      << texts[1];
  EXPECT_EQ(texts[24].find(" graph "), std::string::npos) << texts[24];  // plain's kernel
  EXPECT_NE(texts[25].find(" kernel_time corr 200 device 0 "), std::string::npos) << texts[25];
}

}  // namespace
}  // namespace cuflight::cli
