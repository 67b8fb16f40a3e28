// The log reader on interned files (docs/protocol.md, "Interned configurations"): every reader
// path (ReadLogFile, ReadLogFiles on the calling thread and with a decoder thread) delivers each
// launch as the kernel event it was split from, also when launches of several configurations
// alternate and when a configuration's launches differ in their own members (grid, waves, graph
// ids, timing window); a file's descriptions do not reach into the next file.
//
// The expected events are the kernel events made here by hand before schema::Split made their
// lines (protocol: a description and a launch together are the kernel event, member for member);
// their waves and tails are worked out below from the documented definition (a wave is sm_count x
// max_active_blocks blocks; the tail is the last wave's share, 1 when it is full).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/schema/config_expander.h"
#include "report_test_events.h"
#include "temp_dir.h"
#include "zstd_file.h"

namespace cuflight::logread {
namespace {

namespace fs = std::filesystem;
using report::testing::Line;
using report::testing::WriteFile;
using ::testing::HasSubstr;
using test_support::TempDir;

constexpr int32_t kPid = 7;

// Configuration A: 2 blocks per SM on 132 SMs, 264 blocks a wave. Configuration B: 8 per SM,
// 1,056 blocks a wave. Both on the H100's 132 SMs.
schema::OwnedKernelEvent LaunchOf(char config, uint64_t seq, uint64_t correlation_id,
                                  schema::Dim3 grid, double waves, double tail) {
  report::testing::KernelSpec spec;
  if (config == 'A') {
    spec.name = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE";
    spec.demangled = "void cutlass::Kernel<cutlass::gemm::kernel::Gemm>(Gemm::Params)";
    spec.block = {128, 1, 1};
    spec.regs = 168;
    spec.static_smem = 40960;
    spec.stream = 7;
    spec.occupancy = report::testing::Fields(2, 4, 64, schema::Resource::kRegisters);
  } else {
    spec.name = "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT0_T1_";
    spec.demangled = "void at::native::vectorized_elementwise_kernel<4>(int)";
    spec.block = {256, 1, 1};
    spec.regs = 24;
    spec.stream = 8;
    spec.occupancy = report::testing::Fields(8, 8, 64, schema::Resource::kWarps);
  }
  spec.grid = grid;
  schema::OwnedKernelEvent k = report::testing::Kernel(
      kPid, seq, 1'763'700'000'000'000'000 + static_cast<int64_t>(seq) * 20'011, correlation_id,
      spec);
  k.sm_count = 132;
  k.occupancy.waves = waves;
  k.occupancy.tail_utilization = tail;
  return k;
}

// Five launches, A and B alternating; A's first is a graph's kernel node under sampled timing,
// its second neither, so a member one launch sets must not stay for the next of its
// configuration.
std::vector<schema::OwnedKernelEvent> Launches() {
  std::vector<schema::OwnedKernelEvent> k;
  k.push_back(LaunchOf('A', 3, 101, {528, 1, 1}, 2.0, 1.0));    // 528 / 264 = 2 full waves
  k.back().graph_id = 9;
  k.back().graph_node_id = 90;
  k.back().timing_window = true;
  k.push_back(LaunchOf('B', 4, 102, {3168, 1, 1}, 3.0, 1.0));  // 3,168 / 1,056 = 3
  k.push_back(LaunchOf('A', 5, 103, {660, 1, 1}, 2.5, 0.5));    // 660 / 264; 132 of 264 last
  k.push_back(LaunchOf('B', 6, 104, {264, 1, 1}, 0.25, 0.25));  // 264 / 1,056
  k.push_back(LaunchOf('A', 7, 105, {264, 2, 1}, 2.0, 1.0));    // 528 blocks in 2-D
  return k;
}

// process_start, the two descriptions (ids 1 and 2, seqs 1 and 2: before their first launches,
// as a producer's preamble) and the launches.
std::string InternedText(const std::vector<schema::OwnedKernelEvent>& launches) {
  std::string text = Line(report::testing::Start(kPid, 0, 1'763'700'000'000'000'000));
  schema::OwnedKernelConfigEvent config;
  schema::OwnedLaunchEvent launch;
  schema::Split(launches[0], 1, &config, &launch);
  config.header.seq = 1;
  text += Line(config);
  schema::Split(launches[1], 2, &config, &launch);
  config.header.seq = 2;
  text += Line(config);
  for (const schema::OwnedKernelEvent& k : launches) {
    schema::Split(k, k.name == launches[0].name ? 1 : 2, &config, &launch);
    text += Line(launch);
  }
  return text;
}

struct Kernels {
  bool ok = false;
  std::string error;
  ReadSummary summary;
  std::vector<schema::OwnedKernelEvent> kernels;
  std::vector<uint64_t> configs;  // each kernel's Origin::config
  uint64_t other_events = 0;
  uint64_t other_configs = 0;  // events not expanded whose Origin::config is not 0
};

// Every reader path over `files`: ReadLogFile file by file, ReadLogFiles on the calling thread,
// ReadLogFiles with one decoder thread.
std::vector<Kernels> ReadEveryWay(const std::vector<fs::path>& files) {
  std::vector<Kernels> all(3);
  auto collect = [](Kernels* r) {
    return [r](const schema::OwnedEvent& e, const Origin& origin) {
      if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e)) {
        r->kernels.push_back(*k);
        r->configs.push_back(origin.config);
      } else {
        ++r->other_events;
        if (origin.config != 0) ++r->other_configs;
      }
    };
  };
  all[0].ok = true;
  for (const fs::path& file : files) {
    all[0].ok = all[0].ok && ReadLogFile(file, collect(&all[0]), &all[0].summary, &all[0].error);
  }
  ReadOptions sequential;
  sequential.sequential = true;
  all[1].ok = ReadLogFiles(files, collect(&all[1]), sequential, &all[1].summary, &all[1].error);
  ReadOptions threaded;
  threaded.threads = 1;
  all[2].ok = ReadLogFiles(files, collect(&all[2]), threaded, &all[2].summary, &all[2].error);
  return all;
}

