// Stall detection without a GPU: launches through the recorder, kernels that finish only when the
// test says so (the fake CUPTI's flush hands over the activity records of finished kernels only,
// as cuptiActivityFlushAll's default flush does), the sender thread stepped on a made-up clock,
// and the stall events read back from a collector socket through the schema decoder.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "inject_test_support.h"
#include "sender_thread.h"
#include "stall_tracker.h"
#include "test_collector.h"

namespace cuflight::inject::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kSpin = 0x1000;    // a kernel that waits on a flag
constexpr uint64_t kStep = 0x2000;    // an ordinary kernel
constexpr uint64_t kReduce = 0x3000;  // a kernel on a second stream
constexpr uint64_t kStream2 = 0x6E;   // a second stream of kContext
constexpr uint32_t kStream2Id = 15;   // its CUPTI id
constexpr milliseconds kThreshold(1000);

// A GPU as CUPTI shows it: a launched kernel's activity record exists from its launch (start and
// end still 0) and is complete once the kernel finished; a default flush hands over a buffer only
// when every record in it is complete (cupti_activity.h, cuptiActivityFlushAll), so each finished
// kernel here gets its own buffer and unfinished ones are withheld.
class FakeGpu {
 public:
  FakeGpu(FakeCuda* fake, ActivityBuffers* buffers) : fake_(fake), buffers_(buffers) {
    fake_->on_flush = [this](uint32_t flag) {
      // A forced flush also hands over the records of kernels still running, incomplete (end 0).
      if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0) {
        for (const auto& [corr, r] : running_) finished_.push_back(r);
        running_.clear();
      }
      HandOverFinished();
    };
  }

  void Launched(uint32_t correlation_id, uint32_t stream_id) {
    CUpti_ActivityKernel10 r{};
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.contextId = kContextId;
    r.streamId = stream_id;
    r.correlationId = correlation_id;
    r.deviceId = 0;
    r.blockX = r.blockY = r.blockZ = 1;
    r.gridX = r.gridY = r.gridZ = 1;
    r.name = "";
    running_[correlation_id] = r;
  }

  // The kernel ends; CUPTI fills in its timestamps.
  void Finish(uint32_t correlation_id) {
    auto it = running_.find(correlation_id);
    ASSERT_NE(it, running_.end());
    CUpti_ActivityKernel10 r = it->second;
    r.start = 1000 * uint64_t{correlation_id};
    r.end = r.start + 500;
    running_.erase(it);
    finished_.push_back(r);
  }

  int flushes() const { return fake_->flushes; }

 private:
  void HandOverFinished() {
    for (const CUpti_ActivityKernel10& r : finished_) {
      uint8_t* buffer = nullptr;
      size_t size = 0;
      size_t max_records = 0;
      buffers_->Request(&buffer, &size, &max_records);
      ASSERT_NE(buffer, nullptr);
      const size_t valid = WriteKernelRecords({r}, buffer, size);
      ASSERT_GT(valid, 0u);
      buffers_->Complete(buffer, valid);
    }
    finished_.clear();
  }

  FakeCuda* fake_;
  ActivityBuffers* buffers_;
  std::map<uint32_t, CUpti_ActivityKernel10> running_;
  std::vector<CUpti_ActivityKernel10> finished_;
};

struct Pipeline {
  Harness h;
  ActivityBuffers buffers{16, 4096};
  FakeGpu gpu{&h.fake, &buffers};
  SenderThread sender;

  explicit Pipeline(const std::string& socket, milliseconds threshold = kThreshold,
                    bool timing = true)
      : sender(Options(socket, &h.driver, threshold, timing), Facts(), h.ring.get(),
               h.recorder.get(), &h.functions, &h.devices, &buffers, &h.cupti) {
    h.fake.functions[kSpin] = FakeFunction{};
    h.fake.functions[kStep] = FakeFunction{};
    h.fake.functions[kReduce] = FakeFunction{};
    h.fake.stream_ids[kStream2] = kStream2Id;
  }

  static SenderThreadOptions Options(const std::string& socket, const DriverApi* driver,
                                     milliseconds threshold, bool timing) {
    SenderThreadOptions o;
    o.driver = driver;
    o.transport.socket_path = socket;
    o.transport.backoff_min = milliseconds(1);
    o.transport.backoff_max = milliseconds(20);
    o.stats_interval = std::chrono::hours(1);
    o.timing = timing;
    o.stall_threshold = threshold;
    return o;
  }
  static ProcessFacts Facts() {
    ProcessFacts f = ReadProcessFacts();
    f.config = {{"stall_ms", "1000"}};
    return f;
  }

  // Launches `function` on `stream` (handle) with a grid of `grid_x` blocks of `block_x` threads.
  void Launch(uint64_t function, const char* name, uint32_t corr, uint64_t stream = kStream,
              uint32_t grid_x = 1, uint32_t block_x = 32) {
    cuLaunchKernel_params params{Fn(function), grid_x,  1,      1, block_x, 1, 1, 0,
                                 St(stream),   nullptr, nullptr};
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, name, corr);
    gpu.Launched(corr, stream == kStream ? kStreamId : kStream2Id);
  }

  // Steps the sender every 50 ms from `from` to `to` (both included) on the made-up clock.
  void StepUntil(Clock::time_point from, Clock::time_point to) {
    for (Clock::time_point t = from; t <= to; t += milliseconds(50)) sender.Step(t);
  }
};

