// Stall detection without a GPU: launches through the recorder, kernels that finish only when the
// test says so (the fake CUPTI's flush hands over the activity records of finished kernels only,
// as cuptiActivityFlushAll's default flush does), the sender thread stepped on a made-up clock,
// and the stall events read back from a collector socket through the schema decoder.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/base/clock.h"
#include "cuflight/schema/decoder.h"
#include "inject_test_support.h"
#include "running_collector.h"
#include "sender_thread.h"
#include "stall_tracker.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kSpin = 0x1000;    // a kernel that waits on a flag
constexpr uint64_t kStep = 0x2000;    // an ordinary kernel
constexpr uint64_t kReduce = 0x3000;  // a kernel on a second stream
constexpr uint64_t kStream2 = 0x6E;   // a second stream of kContext
constexpr uint32_t kStream2Id = 15;   // its CUPTI id
constexpr milliseconds kThreshold(1000);

// A GPU as CUPTI shows it (cupti_activity.h, cuptiActivityFlushAll; docs/gpu-verification.md for
// what an H200 with CUDA 13.0 did): a launch's activity record is written into CUPTI's current
// buffer at the launch, in launch order (start and end 0), and is complete once the kernel ended.
// A default flush hands over only the buffers whose records are all complete ("It doesn't return
// buffers which have one or more incomplete records"), the current one included, after which a
// new one begins; so the record of a finished kernel waits while a kernel launched near it runs.
// A forced flush hands over every buffer ("including the ones which have one or more incomplete
// activity records"), incomplete records with start and end 0, and on the H200 those records
// were never handed over again: here they are gone too. A synchronization record (a stream or
// context synchronize that returned) is complete when written.
class FakeGpu {
 public:
  FakeGpu(FakeCuda* fake, ActivityBuffers* buffers, size_t buffer_bytes)
      : fake_(fake),
        buffers_(buffers),
        per_buffer_(buffer_bytes / sizeof(FakeActivityRecord)) {
    fake_->on_flush = [this](uint32_t flag) {
      HandOver((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
    };
  }

  void Launched(uint32_t correlation_id, uint32_t stream_id) {
    FakeActivityRecord r{};
    r.kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.kernel.contextId = kContextId;
    r.kernel.streamId = stream_id;
    r.kernel.correlationId = correlation_id;
    r.kernel.deviceId = 0;
    r.kernel.blockX = r.kernel.blockY = r.kernel.blockZ = 1;
    r.kernel.gridX = r.kernel.gridY = r.kernel.gridZ = 1;
    r.kernel.name = "";
    launched_ns_[correlation_id] = base::NowRealtimeNs();
    Write(r);
  }

  // A kernel node of a graph launched with `correlation_id`: its record carries the graph
  // launch's correlation id, the graph's and the node's ids and the kernel's name
  // (cupti_activity.h, CUpti_ActivityKernel10: correlationId "identical to the correlation ID in
  // the driver or runtime API activity record that launched the kernel", graphId "The unique ID
  // of the graph that launched this kernel through graph launch APIs", graphNodeId). Written at
  // the graph launch, in node order, like a launch's (docs/gpu-verification.md has the GPU
  // check).
  void GraphNodeLaunched(uint32_t correlation_id, uint32_t stream_id, uint32_t graph_id,
                         uint64_t node_id, const char* name) {
    FakeActivityRecord r{};
    r.kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.kernel.contextId = kContextId;
    r.kernel.streamId = stream_id;
    r.kernel.correlationId = correlation_id;
    r.kernel.deviceId = 0;
    r.kernel.graphId = graph_id;
    r.kernel.graphNodeId = node_id;
    r.kernel.blockX = 128;
    r.kernel.blockY = r.kernel.blockZ = 1;
    r.kernel.gridX = 64;
    r.kernel.gridY = r.kernel.gridZ = 1;
    r.kernel.name = name;
    launched_ns_[correlation_id] = base::NowRealtimeNs();
    Write(r);
  }

  // The kernel ends `ran` after its launch; CUPTI fills in its timestamps. Nothing when a forced
  // flush already handed its record over. `node`: which node of a graph launch (0: the first
  // record of that correlation id not ended).
  void Finish(uint32_t correlation_id, std::chrono::nanoseconds ran = std::chrono::nanoseconds(500),
              uint64_t node = 0) {
    for (auto& buffer : held_) {
      for (FakeActivityRecord& r : buffer) {
        if (r.activity.kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            r.kernel.correlationId != correlation_id ||
            (node != 0 && r.kernel.graphNodeId != node) || r.kernel.end != 0) {
          continue;
        }
        r.kernel.start = static_cast<uint64_t>(launched_ns_[correlation_id]);
        r.kernel.end = r.kernel.start + static_cast<uint64_t>(ran.count());
        return;
      }
    }
  }

  // A cuStreamSynchronize (of `stream_id`) or, with no stream, a cuCtxSynchronize that returned.
  // Its record exists only while the kind is enabled (cupti_activity.h, cuptiActivityEnable:
  // "Enable collection of a specific kind of activity record").
  void Synchronized(uint32_t correlation_id, std::optional<uint32_t> stream_id = std::nullopt) {
    if (!SynchronizationRecords()) return;
    FakeActivityRecord r{};
    r.sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.sync.type = stream_id ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE
                            : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    r.sync.correlationId = correlation_id;
    r.sync.contextId = kContextId;
    r.sync.streamId = stream_id.value_or(CUPTI_SYNCHRONIZATION_INVALID_VALUE);
    r.sync.start = static_cast<uint64_t>(base::NowRealtimeNs());
    r.sync.end = r.sync.start + 1000;
    Write(r);
  }

  // CUPTI had no buffer when it would have written this launch's record: there is none.
  void Lose(uint32_t correlation_id) {
    for (auto& buffer : held_) {
      std::erase_if(buffer, [&](const FakeActivityRecord& r) {
        return r.activity.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
               r.kernel.correlationId == correlation_id;
      });
    }
    std::erase_if(held_, [](const auto& buffer) { return buffer.empty(); });
  }

  bool SynchronizationRecords() const {
    return fake_->activity_kinds.count(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) != 0;
  }
  int flushes() const { return fake_->flushes; }
  int forced_flushes() const { return forced_; }

 private:
  static bool Complete(const FakeActivityRecord& r) {
    return r.activity.kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r.kernel.end != 0;
  }

  void Write(const FakeActivityRecord& r) {
    if (held_.empty() || held_.back().size() == per_buffer_) held_.emplace_back();
    held_.back().push_back(r);
  }

  void HandOver(bool forced) {
    if (forced) ++forced_;
    for (auto it = held_.begin(); it != held_.end();) {
      if (!forced && !std::all_of(it->begin(), it->end(), Complete)) {
        ++it;
        continue;
      }
      uint8_t* buffer = nullptr;
      size_t size = 0;
      size_t max_records = 0;
      buffers_->Request(&buffer, &size, &max_records);
      ASSERT_NE(buffer, nullptr);
      const size_t valid = WriteActivityRecords(*it, buffer, size);
      ASSERT_GT(valid, 0u);
      buffers_->Complete(buffer, valid);
      it = held_.erase(it);
    }
  }

  FakeCuda* fake_;
  ActivityBuffers* buffers_;
  size_t per_buffer_;
  std::vector<std::vector<FakeActivityRecord>> held_;  // CUPTI's buffers, the current one last
  std::map<uint32_t, int64_t> launched_ns_;
  int forced_ = 0;
};

struct Pipeline {
  Harness h;
  static constexpr size_t kBufferBytes = 4096;
  // A buffer that holds every record of a test, as CUPTI's 1 MiB ones hold thousands.
  static constexpr size_t kLargeBufferBytes = 256 << 10;
  ActivityBuffers buffers;
  FakeGpu gpu;
  SenderThread sender;

  explicit Pipeline(const std::string& socket, milliseconds threshold = kThreshold,
                    bool timing = true, size_t buffer_bytes = kBufferBytes)
      : buffers(16, buffer_bytes),
        gpu(&h.fake, &buffers, buffer_bytes),
        sender(
            h.Sender(Options(socket, &h.driver, threshold, timing), Facts(), &buffers, &h.cupti)) {
    h.fake.functions[kSpin] = FakeFunction{};
    h.fake.functions[kStep] = FakeFunction{};
    h.fake.functions[kReduce] = FakeFunction{};
    h.fake.stream_ids[kStream2] = kStream2Id;
  }

  static SenderThreadOptions Options(const std::string& socket, const DriverApi* driver,
                                     milliseconds threshold, bool timing) {
    SenderThreadOptions o = QuickSenderOptions(socket, driver);
    o.stats_interval = std::chrono::hours(1);
    o.timing = timing;
    o.stall_threshold = threshold;
    return o;
  }
  static ProcessFacts Facts() { return FactsWithConfig("stall_ms", "1000"); }

  // Launches `function` on `stream` (handle) with a grid of `grid_x` blocks of `block_x` threads.
  void Launch(uint64_t function, const char* name, uint32_t corr, uint64_t stream = kStream,
              uint32_t grid_x = 1, uint32_t block_x = 32) {
    cuLaunchKernel_params params{Fn(function), grid_x,  1,      1, block_x, 1, 1, 0,
                                 St(stream),   nullptr, nullptr};
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, name, corr);
    gpu.Launched(corr, stream == kStream ? kStreamId : kStream2Id);
  }

  // The application's thread enters a synchronising call (`cbid`: cuStreamSynchronize of
  // `stream`, cuCtxSynchronize, cuEventSynchronize), and later returns from it: the enter and
  // exit callbacks of one call, on one thread, with one correlation id (cupti_callbacks.h,
  // CUpti_CallbackData: callbackSite CUPTI_API_ENTER / CUPTI_API_EXIT; correlationId "the same
  // for both the entry and exit callbacks of the same API invocation").
  void SyncEnter(CUpti_CallbackId cbid, uint32_t corr, uint64_t stream = kStream) {
    Sync(cbid, corr, stream, CUPTI_API_ENTER, CUDA_SUCCESS);
  }
  void SyncExit(CUpti_CallbackId cbid, uint32_t corr, uint64_t stream = kStream,
                CUresult result = CUDA_SUCCESS) {
    Sync(cbid, corr, stream, CUPTI_API_EXIT, result);
  }
  void Sync(CUpti_CallbackId cbid, uint32_t corr, uint64_t stream, CUpti_ApiCallbackSite site,
            CUresult result) {
    cuStreamSynchronize_params stream_params{St(stream)};
    cuEventSynchronize_params event_params{reinterpret_cast<CUevent>(uintptr_t{0xE7})};
    const void* params = cbid == CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize
                             ? static_cast<const void*>(&event_params)
                         : cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize
                             ? nullptr
                             : static_cast<const void*>(&stream_params);
    Callback cb(params, nullptr, corr);
    cb.data.callbackSite = site;
    cb.result = result;
    h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb.data);
  }

