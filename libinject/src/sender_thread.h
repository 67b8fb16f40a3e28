// The background thread of the injected library: drains the launch ring and the completed CUPTI
// activity buffers, builds and encodes the events, assigns their seq numbers and hands them to
// the transport; sends process_start and device events as the connection preamble, stats on an
// interval, and process_end at exit.
//
// Seq numbers are assigned here, in send order, so they increase along the stream. A launch the
// ring dropped still uses a number: before numbering the next event the thread skips as many
// numbers as the ring dropped since, so the collector sees every loss as a gap.
//
// Back-pressure. The transport holds a bounded buffer of events the collector has not
// acknowledged. While it has no room, the thread leaves launch records in the ring: with
// CUFLIGHT_ON_FULL=drop the ring then drops the newest launches (dropped_ring_full); with block
// the launching threads wait on the full ring. Events made without a ring record to leave (kernel
// timing, stats, the drains at exit and before a crash) wait for room in block mode, and in the
// drains until their deadline in drop mode. A block-mode wait lasts while the collector makes
// progress: once no line was acknowledged (or spilled) for block_stall_limit, the thread treats
// the collector as stalled or gone and takes work again, the transport dropping its oldest
// never-sent events for room (dropped_backpressure while a collector is connected,
// dropped_disconnected otherwise), until an acknowledgement comes again. So block mode never
// waits forever on a dead collector, and loses nothing while a live one keeps acknowledging.
//
// Stalls (stall_tracker.h). With a stall threshold, every launch record and graph launch
// (graph_launches.h) and every complete kernel activity record the thread handles also goes to a
// StallTracker, and so do the application's synchronising calls (sync_calls.h: those in progress
// and those that returned), and each step (with kernel timing: that drained every completed
// activity buffer) asks it whether a stall event is due. With kernel timing (records_), launches
// are pending until their records show them finished, and activity buffers are asked of CUPTI
// (cuptiActivityFlushAll, default flush) every quarter of the threshold, within [50, 500] ms,
// instead of every 500 ms. Without it (timing off, or unavailable), stalls are seen from the
// synchronising calls alone (stall_tracker.h, points 9-10). A stream a synchronising call shows
// stalled is reported with no forced flush. Before a stream is reported stalled from its records
// alone, a default flush, and if it is still over the threshold one forced flush, on a thread of
// its own and waited for at most kForcedFlushWait, shows which of its kernels had ended
// (stall_tracker.h, point 6); what that flush cost other streams' timing is counted
// (timing_dropped_stall_flush, point 12). Synchronization records show what a stream or context
// synchronize finished (point 7).
//
// The black box (SenderThreadOptions::blackbox, cuflight/blackbox/region_layout.h). The thread
// takes a ring record with TryPeekAt and frees its slot only once it has handled it, so until
// then the record is still in the ring. It frees them kFreeBatch at a time (ring.h, point 10),
// and every one it took before a step ends or a drain returns: a reader of the black box starts
// from the state's handled_pos where the ring's consumer position lags behind it. After every
// seq it uses it publishes its state there (next seq, ring position handled, devices
// announced); a kernel event's record goes to the journal with that state, in one step, and
// stays there until the transport wrote the event's line. A collector that reads the black box
// after this process died knows what each record got or would have got.
//
// Kernel timing records lost before they became events use no number; they are counted in
// timing_dropped instead (stats, process_end, process_crash): records lost for want of an
// activity buffer (ActivityBuffers::lost_records) and records CUPTI handed over incomplete
// (start or end 0, or end before start: a forced flush at exit hands over the records of kernels
// still running). An incomplete record makes no kernel_time event; a graph kernel node's kernel
// event, whose launch facts the record holds complete, is still sent.
//
// Timing that stops: launches recorded after kernel activity records stopped arriving, or all of
// them when kernel activity could not be enabled, are counted in timing_stopped with a reason
// (timing_watch.h).
//
// The sampled timing policy (SenderThreadOptions::windows, timing_windows.h): the thread opens and
// closes the timing windows (every enable and disable of kernel activity is its own, never an
// application thread's), opening the first before process_start. Each launch record says whether
// the launch was made inside a window (its kernel event's timing_window); only those are expected
// to get a kernel activity record, so only those count for TimingWatch and go to the stall
// tracker (a launch outside a window would wait there forever).
#ifndef CUFLIGHT_LIBINJECT_SRC_SENDER_THREAD_H_
#define CUFLIGHT_LIBINJECT_SRC_SENDER_THREAD_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "activity_buffers.h"
#include "config_table.h"
#include "crash_handler.h"
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/env/config.h"
#include "cuflight/env/on_full.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/launch_encoder.h"
#include "cuflight/transport/sender.h"
#include "cupti_api.h"
#include "cupti_yield.h"
#include "device_table.h"
#include "driver_api.h"
#include "event_builder.h"
#include "function_table.h"
#include "launch_ring.h"
#include "process_facts.h"
#include "recorder.h"
#include "timing_watch.h"
#include "timing_windows.h"
#include "stall_tracker.h"

