// The injector's pipeline end to end without a GPU: hand-made callbacks -> recorder -> ring ->
// sender thread -> a real Unix socket collector, with the lines checked by the schema decoder.
#include "sender_thread.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "inject_test_support.h"
#include "log_files.h"
#include "running_collector.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

constexpr uint64_t kF = 0x1000;

struct Pipeline {
  Harness h;
  SenderThread sender;

  Pipeline(const std::string& socket, size_t ring_slots, RecorderOptions options = {},
           ActivityBuffers* activity = nullptr, TimingWatch::Options watch = {})
      : h(ring_slots, std::move(options)),
        sender(h.Sender(MakeOptions(socket, &h.driver, watch), Facts(), activity,
                        activity != nullptr ? &h.cupti : nullptr)) {}

  static SenderThreadOptions MakeOptions(const std::string& socket, const DriverApi* driver,
                                         TimingWatch::Options watch = {}) {
    SenderThreadOptions o = QuickSenderOptions(socket, driver);
    o.timing_watch = watch;
    o.stats_interval = std::chrono::milliseconds(10);
    return o;
  }
  static ProcessFacts Facts() { return FactsWithConfig("ring_size", "64"); }
};

TEST(SenderThread, SendsPreambleKernelsAndProcessEndInSeqOrder) {
  const std::string path = TempSocketPath("e2e");
  StoringCollector collector(path);
  Pipeline p(path, 1024);
  FakeFunction f;
  f.num_regs = 72;
  f.static_smem = 4096;
  p.h.fake.functions[kF] = f;
  for (uint32_t i = 0; i < 3; ++i) {
    cuLaunchKernel_params params{Fn(kF), 264, 1, 1, 256, 1, 1, 16384 * i, St(kStream), nullptr, nullptr};
    p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z4gemmPKfPf", 100 + i);
  }
  p.sender.Step(Clock::now());
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));

  const std::vector<schema::OwnedEvent> events = collector.Events();
  ASSERT_EQ(events.size(), 6u);  // process_start, device, 3 x kernel, process_end
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(std::visit([](const auto& e) { return e.header.pid; }, events[i]), getpid());
  }
  // As stored: the same events and, before each launch, its configuration's description (three
  // dynamic shared memory sizes: three configurations), seqs 0..8 in order.
  const std::vector<uint64_t> seqs = collector.StoredSeqs(getpid());
  ASSERT_EQ(seqs.size(), 9u);
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i);
  const auto& start = std::get<schema::OwnedProcessStartEvent>(events[0]);
  EXPECT_EQ(start.ppid, getppid());
  EXPECT_FALSE(start.exe.empty());
  ASSERT_EQ(start.config.size(), 1u);
  const auto& device = std::get<schema::OwnedDeviceEvent>(events[1]);
  EXPECT_EQ(device.sm_count, 132);
  EXPECT_EQ(device.cc_major, 9);
  for (uint32_t i = 0; i < 3; ++i) {
    const auto& k = std::get<schema::OwnedKernelEvent>(events[2 + i]);
    EXPECT_EQ(k.correlation_id, 100u + i);
    EXPECT_EQ(k.api, "cuLaunchKernel");
    EXPECT_EQ(k.name, "_Z4gemmPKfPf");
    EXPECT_EQ(k.demangled, "gemm(float const*, float*)");
    EXPECT_EQ(k.num_regs, 72);
    EXPECT_EQ(k.static_shared_bytes, 4096);
    EXPECT_EQ(k.dyn_shared_bytes, 16384 * i);
    EXPECT_FALSE(k.graph_id.has_value());
    EXPECT_EQ(k.occupancy.max_active_blocks,
              ReferenceBlocks(p.h.fake.devices[0], f, 256, 16384 * i));
  }
  const auto& end = std::get<schema::OwnedProcessEndEvent>(events[5]);
  EXPECT_EQ(end.launches, 3u);
  EXPECT_EQ(end.dropped, 0u);
  EXPECT_EQ(end.emitted, 8u);  // the lines before it: 5 events, 3 descriptions
}