  // cuGraphLaunch of the executable graph `exec` on `stream` (cuGraphLaunch_params {CUgraphExec
  // hGraph; CUstream hStream}, generated_cuda_meta.h): its exit callback.
  void GraphLaunch(uint64_t exec, uint32_t corr, uint64_t stream = kStream) {
    cuGraphLaunch_params params{reinterpret_cast<CUgraphExec>(static_cast<uintptr_t>(exec)),
                                St(stream)};
    Callback cb(&params, nullptr, corr);
    h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
                           &cb.data);
  }

  // Steps the sender every 50 ms from `from` to `to` (both included) on the made-up clock.
  void StepUntil(Clock::time_point from, Clock::time_point to) {
    for (Clock::time_point t = from; t <= to; t += milliseconds(50)) sender.Step(t);
  }
};

// Ends the run and returns every event the collector got, in seq order.
std::vector<schema::OwnedEvent> Finish(Pipeline& p, StoringCollector& collector) {
  EXPECT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  EXPECT_TRUE(collector.WaitFor(HasProcessEnd));
  return collector.Events();
}

std::vector<schema::OwnedStallEvent> Stalls(const std::vector<schema::OwnedEvent>& events) {
  std::vector<schema::OwnedStallEvent> out;
  for (const schema::OwnedEvent& e : events) {
    if (const auto* s = std::get_if<schema::OwnedStallEvent>(&e)) out.push_back(*s);
  }
  return out;
}

std::vector<std::string> Names(const schema::OwnedStallStream& s) {
  std::vector<std::string> names;
  for (const schema::OwnedStallLaunch& l : s.launches) names.push_back(l.demangled);
  return names;
}

const schema::OwnedKernelEvent* KernelOf(const std::vector<schema::OwnedEvent>& events,
                                         uint64_t correlation_id) {
  for (const schema::OwnedEvent& e : events) {
    const auto* k = std::get_if<schema::OwnedKernelEvent>(&e);
    if (k != nullptr && k->correlation_id == correlation_id) return k;
  }
  return nullptr;
}

TEST(Stall, ReportedAfterTheThresholdNamingPerStreamTheOldestUnfinishedLaunches) {
  const std::string path = TempSocketPath("stall");
  StoringCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1, kStream, 1, 32);    // never finishes
  p.Launch(kStep, "_Z4stepPf", 2, kStream, 264, 256);  // queued behind it
  p.Launch(kStep, "_Z4stepPf", 3, kStream, 264, 256);
  p.Launch(kReduce, "_Z6reducePf", 4, kStream2, 8, 1024);  // waits for the first (an event)
  p.StepUntil(t0, t0 + milliseconds(900));
  // The sender asks CUPTI for completed buffers at least every quarter of the threshold.
  EXPECT_GE(p.gpu.flushes(), 900 / 250);
  EXPECT_EQ(p.gpu.forced_flushes(), 0);
  p.StepUntil(t0 + milliseconds(950), t0 + milliseconds(1100));
  // One forced flush confirmed the stall; it handed the four records over incomplete.
  EXPECT_EQ(p.gpu.forced_flushes(), 1);
  const std::vector<schema::OwnedEvent> events = Finish(p, collector);
  EXPECT_EQ(std::get<schema::OwnedProcessEndEvent>(events.back()).timing_dropped, 4u);
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
  ASSERT_EQ(stalls.size(), 1u);
  const schema::OwnedStallEvent& s = stalls[0];
  EXPECT_EQ(s.state, schema::StallState::kStalled);
  EXPECT_EQ(s.stall_ms, 1000);
  EXPECT_EQ(s.completed, 0u);  // nothing finished anywhere: the whole process is stuck
  EXPECT_EQ(s.streams_stalled, 2);
  ASSERT_EQ(s.streams.size(), 2u);
  // The first stall is seen at the first check at or after t0 + 1 s: 1000 ms of waiting (the
  // records were taken at t0, a few microseconds after their launch).
  EXPECT_GE(s.stalled_ms, 1000);
  EXPECT_LE(s.stalled_ms, 1010);
  const schema::OwnedStallStream& first = s.streams[0];
  EXPECT_EQ(first.context, kContextId);
  EXPECT_EQ(first.stream, kStreamId);
  EXPECT_EQ(first.device, 0);
  EXPECT_EQ(first.unfinished, 3);
  EXPECT_EQ(Names(first),
            (std::vector<std::string>{"spin(int volatile*)", "step(float*)", "step(float*)"}));
  const schema::OwnedStallLaunch& spin = first.launches[0];
  EXPECT_EQ(spin.correlation_id, 1u);
  EXPECT_EQ(spin.name, "_Z4spinPVi");
  EXPECT_EQ(spin.grid, (schema::Dim3{1, 1, 1}));
  EXPECT_EQ(spin.block, (schema::Dim3{32, 1, 1}));
  EXPECT_GE(spin.age_ms, 1000);
  EXPECT_LE(spin.age_ms, 1010);
  const schema::OwnedKernelEvent* spin_event = KernelOf(events, 1);
  ASSERT_NE(spin_event, nullptr);
  EXPECT_EQ(spin.occupancy, spin_event->occupancy.occupancy);  // the kernel event's
  EXPECT_EQ(first.launches[1].grid, (schema::Dim3{264, 1, 1}));
  EXPECT_EQ(first.launches[1].block, (schema::Dim3{256, 1, 1}));
  const schema::OwnedStallStream& second = s.streams[1];
  EXPECT_EQ(second.stream, kStream2Id);
  EXPECT_EQ(second.unfinished, 1);
  EXPECT_EQ(Names(second), (std::vector<std::string>{"reduce(float*)"}));
  // The stall event comes after the kernel events it names, and before process_end.
  EXPECT_EQ(schema::TypeOf(events.back()), schema::EventType::kProcessEnd);
}

TEST(Stall, RepeatedAtABoundedRateThenResolvedWhenSynchronizesReturn) {
  const std::string path = TempSocketPath("stall-repeat");
  StoringCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1);
  p.Launch(kStep, "_Z4stepPf", 2);
  p.Launch(kReduce, "_Z6reducePf", 3, kStream2);
  p.Launch(kStep, "_Z4stepPf", 4, kStream2);
  // Stalled from t0 + 1 s (the forced flush then shows every kernel still running, and takes
  // their records); with a threshold of 1 s the event repeats every second (the repeat interval
  // is the threshold, at least 1 s): at 1, 2, 3 and 4 s.
  // Synchronization records are collected from the confirmation at 1 s on, queries whose work
  // has not completed left out (StallTracker design point 8).
  p.StepUntil(t0, t0 + milliseconds(900));
  EXPECT_FALSE(p.gpu.SynchronizationRecords());
  p.StepUntil(t0 + milliseconds(950), t0 + milliseconds(4500));
  EXPECT_TRUE(p.gpu.SynchronizationRecords());
  EXPECT_FALSE(p.h.fake.all_sync_records);
  // The second stream's kernels end. Their records went with the forced flush, so what shows it
  // is the program's cuStreamSynchronize of that stream returning (correlation id 5): its
  // synchronization record is handed over at the next flush, at 4.75 s.
  p.gpu.Synchronized(5, kStream2Id);
  p.StepUntil(t0 + milliseconds(4550), t0 + milliseconds(5000));  // the repeat at 5 s
  // The spinning kernel ends, and the program's cuCtxSynchronize returns (6); its record arrives
  // at 5.25 s, and the check after that (every 100 ms: 5.3 s) finds no stream stalled.
  p.gpu.Synchronized(6);
  p.StepUntil(t0 + milliseconds(5050), t0 + milliseconds(8000));
  EXPECT_EQ(p.gpu.forced_flushes(), 1);
  // Nothing left that only a synchronize could show: no more synchronization records.
  EXPECT_FALSE(p.gpu.SynchronizationRecords());
  EXPECT_EQ(p.h.fake.activity_enables, 1);
  EXPECT_EQ(p.h.fake.activity_disables, 1);
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(Finish(p, collector));
  ASSERT_EQ(stalls.size(), 6u);  // stalled at 1, 2, 3, 4 and 5 s, then resolved
  for (size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    const schema::OwnedStallEvent& s = stalls[i];
    EXPECT_EQ(s.state, schema::StallState::kStalled);
    EXPECT_GE(s.stalled_ms, 1000 * static_cast<int64_t>(i + 1));
    EXPECT_LE(s.stalled_ms, 1000 * static_cast<int64_t>(i + 1) + 10);
    ASSERT_FALSE(s.streams.empty());
    EXPECT_EQ(s.streams[0].stream, kStreamId);  // the longest waiting first
    EXPECT_EQ(Names(s.streams[0])[0], "spin(int volatile*)");
  }
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(stalls[i].streams_stalled, 2);
    EXPECT_EQ(stalls[i].completed, 0u);
  }
  // At 5 s: the second stream's two kernels finished since the event at 4 s; it is not stalled.
  EXPECT_EQ(stalls[4].completed, 2u);
  EXPECT_EQ(stalls[4].streams_stalled, 1);
  ASSERT_EQ(stalls[4].streams.size(), 1u);
  const schema::OwnedStallEvent& resolved = stalls[5];
  EXPECT_EQ(resolved.state, schema::StallState::kResolved);
  EXPECT_EQ(resolved.completed, 2u);
  EXPECT_EQ(resolved.streams_stalled, 0);
  EXPECT_TRUE(resolved.streams.empty());
  // From the first stream's wait (t0, the launch) to the check that found it moving (5.3 s).
  EXPECT_GE(resolved.stalled_ms, 5300);
  EXPECT_LE(resolved.stalled_ms, 5310);
}

