// Interned configurations found by what a launch record says (libinject/src/config_table.h,
// points 2 and 5-8): the key of every member the kernel_config is made of, the table's bound,
// and through the sender thread the ids launches name: a new function at a retired one's handle,
// each launch dimension, the content table's bound and a refused description.
#include "config_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "inject_test_support.h"
#include "running_collector.h"
#include "sender_thread.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

constexpr uint64_t kF = 0x1000;
constexpr uint64_t kModuleA = 0xA000;
constexpr uint64_t kModuleB = 0xB000;

blackbox::WireLaunchRecord Record() {
  blackbox::WireLaunchRecord r;
  r.context = 3;
  r.stream = 14;
  r.grid[0] = 264;
  r.block[0] = 256;
  r.dyn_smem = 0;
  r.device = 0;
  return r;
}

TEST(RecordConfigs, EveryMemberTheDescriptionIsMadeOfIsInTheKey) {
  RecordConfigs table;
  const blackbox::WireLaunchRecord base = Record();
  ASSERT_TRUE(table.Add(RecordConfigs::Key::Of(base, 7), {.id = 1, .occupancy = 0.5}));
  ASSERT_NE(table.Find(RecordConfigs::Key::Of(base, 7)), nullptr);
  EXPECT_EQ(table.Find(RecordConfigs::Key::Of(base, 7))->id, 1u);
  // What blackbox::KernelEventBuilder::BuildFrom makes the kernel event's launch-invariant
  // members of, one at a time: each is another configuration.
  std::vector<blackbox::WireLaunchRecord> others(17, base);
  others[0].context = 4;
  others[1].stream = 15;
  others[2].block[0] = 128;
  others[3].block[1] = 2;
  others[4].block[2] = 2;
  others[5].cluster[0] = 2;
  others[6].dyn_smem = 4096;
  others[7].carveout = 50;
  others[8].func_max_dyn_smem = 65536;
  others[9].func_carveout = 100;
  others[10].max_active_clusters = 16;
  others[11].driver_max_active_blocks = 4;
  others[12].max_cluster_size = 8;
  others[13].sm_count = 66;
  others[14].device = 1;
  others[15].api = LaunchApi::kLaunchKernelEx;
  others[16].launch_flags = blackbox::kLaunchCooperative;
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_EQ(table.Find(RecordConfigs::Key::Of(others[i], 7)), nullptr) << "member " << i;
  }
  EXPECT_EQ(table.Find(RecordConfigs::Key::Of(base, 8)), nullptr);  // another FunctionInfo
  // What is the launch's alone: the same configuration.
  blackbox::WireLaunchRecord same = base;
  same.grid[0] = 1;
  same.grid[2] = 9;
  same.correlation_id = 99;
  same.tid = 1234;
  same.ts_ns = 5;
  same.launch_flags = blackbox::kLaunchInTimingWindow | blackbox::kLaunchProgrammaticSerialization;
  ASSERT_NE(table.Find(RecordConfigs::Key::Of(same, 7)), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

TEST(RecordConfigs, StopsEnteringAtItsBound) {
  RecordConfigs table;
  const blackbox::WireLaunchRecord r = Record();
  for (uint64_t f = 1; f <= RecordConfigs::kMaxEntries; ++f) {
    ASSERT_TRUE(table.Add(RecordConfigs::Key::Of(r, f), {.id = f}));
  }
  EXPECT_FALSE(table.Add(RecordConfigs::Key::Of(r, RecordConfigs::kMaxEntries + 1), {.id = 1}));
  EXPECT_EQ(table.Find(RecordConfigs::Key::Of(r, RecordConfigs::kMaxEntries + 1)), nullptr);
  EXPECT_EQ(table.size(), RecordConfigs::kMaxEntries);
  for (uint64_t f = 1; f <= RecordConfigs::kMaxEntries; f += 97) {
    const RecordConfigs::Entry* e = table.Find(RecordConfigs::Key::Of(r, f));
    ASSERT_NE(e, nullptr) << f;
    EXPECT_EQ(e->id, f);
  }
}

// A stored kernel line, as its type's letter and the configuration id it describes or names:
// "C<id>" a kernel_config, "L<id>" a launch, "K" a whole kernel event.
std::vector<std::string> KernelLines(const StoringCollector& collector) {
  std::vector<std::string> out;
  for (const std::string& line : collector.Lines()) {
    const schema::DecodeResult d = schema::Decode(line);
    EXPECT_TRUE(d.ok()) << line;
    if (const auto* c = std::get_if<schema::OwnedKernelConfigEvent>(&d.event)) {
      out.push_back("C" + std::to_string(c->config));
    } else if (const auto* l = std::get_if<schema::OwnedLaunchEvent>(&d.event)) {
      out.push_back("L" + std::to_string(l->config));
    } else if (std::holds_alternative<schema::OwnedKernelEvent>(d.event)) {
      out.push_back("K");
    }
  }
  return out;
}

// The expanded kernel events (as every reader gives them), headers and threads aside.
std::vector<schema::OwnedKernelEvent> Kernels(const StoringCollector& collector) {
  std::vector<schema::OwnedKernelEvent> out;
  for (const schema::OwnedEvent& e : collector.Events()) {
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e)) {
      out.push_back(*k);
      out.back().header = {};
    }
  }
  return out;
}