// Interned configurations (config_table.h): the same launches sent whole and interned read back
// as the same kernel events, headers aside (each run has its own clock; interning gives each
// description a seq of its own); the log holds one kernel_config per configuration and stream,
// before its first launch, and a short launch line per launch.
TEST(SenderThread, InternedLaunchesReadBackAsTheKernelEventsSentWhole) {
  const auto run = [](bool intern, std::vector<test_support::LoggedLine>* lines) {
    const std::string path = TempSocketPath(intern ? "interned" : "whole");
    StoringCollector collector(path);
    Harness h(1024, {});
    SenderThreadOptions options = Pipeline::MakeOptions(path, &h.driver);
    options.intern_configs = intern;
    SenderThread sender = h.Sender(options, Pipeline::Facts());
    FakeFunction f;
    f.num_regs = 72;
    f.static_smem = 4096;
    h.fake.functions[kF] = f;
    // Configurations: (stream, dynamic smem) = (A, 0) x3, (A, 16 KiB), (B, 0), (A, 0) again.
    const uint32_t smem[] = {0, 0, 0, 16384, 0, 0};
    const uint64_t streams[] = {kStream, kStream, kStream, kStream, kStream + 1, kStream};
    for (uint32_t i = 0; i < 6; ++i) {
      cuLaunchKernel_params params{Fn(kF), 264 + i, 1, 1, 256, 1, 1, smem[i], St(streams[i]),
                                   nullptr, nullptr};
      h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z4gemmPKfPf", 100 + i);
    }
    EXPECT_TRUE(sender.Finish(Clock::now() + std::chrono::seconds(10)));
    EXPECT_TRUE(collector.WaitFor(HasProcessEnd));
    for (const auto& file : test_support::LogFiles(collector.log_dir())) {
      for (auto& line : test_support::ReadLog(file)) lines->push_back(std::move(line));
    }
    std::vector<schema::OwnedKernelEvent> kernels;
    for (const schema::OwnedEvent& e : collector.Events()) {
      if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e)) {
        kernels.push_back(*k);
        kernels.back().header = {};
      }
    }
    return kernels;
  };
  std::vector<test_support::LoggedLine> whole_lines;
  std::vector<test_support::LoggedLine> interned_lines;
  const std::vector<schema::OwnedKernelEvent> whole = run(false, &whole_lines);
  const std::vector<schema::OwnedKernelEvent> interned = run(true, &interned_lines);
  ASSERT_EQ(whole.size(), 6u);
  ASSERT_EQ(interned.size(), 6u);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(interned[i], whole[i]) << "launch " << i;
  }
  EXPECT_NE(whole[4].stream, whole[0].stream);  // another stream: a configuration of its own
  std::vector<std::string> types;
  size_t launch_bytes = 0;
  size_t kernel_bytes = 0;
  for (const auto& line : interned_lines) {
    if (line.type == "kernel_config" || line.type == "launch") types.push_back(line.type);
    if (line.type == "launch") launch_bytes += line.text.size() + 1;
  }
  for (const auto& line : whole_lines) {
    if (line.type == "kernel") kernel_bytes += line.text.size() + 1;
  }
  // Three configurations, each described just before its first launch.
  EXPECT_EQ(types, (std::vector<std::string>{"kernel_config", "launch", "launch", "launch",
                                             "kernel_config", "launch", "kernel_config",
                                             "launch", "launch"}));
  EXPECT_LT(launch_bytes * 3, kernel_bytes);
}

TEST(SenderThread, RingDropsBecomeExactSeqGaps) {
  const std::string path = TempSocketPath("gaps");
  StoringCollector collector(path);
  Pipeline p(path, 64);
  p.h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t i = 0; i < 100; ++i) p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", i);
  const uint64_t dropped = p.h.recorder->dropped_ring_full();
  ASSERT_EQ(dropped, 100u - p.h.ring->capacity());
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  const std::vector<schema::OwnedEvent> events = collector.Events();
  // The seqs as stored (the configuration's description takes one of its own).
  uint64_t last_seq = 0;
  uint64_t gaps = 0;
  const std::vector<uint64_t> seqs = collector.StoredSeqs(getpid());
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (i > 0) gaps += seqs[i] - last_seq - 1;
    last_seq = seqs[i];
  }
  EXPECT_EQ(gaps, dropped);
  const auto& end = std::get<schema::OwnedProcessEndEvent>(events.back());
  EXPECT_EQ(end.dropped_ring_full, dropped);
  EXPECT_EQ(end.launches, 100u);
  EXPECT_EQ(end.emitted + end.dropped, last_seq);  // every seq before process_end accounted
}