// What an H200 showed (docs/gpu-verification.md): three short kernels, a kernel spinning on a
// flag, two more queued behind it, all on one stream. The six records share CUPTI's buffer, so no
// default flush hands over the three finished ones; the forced flush before the first report
// does, and the stall names the spinning kernel, not the first short one.
TEST(Stall, TheKernelHoldingTheStreamIsNamedThoughFinishedOnesShareItsBuffer) {
  const std::string path = TempSocketPath("stall-shared");
  StoringCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  for (uint32_t corr = 1; corr <= 3; ++corr) p.Launch(kStep, "_Z4stepPf", corr, kStream, 4096, 256);
  p.Launch(kSpin, "_Z4spinPVi", 4, kStream, 1, 32);
  p.Launch(kStep, "_Z4stepPf", 5, kStream, 4096, 256);
  p.Launch(kStep, "_Z4stepPf", 6, kStream, 4096, 256);
  for (uint32_t corr = 1; corr <= 3; ++corr) p.gpu.Finish(corr, std::chrono::microseconds(4));
  p.StepUntil(t0, t0 + milliseconds(1100));
  // The flag is set; the program's cuStreamSynchronize returns (7).
  p.gpu.Synchronized(7, kStreamId);
  p.StepUntil(t0 + milliseconds(1150), t0 + milliseconds(1500));
  const std::vector<schema::OwnedEvent> events = Finish(p, collector);
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
  ASSERT_EQ(stalls.size(), 2u);
  ASSERT_EQ(stalls[0].streams.size(), 1u);
  EXPECT_EQ(stalls[0].streams[0].unfinished, 3);
  EXPECT_EQ(stalls[0].streams[0].launches[0].correlation_id, 4u);
  EXPECT_EQ(Names(stalls[0].streams[0]),
            (std::vector<std::string>{"spin(int volatile*)", "step(float*)", "step(float*)"}));
  EXPECT_EQ(stalls[1].state, schema::StallState::kResolved);
  // The three short kernels are timed; the spinning one and those behind it are not (their
  // records went incomplete with the forced flush), and say so in timing_dropped.
  int timed = 0;
  for (const schema::OwnedEvent& e : events) {
    if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&e)) {
      EXPECT_LE(t->correlation_id, 3u);
      ++timed;
    }
  }
  EXPECT_EQ(timed, 3);
  EXPECT_EQ(std::get<schema::OwnedProcessEndEvent>(events.back()).timing_dropped, 3u);
}

// A long kernel, then one queued behind it. Their records share a buffer, so the first one's end
// is not seen until the forced flush at 1 s: it ended at 0.7 s, so the second has waited 0.3 s,
// not the threshold: not stalled yet. It is looked at again when it has waited the threshold
// (1.7 s): if nothing showed it ending by then, it is reported; if a synchronize did, not.
TEST(Stall, AKernelQueuedBehindALongOneIsJudgedFromWhenTheLongOneEnded) {
  for (const bool ends : {false, true}) {
    SCOPED_TRACE(ends);
    const std::string path = TempSocketPath("stall-queued");
    StoringCollector collector(path);
    Pipeline p(path);
    const Clock::time_point t0 = Clock::now();
    p.Launch(kStep, "_Z4stepPf", 1);   // runs 0.7 s
    p.Launch(kSpin, "_Z4spinPVi", 2);  // launched at once, runs after it
    p.StepUntil(t0, t0 + milliseconds(700));
    p.gpu.Finish(1, milliseconds(700));
    p.StepUntil(t0 + milliseconds(750), t0 + milliseconds(1200));
    EXPECT_EQ(p.gpu.forced_flushes(), 1);
    if (ends) p.gpu.Synchronized(3, kStreamId);
    p.StepUntil(t0 + milliseconds(1250), t0 + milliseconds(1800));
    EXPECT_EQ(p.gpu.forced_flushes(), ends ? 1 : 2);
    const std::vector<schema::OwnedEvent> events = Finish(p, collector);
    const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
    // Its record went incomplete with the first forced flush.
    EXPECT_EQ(std::get<schema::OwnedProcessEndEvent>(events.back()).timing_dropped, 1u);
    if (ends) {
      EXPECT_TRUE(stalls.empty());
      continue;
    }
    ASSERT_EQ(stalls.size(), 1u);
    ASSERT_EQ(stalls[0].streams.size(), 1u);
    EXPECT_EQ(Names(stalls[0].streams[0]), (std::vector<std::string>{"spin(int volatile*)"}));
    // Waiting from the first kernel's end (0.7 s) to the check at 1.7 s.
    EXPECT_GE(stalls[0].streams[0].waiting_ms, 1000);
    EXPECT_LE(stalls[0].streams[0].waiting_ms, 1010);
    EXPECT_GE(stalls[0].streams[0].launches[0].age_ms, 1700);  // its age counts from its launch
    EXPECT_LE(stalls[0].streams[0].launches[0].age_ms, 1710);
  }
}

// At exit the library flushes CUPTI's buffers (forced) and handles what they hold: a stall whose
// kernels are shown finished by then (here by a synchronize) is reported resolved before
// process_end; one whose kernel still runs is not.
TEST(Stall, AStallThatEndedBeforeTheExitIsResolvedBeforeProcessEnd) {
  for (const bool finished : {true, false}) {
    SCOPED_TRACE(finished);
    const std::string path = TempSocketPath("stall-exit");
    StoringCollector collector(path);
    Pipeline p(path);
    const Clock::time_point t0 = Clock::now();
    p.Launch(kSpin, "_Z4spinPVi", 1);
    p.StepUntil(t0, t0 + milliseconds(1100));
    // The kernel ends and the program's cuCtxSynchronize returns (2). (The kernel's own record
    // went incomplete with the forced flush that confirmed the stall.)
    if (finished) p.gpu.Synchronized(2);
    p.h.cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // as the exit does
    const std::vector<schema::OwnedEvent> events = Finish(p, collector);
    const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
    ASSERT_EQ(stalls.size(), finished ? 2u : 1u);
    EXPECT_EQ(stalls[0].state, schema::StallState::kStalled);
    if (finished) {
      EXPECT_EQ(stalls[1].state, schema::StallState::kResolved);
      EXPECT_EQ(stalls[1].completed, 1u);
      EXPECT_EQ(schema::TypeOf(events[events.size() - 2]), schema::EventType::kStall);
    } else {
      EXPECT_EQ(std::get<schema::OwnedProcessEndEvent>(events.back()).timing_dropped, 1u);
    }
  }
}

TEST(Stall, AKernelThatFinishedIsNeverBlamedWhateverTheOrderOfItsRecords) {
  const std::string path = TempSocketPath("stall-order");
  StoringCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  // Its activity record is handled before its launch record (the ring was behind).
  p.gpu.Launched(1, kStreamId);
  p.gpu.Finish(1);
  p.StepUntil(t0, t0 + milliseconds(600));
  cuLaunchKernel_params params{Fn(kStep), 1, 1, 1, 32, 1, 1, 0, St(kStream), nullptr, nullptr};
  p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, "_Z4stepPf", 1);
  // A record CUPTI lost (or never made), followed by a later kernel of the same stream that
  // finished: kernels of a stream finish in order, so the first finished too.
  p.Launch(kStep, "_Z4stepPf", 2, kStream2);
  p.Launch(kStep, "_Z4stepPf", 3, kStream2);
  p.gpu.Finish(3);
  p.StepUntil(t0 + milliseconds(650), t0 + milliseconds(5000));
  EXPECT_TRUE(Stalls(Finish(p, collector)).empty());
}

// Takes every free buffer of the pool and asks once more: the request is refused, as when
// CUPTI wants a buffer while all are in use (its records are then dropped). Gives them back.
void RefuseABufferRequest(Pipeline& p) {
  std::vector<uint8_t*> held;
  for (size_t i = 0; i <= p.buffers.count(); ++i) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    p.buffers.Request(&buffer, &size, &max_records);
    if (buffer != nullptr) held.push_back(buffer);
  }
  for (uint8_t* buffer : held) p.buffers.Complete(buffer, 0);
}

// A kernel whose record was lost may have finished unseen: the confirmation finds no record of
// it at all and forgets it, rather than report a stall of a kernel that ended.
TEST(Stall, LostTimingRecordsForgetWhatMayHaveFinishedUnseen) {
  const std::string path = TempSocketPath("stall-lost");
  StoringCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kStep, "_Z4stepPf", 1);
  p.gpu.Lose(1);
  p.StepUntil(t0, t0 + milliseconds(500));
  RefuseABufferRequest(p);
  EXPECT_EQ(p.buffers.refused(), 1u);
  p.StepUntil(t0 + milliseconds(550), t0 + milliseconds(3000));
  EXPECT_EQ(p.gpu.forced_flushes(), 1);  // the confirmation, which showed no record of it
  // A kernel launched after the loss is tracked again.
  p.Launch(kSpin, "_Z4spinPVi", 2);
  p.StepUntil(t0 + milliseconds(3050), t0 + milliseconds(4100));
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(Finish(p, collector));
  ASSERT_EQ(stalls.size(), 1u);
  ASSERT_EQ(stalls[0].streams.size(), 1u);
  EXPECT_EQ(Names(stalls[0].streams[0]), (std::vector<std::string>{"spin(int volatile*)"}));
}