bool HasProcessEnd(const std::vector<std::string>& lines) {
  return std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("\"type\":\"process_end\"") != std::string::npos;
  });
}

// Ends the run and returns every event the collector got, in seq order.
std::vector<schema::OwnedEvent> Finish(Pipeline& p, TestCollector& collector) {
  EXPECT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  EXPECT_TRUE(collector.WaitFor(HasProcessEnd));
  std::vector<schema::OwnedEvent> events;
  for (const std::string& line : collector.Lines()) {
    schema::DecodeResult r = schema::Decode(line);
    EXPECT_TRUE(r.ok()) << r.message << "\n" << line;
    if (r.ok()) events.push_back(std::move(r.event));
  }
  return events;
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
  TestCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1, kStream, 1, 32);    // never finishes
  p.Launch(kStep, "_Z4stepPf", 2, kStream, 264, 256);  // queued behind it
  p.Launch(kStep, "_Z4stepPf", 3, kStream, 264, 256);
  p.Launch(kReduce, "_Z6reducePf", 4, kStream2, 8, 1024);  // waits for the first (an event)
  p.StepUntil(t0, t0 + milliseconds(900));
  // The sender asks CUPTI for completed buffers at least every quarter of the threshold.
  EXPECT_GE(p.gpu.flushes(), 900 / 250);
  p.StepUntil(t0 + milliseconds(950), t0 + milliseconds(1100));
  const std::vector<schema::OwnedEvent> events = Finish(p, collector);
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

TEST(Stall, RepeatedAtABoundedRateThenResolvedWhenTheRecordsArrive) {
  const std::string path = TempSocketPath("stall-repeat");
  TestCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1);
  p.Launch(kStep, "_Z4stepPf", 2);
  p.Launch(kReduce, "_Z6reducePf", 3, kStream2);
  p.Launch(kStep, "_Z4stepPf", 4, kStream2);
  // Stalled from t0 + 1 s; with a threshold of 1 s the event repeats every second (the repeat
  // interval is the threshold, at least 1 s): at 1, 2, 3 and 4 s.
  p.StepUntil(t0, t0 + milliseconds(4500));
  // The second stream's first kernel finishes. The sender flushes every 250 ms (a quarter of the
  // threshold), so its record arrives at 4.75 s: the stream made progress, and its next kernel
  // has been waiting only since then.
  p.gpu.Finish(3);
  p.StepUntil(t0 + milliseconds(4550), t0 + milliseconds(5000));  // the repeat at 5 s
  // The spinning kernel ends, and everything after it; the records arrive at 5.25 s, and the
  // check after that (every 100 ms: 5.3 s) finds every stream moving.
  p.gpu.Finish(1);
  p.gpu.Finish(2);
  p.gpu.Finish(4);
  p.StepUntil(t0 + milliseconds(5050), t0 + milliseconds(8000));
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
  // At 5 s: one kernel finished since the event at 4 s, and the second stream's next kernel has
  // waited 250 ms: not stalled.
  EXPECT_EQ(stalls[4].completed, 1u);
  EXPECT_EQ(stalls[4].streams_stalled, 1);
  ASSERT_EQ(stalls[4].streams.size(), 1u);
  const schema::OwnedStallEvent& resolved = stalls[5];
  EXPECT_EQ(resolved.state, schema::StallState::kResolved);
  EXPECT_EQ(resolved.completed, 3u);
  EXPECT_EQ(resolved.streams_stalled, 0);
  EXPECT_TRUE(resolved.streams.empty());
  // From the first stream's wait (t0, the launch) to the check that found it moving (5.3 s).
  EXPECT_GE(resolved.stalled_ms, 5300);
  EXPECT_LE(resolved.stalled_ms, 5310);
}

TEST(Stall, KernelsQueuedBehindALongKernelWaitFromItsEndNotTheirLaunch) {
  const std::string path = TempSocketPath("stall-queued");
  TestCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kSpin, "_Z4spinPVi", 1);  // runs about 0.7 s
  p.Launch(kStep, "_Z4stepPf", 2);   // launched at once, runs after it
  p.StepUntil(t0, t0 + milliseconds(700));
  p.gpu.Finish(1);  // seen at the flush at 0.75 s
  // From 0.75 s the second kernel is at the head. At 1.7 s it is 1.7 s past its launch but has
  // waited 0.95 s: not stalled.
  p.StepUntil(t0 + milliseconds(750), t0 + milliseconds(1700));
  // It stalls in its own right 1 s after the first one finished: at the check at 1.8 s.
  p.StepUntil(t0 + milliseconds(1750), t0 + milliseconds(1850));
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(Finish(p, collector));
  ASSERT_EQ(stalls.size(), 1u);
  const schema::OwnedStallEvent& s = stalls[0];
  ASSERT_EQ(s.streams.size(), 1u);
  EXPECT_EQ(s.streams[0].unfinished, 1);
  EXPECT_EQ(Names(s.streams[0]), (std::vector<std::string>{"step(float*)"}));
  EXPECT_GE(s.streams[0].waiting_ms, 1050);
  EXPECT_LE(s.streams[0].waiting_ms, 1060);
  EXPECT_GE(s.streams[0].launches[0].age_ms, 1800);  // its age counts from its launch
  EXPECT_LE(s.streams[0].launches[0].age_ms, 1810);
  // The first kernel's end began the wait: nothing finished since.
  EXPECT_EQ(s.completed, 0u);
}