// Hands `records` to the sender as CUPTI would: in a buffer taken from the pool and completed.
// False when the pool has no free buffer.
bool HandOver(ActivityBuffers* buffers, FakeCuda* fake, std::vector<KernelActivity*> records) {
  fake->activity_records.clear();
  for (KernelActivity* r : records) {
    fake->activity_records.push_back(reinterpret_cast<CUpti_Activity*>(r));
  }
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  buffers->Request(&buffer, &size, &max_records);
  if (buffer == nullptr) return false;
  buffers->Complete(buffer, records.size() * sizeof(KernelActivity));
  return true;
}

// The library sets CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER: "user should provide a zero
// value buffer in the CUpti_BuffersCallbackRequestFunc" (cupti_activity.h). Every buffer handed
// out is all zero: at first, and again after CUPTI wrote into it and the sender gave it back.
TEST(ActivityBuffers, EveryBufferHandedOutIsAllZero) {
  ActivityBuffers buffers(2, 4096);
  const auto all_zero = [](const uint8_t* b, size_t n) {
    return std::all_of(b, b + n, [](uint8_t c) { return c == 0; });
  };
  uint8_t* a = nullptr;
  uint8_t* b = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  buffers.Request(&a, &size, &max_records);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(all_zero(a, size));
  buffers.Request(&b, &size, &max_records);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(all_zero(b, size));
  std::memset(a, 0xA5, 1000);  // CUPTI's records
  buffers.Complete(a, 1000);
  buffers.Complete(b, 0);  // nothing written: freed at once
  ActivityBuffers::Completed completed;
  ASSERT_TRUE(buffers.PopCompleted(&completed));
  EXPECT_EQ(completed.buffer, a);
  buffers.Release(completed.buffer, completed.valid_size);
  for (int i = 0; i < 2; ++i) {
    uint8_t* again = nullptr;
    buffers.Request(&again, &size, &max_records);
    ASSERT_NE(again, nullptr);
    EXPECT_TRUE(all_zero(again, size));
  }
}

TEST(SenderThread, AGraphOnADeviceNoLaunchDescribedGetsItsDeviceFromTheDriver) {
  // A process that only replays graphs: no launch callback ever described device 0, so the
  // sender reads it itself, sends its device event, then the node's kernel event.
  const std::string path = TempSocketPath("graph-only");
  StoringCollector collector(path);
  ActivityBuffers buffers(2, 4096);
  Pipeline p(path, 64, {}, &buffers);
  ASSERT_EQ(p.h.devices.Get(0), nullptr);
  KernelActivity node{};
  node.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  node.registersPerThread = 32;
  node.blockX = 128;
  node.blockY = 1;
  node.blockZ = 1;
  node.gridX = 132;
  node.gridY = 1;
  node.gridZ = 1;
  node.deviceId = 0;
  node.correlationId = 5;
  node.start = 1000;
  node.end = 2000;
  node.graphId = 9;
  node.graphNodeId = 1;
  node.name = "_Z4nodev";
  ASSERT_TRUE(HandOver(&buffers, &p.h.fake, {&node}));
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  const std::vector<schema::OwnedEvent> events = collector.Events();
  int devices = 0;
  int graph_kernels = 0;
  for (const auto& e : events) {
    if (const auto* d = std::get_if<schema::OwnedDeviceEvent>(&e)) {
      ++devices;
      EXPECT_EQ(d->sm_count, p.h.fake.devices[0].sm_count);
      EXPECT_EQ(graph_kernels, 0);  // before the kernel it describes
    }
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e); k != nullptr && k->graph_id) {
      ++graph_kernels;
      FakeFunction as_function;
      as_function.num_regs = 32;
      EXPECT_EQ(k->occupancy.max_active_blocks,
                ReferenceBlocks(p.h.fake.devices[0], as_function, 128, 0));
    }
  }
  EXPECT_EQ(devices, 1);
  EXPECT_EQ(graph_kernels, 1);
}