// Records lost elsewhere (a buffer request refused while many threads record) do not hide a
// hang: the hung kernel's record was written at its launch and sits incomplete in CUPTI's
// buffer, so the confirmation shows it running, and the stall is reported at the threshold.
// (Forgetting every launch pending at a loss would never report this hang.)
TEST(Stall, AHangIsStillReportedWhenOtherRecordsWereLost) {
  const std::string path = TempSocketPath("stall-lost-hang");
  StoringCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1);                 // hangs
  p.Launch(kReduce, "_Z6reducePf", 2, kStream2);    // its record is lost; it ended
  p.gpu.Lose(2);
  p.StepUntil(t0, t0 + milliseconds(300));
  RefuseABufferRequest(p);
  p.StepUntil(t0 + milliseconds(350), t0 + milliseconds(1100));
  const std::vector<schema::OwnedEvent> events = Finish(p, collector);
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].state, schema::StallState::kStalled);
  EXPECT_EQ(stalls[0].streams_stalled, 1);  // not the stream whose record was lost
  ASSERT_EQ(stalls[0].streams.size(), 1u);
  EXPECT_EQ(stalls[0].streams[0].stream, kStreamId);
  EXPECT_EQ(Names(stalls[0].streams[0]), (std::vector<std::string>{"spin(int volatile*)"}));
  EXPECT_GE(std::get<schema::OwnedProcessEndEvent>(events.back()).timing_dropped, 1u);
}

// Programmatic dependent launch (cuda.h, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
// "allow the grid's execution to overlap with the previous kernel in the stream"): a secondary
// that does not wait on its primary ends while the primary spins. Its record shows the secondary
// finished, not the primary: the stall names the primary. (Were the secondary's end taken as the
// end of every earlier launch of the stream, the spinning primary would never be reported.)
TEST(Stall, AProgrammaticSecondaryThatEndedDoesNotHideItsSpinningPrimary) {
  for (const bool programmatic : {true, false}) {
    SCOPED_TRACE(programmatic);
    const std::string path = TempSocketPath("stall-pdl");
    StoringCollector collector(path);
    Pipeline p(path);
    const Clock::time_point t0 = Clock::now();
    p.Launch(kSpin, "_Z4spinPVi", 1);  // the primary: spins
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = programmatic ? 1 : 0;
    CUlaunchConfig config{1, 1, 1, 32, 1, 1, 0, St(kStream), &attr, 1};
    cuLaunchKernelEx_params params{&config, Fn(kStep), nullptr, nullptr};
    p.h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &params, "_Z4stepPf", 2);
    p.gpu.Launched(2, kStreamId);
    p.gpu.Finish(2);  // the secondary ends at once
    p.StepUntil(t0, t0 + milliseconds(1100));
    const std::vector<schema::OwnedEvent> events = Finish(p, collector);
    const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
    // The secondary is timed either way (its record came with the confirming forced flush).
    EXPECT_EQ(std::count_if(events.begin(), events.end(),
                            [](const schema::OwnedEvent& e) {
                              const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&e);
                              return t != nullptr && t->correlation_id == 2;
                            }),
              1);
    if (!programmatic) {
      // Without the attribute the stream runs in launch order: the second kernel's end shows the
      // first ended (a lost or late record of it), and nothing is reported.
      EXPECT_TRUE(stalls.empty());
      continue;
    }
    ASSERT_EQ(stalls.size(), 1u);
    ASSERT_EQ(stalls[0].streams.size(), 1u);
    EXPECT_EQ(stalls[0].streams[0].stream, kStreamId);
    EXPECT_EQ(stalls[0].streams[0].unfinished, 1);
    EXPECT_EQ(stalls[0].streams[0].launches[0].correlation_id, 1u);
    EXPECT_EQ(Names(stalls[0].streams[0]), (std::vector<std::string>{"spin(int volatile*)"}));
  }
}

// Without kernel timing nothing shows a launch finished or not: a launch that no synchronising
// call waits for is never reported (stall_tracker.h, point 10). A threshold of 0 is no detection.
TEST(Stall, NothingWithoutKernelTimingAndASynchronizeOrWithAThresholdOf0) {
  for (const bool timing : {false, true}) {
    SCOPED_TRACE(timing);
    const std::string path = TempSocketPath("stall-off");
    StoringCollector collector(path);
    Pipeline p(path, timing ? milliseconds(0) : kThreshold, timing);
    EXPECT_EQ(p.sender.stall_detection(), !timing);
    const Clock::time_point t0 = Clock::now();
    p.Launch(kSpin, "_Z4spinPVi", 1);
    p.StepUntil(t0, t0 + milliseconds(5000));
    EXPECT_TRUE(Stalls(Finish(p, collector)).empty());
  }
}

int32_t ThisThread() { return static_cast<int32_t>(syscall(SYS_gettid)); }

// One stalled stream must not cost every stream its timing. Stream A's kernel
// spins; stream B's 60 kernels, launched after it by the same thread, run and end meanwhile. All
// the records share one activity buffer (as CUPTI's 1 MiB buffers hold thousands), which a
// default flush does not hand over while A's record is incomplete (cupti_activity.h,
// cuptiActivityFlushAll: "It doesn't return buffers which have one or more incomplete records"),
// so B looks as stalled as A from its records. The application waits in cuStreamSynchronize(A):
// that call confirms A, no forced flush is made (it would hand over the records of B's kernels
// still queued incomplete, never to come again), B is not named, and once A ends every kernel of
// both streams has its kernel_time.
TEST(Stall, AStreamHungInASynchronizeIsReportedWithoutAForcedFlushAndOtherStreamsKeepTheirTiming) {
  const std::string path = TempSocketPath("stall-sync");
  StoringCollector collector(path);
  Pipeline p(path, kThreshold, /*timing=*/true, Pipeline::kLargeBufferBytes);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1);  // stream A, never ends until the test says
  constexpr uint32_t kB = 60;
  for (uint32_t i = 0; i < kB; ++i) p.Launch(kReduce, "_Z6reducePf", 2 + i, kStream2);
  p.SyncEnter(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 2 + kB);
  // B's kernels end one after another during the first 1.5 s, the last 20 after the threshold.
  for (uint32_t i = 0; i < kB; ++i) {
    const Clock::time_point at = t0 + milliseconds(25 * i);
    p.sender.Step(at);
    p.gpu.Finish(2 + i);
  }
  p.StepUntil(t0 + milliseconds(1500), t0 + milliseconds(2500));
  EXPECT_EQ(p.gpu.forced_flushes(), 0);
  // A ends at 2.5 s; the synchronize returns.
  p.gpu.Finish(1);
  p.SyncExit(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 2 + kB);
  p.StepUntil(t0 + milliseconds(2550), t0 + milliseconds(3500));
  EXPECT_EQ(p.gpu.forced_flushes(), 0);
  const std::vector<schema::OwnedEvent> events = Finish(p, collector);
  std::vector<uint64_t> timed;
  for (const schema::OwnedEvent& e : events) {
    if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&e)) {
      timed.push_back(t->correlation_id);
    }
  }
  std::sort(timed.begin(), timed.end());
  std::vector<uint64_t> every(kB + 1);
  for (uint32_t i = 0; i < kB + 1; ++i) every[i] = 1 + i;
  EXPECT_EQ(timed, every);  // A's kernel and all 60 of B's
  const auto& end = std::get<schema::OwnedProcessEndEvent>(events.back());
  EXPECT_EQ(end.timing_dropped, 0u);
  EXPECT_EQ(end.timing_dropped_stall_flush, 0u);
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
  ASSERT_GE(stalls.size(), 2u);
  const schema::OwnedStallEvent& s = stalls[0];
  EXPECT_EQ(s.state, schema::StallState::kStalled);
  EXPECT_FALSE(s.flush_incomplete.has_value());  // no forced flush
  ASSERT_EQ(s.streams.size(), 1u);  // A only: B's silence is its records held with A's
  const schema::OwnedStallStream& a = s.streams[0];
  EXPECT_EQ(a.stream, kStreamId);
  EXPECT_EQ(a.evidence, schema::kStallEvidenceSyncCall);
  EXPECT_EQ(a.launches_from, schema::kStallLaunchesFromTimingRecords);
  EXPECT_EQ(a.sync_api, "cuStreamSynchronize");
  EXPECT_EQ(a.sync_tid, ThisThread());
  ASSERT_TRUE(a.sync_waited_ms.has_value());
  EXPECT_GE(*a.sync_waited_ms, 1000);
  EXPECT_EQ(Names(a), (std::vector<std::string>{"spin(int volatile*)"}));
  EXPECT_EQ(stalls.back().state, schema::StallState::kResolved);
}