namespace cuflight::inject {

struct SenderThreadOptions {
  transport::SenderOptions transport;
  std::chrono::milliseconds stats_interval{5000};
  bool timing = true;  // kernel_time events from activity records
  // CUFLIGHT_INTERN_CONFIGS: kernel launches as interned configurations (config_table.h): a
  // kernel_config once per configuration and a short `launch` per launch, instead of a whole
  // kernel event per launch (docs/protocol.md, "Interned configurations"). On by default, as
  // the variable.
  bool intern_configs = true;
  // Correlation ids of the latest recorded launches kept per context for api_error events
  // (0..kMaxApiErrorHistory, config.h).
  int api_error_history = 8;
  // Error names and messages for api_error events (cuGetErrorName/cuGetErrorString), and the
  // limits of a device only graph kernels ran on; may be null, and so may its members.
  const DriverApi* driver = nullptr;
  // Names of driver API callback ids (cuptiGetCallbackName); may be null.
  const CuptiApi* callback_names = nullptr;
  // CUFLIGHT_ON_FULL: kBlock waits for the transport to have room instead of making it drop
  // (see Back-pressure above).
  env::OnFull on_full = env::OnFull::kDrop;
  // The black box the ring lies in (see above); null: none.
  blackbox::RegionWriter* blackbox = nullptr;
  // Block mode: the longest wait for room during which no line is acknowledged or spilled.
  static constexpr std::chrono::milliseconds kDefaultBlockStallLimit{5000};
  std::chrono::milliseconds block_stall_limit{kDefaultBlockStallLimit};
  // When kernel timing is said to have stopped (TimingWatch::Options).
  TimingWatch::Options timing_watch;
  // CUFLIGHT_STALL_MS: stall events when launched work has not finished for this long; 0: none.
  // With `timing` and the activity buffers, from kernel records and synchronising calls; without
  // them, from synchronising calls only (stall_tracker.h, point 10).
  std::chrono::milliseconds stall_threshold{0};
  // The timing policy the stats, process_end and process_crash events name.
  schema::TimingPolicy timing_policy = schema::TimingPolicy::kAll;
  // With timing_policy kSampled: the windows this thread opens and closes (outlives the thread);
  // null otherwise.
  TimingWindows* windows = nullptr;
  // Taking turns with other CUPTI tools (cupti_yield.h): the collector's yield lines go to it,
  // and while it is off CUPTI the thread makes no CUPTI call. Null: no yielding (a fork()ed
  // child's pipeline). Outlives the thread.
  CuptiYield* yield = nullptr;
  // Whether disabling kernel activity cannot deadlock (CUPTI 13.0 Update 1 or later, injector.cc,
  // kCuptiVersionSafeKernelDisable): only then does a yield disable it before its flush.
  bool kernel_disable_safe = true;
};


// Totals of the event pipeline, as in the stats and process_end events.
struct PipelineCounters {
  uint64_t emitted = 0;  // events handed to the transport
  uint64_t dropped_ring_full = 0;
  uint64_t dropped_disconnected = 0;
  uint64_t dropped_backpressure = 0;  // dropped for room while the collector was connected
  uint64_t launches = 0;
  uint64_t filtered = 0;
  uint64_t ring_high_water = 0;
  int64_t cpu_ns = 0;
  // Kernel timing records lost: ActivityBuffers::lost_records() + incomplete records skipped.
  uint64_t timing_dropped = 0;
  // Of timing_dropped: the incomplete records of stalls' confirming forced flushes.
  uint64_t timing_dropped_stall_flush = 0;
  // Kernel events whose driver block count differed from the engine's.
  uint64_t occupancy_disagreements = 0;
  uint64_t api_errors_routine = 0;     // Recorder::api_errors_routine()
  uint64_t api_errors_suppressed = 0;  // Recorder::api_errors_suppressed()
  // Launches recorded while kernel timing was stopped, and why (TimingWatch).
  uint64_t timing_stopped = 0;
  TimingStop timing_stop = TimingStop::kNone;
  // The timing policy and, with kSampled, its windows (TimingWindows).
  schema::TimingPolicy timing_policy = schema::TimingPolicy::kAll;
  uint64_t timing_windows = 0;
  uint64_t timing_window_ns = 0;
  uint64_t launches_in_window = 0;
  // Yields to other CUPTI tools (CuptiYield).
  uint64_t yields = 0;
  uint64_t yielded_ns = 0;
  uint64_t launches_yielded = 0;
  bool yielded = false;
};

class SenderThread {
 public:
  // `activity` and `cupti` may be null (no timing, no graph kernels). With both, the constructor
  // points `activity` at cupti's dropped-record count (ActivityBuffers::SetDroppedRecordsSource),
  // before any CUPTI callback can complete a buffer.
  SenderThread(SenderThreadOptions options, ProcessFacts facts, LaunchRing* ring,
               const Recorder* recorder, FunctionTable* functions,
               DeviceTable* devices, ActivityBuffers* activity, const CuptiApi* cupti);
  ~SenderThread();
  SenderThread(const SenderThread&) = delete;
  SenderThread& operator=(const SenderThread&) = delete;