struct Producer {
  Harness h{16384};
  SenderThreadOptions options;

  explicit Producer(const std::string& socket, bool intern = true)
      : options(QuickSenderOptions(socket, &h.driver)) {
    // As the injector sizes it (injector.cc): room for every description.
    options.transport.preamble_bytes = (64 << 10) + ConfigTable::kMaxConfigs * 1024;
    options.transport.max_preamble_lines = 256 + ConfigTable::kMaxConfigs;
    options.intern_configs = intern;
  }
  // The sender thread of these options (as a test left them) over the harness.
  SenderThread Sender() { return h.Sender(options, FactsWithConfig("ring_size", "16384")); }
  void Launch(uint32_t grid, uint32_t block, uint32_t smem, uint64_t stream, uint32_t corr,
              const char* symbol = "_Z4gemmPKfPf") {
    cuLaunchKernel_params p{Fn(kF), grid, 1, 1, block, 1, 1, smem, St(stream), nullptr, nullptr};
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, symbol, corr);
  }
  void Unload(uint64_t module) {
    cuModuleUnload_params unload{reinterpret_cast<CUmodule>(static_cast<uintptr_t>(module))};
    Callback cb(&unload, nullptr, 0);
    h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleUnload,
                           &cb.data);
  }
  // Handles what the ring holds (the transport may take it in several steps).
  void Drain(SenderThread& sender) {
    for (int i = 0; i < 10000 && h.ring->SizeApprox() > 0; ++i) sender.Step(Clock::now());
    ASSERT_EQ(h.ring->SizeApprox(), 0u);
  }
  // Sends everything through `sender`, then waits for the collector to store it.
  static void Finish(SenderThread& sender, StoringCollector& collector) {
    ASSERT_TRUE(sender.Finish(Clock::now() + std::chrono::seconds(20)));
    ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  }
};

// FunctionInfo ids are never reused (function_table.h, point 5): a module unloaded and another
// loaded whose function gets the same handle is another key, even where everything the launch
// record says is the same (the same registers and shared memory, so the same driver answer).
// Another function (another name and constant bank) is described anew; the first code loaded
// again (equal content) keeps its description's id (config_table.h, point 3).
TEST(RecordConfigsThroughTheSender, ANewFunctionAtARetiredOnesHandleIsDescribedByWhatItIs) {
  const std::string path = TempSocketPath("reload");
  StoringCollector collector(path);
  Producer run(path);
  SenderThread sender = run.Sender();
  FakeFunction f;
  f.num_regs = 72;
  f.module = kModuleA;
  run.h.fake.functions[kF] = f;
  run.Launch(264, 256, 0, kStream, 1, "_Z4gemmPKfPf");
  run.Launch(264, 256, 0, kStream, 2, "_Z4gemmPKfPf");
  sender.Step(Clock::now());  // handled: the first function's key is in the table
  run.Unload(kModuleA);
  f.const_bytes = 1024;  // other code at the same handle
  f.module = kModuleB;
  run.h.fake.functions[kF] = f;
  run.Launch(264, 256, 0, kStream, 3, "_Z4gemvPKfPf");
  run.Launch(264, 256, 0, kStream, 4, "_Z4gemvPKfPf");
  sender.Step(Clock::now());
  run.Unload(kModuleB);
  f.const_bytes = 0;  // the first code loaded again: a new FunctionInfo, the first one's content
  f.module = kModuleA;
  run.h.fake.functions[kF] = f;
  run.Launch(264, 256, 0, kStream, 5, "_Z4gemmPKfPf");
  run.Launch(264, 256, 0, kStream, 6, "_Z4gemmPKfPf");
  Producer::Finish(sender, collector);

  EXPECT_EQ(KernelLines(collector),
            (std::vector<std::string>{"C1", "L1", "L1", "C2", "L2", "L2", "L1", "L1"}));
  const std::vector<schema::OwnedKernelEvent> kernels = Kernels(collector);
  ASSERT_EQ(kernels.size(), 6u);
  const int64_t const_bytes[] = {0, 0, 1024, 1024, 0, 0};
  for (size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_EQ(kernels[i].const_bytes, const_bytes[i]) << "launch " << i;
    EXPECT_EQ(kernels[i].name, const_bytes[i] != 0 ? "_Z4gemvPKfPf" : "_Z4gemmPKfPf");
    EXPECT_EQ(kernels[i].num_regs, 72);
    EXPECT_EQ(kernels[i].correlation_id, i + 1);
  }
}