// The same hang with no synchronising call to confirm it (the application waits by polling, say):
// the forced flush is still made, and what it cost is counted exactly. When it comes, 20 of B's
// kernels are still queued behind the spinning one: their records are handed over incomplete with
// A's, and are lost: 21 records on 2 streams.
TEST(Stall, WhenAForcedFlushIsUnavoidableItsCostIsCounted) {
  const std::string path = TempSocketPath("stall-cost");
  StoringCollector collector(path);
  Pipeline p(path, kThreshold, /*timing=*/true, Pipeline::kLargeBufferBytes);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1);
  constexpr uint32_t kB = 60;
  for (uint32_t i = 0; i < kB; ++i) p.Launch(kReduce, "_Z6reducePf", 2 + i, kStream2);
  for (uint32_t i = 0; i < kB - 20; ++i) p.gpu.Finish(2 + i);
  p.StepUntil(t0, t0 + milliseconds(1100));
  EXPECT_EQ(p.gpu.forced_flushes(), 1);
  const std::vector<schema::OwnedEvent> events = Finish(p, collector);
  const auto& end = std::get<schema::OwnedProcessEndEvent>(events.back());
  EXPECT_EQ(end.timing_dropped, 21u);
  EXPECT_EQ(end.timing_dropped_stall_flush, 21u);
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
  ASSERT_FALSE(stalls.empty());
  EXPECT_EQ(stalls[0].flush_incomplete, 21u);
  EXPECT_EQ(stalls[0].flush_incomplete_streams, 2);
  ASSERT_FALSE(stalls[0].streams.empty());
  EXPECT_EQ(stalls[0].streams[0].evidence, schema::kStallEvidenceTimingRecords);
}

// With kernel timing off a hang is still reported, from the synchronising call it
// holds: the stream it names, the thread, the call, and the last launches recorded on the
// stream, said to be only that (launches_from recent: which of them runs is not known). A
// synchronize that returned finished the launches before it; its return ends the stall.
TEST(Stall, WithTimingOffAHungStreamSynchronizeNamesTheStreamAndItsLastLaunches) {
  const std::string path = TempSocketPath("stall-notiming");
  StoringCollector collector(path);
  Pipeline p(path, kThreshold, /*timing=*/false);
  ASSERT_TRUE(p.sender.stall_detection());
  const Clock::time_point t0 = Clock::now();
  p.Launch(kStep, "_Z4stepPf", 1, kStream, 264, 256);
  p.Launch(kStep, "_Z4stepPf", 2, kStream, 264, 256);
  p.SyncEnter(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 3);
  p.SyncExit(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 3);  // those two ended
  p.sender.Step(t0);
  for (uint32_t corr = 4; corr < 10; ++corr) {
    p.Launch(corr == 4 ? kSpin : kStep, corr == 4 ? "_Z4spinPVi" : "_Z4stepPf", corr);
  }
  p.Launch(kReduce, "_Z6reducePf", 10, kStream2);  // another stream, not waited for
  p.SyncEnter(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 11);
  p.StepUntil(t0, t0 + milliseconds(1200));
  p.SyncExit(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 11);
  p.StepUntil(t0 + milliseconds(1250), t0 + milliseconds(1500));
  const std::vector<schema::OwnedEvent> events = Finish(p, collector);
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
  ASSERT_EQ(stalls.size(), 2u);
  const schema::OwnedStallEvent& s = stalls[0];
  EXPECT_EQ(s.state, schema::StallState::kStalled);
  EXPECT_EQ(s.streams_stalled, 1);
  ASSERT_EQ(s.streams.size(), 1u);
  const schema::OwnedStallStream& st = s.streams[0];
  EXPECT_EQ(st.stream, kStreamId);
  EXPECT_EQ(st.evidence, schema::kStallEvidenceSyncCall);
  EXPECT_EQ(st.launches_from, schema::kStallLaunchesFromRecent);
  EXPECT_EQ(st.sync_api, "cuStreamSynchronize");
  EXPECT_EQ(st.sync_tid, ThisThread());
  EXPECT_EQ(st.unfinished, 6);  // the launches since the synchronize that returned
  EXPECT_GE(st.waiting_ms, 1000);
  // The last kRecent (4) launches, oldest first.
  std::vector<uint64_t> ids;
  for (const schema::OwnedStallLaunch& l : st.launches) ids.push_back(l.correlation_id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{6, 7, 8, 9}));
  ASSERT_FALSE(st.launches.empty());
  EXPECT_EQ(st.launches[0].demangled, "step(float*)");
  EXPECT_EQ(st.launches[0].block, (schema::Dim3{32, 1, 1}));
  EXPECT_EQ(stalls[1].state, schema::StallState::kResolved);
  // Nothing to confirm from records: no forced flush.
  EXPECT_EQ(p.gpu.forced_flushes(), 0);
}

// A context synchronize names no stream: each stream of the context with launches since its last
// synchronize seen returning is listed (here A; B's work was synchronized), with the call.
TEST(Stall, WithTimingOffAHungContextSynchronizeListsTheStreamsWithWorkNotSynchronized) {
  const std::string path = TempSocketPath("stall-ctx");
  StoringCollector collector(path);
  Pipeline p(path, kThreshold, /*timing=*/false);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1);
  p.Launch(kReduce, "_Z6reducePf", 2, kStream2);
  p.sender.Step(t0);
  p.SyncEnter(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 3, kStream2);
  p.SyncExit(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 3, kStream2);
  p.SyncEnter(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, 4);
  p.StepUntil(t0, t0 + milliseconds(1200));
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(Finish(p, collector));
  ASSERT_FALSE(stalls.empty());
  ASSERT_EQ(stalls[0].streams.size(), 1u);
  EXPECT_EQ(stalls[0].streams[0].stream, kStreamId);
  EXPECT_EQ(stalls[0].streams[0].sync_api, "cuCtxSynchronize");
  EXPECT_EQ(Names(stalls[0].streams[0]), (std::vector<std::string>{"spin(int volatile*)"}));
}

// A hang inside a CUDA graph (a captured graph replayed with cuGraphLaunch, as
// torch.compile's reduce-overhead mode does) names the graph launch: its correlation id (the one
// its nodes' records carry), the executable graph's id (cuptiGetGraphExecId), and the node the
// confirming forced flush showed running, from its record (graphId, graphNodeId, kernel name).
// Its first node ended; the second spins; the third is queued behind it.
TEST(Stall, AHangInsideAGraphLaunchNamesTheGraphLaunchAndTheRunningNode) {
  const std::string path = TempSocketPath("stall-graph");
  StoringCollector collector(path);
  Pipeline p(path);
  constexpr uint64_t kExec = 0xE0;
  p.h.fake.graph_exec_ids[kExec] = 12;
  const Clock::time_point t0 = Clock::now();
  p.Launch(kStep, "_Z4stepPf", 1);
  p.gpu.Finish(1);
  p.GraphLaunch(kExec, 2);
  p.gpu.GraphNodeLaunched(2, kStreamId, 7, 701, "_Z4stepPf");
  p.gpu.GraphNodeLaunched(2, kStreamId, 7, 702, "_Z4spinPVi");
  p.gpu.GraphNodeLaunched(2, kStreamId, 7, 703, "_Z6reducePf");
  p.gpu.Finish(2, std::chrono::nanoseconds(500), 701);
  p.StepUntil(t0, t0 + milliseconds(1200));
  // (A second look follows the first: node 701's end, a few microseconds after the launch, moved
  // the stream's progress past the launch; see AStreamThatHasNotWaitedTheThresholdIsLookedAtAgain.)
  EXPECT_GE(p.gpu.forced_flushes(), 1);
  const std::vector<schema::OwnedEvent> events = Finish(p, collector);
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(events);
  ASSERT_FALSE(stalls.empty());
  ASSERT_EQ(stalls[0].streams.size(), 1u);
  const schema::OwnedStallStream& st = stalls[0].streams[0];
  ASSERT_EQ(st.launches.size(), 1u);
  const schema::OwnedStallLaunch& g = st.launches[0];
  EXPECT_TRUE(g.graph_launch);
  EXPECT_EQ(g.correlation_id, 2u);
  EXPECT_EQ(g.graph_exec_id, 12u);
  EXPECT_EQ(g.graph_id, 7u);
  EXPECT_EQ(g.graph_node_id, 702u);
  EXPECT_EQ(g.name, "_Z4spinPVi");
  EXPECT_EQ(g.demangled, "spin(int volatile*)");
  EXPECT_EQ(g.grid, (schema::Dim3{64, 1, 1}));
  EXPECT_EQ(g.block, (schema::Dim3{128, 1, 1}));
}

// The same hang with timing off, seen from the synchronize that waits for it: the graph launch is
// named among the stream's last launches, its node not known.
TEST(Stall, WithTimingOffAHangInsideAGraphLaunchNamesTheGraphLaunch) {
  const std::string path = TempSocketPath("stall-graph-off");
  StoringCollector collector(path);
  Pipeline p(path, kThreshold, /*timing=*/false);
  constexpr uint64_t kExec = 0xE0;
  p.h.fake.graph_exec_ids[kExec] = 12;
  const Clock::time_point t0 = Clock::now();
  p.Launch(kStep, "_Z4stepPf", 1);
  p.sender.Step(t0);
  p.GraphLaunch(kExec, 2);
  p.SyncEnter(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 3);
  p.StepUntil(t0, t0 + milliseconds(1200));
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(Finish(p, collector));
  ASSERT_FALSE(stalls.empty());
  const schema::OwnedStallStream& st = stalls[0].streams[0];
  EXPECT_EQ(st.launches_from, schema::kStallLaunchesFromRecent);
  ASSERT_EQ(st.launches.size(), 2u);
  EXPECT_FALSE(st.launches[0].graph_launch);
  const schema::OwnedStallLaunch& g = st.launches[1];
  EXPECT_TRUE(g.graph_launch);
  EXPECT_EQ(g.correlation_id, 2u);
  EXPECT_EQ(g.graph_exec_id, 12u);
  EXPECT_FALSE(g.graph_node_id.has_value());
  EXPECT_EQ(g.name, "");
}