  // Starts the thread. Returns false (and the library runs without sending) if it cannot. The
  // thread calls CUPTI (cuptiActivityFlushAll) from its first step on: start it only once the
  // CUPTI subscription and the activity set-up are done.
  bool Start() noexcept;
  // Kernel activity could not be enabled: launches count in timing_stopped ("unavailable"), and
  // stalls are seen from synchronising calls only. Before Start.
  // Before Start: the CUPTI API family the subscription uses, for process_start
  // (kActivityApiSubscriber or kActivityApiGlobal, cupti_api.h).
  void SetCuptiActivityApi(const char* family) noexcept { facts_.cupti_activity_api = family; }
  void SetTimingUnavailable() noexcept {
    timing_watch_.SetUnavailable();
    if (options_.windows != nullptr) options_.windows->SetUnavailable();
    records_ = false;
  }
  // Stops the thread, which then does the exit's work: a forced activity flush
  // (cuptiActivityFlushAll with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, when it has activity buffers;
  // a default one with the subscriber-scoped API, ForcedFlushAllowed),
  // then Finish: drains the ring and completed activity buffers, reads CUPTI's count of dropped
  // records once more, sends process_end, and waits until the collector acknowledged everything
  // or shortly before `deadline`. Stop returns by `deadline` whatever CUPTI does: a thread still
  // busy then (inside a CUPTI call that does not return, e.g. a flush on a faulted context) is
  // detached and abandoned, never joined (abandoned() is then true; for the process's exit only:
  // the object must then never be destroyed). Returns true when all was acknowledged.
  // Idempotent. Without a started thread, Finish runs on the caller's thread.
  bool Stop(std::chrono::steady_clock::time_point deadline) noexcept;
  bool abandoned() const noexcept { return abandoned_.load(std::memory_order_acquire); }
  // Where an abandoned thread was (for the exit's warning): true when inside the forced CUPTI
  // activity flush, false when it had not yet reached it (its last loop turn) or was past it.
  bool abandoned_in_flush() const noexcept {
    return in_exit_flush_.load(std::memory_order_acquire);
  }