TEST(SenderThread, GraphKernelNodesAndTimingComeFromActivityRecords) {
  const std::string path = TempSocketPath("graph");
  StoringCollector collector(path);
  ActivityBuffers buffers(2, 4096);
  Pipeline p(path, 64, {}, &buffers);
  // A launch first, so the device is known (graphs run on devices the process uses).
  p.h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", 1);

  KernelActivity node{};
  node.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  node.registersPerThread = 40;
  node.staticSharedMemory = 2048;
  node.dynamicSharedMemory = 1024;
  node.blockX = 256;
  node.blockY = 1;
  node.blockZ = 1;
  node.gridX = 1000;
  node.gridY = 1;
  node.gridZ = 1;
  node.deviceId = 0;
  node.correlationId = 77;
  node.start = 1000;
  node.end = 4500;
  node.graphId = 3;
  node.graphNodeId = 0x1234567890ULL;
  node.name = "_Z9graphnodev";
  KernelActivity plain = node;  // the direct launch's timing record
  plain.graphId = 0;
  plain.graphNodeId = 0;
  plain.correlationId = 1;
  plain.name = "_Z1kv";
  ASSERT_TRUE(HandOver(&buffers, &p.h.fake, {&plain, &node}));

  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  const std::vector<schema::OwnedEvent> events = collector.Events();
  int graph_kernels = 0;
  int times = 0;
  for (const auto& e : events) {
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e); k != nullptr && k->graph_id) {
      ++graph_kernels;
      EXPECT_EQ(*k->graph_id, 3u);
      EXPECT_EQ(*k->graph_node_id, 0x1234567890ULL);
      EXPECT_EQ(k->name, "_Z9graphnodev");
      EXPECT_EQ(k->demangled, "graphnode()");
      EXPECT_EQ(k->num_regs, 40);
      EXPECT_EQ(k->api, "cuGraphLaunch");
      FakeFunction as_function;
      as_function.num_regs = 40;
      as_function.static_smem = 2048;
      as_function.max_dyn_smem = 48 * 1024 - 2048;
      EXPECT_EQ(k->occupancy.max_active_blocks,
                ReferenceBlocks(p.h.fake.devices[0], as_function, 256, 1024));
    }
    if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&e)) {
      ++times;
      EXPECT_EQ(t->duration_ns, 3500u);
      // cupti_activity.h, CUpti_ActivityKernel10.graphId/graphNodeId: 0 unless launched through
      // a graph. The node's kernel_time carries its ids, as its kernel event does, so the two
      // join per node; the direct launch's carries none.
      if (t->correlation_id == 77) {
        EXPECT_EQ(t->graph_id, std::optional<uint64_t>(3));
        EXPECT_EQ(t->graph_node_id, std::optional<uint64_t>(0x1234567890ULL));
      } else {
        EXPECT_EQ(t->correlation_id, 1u);
        EXPECT_FALSE(t->graph_id.has_value());
        EXPECT_FALSE(t->graph_node_id.has_value());
      }
    }
  }
  EXPECT_EQ(graph_kernels, 1);
  EXPECT_EQ(times, 2);
}

// A kernel activity record as CUPTI writes it for a finished kernel.
KernelActivity TimedKernel(uint32_t correlation_id, uint64_t start, uint64_t end) {
  KernelActivity a{};
  a.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  a.registersPerThread = 32;
  a.blockX = 128;
  a.blockY = 1;
  a.blockZ = 1;
  a.gridX = 1;
  a.gridY = 1;
  a.gridZ = 1;
  a.deviceId = 0;
  a.contextId = 1;
  a.streamId = 7;
  a.correlationId = correlation_id;
  a.start = start;
  a.end = end;
  a.name = "_Z1kv";
  return a;
}