// Sampled timing, at the tracker (the timing policy decides which launches are timed): launches
// made inside a timing window are pending until their records show them finished; those outside
// one are only remembered, and a synchronize that hangs on their stream reports them as its last
// launches. A stream with untimed launches and no synchronize is not reported from what it has
// (the tracker asks for a timing window for it: the next test).
TEST(StallTracker, WithSampledTimingUntimedLaunchesAreJudgedFromSynchronizesOnly) {
  StallTracker tracker(milliseconds(100));
  const Clock::time_point t0 = Clock::now();
  StallTracker::Launch launch;
  launch.context = 3;
  launch.stream = 14;
  launch.function_id = 1;
  launch.name = "_Z4stepPf";
  launch.launched_at = t0;
  launch.correlation_id = 1;
  launch.timed = true;  // inside a window
  tracker.OnLaunch(launch);
  tracker.OnFinished(3, 14, 1, t0 + milliseconds(1));
  for (uint32_t corr = 2; corr <= 4; ++corr) {  // outside one
    launch.correlation_id = corr;
    launch.timed = false;
    tracker.OnLaunch(launch);
  }
  launch.stream = 15;  // another stream, never synchronized
  launch.correlation_id = 5;
  tracker.OnLaunch(launch);
  EXPECT_EQ(tracker.pending(), 0);
  schema::StallEvent event;
  EXPECT_FALSE(tracker.Poll(t0 + milliseconds(500), &event));
  SyncCall call;
  call.tid = 77;
  call.cbid = CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize;
  call.scope = SyncScope::kStream;
  call.context = 3;
  call.stream = 14;
  call.correlation_id = 6;
  call.entered_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  tracker.OnSyncCalls(std::span<const SyncCall>(&call, 1));
  EXPECT_FALSE(tracker.ConfirmationDue(t0 + milliseconds(1000)));
  ASSERT_TRUE(tracker.Poll(t0 + milliseconds(1000), &event));
  ASSERT_EQ(event.streams.size(), 1u);
  EXPECT_EQ(event.streams[0].stream, 14u);
  EXPECT_EQ(event.streams[0].unfinished, 3);
  EXPECT_EQ(event.streams[0].sync_tid, 77);
  EXPECT_EQ(event.streams[0].sync_waited_ms, 1000);
  std::vector<uint64_t> ids;
  for (const schema::StallLaunch& l : event.streams[0].launches) ids.push_back(l.correlation_id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3, 4}));  // the last 4, the timed one included
}

// Sampled timing, at the tracker (stall_tracker.h, point 10): a stream whose launches were all
// made outside timing windows, that no synchronising call covers and that shows no progress asks
// for a window once its first untimed launch has waited the threshold (100 ms): not before, not
// for a stream a call covers, once for the launches it had. Its next launch, made in that window,
// is pending; unfinished for the threshold and confirmed by a forced flush that hands its record
// over incomplete, the stream is reported, listing its last launches (launches_from recent: an
// untimed launch before the pending one may be the one that runs). The other stream asks once the
// call no longer covers it. Once the pending launch is seen finishing, every launch before it is
// known finished and no window is asked for again.
TEST(StallTracker, WithSampledTimingAStreamOfUntimedLaunchesWithoutProgressAsksForAWindow) {
  StallTracker tracker(milliseconds(100));
  const Clock::time_point t0 = Clock::now();
  StallTracker::Launch launch;
  launch.context = 3;
  launch.stream = 14;
  launch.function_id = 1;
  launch.name = "_Z4stepPf";
  launch.tid = 9;
  launch.launched_at = t0;
  launch.timed = false;
  for (uint32_t corr = 1; corr <= 3; ++corr) {
    launch.correlation_id = corr;
    tracker.OnLaunch(launch);
  }
  launch.stream = 15;  // another stream, inside a cuStreamSynchronize of it
  launch.correlation_id = 4;
  tracker.OnLaunch(launch);
  SyncCall call;
  call.tid = 77;
  call.cbid = CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize;
  call.scope = SyncScope::kStream;
  call.context = 3;
  call.stream = 15;
  call.correlation_id = 5;
  call.entered_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  tracker.OnSyncCalls(std::span<const SyncCall>(&call, 1));
  EXPECT_FALSE(tracker.AskTimingWindow(t0 + milliseconds(99)));
  EXPECT_TRUE(tracker.AskTimingWindow(t0 + milliseconds(100)));
  EXPECT_EQ(tracker.window_asks(), 1u);  // stream 14 only: the call covers 15
  EXPECT_FALSE(tracker.AskTimingWindow(t0 + milliseconds(101)));
  EXPECT_FALSE(tracker.AskTimingWindow(t0 + milliseconds(250)));  // no launch since
  tracker.OnSyncCalls({});
  // The next launch on 14, in the window.
  launch.stream = 14;
  launch.correlation_id = 6;
  launch.timed = true;
  launch.launched_at = t0 + milliseconds(300);
  tracker.OnLaunch(launch);
  EXPECT_EQ(tracker.pending(), 1);
  // Stream 15, no longer covered by the call, asks now; 14 does not (its launch is pending).
  EXPECT_TRUE(tracker.AskTimingWindow(t0 + milliseconds(399)));
  EXPECT_EQ(tracker.window_asks(), 2u);
  EXPECT_FALSE(tracker.ConfirmationDue(t0 + milliseconds(399)));
  ASSERT_TRUE(tracker.ConfirmationDue(t0 + milliseconds(400)));
  tracker.BeginConfirmation(t0 + milliseconds(400));
  tracker.OnIncomplete(3, 14, 6);
  tracker.EndConfirmation();
  schema::StallEvent event;
  ASSERT_TRUE(tracker.Poll(t0 + milliseconds(400), &event));
  EXPECT_EQ(event.state, schema::StallState::kStalled);
  ASSERT_EQ(event.streams.size(), 1u);
  const schema::StallStream& st = event.streams[0];
  EXPECT_EQ(st.stream, 14u);
  EXPECT_EQ(st.evidence, schema::kStallEvidenceTimingRecords);
  EXPECT_EQ(st.launches_from, schema::kStallLaunchesFromRecent);
  EXPECT_EQ(st.unfinished, 4);  // the pending launch and the 3 untimed ones
  std::vector<uint64_t> ids;
  for (const schema::StallLaunch& l : st.launches) ids.push_back(l.correlation_id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3, 6}));
  // Launch 6 finishes: launches 1-3, made before it by its thread, did too.
  tracker.OnFinished(3, 14, 6, t0 + milliseconds(500));
  EXPECT_EQ(tracker.pending(), 0);
  EXPECT_FALSE(tracker.AskTimingWindow(t0 + milliseconds(5000)));
  EXPECT_EQ(tracker.window_asks(), 2u);
}