  // One iteration of the thread's loop at `now`; returns true if it moved any event. Tests call
  // it directly instead of Start().
  bool Step(std::chrono::steady_clock::time_point now) noexcept;
  // What Stop does after the thread ended; tests call it directly.
  bool Finish(std::chrono::steady_clock::time_point deadline) noexcept;

  // Sends everything recorded so far now, then waits until the collector acknowledged it (or
  // the spill took it), at most `wait_ns` (never longer, whatever the thread is doing). For
  // sticky CUDA errors, from the application thread whose call failed: the thread sends what the
  // ring holds first, then flushes CUPTI's activity buffers (which may hang on a faulted context)
  // and sends their kernel_time events. False when the thread is not running, on the thread
  // itself, or at the deadline.
  bool FlushNow(int64_t wait_ns) noexcept;
  // The same from a fatal-signal handler, followed by a process_crash event for `crash`.
  // Async-signal-safe.
  bool FlushForCrash(const CrashInfo& crash, int64_t wait_ns) noexcept;

  // Turns stall detection off (kernel timing turned out unavailable after construction: CUPTI
  // refused the activity set-up) and says so in process_start's config (stall_ms "0"). Only
  // before Start().
  void DisableStallDetection() noexcept;
  bool stall_detection() const noexcept { return stall_ != nullptr; }

  PipelineCounters counters() const noexcept;
  const transport::Sender& transport() const { return transport_; }
  // In a fork()ed child, where this object is the parent's and its thread does not exist:
  // closes the parent's socket (transport::Sender::CloseAfterFork). Async-signal-safe.
  void CloseSocketAfterFork() noexcept { transport_.CloseAfterFork(); }
  // Around a fork() (transport::Sender::BeforeFork): no socket is created or closed meanwhile.
  void BeforeFork() noexcept { transport_.BeforeFork(); }
  void AfterForkInParent() noexcept { transport_.AfterForkInParent(); }

 private:
  using Clock = std::chrono::steady_clock;

