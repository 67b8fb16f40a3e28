// On a GPU (label `gpu`): occupancy_probe runs under libcuflight_inject.so, and every kernel
// event's max_active_blocks equals what the program got from
// cudaOccupancyMaxActiveBlocksPerMultiprocessor for the same configuration. The graph's kernel
// nodes arrive as kernel events with graph ids, and no launch made during stream capture is
// reported as an execution.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <sstream>
#include <string>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "running_collector.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

using test_support::StoringCollector;
using test_support::TempSocketPath;

struct Expectation {
  std::string kernel;
  uint32_t block = 0;
  int64_t dyn = 0;
  int blocks = 0;
  int seen = 0;
};

TEST(GpuInjection, EveryLaunchMatchesTheRuntimeOccupancyCalculator) {
  const std::string path = TempSocketPath("gpu");
  StoringCollector collector(path);
  setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
  setenv("CUDA_INJECTION64_PATH",
         cuflight::testing::PathFromEnv("CUFLIGHT_TEST_INJECT_SO", CUFLIGHT_INJECT_SO).c_str(), 1);
  const auto r = cuflight::testing::RunProcess(
      cuflight::testing::PathFromEnv("CUFLIGHT_TEST_OCCUPANCY_PROBE", CUFLIGHT_OCCUPANCY_PROBE),
      {});
  unsetenv("CUDA_INJECTION64_PATH");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::cout << r.out.substr(0, r.out.find('\n')) << "\n";

  std::vector<Expectation> expected;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string tag;
    f >> tag;
    if (tag != "EXPECT") continue;
    Expectation e;
    f >> e.kernel >> e.block >> e.dyn >> e.blocks;
    expected.push_back(e);
  }
  ASSERT_GT(expected.size(), 20u);
  ASSERT_TRUE(collector.WaitFor([](const std::vector<std::string>& l) {
    return !l.empty() && l.back().find("\"process_end\"") != std::string::npos;
  }));

  int kernels = 0;
  int graph_nodes = 0;
  for (const std::string& line : collector.Lines()) {
    const schema::DecodeResult d = schema::Decode(line);
    ASSERT_TRUE(d.ok()) << d.message;
    const auto* k = std::get_if<schema::OwnedKernelEvent>(&d.event);
    if (k == nullptr) continue;
    ++kernels;
    if (k->graph_id) ++graph_nodes;
    const std::string name = k->demangled.substr(0, k->demangled.find('('));
    bool matched = false;
    for (Expectation& e : expected) {
      if (e.kernel == name && e.block == k->block.x && e.dyn == k->dyn_shared_bytes) {
        // The same configuration may appear twice (the carveout case): take the first unmatched
        // with the same answer.
        if (k->occupancy.max_active_blocks == e.blocks) {
          ++e.seen;
          matched = true;
          break;
        }
      }
    }
    EXPECT_TRUE(matched) << name << " block " << k->block.x << " dyn " << k->dyn_shared_bytes
                         << ": event says " << k->occupancy.max_active_blocks << " blocks/SM";
  }
  for (const Expectation& e : expected) {
    EXPECT_GE(e.seen, 1) << "no matching event for " << e.kernel << " " << e.block << " " << e.dyn;
  }
  EXPECT_EQ(graph_nodes, 6);
  std::cout << "kernel events: " << kernels << ", configurations: " << expected.size()
            << ", graph node events: " << graph_nodes << "\n";
}

}  // namespace
}  // namespace cuflight::inject::testing