TEST(SenderThread, KernelTimeOnlyForCompleteRecordsAndTimingDroppedAddsUp) {
  const std::string path = TempSocketPath("timing");
  StoringCollector collector(path);
  ActivityBuffers buffers(2, 16 << 10);
  Pipeline p(path, 64, {}, &buffers);
  p.h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", 1);

  // What a forced flush hands over: two finished kernels (one took no measurable time), three
  // still running or never timed, and a graph kernel node still running.
  KernelActivity graph_node = TimedKernel(6, 9000, 0);
  graph_node.graphId = 3;
  graph_node.graphNodeId = 12;
  graph_node.name = "_Z9graphnodev";
  const std::vector<KernelActivity> records = {
      TimedKernel(1, 1000, 4500),  // complete: 3500 ns
      TimedKernel(2, 5000, 0),     // end 0
      TimedKernel(3, 0, 6000),     // start 0
      TimedKernel(4, 8000, 7000),  // end before start
      TimedKernel(5, 7000, 7000),  // complete: 0 ns
      graph_node,
  };
  uint8_t* first = nullptr;
  uint8_t* second = nullptr;
  uint8_t* refused = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  buffers.Request(&first, &size, &max_records);
  ASSERT_NE(first, nullptr);
  buffers.Request(&second, &size, &max_records);
  ASSERT_NE(second, nullptr);
  for (int i = 0; i < 2; ++i) {  // the pool has two buffers, both in use
    buffers.Request(&refused, &size, &max_records);
    EXPECT_EQ(refused, nullptr);
  }
  EXPECT_EQ(buffers.refused(), 2u);
  const size_t valid = WriteKernelRecords(records, first, buffers.buffer_size());
  ASSERT_EQ(valid, records.size() * sizeof(KernelActivity));
  p.h.fake.dropped_records = 5;  // CUPTI dropped 5 records for want of a buffer
  buffers.Complete(first, valid);
  buffers.Complete(second, 0);  // handed back empty
  EXPECT_EQ(buffers.cupti_dropped(), 5u);
  EXPECT_EQ(p.h.fake.dropped_queries, 2);

  const Clock::time_point t0 = Clock::now();
  p.sender.Step(t0);
  p.sender.Step(t0 + std::chrono::milliseconds(50));  // past the 10 ms stats interval: stats
  p.h.fake.dropped_records = 3;  // dropped after the last completed buffer
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  EXPECT_EQ(p.h.fake.dropped_queries, 3);  // once more at the end

  const std::vector<schema::OwnedEvent> events = collector.Events();
  std::map<uint64_t, uint64_t> durations;  // correlation id -> duration_ns
  std::vector<uint64_t> graph_kernels;
  int stats = 0;
  // Lost timing records use no seq: the stream as stored (descriptions included) has no gap.
  const std::vector<uint64_t> seqs = collector.StoredSeqs(getpid());
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i);
  for (size_t i = 0; i < events.size(); ++i) {
    if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&events[i])) {
      durations[t->correlation_id] = t->duration_ns;
    }
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&events[i]); k && k->graph_id) {
      graph_kernels.push_back(k->correlation_id);
      EXPECT_EQ(*k->graph_node_id, 12u);
    }
    if (const auto* st = std::get_if<schema::OwnedStatsEvent>(&events[i])) {
      ++stats;
      // CUPTI's 5 dropped (the 2 refused requests are among them) + 4 incomplete.
      EXPECT_EQ(st->timing_dropped, 9u);
      EXPECT_EQ(st->dropped, 0u);
    }
  }
  EXPECT_EQ(durations, (std::map<uint64_t, uint64_t>{{1, 3500}, {5, 0}}));
  EXPECT_EQ(graph_kernels, (std::vector<uint64_t>{6}));  // its launch facts are complete
  EXPECT_EQ(stats, 1);
  const auto& end = std::get<schema::OwnedProcessEndEvent>(events.back());
  EXPECT_EQ(end.timing_dropped, 5u + 3u + 4u);
  EXPECT_EQ(end.dropped, 0u);
  EXPECT_EQ(p.sender.counters().timing_dropped, 12u);
}