  void Run() noexcept;
  uint64_t NextSeq() noexcept;
  // A header with the next seq; `publish`: the black box learns at once that the seq is used
  // (false for the events of a ring record, whose handling publishes at its end).
  schema::Header MakeHeader(bool publish = true) noexcept;
  // The same with the event's own time (a ring record's): no clock is read.
  schema::Header MakeHeader(int64_t ts_ns, bool publish) noexcept;
  // The black box's view of the thread's progress; publishes it.
  blackbox::SeqState BlackboxState() const noexcept;
  void PublishState() noexcept;
  // Encodes and queues one event; the preamble ones go to the transport's preamble. True when
  // the transport took it.
  template <typename Event>
  bool Send(Event& event, bool preamble) noexcept;
  // Encode's line of `event`; a launch's through launch_encoder_ (the same bytes, faster).
  template <typename Event>
  size_t EncodeLine(const Event& event, char* buf, size_t cap) noexcept;
  // Takes the oldest ring record not yet taken and handles it; false when there is none. Its
  // slot is freed with the batch it belongs to (FreeTaken).
  bool TakeRecord() noexcept;
  // Frees the slots of every record taken and not yet freed (ring.h, point 10). After each run
  // of TakeRecord calls, before the ring's consumer position is read.
  void FreeTaken() noexcept;
  void SendProcessStart() noexcept;
  void EnsureDeviceEvent(int ordinal) noexcept;
  // The record at ring position `pos`.
  void HandleRecord(const LaunchRecord& record, uint64_t pos) noexcept;
  // What became of a launch record: its kernel event built (false: the engine refused it), the
  // seq its line took, whether the transport took it, and whether a kernel activity record is
  // expected for it.
  struct LaunchSent {
    bool built = true;
    bool sent = false;
    bool timed = true;
    uint64_t seq = 0;
  };
  // A launch record's timing window and stall tracking, `occupancy` being its kernel event's
  // figure; sets *timing_window under sampled. Returns whether it is timed.
  bool NoteLaunch(const LaunchRecord& record, double occupancy,
                  std::optional<bool>* timing_window) noexcept;
  // A launch of a configuration found by its record (config_table.h, point 2): its `launch` line
  // made from the record and `known`.
  LaunchSent SendKnownLaunch(const LaunchRecord& record,
                             const RecordConfigs::Entry& known) noexcept;
  // Any other launch: its kernel event built, described when new and sent (interned or whole);
  // a configuration described goes into by_record_ under *key (null: not interned).
  LaunchSent BuildAndSendKernel(const LaunchRecord& record, const DeviceInfo& device,
                                const RecordConfigs::Key* key) noexcept;
  // The device an activity record names, read from the driver when no launch described it.
  const DeviceInfo* DeviceOfActivity(int ordinal) noexcept;
  void HandleActivityBuffer(uint8_t* buffer, size_t valid_size) noexcept;
  // Opens the sampled policy's first window (before process_start); when kernel activity cannot
  // be enabled, timing is unavailable and stall detection off, as when the set-up failed.
  void StartWindows(Clock::time_point now) noexcept;
  // The collector's yield requests and CuptiYield's steps (cupti_yield.h, points 2 and 3).
  void StepYield(Clock::time_point now) noexcept;
  // Whether CUPTI is this library's now (not yielded): only then may the thread call it.
  bool CuptiOurs() const noexcept { return options_.yield == nullptr || !options_.yield->off(); }
  // Fills the counters every event that carries them shares.
  template <typename Event>
  void FillCounters(const PipelineCounters& c, Event* event) noexcept;
  // The clocks launch and activity records are stamped with (the stall tracker's), read once per
  // step or drain.
  void StampClocks(Clock::time_point now) noexcept;
  // Sends a stall event if one is due at `now` (stall_tracker.h).
  void CheckStall(Clock::time_point now) noexcept;
  // One forced activity flush before a stream is reported stalled (stall_tracker.h, point 6).
  void ConfirmStall(Clock::time_point now) noexcept;
  // Hands the tracker the synchronising calls and graph launches seen since the last look.
  void ReadCallbacksForStalls() noexcept;
  // Collects synchronization records or stops (StallTracker design point 8).
  void CollectSynchronizations(bool on) noexcept;
  // A synchronization activity record: what it shows finished (stall_tracker.h, point 7).
  void HandleSynchronization(const CUpti_ActivitySynchronization2& sync) noexcept;
  void SendStats() noexcept;
  void SendProcessEnd() noexcept;
  void SendProcessCrash(const CrashInfo& crash) noexcept;
  void HandleApiError(const LaunchRecord& record) noexcept;
  void RememberLaunch(uint64_t context, uint64_t correlation_id) noexcept;
  // Handles every record in the ring and every completed activity buffer, ignoring HasRoom.
  void DrainAll() noexcept;
  void UrgentFlush() noexcept;
  // Whether a forced activity flush (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) may be made: not with the
  // subscriber-scoped (_v2) API. cuptiActivityFlushAll names no subscriber (cupti_activity.h),
  // and the CUDA 13.0 headers this library builds against have no per-subscriber flush: with
  // several CUPTI tools in the process a forced flush would hand every tool's buffers over with
  // their incomplete records, which those tools never get complete. The cost: a stall is
  // confirmed only by a synchronising call that covers its stream (stall_tracker.h, points 6, 9
  // and 10), so a hang no thread waits on is not reported; at exit the default flush hands over
  // only buffers whose records are all complete, so a buffer holding a kernel still running at
  // exit (and the finished kernels sharing it) gives no kernel_time. Default flushes (flag 0)
  // stay: they hand over only complete buffers, each to its own subscriber.
  bool ForcedFlushAllowed() const noexcept {
    return cupti_ == nullptr || cupti_->activity_subscriber == nullptr;
  }
  // Whether Step takes more work (a ring record, an activity buffer) at `now`: the transport has
  // room for a record, or in block mode the collector is stalled (the transport drops instead).
  bool MayTake(Clock::time_point now) noexcept;
  // True when, in the wait for room now going on, no line was acknowledged or spilled for
  // block_stall_limit; stays true until a line is. Call only while the transport has no room.
  bool Stalled(Clock::time_point now) noexcept;
  // Before a non-preamble line of `bytes` is queued: waits for room until room_deadline_, never
  // past a stall.
  void WaitForRoom(size_t bytes) noexcept;
  bool RequestUrgentFlushAndWait(int64_t wait_ns) noexcept;
  // The id of a kernel event's configuration, describing it first (a kernel_config, a preamble
  // line with a seq of its own) when new; ConfigTable::kSendWhole when it goes out whole
  // (config_table.h, point 3). Before the launch's own seq is taken. `wave`: the wave the
  // event's waves were counted in (the builder's), which the description carries so that the
  // launches need not (schema::Split, config_expander.h point 1a).
  uint64_t DescribeConfig(const schema::KernelEvent& event, schema::WaveShape wave) noexcept;
  // Sends a kernel event whose header is set, as a `launch` of configuration `config_id` (or
  // whole), `wave` as DescribeConfig's. Returns what Send returned. *waves_derived (when not
  // null and sent as a launch): the launch left its waves for the reader to derive.
  bool SendKernel(schema::KernelEvent& event, uint64_t config_id, schema::WaveShape wave,
                  bool* waves_derived = nullptr) noexcept;
  std::string_view Intern(const char* name, std::string_view* demangled);