TEST(InternedReadTest, AlternatingConfigurationsReadBackAsTheKernelEventsTheyWereSplitFrom) {
  TempDir dir;
  const std::vector<schema::OwnedKernelEvent> launches = Launches();
  const fs::path plain = dir.path() / "p.jsonl";
  WriteFile(plain, InternedText(launches));
  const fs::path compressed = dir.path() / "p.000001.jsonl.zst";
  std::string error;
  ASSERT_TRUE(logstore::CompressFileAtomically(plain, compressed, 1, &error)) << error;
  for (const fs::path& file : {plain, compressed}) {
    SCOPED_TRACE(file.native());
    int way = 0;
    for (const Kernels& r : ReadEveryWay({file})) {
      SCOPED_TRACE(way++);
      ASSERT_TRUE(r.ok) << r.error;
      ASSERT_EQ(r.kernels.size(), launches.size());
      for (size_t i = 0; i < launches.size(); ++i) {
        EXPECT_EQ(r.kernels[i], launches[i]) << "launch " << i;
      }
      // Each kernel event names the configuration it was expanded from (A is 1, B is 2).
      EXPECT_EQ(r.configs, (std::vector<uint64_t>{1, 2, 1, 2, 1}));
      EXPECT_EQ(r.other_configs, 0u);
      // Lines: process_start, 2 descriptions, 5 launches; events: the descriptions are none.
      EXPECT_EQ(r.summary.lines, 8u);
      EXPECT_EQ(r.summary.events, 6u);
      EXPECT_EQ(r.other_events, 1u);
      EXPECT_EQ(r.summary.rejected_lines, 0u);
    }
  }
}

// Each file is a sequence of its own: the second file's launch of configuration 1, not
// described there, is refused by name, also when the first file described it; the second
// file's own description then serves its next launch.
TEST(InternedReadTest, AFilesDescriptionsDoNotServeTheNextFile) {
  TempDir dir;
  const std::vector<schema::OwnedKernelEvent> launches = Launches();
  const fs::path first = dir.path() / "a.000001.jsonl";
  WriteFile(first, InternedText(launches));
  schema::OwnedKernelConfigEvent config;
  schema::OwnedLaunchEvent launch;
  schema::OwnedKernelEvent later = launches[2];
  later.header.seq = 8;
  later.correlation_id = 106;
  schema::Split(later, 1, &config, &launch);
  config.header.seq = 1;  // the collector's copy keeps the description's seq
  std::string second_text = Line(launch);  // line 1: not described in this file
  second_text += Line(config);
  later.header.seq = 9;
  later.correlation_id = 107;
  schema::Split(later, 1, &config, &launch);
  second_text += Line(launch);  // line 3: described on line 2
  const fs::path second = dir.path() / "a.jsonl";
  WriteFile(second, second_text);

  int way = 0;
  for (const Kernels& r : ReadEveryWay({first, second})) {
    SCOPED_TRACE(way++);
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.kernels.size(), launches.size() + 1);
    EXPECT_EQ(r.kernels.back(), later);
    EXPECT_EQ(r.configs.back(), 1u);  // the second file's configuration 1
    EXPECT_EQ(r.summary.rejected_lines, 1u);
    ASSERT_EQ(r.summary.notes.size(), 1u);
    EXPECT_THAT(r.summary.notes[0], HasSubstr("rejected line 1 in " + second.native() +
                                              ": unknown_config: configuration 1"));
  }
}

}  // namespace
}  // namespace cuflight::logread