// Block, dynamic shared memory and stream (cuLaunchKernel_params blockDimX, sharedMemBytes,
// hStream: cuda.h) each make a configuration of their own; a configuration launched again after
// others names its first id. Expanded, the interned launches are the whole events member for
// member (waves included: derived by the reader from the grid).
TEST(RecordConfigsThroughTheSender, BlockDynamicSharedMemoryAndStreamEachGiveAnId) {
  const auto record = [](bool intern, std::vector<std::string>* lines) {
    const std::string path = TempSocketPath(intern ? "dims-i" : "dims-w");
    StoringCollector collector(path);
    Producer run(path, intern);
    SenderThread sender = run.Sender();
    run.h.fake.functions[kF] = FakeFunction{};
    uint32_t corr = 1;
    for (int round = 0; round < 2; ++round) {
      run.Launch(264 + round, 256, 0, kStream, corr++);
      run.Launch(1000 + round, 128, 0, kStream, corr++);
      run.Launch(7 + round, 256, 4096, kStream, corr++);
      run.Launch(132 + round, 256, 0, kStream + 1, corr++);
      sender.Step(Clock::now());
    }
    Producer::Finish(sender, collector);
    *lines = KernelLines(collector);
    return Kernels(collector);
  };
  std::vector<std::string> interned_lines;
  std::vector<std::string> whole_lines;
  const std::vector<schema::OwnedKernelEvent> interned = record(true, &interned_lines);
  const std::vector<schema::OwnedKernelEvent> whole = record(false, &whole_lines);
  EXPECT_EQ(interned_lines, (std::vector<std::string>{"C1", "L1", "C2", "L2", "C3", "L3", "C4",
                                                      "L4", "L1", "L2", "L3", "L4"}));
  EXPECT_EQ(whole_lines, std::vector<std::string>(8, "K"));
  ASSERT_EQ(interned.size(), 8u);
  ASSERT_EQ(whole.size(), 8u);
  for (size_t i = 0; i < whole.size(); ++i) {
    schema::OwnedKernelEvent a = interned[i];
    schema::OwnedKernelEvent b = whole[i];
    a.tid = b.tid = 0;
    EXPECT_EQ(a, b) << "launch " << i;
  }
  // 264 blocks of 256 threads on an H100's 132 SMs: waves = 264 / (132 * blocks per SM), a
  // figure of the grid, so launches of one configuration differ in it.
  EXPECT_NE(interned[0].occupancy.waves, interned[4].occupancy.waves);
}