  SenderThreadOptions options_;
  ProcessFacts facts_;
  LaunchRing* ring_;
  const Recorder* recorder_;
  // Retired FunctionInfos are freed here, between records (FunctionTable::Reclaim).
  FunctionTable* functions_;
  DeviceTable* devices_;  // graph-only devices are published here too
  ActivityBuffers* activity_;
  const CuptiApi* cupti_;

  transport::Sender transport_;
  EventBuilder builder_;
  std::vector<char> line_;  // encode buffer, sized once
  // The process's launch lines (cuflight/schema/launch_encoder.h): most lines it sends.
  schema::LaunchEncoder launch_encoder_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  // Stop's request, written before stop_ is set, and the thread's answer.
  std::chrono::steady_clock::time_point exit_deadline_{};
  bool exit_requested_ = false;
  static constexpr int kExitPending = 0;
  static constexpr int kExitAcknowledged = 1;
  static constexpr int kExitUnacknowledged = 2;
  std::atomic<int> exit_result_{kExitPending};
  std::atomic<bool> in_exit_flush_{false};  // inside the exit's forced activity flush
  std::atomic<bool> abandoned_{false};
  std::atomic<int32_t> thread_tid_{0};

  // Urgent flushes (FlushNow, FlushForCrash): a requester bumps urgent_requested_ and waits
  // until urgent_done_ reaches its number; the thread serves every request pending at once.
  std::atomic<uint32_t> urgent_requested_{0};
  std::atomic<uint32_t> urgent_done_{0};
  std::atomic<int64_t> urgent_deadline_ns_{0};  // CLOCK_MONOTONIC
  uint32_t urgent_served_ = 0;
  CrashInfo crash_;  // written before crash_pending_ is set
  std::atomic<bool> crash_pending_{false};

  // Latest recorded launches per context, for api_error events: kMaxContexts slots, replaced
  // round-robin, each a ring of api_error_history correlation ids.
  static constexpr int kMaxContexts = 64;
  struct ContextHistory {
    uint64_t context = 0;
    uint64_t count = 0;  // launches remembered, all time
  };
  ContextHistory contexts_[kMaxContexts];
  std::vector<uint64_t> history_;  // kMaxContexts * api_error_history ids
  int next_context_slot_ = 0;
  bool started_process_ = false;
  bool finished_ = false;
  bool device_sent_[DeviceTable::kMaxDevices] = {};
  bool device_warned_[DeviceTable::kMaxDevices] = {};