// Another CUPTI client takes over the activity buffers (torch.profiler's Kineto registering its
// own callbacks): launches go on, records stop. The stats then say so with a count, and say it no
// more once records arrive again; the thresholds are small here (4 launches, 50 ms).
TEST(SenderThread, TimingThatStopsWhileLaunchesGoOnIsCountedUntilRecordsReturn) {
  const std::string path = TempSocketPath("stopped");
  StoringCollector collector(path);
  ActivityBuffers buffers(2, 16 << 10);
  TimingWatch::Options watch;
  watch.silence_ns = 50'000'000;
  watch.min_launches = 4;
  Pipeline p(path, 64, {}, &buffers, watch);
  p.h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  const auto deliver = [&](uint32_t correlation_id) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    buffers.Request(&buffer, &size, &max_records);
    ASSERT_NE(buffer, nullptr);
    const size_t valid = WriteKernelRecords({TimedKernel(correlation_id, 1000, 2000)}, buffer,
                                            buffers.buffer_size());
    buffers.Complete(buffer, valid);
  };
  Clock::time_point now = Clock::now();
  const auto step = [&] {
    now += std::chrono::milliseconds(20);  // past the 10 ms stats interval: stats every step
    p.sender.Step(now);
  };
  // Timed as usual.
  p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", 1);
  deliver(1);
  step();
  // The takeover: six launches, no record, for longer than the silence.
  for (uint32_t c = 2; c <= 7; ++c) p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", c);
  step();
  EXPECT_EQ(p.sender.counters().timing_stop, TimingStop::kNone);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  step();
  EXPECT_EQ(p.sender.counters().timing_stop, TimingStop::kRecordsStopped);
  EXPECT_EQ(p.sender.counters().timing_stopped, 6u);
  p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", 8);
  step();
  EXPECT_EQ(p.sender.counters().timing_stopped, 7u);
  // Records again (the client gave the buffers back, or the GPU was only slow).
  deliver(8);
  step();
  EXPECT_EQ(p.sender.counters().timing_stop, TimingStop::kNone);
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));

  std::vector<std::pair<uint64_t, schema::TimingStoppedReason>> seen;  // per stats event
  for (const schema::OwnedEvent& e : collector.Events()) {
    if (const auto* st = std::get_if<schema::OwnedStatsEvent>(&e)) {
      seen.emplace_back(st->timing_stopped, st->timing_stopped_reason);
    }
    if (const auto* end = std::get_if<schema::OwnedProcessEndEvent>(&e)) {
      EXPECT_EQ(end->timing_stopped, 0u);
      EXPECT_EQ(end->timing_stopped_reason, schema::TimingStoppedReason::kNone);
    }
  }
  using R = schema::TimingStoppedReason;
  // One stats event per step but the first (which starts the interval).
  const std::vector<std::pair<uint64_t, R>> expected = {
      {0, R::kNone}, {6, R::kRecordsStopped}, {7, R::kRecordsStopped}, {0, R::kNone}};
  EXPECT_EQ(seen, expected);
}

TEST(SenderThread, RefusedRequestsCountWhenCuptiReportsFewerDrops) {
  const std::string path = TempSocketPath("refused");
  StoringCollector collector(path);
  ActivityBuffers buffers(1, 4096);
  Pipeline p(path, 64, {}, &buffers);
  uint8_t* held = nullptr;
  uint8_t* refused = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  buffers.Request(&held, &size, &max_records);
  ASSERT_NE(held, nullptr);
  for (int i = 0; i < 3; ++i) buffers.Request(&refused, &size, &max_records);
  p.h.fake.dropped_records = 1;  // CUPTI reports fewer records than requests it was refused
  buffers.Complete(held, 0);
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  const std::vector<schema::OwnedEvent> events = collector.Events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(std::get<schema::OwnedProcessEndEvent>(events.back()).timing_dropped, 3u);
}

TEST(SenderThread, TimingDroppedIsZeroWithoutActivity) {
  const std::string path = TempSocketPath("notiming");
  StoringCollector collector(path);
  Pipeline p(path, 64);
  p.h.fake.dropped_records = 4;  // never read: no activity buffers
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  const std::vector<schema::OwnedEvent> events = collector.Events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(std::get<schema::OwnedProcessEndEvent>(events.back()).timing_dropped, 0u);
  EXPECT_EQ(p.h.fake.dropped_queries, 0);
}

TEST(ActivityBuffers, CuptiDropsAreReadAtEveryCompletionAndCountedOnce) {
  FakeCuda fake;
  ScopedFake scope(&fake);
  const CuptiApi cupti = fake.cupti();
  ActivityBuffers buffers(1, 4096);
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  buffers.Request(&buffer, &size, &max_records);
  fake.dropped_records = 7;
  buffers.Complete(buffer, 0);  // no source yet: not read
  EXPECT_EQ(fake.dropped_queries, 0);
  EXPECT_EQ(buffers.cupti_dropped(), 0u);
  buffers.SetDroppedRecordsSource(&cupti);
  buffers.Request(&buffer, &size, &max_records);
  ASSERT_NE(buffer, nullptr);
  buffers.Complete(nullptr, 0, buffer, 0);
  EXPECT_EQ(buffers.cupti_dropped(), 7u);
  buffers.ReadDropped(nullptr, 0);  // CUPTI reset its count: nothing more
  EXPECT_EQ(buffers.cupti_dropped(), 7u);
  fake.dropped_records = 2;
  buffers.Complete(nullptr, 0, nullptr, 0);  // CUPTI may complete without a buffer
  EXPECT_EQ(buffers.cupti_dropped(), 9u);
  EXPECT_EQ(fake.dropped_queries, 3);
  EXPECT_EQ(buffers.refused(), 0u);
  EXPECT_EQ(buffers.lost_records(), 9u);
}