// At exit the library flushes CUPTI's buffers (forced) and handles what they hold: a stall whose
// kernels finished by then is reported resolved before process_end; one whose kernel still runs
// (its record handed over incomplete) is not.
TEST(Stall, AStallThatEndedBeforeTheExitIsResolvedBeforeProcessEnd) {
  for (const bool finished : {true, false}) {
    SCOPED_TRACE(finished);
    const std::string path = TempSocketPath("stall-exit");
    TestCollector collector(path);
    Pipeline p(path);
    const Clock::time_point t0 = Clock::now();
    p.Launch(kSpin, "_Z4spinPVi", 1);
    p.StepUntil(t0, t0 + milliseconds(1100));
    if (finished) p.gpu.Finish(1);
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
  TestCollector collector(path);
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

TEST(Stall, LostTimingRecordsForgetWhatMayHaveFinishedUnseen) {
  const std::string path = TempSocketPath("stall-lost");
  TestCollector collector(path);
  Pipeline p(path);
  const Clock::time_point t0 = Clock::now();
  p.Launch(kStep, "_Z4stepPf", 1);
  p.StepUntil(t0, t0 + milliseconds(500));
  // CUPTI asks for a buffer and the pool has none: a record is lost, perhaps this kernel's.
  std::vector<uint8_t*> held;
  for (size_t i = 0; i <= p.buffers.count(); ++i) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    p.buffers.Request(&buffer, &size, &max_records);
    if (buffer != nullptr) held.push_back(buffer);
  }
  EXPECT_EQ(p.buffers.refused(), 1u);
  for (uint8_t* buffer : held) p.buffers.Complete(buffer, 0);
  p.StepUntil(t0 + milliseconds(550), t0 + milliseconds(3000));
  // A kernel launched after the loss is tracked again.
  p.Launch(kSpin, "_Z4spinPVi", 2);
  p.StepUntil(t0 + milliseconds(3050), t0 + milliseconds(4100));
  const std::vector<schema::OwnedStallEvent> stalls = Stalls(Finish(p, collector));
  ASSERT_EQ(stalls.size(), 1u);
  ASSERT_EQ(stalls[0].streams.size(), 1u);
  EXPECT_EQ(Names(stalls[0].streams[0]), (std::vector<std::string>{"spin(int volatile*)"}));
}

TEST(Stall, NothingWithoutKernelTimingOrWithAThresholdOf0) {
  for (const bool timing : {false, true}) {
    SCOPED_TRACE(timing);
    const std::string path = TempSocketPath("stall-off");
    TestCollector collector(path);
    Pipeline p(path, timing ? milliseconds(0) : kThreshold, timing);
    EXPECT_FALSE(p.sender.stall_detection());
    const Clock::time_point t0 = Clock::now();
    p.Launch(kSpin, "_Z4spinPVi", 1);
    p.StepUntil(t0, t0 + milliseconds(5000));
    EXPECT_TRUE(Stalls(Finish(p, collector)).empty());
  }
}

TEST(Stall, DisabledBeforeStartSaysSoInProcessStart) {
  const std::string path = TempSocketPath("stall-disabled");
  TestCollector collector(path);
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
  ASSERT_TRUE(tracker.Poll(t0 + milliseconds(500), &event));
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
    l.correlation_id = static_cast<uint64_t>(i);
    l.function_id = 1;
    l.launched_at = t0;
    tracker.OnLaunch(l);
  }
  EXPECT_EQ(tracker.pending(), StallTracker::kMaxPending);
  EXPECT_EQ(tracker.untracked(), 10u);
  schema::StallEvent event;
  ASSERT_TRUE(tracker.Poll(t0 + milliseconds(200), &event));
  EXPECT_EQ(event.streams[0].launches[0].correlation_id, 1u);
  // Everything finishes: the entries come back, and the stall resolves.
  tracker.OnFinished(1, 2, StallTracker::kMaxPending + 10, t0 + milliseconds(250));
  EXPECT_EQ(tracker.pending(), 0);
  ASSERT_TRUE(tracker.Poll(t0 + milliseconds(400), &event));
  EXPECT_EQ(event.state, schema::StallState::kResolved);
  EXPECT_EQ(event.completed, 1u);
}

}  // namespace
}  // namespace cuflight::inject::testing