  uint64_t next_seq_ = 0;
  uint64_t ring_drops_seen_ = 0;
  // Records taken from the ring and not yet freed (TakeRecord, FreeTaken), and the next position
  // to take. A batch of 32 keeps the producers' reads of the consumer position off a line the
  // sender writes every record (ring.h, point 10), and holds at most 32 slots of the ring's
  // 16,384 (env::kDefaultRingSlots) for a few microseconds longer.
  static constexpr uint32_t kFreeBatch = 32;
  uint32_t taken_ = 0;
  uint64_t take_pos_ = 0;
  // The black box's state (see above): the ring position below which every record is handled,
  // and the devices whose device event has a seq.
  uint64_t handled_pos_ = 0;
  uint64_t announced_devices_ = 0;
  std::atomic<uint64_t> emitted_{0};
  std::atomic<uint64_t> rejected_{0};       // Enqueue refused or encode failed: seq used
  std::atomic<uint64_t> ring_high_water_{0};
  std::atomic<int64_t> cpu_ns_{0};
  std::atomic<uint64_t> timing_incomplete_{0};  // activity records skipped as incomplete
  // Of those, handed over by stalls' confirming forced flushes (StallTracker::flush_incomplete).
  std::atomic<uint64_t> stall_flush_incomplete_{0};
  TimingWatch timing_watch_;
  // Back-pressure (transport room).
  bool block_ = false;                 // options_.on_full == kBlock
  Clock::time_point room_deadline_{};  // how long Send may wait for room, set by each context
  Clock::duration room_waited_{};      // time waited for room since the stop (added to its bound)
  bool waiting_ = false;               // the transport had no room when last looked
  bool stalled_ = false;
  uint64_t released_seen_ = 0;       // transport lines acked + spilled when last looked
  Clock::time_point progress_at_{};  // the last release seen, or the start of the wait
  std::chrono::steady_clock::time_point next_stats_{};
  std::chrono::steady_clock::time_point next_activity_flush_{};
  // Stall detection (null: off), and the clocks of the step being made.
  std::unique_ptr<StallTracker> stall_;
  // Kernel activity records come (timing on, activity enabled): launches are pending until their
  // records show them finished (stall_tracker.h, point 1); false: point 10.
  bool records_ = false;
  // How long a stall's forced flush is waited for; one that did not return stops them.
  static constexpr std::chrono::milliseconds kForcedFlushWait{1000};
  bool forced_flush_stuck_ = false;
  bool windows_started_ = false;  // StartWindows ran
  // CLOCK_MONOTONIC when CUPTI was last taken back after a yield (0: never): synchronising calls
  // entered before it are not judged.
  int64_t resumed_at_ns_ = 0;
  bool sync_records_ = false;           // CUPTI_ACTIVITY_KIND_SYNCHRONIZATION enabled now
  bool sync_records_failed_ = false;    // enabling it failed once: not tried again
  Clock::time_point stamp_now_{};
  int64_t stamp_realtime_ns_ = 0;
  uint64_t timing_lost_seen_ = 0;  // ActivityBuffers::lost_records() when last looked
  // Interned kernel names of graph-node activity records: mangled -> demangled.
  std::unordered_map<std::string, std::string> names_;
  // The kernel configurations described so far (config_table.h), by content and by what a launch
  // record says, and the next id to give.
  ConfigTable configs_;
  RecordConfigs by_record_;
  // Launches sent from by_record_ whose driver block count differed from the engine's (the
  // builder counts the kernel events it builds): occupancy_disagreements is both.
  std::atomic<uint64_t> fast_disagreements_{0};
  uint64_t next_config_id_ = 1;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_SENDER_THREAD_H_