TEST(SenderThread, AnUnloadedFunctionIsFreedOnceItsKernelEventIsBuilt) {
  // The module is unloaded while the launch's record is still in the ring: the sender builds the
  // event from the FunctionInfo first, then frees it (FunctionTable::Reclaim in Step).
  const std::string path = TempSocketPath("unload");
  StoringCollector collector(path);
  Pipeline p(path, 1024);
  FakeFunction f;
  f.num_regs = 72;
  f.module = 0xA000;
  p.h.fake.functions[kF] = f;
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", 1);
  cuModuleUnload_params unload{reinterpret_cast<CUmodule>(uintptr_t{0xA000})};
  Callback cb(&unload, nullptr, 2);
  p.h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleUnload,
                           &cb.data);
  p.h.fake.functions.erase(kF);
  EXPECT_EQ(p.h.functions.live_infos(), 1u);
  EXPECT_EQ(p.h.functions.retired(), 1u);
  p.sender.Step(Clock::now());
  EXPECT_EQ(p.h.functions.live_infos(), 0u);
  EXPECT_EQ(p.h.functions.retired(), 0u);
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  int kernels = 0;
  for (const schema::OwnedEvent& e : collector.Events()) {
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&e); k != nullptr) {
      EXPECT_EQ(k->num_regs, 72);
      EXPECT_EQ(k->name, "_Z1kv");
      ++kernels;
    }
  }
  EXPECT_EQ(kernels, 1);
}

TEST(SenderThread, StatsCountEveryLaunch) {
  const std::string path = TempSocketPath("stats");
  StoringCollector collector(path);
  RecorderOptions options;
  options.sample_every = 10;
  Pipeline p(path, 1024, options);
  p.h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t i = 0; i < 25; ++i) p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", i);
  const Clock::time_point t0 = Clock::now();
  p.sender.Step(t0);
  p.sender.Step(t0 + std::chrono::milliseconds(50));  // past the 10 ms stats interval
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  const std::vector<schema::OwnedEvent> events = collector.Events();
  int stats = 0;
  for (const auto& e : events) {
    if (const auto* s = std::get_if<schema::OwnedStatsEvent>(&e)) {
      ++stats;
      EXPECT_EQ(s->launches, 25u);
      EXPECT_EQ(s->filtered, 22u);  // launches 0, 10, 20 recorded
      EXPECT_EQ(s->ring_capacity, 1024u);
    }
  }
  EXPECT_EQ(stats, 1);
}

std::vector<schema::OwnedEvent> EventsOfType(const std::vector<schema::OwnedEvent>& events,
                                             schema::EventType type) {
  std::vector<schema::OwnedEvent> out;
  for (const schema::OwnedEvent& e : events) {
    if (schema::TypeOf(e) == type) out.push_back(e);
  }
  return out;
}