// The table of synchronising calls (sync_calls.h): a call in progress from its enter to its exit,
// each return seen once, a call that finds the table full counted.
TEST(SyncCallTable, HoldsCallsFromEnterToExitAndShowsEachReturnOnce) {
  SyncCallTable table;
  SyncCall call;
  call.tid = 5;
  call.cbid = CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize;
  call.scope = SyncScope::kContext;
  call.correlation_id = 40;
  call.context = 3;
  call.entered_ns = 123;
  table.Enter(call);
  SyncCall out[SyncCallTable::kSlots];
  ASSERT_EQ(table.InProgress(out, SyncCallTable::kSlots), 1);
  EXPECT_EQ(out[0].tid, 5);
  EXPECT_EQ(out[0].correlation_id, 40u);
  EXPECT_EQ(out[0].entered_ns, 123);
  EXPECT_EQ(table.ReturnedSinceLastLook(out, SyncCallTable::kSlots), 0);
  table.Exit(5, 40, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(table.InProgress(out, SyncCallTable::kSlots), 0);
  ASSERT_EQ(table.ReturnedSinceLastLook(out, SyncCallTable::kSlots), 1);
  EXPECT_EQ(out[0].result, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(table.ReturnedSinceLastLook(out, SyncCallTable::kSlots), 0);
  // A thread's enter without an exit (its exit callback never came) is no call in progress once
  // the thread enters another.
  call.tid = 6;
  table.Enter(call);
  call.correlation_id = 41;
  table.Enter(call);
  ASSERT_EQ(table.InProgress(out, SyncCallTable::kSlots), 1);
  EXPECT_EQ(out[0].correlation_id, 41u);
  table.Exit(6, 41, CUDA_SUCCESS);
  // kSlots threads inside a call at once, then one more: not tracked.
  for (int i = 0; i < SyncCallTable::kSlots + 1; ++i) {
    call.tid = 100 + i;
    std::thread([&table, call] { table.Enter(call); }).join();
  }
  EXPECT_EQ(table.InProgress(out, SyncCallTable::kSlots), SyncCallTable::kSlots);
  EXPECT_EQ(table.untracked(), 1u);
}

TEST(Stall, DisabledBeforeStartSaysSoInProcessStart) {
  const std::string path = TempSocketPath("stall-disabled");
  StoringCollector collector(path);
  Pipeline p(path);
  ASSERT_TRUE(p.sender.stall_detection());
  p.sender.DisableStallDetection();  // as when CUPTI refuses the activity set-up
  EXPECT_FALSE(p.sender.stall_detection());
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1);
  p.StepUntil(t0, t0 + milliseconds(3000));
  const std::vector<schema::OwnedEvent> events = Finish(p, collector);
  EXPECT_TRUE(Stalls(events).empty());
  const auto& start = std::get<schema::OwnedProcessStartEvent>(events.front());
  EXPECT_EQ(start.config, (std::vector<std::pair<std::string, std::string>>{{"stall_ms", "0"}}));
}

// The tracker alone: its bounds, and names cut to the schema's limit.
TEST(StallTracker, LongNamesAreCutAndStreamsAndLaunchesListedAreBounded) {
  StallTracker tracker(milliseconds(100));
  const Clock::time_point t0 = Clock::now();
  const std::string long_name(1000, 'k');
  uint64_t corr = 0;
  for (uint64_t stream = 1; stream <= 20; ++stream) {
    for (int i = 0; i < 6; ++i) {
      StallTracker::Launch l;
      l.context = 1;
      l.stream = stream;
      l.correlation_id = ++corr;
      l.function_id = 7;
      l.name = long_name;
      l.demangled = "";
      l.launched_at = t0 + milliseconds(stream);  // stream 1 waits longest
      tracker.OnLaunch(l);
    }
  }
  EXPECT_EQ(tracker.pending(), 120);
  schema::StallEvent event;
  // Over the threshold but not yet confirmed by a forced flush (design point 6): not reported.
  EXPECT_FALSE(tracker.Poll(t0 + milliseconds(500), &event));
  ASSERT_TRUE(tracker.ConfirmationDue(t0 + milliseconds(600)));
  tracker.BeginConfirmation(t0 + milliseconds(600));  // the flush shows nothing finished
  tracker.EndConfirmation();
  ASSERT_TRUE(tracker.Poll(t0 + milliseconds(600), &event));
  EXPECT_EQ(event.streams_stalled, 20);
  ASSERT_EQ(event.streams.size(), schema::kMaxStallStreams);
  for (size_t i = 0; i < event.streams.size(); ++i) {
    EXPECT_EQ(event.streams[i].stream, i + 1);
    EXPECT_EQ(event.streams[i].unfinished, 6);
    ASSERT_EQ(event.streams[i].launches.size(), schema::kMaxStallLaunches);
  }
  const std::string_view name = event.streams[0].launches[0].name;
  EXPECT_EQ(name.size(), schema::kMaxStallNameBytes);
  EXPECT_TRUE(name.ends_with(schema::kTruncationMarker));
  EXPECT_EQ(name.substr(0, 10), "kkkkkkkkkk");
  // Launches of a stream CUPTI could not name are not tracked (their records cannot be matched).
  StallTracker::Launch unnamed;
  unnamed.context = 1;
  unnamed.stream = 0xffffffff;  // CUPTI_INVALID_STREAM_ID
  unnamed.correlation_id = ++corr;
  tracker.OnLaunch(unnamed);
  EXPECT_EQ(tracker.pending(), 120);
  EXPECT_EQ(tracker.untracked(), 1u);
}

TEST(StallTracker, PendingLaunchesAreBoundedAndTheOldestKept) {
  StallTracker tracker(milliseconds(100));
  const Clock::time_point t0 = Clock::now();
  for (int i = 1; i <= StallTracker::kMaxPending + 10; ++i) {
    StallTracker::Launch l;
    l.context = 1;
    l.stream = 2;
    l.correlation_id = static_cast<uint32_t>(i);
    l.function_id = 1;
    l.launched_at = t0;
    tracker.OnLaunch(l);
  }
  EXPECT_EQ(tracker.pending(), StallTracker::kMaxPending);
  EXPECT_EQ(tracker.untracked(), 10u);
  schema::StallEvent event;
  ASSERT_TRUE(tracker.ConfirmationDue(t0 + milliseconds(200)));
  tracker.BeginConfirmation(t0 + milliseconds(200));
  tracker.EndConfirmation();
  ASSERT_TRUE(tracker.Poll(t0 + milliseconds(200), &event));
  EXPECT_EQ(event.streams[0].launches[0].correlation_id, 1u);
  // Everything finishes: the entries come back, and the stall resolves.
  tracker.OnFinished(1, 2, StallTracker::kMaxPending + 10, t0 + milliseconds(250));
  EXPECT_EQ(tracker.pending(), 0);
  ASSERT_TRUE(tracker.Poll(t0 + milliseconds(400), &event));
  EXPECT_EQ(event.state, schema::StallState::kResolved);
  EXPECT_EQ(event.completed, 1u);
}

StallTracker::Launch TrackedLaunch(uint64_t stream, uint32_t corr, Clock::time_point at,
                                   int64_t ts_ns) {
  StallTracker::Launch l;
  l.context = 1;
  l.stream = stream;
  l.correlation_id = corr;
  l.function_id = corr;
  l.name = "_Z1kv";
  l.demangled = "k()";
  l.launched_at = at;
  l.ts_ns = ts_ns;
  return l;
}

// The H200 case (docs/gpu-verification.md): three short kernels, one that never ends, two queued
// behind it, all launched at t0; the default flushes show nothing (one buffer holds all six). The
// forced flush shows the first three ended 4 ms after their launch and the rest incomplete: the
// stall names the fourth, waiting since the third ended.
TEST(StallTracker, AForcedFlushShowsWhichLaunchHoldsTheStreamAndSinceWhen) {
  StallTracker tracker(milliseconds(1000));
  const Clock::time_point t0 = Clock::now();
  const int64_t ts0 = 1'800'000'000'000'000'000;  // the launch records' wall clock
  for (uint64_t corr = 1; corr <= 6; ++corr) tracker.OnLaunch(TrackedLaunch(7, corr, t0, ts0));
  schema::StallEvent event;
  EXPECT_FALSE(tracker.ConfirmationDue(t0 + milliseconds(900)));
  EXPECT_FALSE(tracker.Poll(t0 + milliseconds(1000), &event));  // not confirmed
  const Clock::time_point tc = t0 + milliseconds(1100);
  ASSERT_TRUE(tracker.ConfirmationDue(tc));
  tracker.BeginConfirmation(tc);
  for (uint64_t corr = 1; corr <= 3; ++corr) {
    tracker.OnFinished(1, 7, corr, tc, static_cast<uint64_t>(ts0) + 4'000'000);
  }
  for (uint32_t corr = 4; corr <= 6; ++corr) tracker.OnIncomplete(1, 7, corr);
  tracker.EndConfirmation();
  EXPECT_FALSE(tracker.ConfirmationDue(tc + milliseconds(500)));  // at most one per threshold
  ASSERT_TRUE(tracker.Poll(tc, &event));
  EXPECT_EQ(event.state, schema::StallState::kStalled);
  ASSERT_EQ(event.streams.size(), 1u);
  EXPECT_EQ(event.streams[0].unfinished, 3);
  EXPECT_EQ(event.streams[0].launches[0].correlation_id, 4u);
  // Waiting since the third kernel ended at t0 + 4 ms, not since the forced flush.
  EXPECT_EQ(event.streams[0].waiting_ms, 1100 - 4);
  EXPECT_EQ(event.completed, 0u);  // none since the wait began
}

// A stream whose kernel, the forced flush shows, began holding it less than the threshold ago is
// not stalled yet, and is looked at again when it has waited the threshold; other streams whose
// records came back incomplete may end unseen, so their launches are forgotten (point 5).
TEST(StallTracker, AStreamThatHasNotWaitedTheThresholdIsLookedAtAgain) {
  StallTracker tracker(milliseconds(1000));
  const Clock::time_point t0 = Clock::now();
  const int64_t ts0 = 1'800'000'000'000'000'000;
  tracker.OnLaunch(TrackedLaunch(7, 1, t0, ts0));  // runs 700 ms
  tracker.OnLaunch(TrackedLaunch(7, 2, t0, ts0));  // runs after it, and on
  tracker.OnLaunch(TrackedLaunch(8, 3, t0 + milliseconds(900), ts0 + 900'000'000));  // another
  const Clock::time_point tc = t0 + milliseconds(1000);
  ASSERT_TRUE(tracker.ConfirmationDue(tc));
  tracker.BeginConfirmation(tc);
  tracker.OnFinished(1, 7, 1, tc, static_cast<uint64_t>(ts0) + 700'000'000);
  tracker.OnIncomplete(1, 7, 2);
  tracker.OnIncomplete(1, 8, 3);
  tracker.EndConfirmation();
  EXPECT_EQ(tracker.pending(), 1);  // 2 kept; 3 forgotten
  schema::StallEvent event;
  EXPECT_FALSE(tracker.Poll(tc, &event));
  EXPECT_FALSE(tracker.ConfirmationDue(t0 + milliseconds(1650)));
  const Clock::time_point again = t0 + milliseconds(1700);
  ASSERT_TRUE(tracker.ConfirmationDue(again));
  tracker.BeginConfirmation(again);
  tracker.EndConfirmation();  // nothing new
  ASSERT_TRUE(tracker.Poll(again, &event));
  ASSERT_EQ(event.streams.size(), 1u);
  EXPECT_EQ(event.streams[0].launches[0].correlation_id, 2u);
  EXPECT_EQ(event.streams[0].waiting_ms, 1000);
}

// Synchronization records (point 7): a stream synchronize finishes that stream's launches made
// before it; a context synchronize every stream's of the context, also launches whose records
// are handled after it.
TEST(StallTracker, SynchronizesFinishWhatWasLaunchedBeforeThem) {
  StallTracker tracker(milliseconds(1000));
  const Clock::time_point t0 = Clock::now();
  tracker.OnLaunch(TrackedLaunch(7, 1, t0, 0));
  tracker.OnLaunch(TrackedLaunch(8, 2, t0, 0));
  tracker.OnLaunch(TrackedLaunch(7, 4, t0, 0));  // after the stream synchronize (3)
  tracker.OnSynchronized(1, 7, 3, t0 + milliseconds(10));
  EXPECT_EQ(tracker.pending(), 2);  // 2 on stream 8, 4 on stream 7
  tracker.OnSynchronized(1, 8, 3, t0 + milliseconds(10));
  EXPECT_EQ(tracker.pending(), 1);
  tracker.OnSynchronized(1, StallTracker::kAllStreams, 6, t0 + milliseconds(20));
  EXPECT_EQ(tracker.pending(), 0);
  tracker.OnLaunch(TrackedLaunch(9, 5, t0, 0));  // its record handled after the synchronize
  EXPECT_EQ(tracker.pending(), 0);
  tracker.OnLaunch(TrackedLaunch(9, 7, t0, 0));  // made after it
  EXPECT_EQ(tracker.pending(), 1);
  // Another context's synchronize finishes nothing here.
  tracker.OnSynchronized(2, StallTracker::kAllStreams, 8, t0 + milliseconds(30));
  EXPECT_EQ(tracker.pending(), 1);
}

// Correlation ids are 32 bits (cupti_callbacks.h: `uint32_t correlationId;`) and wrap. Unwrapped
// by serial-number arithmetic (RFC 1982, 32 bits) against the newest id: the first id is placed
// at 2^32 + id; 5 is 21 ids after 0xFFFFFFF0 (0xFFFFFFF0 + 21 = 2^32 + 5), so 2^33 + 5; an id a
// little before the newest lands before it, in the same or the previous lap.
TEST(CorrelationUnwrapper, PlacesIdsAcrossTheWrap) {
  CorrelationUnwrapper ids;
  const uint64_t lap = uint64_t{1} << 32;
  EXPECT_EQ(ids.Unwrap(0xFFFFFFF0u), lap + 0xFFFFFFF0u);
  EXPECT_EQ(ids.Unwrap(5), 2 * lap + 5);
  EXPECT_EQ(ids.Unwrap(0xFFFFFFFFu), lap + 0xFFFFFFFFu);  // late: before 5
  EXPECT_EQ(ids.Unwrap(0), 2 * lap);
  EXPECT_EQ(ids.Unwrap(6), 2 * lap + 6);
  EXPECT_EQ(CorrelationUnwrapper::Cupti(2 * lap + 6), 6u);
  // An id 2^31 - 1 after the newest is after it; 2^31 after it has no serial order and is taken
  // as before.
  EXPECT_EQ(ids.Unwrap(6 + 0x7FFFFFFFu), 2 * lap + 6 + 0x7FFFFFFFu);
  EXPECT_EQ(ids.Unwrap(6 + 0x7FFFFFFFu + 0x80000000u), 2 * lap + 6 + 0x7FFFFFFFu - 0x80000000u);
}

// Launch 0xFFFFFFF0 finished, launch 5 (after the wrap) never does. Compared as plain integers,
// 5 <= 0xFFFFFFF0 would count as finished and nothing would be reported, whether 5's launch record
// came before the finished record or after it.
TEST(StallTracker, AHangAfterTheCorrelationIdsWrapIsReported) {
  for (const bool launch_first : {true, false}) {
    SCOPED_TRACE(launch_first);
    StallTracker tracker(milliseconds(1000));
    const Clock::time_point t0 = Clock::now();
    tracker.OnLaunch(TrackedLaunch(7, 0xFFFFFFF0u, t0, 0));
    if (launch_first) tracker.OnLaunch(TrackedLaunch(7, 5, t0, 0));
    tracker.OnFinished(1, 7, 0xFFFFFFF0u, t0 + milliseconds(1));
    if (!launch_first) tracker.OnLaunch(TrackedLaunch(7, 5, t0, 0));
    EXPECT_EQ(tracker.pending(), 1);
    const Clock::time_point tc = t0 + milliseconds(1100);
    ASSERT_TRUE(tracker.ConfirmationDue(tc));
    tracker.BeginConfirmation(tc);
    tracker.OnIncomplete(1, 7, 5);
    tracker.EndConfirmation();
    schema::StallEvent event;
    ASSERT_TRUE(tracker.Poll(tc, &event));
    EXPECT_EQ(event.state, schema::StallState::kStalled);
    ASSERT_EQ(event.streams.size(), 1u);
    ASSERT_EQ(event.streams[0].launches.size(), 1u);
    // CUPTI's id, as in its kernel event.
    EXPECT_EQ(event.streams[0].launches[0].correlation_id, 5u);
    // A synchronize after the wrap ends it.
    tracker.OnSynchronized(1, 7, 6, tc + milliseconds(10));
    EXPECT_EQ(tracker.pending(), 0);
  }
}

// And the other way: a launch just before the wrap is finished by a later kernel of its thread
// just after it (compared as plain integers, 0xFFFFFFFE would stay pending behind 3: a stall that
// is not).
TEST(StallTracker, AKernelAfterTheWrapFinishesTheLaunchesBeforeIt) {
  StallTracker tracker(milliseconds(1000));
  const Clock::time_point t0 = Clock::now();
  tracker.OnLaunch(TrackedLaunch(7, 0xFFFFFFFEu, t0, 0));
  tracker.OnLaunch(TrackedLaunch(7, 3, t0, 0));
  tracker.OnFinished(1, 7, 3, t0 + milliseconds(1));
  EXPECT_EQ(tracker.pending(), 0);
  // A context synchronize just after the wrap finishes a launch record handled after it from
  // just before the wrap.
  tracker.OnSynchronized(1, StallTracker::kAllStreams, 4, t0 + milliseconds(2));
  tracker.OnLaunch(TrackedLaunch(8, 0xFFFFFFFFu, t0, 0));
  EXPECT_EQ(tracker.pending(), 0);
}

StallTracker::Launch ThreadLaunch(uint64_t corr, int32_t tid, bool programmatic,
                                  Clock::time_point at) {
  StallTracker::Launch l = TrackedLaunch(7, corr, at, 0);
  l.tid = tid;
  l.overlaps_previous = programmatic;
  return l;
}

// Design point 1: a later kernel's end finishes earlier launches only when the stream runs them
// in launch order. Two threads on one stream: the ids were taken when each call began, not in
// the order the stream got the kernels; a programmatic secondary may end before its primary.
TEST(StallTracker, ALaterKernelFinishesOnlyLaunchesTheStreamRunsBeforeIt) {
  const Clock::time_point t0 = Clock::now();
  {
    // One thread, in order: the third kernel's end shows the first two ended.
    StallTracker tracker(milliseconds(1000));
    for (uint64_t corr = 1; corr <= 3; ++corr) tracker.OnLaunch(ThreadLaunch(corr, 100, false, t0));
    tracker.OnFinished(1, 7, 3, t0);
    EXPECT_EQ(tracker.pending(), 0);
  }
  {
    // Two threads: thread 200's kernel (11) ending says nothing of thread 100's 10; thread 100's
    // later 12 ending does.
    StallTracker tracker(milliseconds(1000));
    tracker.OnLaunch(ThreadLaunch(10, 100, false, t0));
    tracker.OnLaunch(ThreadLaunch(11, 200, false, t0));
    tracker.OnLaunch(ThreadLaunch(12, 100, false, t0));
    tracker.OnFinished(1, 7, 11, t0);
    EXPECT_EQ(tracker.pending(), 2);  // 10 and 12
    tracker.OnFinished(1, 7, 12, t0);
    EXPECT_EQ(tracker.pending(), 0);
  }
  {
    // A programmatic pair: 2 overlaps 1. 2 ending leaves 1; 3 (launched normally after 2) ending
    // leaves it too (1 is finished by its own record or a synchronize only); a launch before the
    // primary is finished by them as usual.
    StallTracker tracker(milliseconds(1000));
    tracker.OnLaunch(ThreadLaunch(1, 100, false, t0));
    tracker.OnLaunch(ThreadLaunch(2, 100, false, t0));  // the primary
    tracker.OnLaunch(ThreadLaunch(3, 100, true, t0));   // the secondary
    tracker.OnLaunch(ThreadLaunch(4, 100, false, t0));
    tracker.OnFinished(1, 7, 3, t0);
    EXPECT_EQ(tracker.pending(), 2);  // 2 and 4
    tracker.OnFinished(1, 7, 4, t0);
    EXPECT_EQ(tracker.pending(), 1);  // 2
    const Clock::time_point tc = t0 + milliseconds(1100);
    ASSERT_TRUE(tracker.ConfirmationDue(tc));
    tracker.BeginConfirmation(tc);
    tracker.OnIncomplete(1, 7, 2);
    tracker.EndConfirmation();
    schema::StallEvent event;
    ASSERT_TRUE(tracker.Poll(tc, &event));
    ASSERT_EQ(event.streams.size(), 1u);
    EXPECT_EQ(event.streams[0].launches[0].correlation_id, 2u);  // the primary is named
    tracker.OnSynchronized(1, 7, 5, tc);
    EXPECT_EQ(tracker.pending(), 0);
  }
}

// Design point 5: after a loss, a launch whose record the confirmation does not show at all is
// forgotten (it may have ended unseen); one whose record shows it running is kept and reported.
TEST(StallTracker, AfterLostRecordsTheConfirmationTellsTheHungFromTheUnseen) {
  StallTracker tracker(milliseconds(1000));
  const Clock::time_point t0 = Clock::now();
  tracker.OnLaunch(TrackedLaunch(7, 1, t0, 0));  // hangs
  tracker.OnLaunch(TrackedLaunch(8, 2, t0, 0));  // ended; its record was lost
  tracker.OnTimingLost();
  EXPECT_EQ(tracker.pending(), 2);
  const Clock::time_point tc = t0 + milliseconds(1100);
  ASSERT_TRUE(tracker.ConfirmationDue(tc));
  tracker.BeginConfirmation(tc);
  tracker.OnIncomplete(1, 7, 1);
  tracker.EndConfirmation();
  EXPECT_EQ(tracker.pending(), 1);
  schema::StallEvent event;
  ASSERT_TRUE(tracker.Poll(tc, &event));
  EXPECT_EQ(event.streams_stalled, 1);
  EXPECT_EQ(event.streams[0].stream, 7u);
  // A later loss does not forget it: its record went with the forced flush and will not come
  // again, but it was seen running.
  tracker.OnTimingLost();
  const Clock::time_point again = tc + milliseconds(1100);
  tracker.BeginConfirmation(again);
  tracker.EndConfirmation();
  EXPECT_EQ(tracker.pending(), 1);
  ASSERT_TRUE(tracker.Poll(again, &event));
  EXPECT_EQ(event.state, schema::StallState::kStalled);
}

}  // namespace
}  // namespace cuflight::inject::testing