// The content table's bound (ConfigTable::kMaxConfigs): the configuration past it goes out whole
// at each launch, while those described keep their ids.
TEST(RecordConfigsThroughTheSender, PastTheBoundLaunchesGoWhole) {
  const std::string path = TempSocketPath("bound");
  StoringCollector collector(path);
  Producer run(path);
  SenderThread sender = run.Sender();
  run.h.fake.functions[kF] = FakeFunction{};
  // 1024 block sizes x 4 dynamic shared memory sizes: 4096 configurations.
  static_assert(ConfigTable::kMaxConfigs == 4096);
  uint32_t corr = 1;
  for (uint32_t smem = 0; smem < 4; ++smem) {
    for (uint32_t block = 1; block <= 1024; ++block) {
      run.Launch(1, block, smem * 1024, kStream, corr++);
    }
    run.Drain(sender);
  }
  run.Launch(1, 1024, 4096, kStream, corr++);  // the 4097th, twice
  run.Launch(2, 1024, 4096, kStream, corr++);
  run.Launch(3, 1, 0, kStream, corr++);  // the first again
  Producer::Finish(sender, collector);

  const std::vector<std::string> lines = KernelLines(collector);
  ASSERT_EQ(lines.size(), 2u * 4096 + 3);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l[0] == 'C'; }),
            4096);
  EXPECT_EQ(std::vector<std::string>(lines.end() - 3, lines.end()),
            (std::vector<std::string>{"K", "K", "L1"}));
  const std::vector<schema::OwnedKernelEvent> kernels = Kernels(collector);
  ASSERT_EQ(kernels.size(), 4096u + 3);
  EXPECT_EQ(kernels[4096].dyn_shared_bytes, 4096);
  EXPECT_EQ(kernels[4098].block.x, 1u);
  EXPECT_EQ(kernels[4098].grid.x, 3u);
}

// A description the transport refuses (its preamble storage full: transport/sender.h, point 5)
// gives no id: every launch of that configuration goes out whole, and is never found by its
// record; the configuration described before it stays interned.
TEST(RecordConfigsThroughTheSender, ARefusedDescriptionLeavesItsLaunchesWhole) {
  const std::string path = TempSocketPath("refused");
  StoringCollector collector(path);
  Producer run(path);
  // process_start, the device event and one description.
  run.options.transport.max_preamble_lines = 3;
  SenderThread sender = run.Sender();
  run.h.fake.functions[kF] = FakeFunction{};
  run.Launch(264, 256, 0, kStream, 1);
  run.Launch(264, 128, 0, kStream, 2);  // its description refused
  sender.Step(Clock::now());
  run.Launch(264, 128, 0, kStream, 3);
  run.Launch(264, 256, 0, kStream, 4);
  run.Launch(528, 128, 0, kStream, 5);
  Producer::Finish(sender, collector);

  EXPECT_EQ(KernelLines(collector), (std::vector<std::string>{"C1", "L1", "K", "K", "L1", "K"}));
  const std::vector<schema::OwnedKernelEvent> kernels = Kernels(collector);
  ASSERT_EQ(kernels.size(), 5u);
  for (size_t i = 0; i < kernels.size(); ++i) EXPECT_EQ(kernels[i].correlation_id, i + 1);
  EXPECT_EQ(kernels[4].grid.x, 528u);
  EXPECT_EQ(kernels[4].block.x, 128u);
}

// A configuration whose driver answer differs from the engine's (a kernel with many named
// barriers: the fake driver counts them as cuda_occupancy.h's numBlockBarriers does, the
// attributes do not show them) counts in occupancy_disagreements once per launch, as when every
// launch's kernel event was built (config_table.h, point 6).
TEST(RecordConfigsThroughTheSender, DisagreementsAreCountedPerLaunch) {
  const std::string path = TempSocketPath("disagree");
  StoringCollector collector(path);
  Producer run(path);
  SenderThread sender = run.Sender();
  FakeFunction f;
  f.block_barriers = 16;
  run.h.fake.functions[kF] = f;
  for (uint32_t i = 1; i <= 5; ++i) {
    run.Launch(264 * i, 256, 0, kStream, i);
    sender.Step(Clock::now());
  }
  EXPECT_EQ(sender.counters().occupancy_disagreements, 5u);
  Producer::Finish(sender, collector);
  EXPECT_EQ(KernelLines(collector), (std::vector<std::string>{"C1", "L1", "L1", "L1", "L1", "L1"}));
  const std::vector<schema::OwnedKernelEvent> kernels = Kernels(collector);
  ASSERT_EQ(kernels.size(), 5u);
  for (const auto& k : kernels) {
    ASSERT_TRUE(k.engine_max_active_blocks.has_value());
    EXPECT_NE(*k.engine_max_active_blocks, k.occupancy.max_active_blocks);
  }
}

}  // namespace
}  // namespace cuflight::inject::testing