TEST(SenderThread, ApiErrorCarriesTheContextsLatestLaunchesAndTheDriversNames) {
  const std::string path = TempSocketPath("apierr");
  StoringCollector collector(path);
  constexpr uint64_t kOtherContext = 0xD0;  // handles are aligned pointers
  constexpr uint64_t kOtherStream = 0x5F;  // a stream belongs to one context
  Harness h(1024);
  h.fake.context_device[kOtherContext] = 0;
  h.fake.context_ids[kOtherContext] = 9;
  SenderThreadOptions options = Pipeline::MakeOptions(path, &h.driver);
  options.api_error_history = 3;
  options.callback_names = &h.cupti;
  SenderThread sender = h.Sender(options, Pipeline::Facts());
  h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t corr = 1; corr <= 5; ++corr) {
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", corr);
  }
  cuLaunchKernel_params other_params = params;
  other_params.hStream = St(kOtherStream);
  Callback other(&other_params, "_Z1kv", 99, kOtherContext);  // another context's launch
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                         &other.data);
  const int sync = 0;  // cuCtxSynchronize has no parameters
  Callback failed(&sync, nullptr, 6);
  failed.result = CUDA_ERROR_ILLEGAL_ADDRESS;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
                         &failed.data);
  Callback unnamed(&sync, nullptr, 7, kOtherContext);
  unnamed.result = CUDA_ERROR_OUT_OF_MEMORY;  // no name in the fake driver
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
                         &unnamed.data);
  ASSERT_TRUE(sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  const std::vector<schema::OwnedEvent> errors =
      EventsOfType(collector.Events(), schema::EventType::kApiError);
  ASSERT_EQ(errors.size(), 2u);
  const auto& e = std::get<schema::OwnedApiErrorEvent>(errors[0]);
  EXPECT_EQ(e.api, "cuCtxSynchronize");
  EXPECT_EQ(e.code, 700);  // CUDA_ERROR_ILLEGAL_ADDRESS in cuda.h
  EXPECT_EQ(e.error_name, "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ(e.message, "an illegal memory access was encountered");
  EXPECT_EQ(e.device, 0);
  EXPECT_EQ(e.context, kContextId);  // CUPTI's id, as on the launches' kernel events
  // The last 3 of the 5 launches on this context, oldest first; not the other context's.
  EXPECT_EQ(e.last_correlation_ids, (std::vector<uint64_t>{3, 4, 5}));
  const auto& u = std::get<schema::OwnedApiErrorEvent>(errors[1]);
  EXPECT_EQ(u.api, "driver API callback " +
                       std::to_string(static_cast<int>(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2)));
  EXPECT_EQ(u.code, 2);  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(u.error_name, "");
  EXPECT_EQ(u.context, 9u);
  EXPECT_EQ(u.last_correlation_ids, (std::vector<uint64_t>{99}));
}

TEST(SenderThread, FlushNowDeliversEverythingRecordedBeforeItReturns) {
  const std::string path = TempSocketPath("flushnow");
  StoringCollector collector(path);
  Pipeline p(path, 1024);
  EXPECT_FALSE(p.sender.FlushNow(1'000'000));  // not running yet
  p.h.fake.functions[kF] = FakeFunction{};
  ASSERT_TRUE(p.sender.Start());
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t corr = 1; corr <= 50; ++corr) {
    p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", corr);
  }
  ASSERT_TRUE(p.sender.FlushNow(10'000'000'000));
  // Acknowledged means the collector has read every line: no waiting needed.
  EXPECT_EQ(EventsOfType(collector.Events(), schema::EventType::kKernel).size(), 50u);
  p.sender.Stop(Clock::now() + std::chrono::seconds(10));
}

TEST(SenderThread, FlushForCrashSendsPendingEventsThenProcessCrash) {
  const std::string path = TempSocketPath("crash");
  StoringCollector collector(path);
  Pipeline p(path, 1024);
  p.h.fake.functions[kF] = FakeFunction{};
  ASSERT_TRUE(p.sender.Start());
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  for (uint32_t corr = 1; corr <= 20; ++corr) {
    p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", corr);
  }
  CrashInfo crash;
  crash.signal = SIGBUS;
  crash.code = 2;
  crash.addr = 0x1000;
  crash.tid = 1234;
  ASSERT_TRUE(p.sender.FlushForCrash(crash, 10'000'000'000));
  const std::vector<schema::OwnedEvent> events = collector.Events();
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(schema::TypeOf(events.back()), schema::EventType::kProcessCrash);
  const auto& c = std::get<schema::OwnedProcessCrashEvent>(events.back());
  EXPECT_EQ(c.signal, SIGBUS);
  EXPECT_EQ(c.signal_name, "SIGBUS");
  EXPECT_EQ(c.code, 2);
  EXPECT_EQ(c.addr, 0x1000u);
  EXPECT_EQ(c.tid, 1234);
  EXPECT_FALSE(c.app_handler);
  EXPECT_EQ(c.launches, 20u);
  EXPECT_EQ(EventsOfType(events, schema::EventType::kKernel).size(), 20u);
  // Everything before it (the description too), nothing lost.
  EXPECT_EQ(c.emitted + 1, collector.StoredSeqs(getpid()).size());
  p.sender.Stop(Clock::now() + std::chrono::seconds(10));
}

TEST(SenderThread, ExitWithoutACollectorWaitsAtMostItsDeadline) {
  Pipeline p(TempSocketPath("absent"), 64);
  p.h.fake.functions[kF] = FakeFunction{};
  cuLaunchKernel_params params{Fn(kF), 1, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
  p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z1kv", 1);
  ASSERT_TRUE(p.sender.Start());
  const Clock::time_point start = Clock::now();
  EXPECT_FALSE(p.sender.Stop(start + std::chrono::seconds(1)));
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
}

}  // namespace
}  // namespace cuflight::inject::testing
