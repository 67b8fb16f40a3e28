#include "sender_thread.h"

#include <cxxabi.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <type_traits>
#include <utility>

#include "cuflight/base/clock.h"
#include "cuflight/base/tsc_clock.h"
#include "cuflight/schema/encoder.h"
#include "log.h"
#include "own_calls.h"
#include "recorder.h"

namespace cuflight::inject {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kLineBytes = 1 << 20;     // longest event line (names can be very long)
constexpr size_t kRoomForRecord = 8 << 10; // room asked of the transport before a ring record
constexpr int kMaxRecordsPerStep = 4096;
constexpr auto kActivityFlushInterval = std::chrono::milliseconds(500);
// A wait for room checks the stall clock at least this often.
constexpr auto kRoomWaitSlice = std::chrono::milliseconds(10);

// Time the sender thread keeps for itself out of an urgent flush's wait: the requester's wait
// ends shortly after the thread's flush deadline, not before it.
constexpr int64_t kUrgentMarginNs = 20'000'000;

// A thread of the library, born with every signal blocked but the faults its own code can raise.
// Signals sent to the process are the application's: the kernel delivers each to a thread of the
// application, as without cuflight (an application that blocks a signal in its threads and takes
// it with sigwait() in one of them gets it; a process-directed SIGABRT never runs the crash
// handler on the thread that handler waits for). The faults stay unblocked: the kernel delivers
// them to the faulting thread whatever the mask, and a blocked one would end the process without
// the handlers. The creating thread's mask changes for the creation only; a signal sent meanwhile
// waits, pending, until it is restored. Precedent: LTTng-UST's threads block every signal.
template <class F>
std::thread LibraryThread(F&& run) {
  sigset_t set;
  sigfillset(&set);
  for (const int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&set, fault);
  sigset_t saved;
  pthread_sigmask(SIG_BLOCK, &set, &saved);
  try {
    std::thread thread(std::forward<F>(run));
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    return thread;
  } catch (...) {  // std::system_error
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    throw;
  }
}

int64_t ThreadCpuNs() noexcept {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

SenderThread::SenderThread(SenderThreadOptions options, ProcessFacts facts, LaunchRing* ring,
                           const Recorder* recorder, FunctionTable* functions,
                           DeviceTable* devices, ActivityBuffers* activity,
                           const CuptiApi* cupti)
    : options_(std::move(options)),
      facts_(std::move(facts)),
      ring_(ring),
      recorder_(recorder),
      functions_(functions),
      devices_(devices),
      activity_(activity),
      cupti_(cupti),
      transport_(options_.transport),
      line_(kLineBytes),
      launch_encoder_(facts_.pid),
      timing_watch_(options_.timing_watch) {
  options_.api_error_history =
      std::clamp(options_.api_error_history, 0, static_cast<int>(env::kMaxApiErrorHistory));
  block_ = options_.on_full == env::OnFull::kBlock;
  history_.assign(static_cast<size_t>(kMaxContexts) * options_.api_error_history, 0);
  if (activity_ != nullptr && cupti_ != nullptr) {
    activity_->SetDroppedRecordsSource(cupti_);
  }
  records_ = options_.timing && activity_ != nullptr && cupti_ != nullptr;
  if (options_.stall_threshold.count() > 0) {
    try {
      stall_ = std::make_unique<StallTracker>(options_.stall_threshold);
    } catch (...) {
      Log().warn("cannot allocate the stall tracker; stall detection is off");
    }
  }
}

void SenderThread::DisableStallDetection() noexcept {
  stall_.reset();
  for (auto& [key, value] : facts_.config) {
    if (key != "stall_ms") continue;
    try {
      value = "0";
    } catch (...) {
    }
  }
}

void SenderThread::StampClocks(Clock::time_point now) noexcept {
  stamp_now_ = now;
  // Also keeps the launch callback's clock fitted to CLOCK_REALTIME (tsc_clock.h).
  stamp_realtime_ns_ = base::EventClock().Refresh();
}

void SenderThread::ReadCallbacksForStalls() noexcept {
  if (recorder_ == nullptr) return;
  SyncCall calls[StallTracker::kMaxSyncWaits];
  // Returned first: a call that returned and a new one of the same thread are seen in order.
  SyncCallTable* table = recorder_->sync_calls();
  for (int n = table->ReturnedSinceLastLook(calls, StallTracker::kMaxSyncWaits), i = 0; i < n;
       ++i) {
    const SyncCall& c = calls[i];
    // A successful stream or context synchronize finished what was launched before it (design
    // point 9); an event's stream is not known.
    if (c.result != CUDA_SUCCESS || c.scope == SyncScope::kEvent) continue;
    stall_->OnSynchronized(c.context,
                           c.scope == SyncScope::kStream ? c.stream : StallTracker::kAllStreams,
                           c.correlation_id, stamp_now_);
  }
  int n = table->InProgress(calls, StallTracker::kMaxSyncWaits);
  if (resumed_at_ns_ != 0) {
    // A call entered before CUPTI was taken back may have returned while this library was not
    // subscribed (its exit callback never came): not a sign of anything (cupti_yield.h).
    n = static_cast<int>(std::remove_if(calls, calls + n,
                                        [this](const SyncCall& c) {
                                          return c.entered_ns < resumed_at_ns_;
                                        }) -
                         calls);
  }
  stall_->OnSyncCalls(std::span<const SyncCall>(calls, static_cast<size_t>(n)));
  GraphLaunch g;
  while (recorder_->graph_launches()->Next(&g)) {
    StallTracker::GraphLaunch launch;
    launch.context = g.context;
    launch.stream = g.stream;
    launch.device = g.device;
    launch.correlation_id = g.correlation_id;
    launch.graph_exec_id = g.graph_exec_id;
    launch.tid = g.tid;
    const int64_t delay_ns = std::max<int64_t>(0, stamp_realtime_ns_ - g.ts_ns);
    launch.launched_at = stamp_now_ - std::chrono::nanoseconds(delay_ns);
    launch.ts_ns = g.ts_ns;
    // Under `sampled` a graph launch carries no window flag (only kernel launches do:
    // timing_windows.h), so its nodes' records may not come: it is judged from synchronising
    // calls only, as an untimed kernel launch is.
    launch.timed = records_ && options_.windows == nullptr;
    stall_->OnGraphLaunch(launch);
  }
}

void SenderThread::CheckStall(Clock::time_point now) noexcept {
  // Off CUPTI (cupti_yield.h) nothing is seen finishing: no stall can be judged, and no flush or
  // activity switch may be made. Tracking starts afresh once CUPTI is back (StepYield).
  if (stall_ == nullptr || !CuptiOurs()) return;
  if (activity_ != nullptr) {
    const uint64_t lost = activity_->lost_records();
    if (lost != timing_lost_seen_) {
      timing_lost_seen_ = lost;
      stall_->OnTimingLost();
    }
  }
  ReadCallbacksForStalls();
  // A stream with launches made outside timing windows, no synchronising call covering it and no
  // sign of progress for the threshold cannot be judged from what it has (stall_tracker.h, point
  // 10). Under `sampled` a timing window opens for it, so that its next launches get records: one
  // that does not finish is then pending, and reported as any other. (With timing off nothing
  // can show it: not reported.)
  if (options_.windows != nullptr && stall_->AskTimingWindow(now)) {
    options_.windows->OpenForStall(now);
  }
  // With the subscriber-scoped (_v2) API no forced flush is made (ForcedFlushAllowed): a stream
  // is then reported only when a synchronising call shows it stalled (stall_tracker.h, point 9).
  if (records_ && ForcedFlushAllowed() && stall_->ConfirmationDue(now)) {
    // A default flush first: records of kernels that ended since the last one come without
    // costing anyone's timing (stall_tracker.h, point 6). Only when a stream still looks stalled
    // from its records alone, the forced flush.
    if (!forced_flush_stuck_ && cupti_->ActivityFlushAll != nullptr) {
      cupti_->ActivityFlushAll(0);
      ActivityBuffers::Completed completed;
      while (activity_->PopCompleted(&completed)) {
        HandleActivityBuffer(completed.buffer, completed.valid_size);
        activity_->Release(completed.buffer, completed.valid_size);
      }
    }
    if (stall_->ConfirmationDue(now)) ConfirmStall(now);
  }
  if (sync_records_ && !stall_->NeedsSynchronizations()) CollectSynchronizations(false);
  schema::StallEvent event;
  if (!stall_->Poll(now, &event)) return;
  event.header = MakeHeader();
  Send(event, /*preamble=*/false);
}

void SenderThread::CollectSynchronizations(bool on) noexcept {
  // Not while a forced flush may hold CUPTI's lock (it did not return): the call could block too.
  if (on == sync_records_ || (on && sync_records_failed_) || forced_flush_stuck_) return;
  if (on && cupti_->activity_subscriber == nullptr &&
      cupti_->ActivityEnableAllSyncRecords != nullptr) {
    // Queries whose work has not completed (a poll of the hung stream) make no record. (The
    // subscriber-scoped family has no such call in the 13.0 headers; there every query does.)
    cupti_->ActivityEnableAllSyncRecords(0);
  }
  const CUptiResult result = cupti_->SetActivityKind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, on);
  if (result == CUPTI_SUCCESS) {
    sync_records_ = on;
  } else if (on) {
    sync_records_failed_ = true;
    Log().debug("no synchronization records (CUPTI error {}); a stall's end is seen from later "
                "kernels only",
                static_cast<int>(result));
  }
}

void SenderThread::ConfirmStall(Clock::time_point now) noexcept {
  // The records of kernels that finished before a hung one wait in its buffer: a forced flush
  // hands them over (StallTracker design point 6). Its incomplete records are never handed over
  // again: their kernels go untimed (timing_dropped).
  if (forced_flush_stuck_) {
    stall_->ConfirmWithoutRecords(now);
    return;
  }
  // From now on a synchronize is what shows a kernel whose record this flush takes ended.
  CollectSynchronizations(true);
  // On a thread of its own, waited for at most kForcedFlushWait: cupti_activity.h gives the call
  // no time limit, and a stalled GPU is when it might not return. One that does not is left
  // behind, and no other is tried.
  std::shared_ptr<std::atomic<bool>> done;
  try {
    done = std::make_shared<std::atomic<bool>>(false);
    LibraryThread([cupti = cupti_, done] {
      cupti->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      done->store(true, std::memory_order_release);
    }).detach();
  } catch (...) {  // std::bad_alloc, std::system_error
    stall_->ConfirmWithoutRecords(now);
    return;
  }
  stall_->BeginConfirmation(now);
  const Clock::time_point give_up = Clock::now() + kForcedFlushWait;
  while (!done->load(std::memory_order_acquire) && Clock::now() < give_up) {
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  if (!done->load(std::memory_order_acquire)) {
    forced_flush_stuck_ = true;
    Log().warn("a forced CUPTI activity flush did not return within {} ms; stalls are reported "
               "from then on without it, and may name kernels that had finished",
               std::chrono::duration_cast<std::chrono::milliseconds>(kForcedFlushWait).count());
  }
  ActivityBuffers::Completed completed;
  while (activity_->PopCompleted(&completed)) {
    HandleActivityBuffer(completed.buffer, completed.valid_size);
    activity_->Release(completed.buffer, completed.valid_size);
  }
  const uint64_t before = stall_flush_incomplete_.load(std::memory_order_relaxed);
  stall_->EndConfirmation();
  // What it cost (stall_tracker.h, point 12): also in the stall event and the counters.
  const uint64_t cost = stall_->flush_incomplete() - before;
  stall_flush_incomplete_.store(stall_->flush_incomplete(), std::memory_order_relaxed);
  if (cost > 0) {
    Log().info("a forced CUPTI activity flush to confirm a stall handed over {} kernel records "
               "incomplete; those kernels get no kernel_time (timing_dropped_stall_flush)",
               cost);
  }
}

void SenderThread::HandleSynchronization(const CUpti_ActivitySynchronization2& sync) noexcept {
  // Only a synchronize that returned: an incomplete record (end 0, one a forced flush handed
  // over while the call still waited) or a failed one shows nothing finished.
  if (sync.end == 0 || sync.end < sync.start || sync.returnValue != 0) return;
  if (sync.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE &&
      sync.streamId != CUPTI_SYNCHRONIZATION_INVALID_VALUE) {
    stall_->OnSynchronized(sync.contextId, sync.streamId, sync.correlationId, stamp_now_);
  } else if (sync.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE) {
    stall_->OnSynchronized(sync.contextId, StallTracker::kAllStreams, sync.correlationId,
                           stamp_now_);
  }
}

SenderThread::~SenderThread() {
  if (thread_.joinable()) {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }
}

bool SenderThread::Start() noexcept {
  try {
    running_.store(true, std::memory_order_release);  // urgent flushes wait for the thread
    thread_ = LibraryThread([this] { Run(); });
    return true;
  } catch (...) {
    running_.store(false, std::memory_order_release);
    Log().warn("cannot start the sender thread; no events will be sent");
    return false;
  }
}

bool SenderThread::Stop(Clock::time_point deadline) noexcept {
  if (!thread_.joinable()) {
    if (abandoned_.load(std::memory_order_acquire)) return false;
    return Finish(deadline);  // never started (tests drive Step and Finish themselves)
  }
  exit_deadline_ = deadline;
  exit_requested_ = true;
  stop_.store(true, std::memory_order_release);  // publishes the two above
  // The thread does the forced activity flush and Finish; wait for it at most until `deadline`.
  // A thread still busy then (inside a CUPTI call that does not return) is never joined: the
  // process is exiting, and the thread ends with it.
  while (exit_result_.load(std::memory_order_acquire) == kExitPending &&
         Clock::now() < deadline) {
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  if (exit_result_.load(std::memory_order_acquire) == kExitPending) {
    abandoned_.store(true, std::memory_order_release);
    thread_.detach();
    return false;
  }
  thread_.join();
  return exit_result_.load(std::memory_order_acquire) == kExitAcknowledged;
}

void SenderThread::Run() noexcept {
  const OwnCalls own;  // every driver call on this thread is the library's (own_calls.h)
  thread_tid_.store(static_cast<int32_t>(syscall(SYS_gettid)), std::memory_order_relaxed);
  while (!stop_.load(std::memory_order_acquire)) {
    const Clock::time_point now = Clock::now();
    const bool busy = Step(now);
    if (busy) continue;
    // Idle: sleep on the socket until the transport's next deadline, at most 10 ms, so new
    // ring records wait at most that long (the ring itself never wakes this thread).
    Clock::time_point wake = std::min(transport_.NextDeadline(), now + std::chrono::milliseconds(10));
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now());
    const int timeout = static_cast<int>(std::max<int64_t>(0, wait.count()));
    pollfd pfd{transport_.fd(), static_cast<short>(POLLIN | (transport_.WantsWrite() ? POLLOUT : 0)), 0};
    if (pfd.fd >= 0) {
      poll(&pfd, 1, timeout);
    } else if (timeout > 0) {
      poll(nullptr, 0, timeout);
    }
  }
  running_.store(false, std::memory_order_release);
  cpu_ns_.store(ThreadCpuNs(), std::memory_order_relaxed);
  // Stop gave up on this thread (it was stuck until after the deadline): touch nothing more.
  if (!exit_requested_ || abandoned_.load(std::memory_order_acquire)) return;
  if (activity_ != nullptr && cupti_ != nullptr && cupti_->ActivityFlushAll != nullptr &&
      CuptiOurs()) {
    // What the ring holds goes out before the CUPTI call that may not return (at most half the
    // time left: the forced flush and Finish need the rest).
    if (!started_process_) SendProcessStart();
    StampClocks(Clock::now());
    while (TakeRecord()) {
    }
    FreeTaken();
    const Clock::time_point now = Clock::now();
    if (exit_deadline_ > now) transport_.Flush(now + (exit_deadline_ - now) / 2);
    // Completes the records of kernels that ran; their buffers reach ActivityBuffers now. On a
    // faulted context this may not return: Stop stops waiting at its deadline.
    in_exit_flush_.store(true, std::memory_order_release);
    cupti_->ActivityFlushAll(ForcedFlushAllowed() ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    in_exit_flush_.store(false, std::memory_order_release);
  }
  if (abandoned_.load(std::memory_order_acquire)) return;  // Stop gave up on us: touch nothing
  // Finish a little before Stop's deadline, so that Stop sees the result.
  const Clock::time_point finish_by = exit_deadline_ - std::chrono::nanoseconds(kUrgentMarginNs);
  const bool acknowledged = Finish(finish_by);
  exit_result_.store(acknowledged ? kExitAcknowledged : kExitUnacknowledged,
                     std::memory_order_release);
}

bool SenderThread::RequestUrgentFlushAndWait(int64_t wait_ns) noexcept {
  const int64_t deadline = base::MonotonicNs() + wait_ns;
  urgent_deadline_ns_.store(deadline - kUrgentMarginNs, std::memory_order_relaxed);
  const uint32_t ticket = urgent_requested_.fetch_add(1, std::memory_order_acq_rel) + 1;
  while (base::MonotonicNs() < deadline) {
    if (static_cast<int32_t>(urgent_done_.load(std::memory_order_acquire) - ticket) >= 0) {
      return true;
    }
    if (!running_.load(std::memory_order_acquire)) return false;
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  return false;
}

bool SenderThread::FlushNow(int64_t wait_ns) noexcept {
  if (!running_.load(std::memory_order_acquire)) return false;
  if (static_cast<int32_t>(syscall(SYS_gettid)) == thread_tid_.load(std::memory_order_relaxed)) {
    return false;
  }
  return RequestUrgentFlushAndWait(wait_ns);
}

bool SenderThread::FlushForCrash(const CrashInfo& crash, int64_t wait_ns) noexcept {
  if (!running_.load(std::memory_order_acquire)) return false;
  if (static_cast<int32_t>(syscall(SYS_gettid)) == thread_tid_.load(std::memory_order_relaxed)) {
    return false;  // the sender thread itself crashed: nobody is left to send
  }
  crash_ = crash;
  crash_pending_.store(true, std::memory_order_release);
  return RequestUrgentFlushAndWait(wait_ns);
}

void SenderThread::DrainAll() noexcept {
  // Everything recorded goes out, even if the transport must drop its oldest never-sent lines.
  StampClocks(Clock::now());
  while (TakeRecord()) {
  }
  FreeTaken();
  if (activity_ != nullptr) {
    ActivityBuffers::Completed completed;
    while (activity_->PopCompleted(&completed)) {
      HandleActivityBuffer(completed.buffer, completed.valid_size);
      activity_->Release(completed.buffer, completed.valid_size);
    }
  }
}

void SenderThread::UrgentFlush() noexcept {
  const bool crash = crash_pending_.load(std::memory_order_acquire);
  const int64_t deadline_ns = urgent_deadline_ns_.load(std::memory_order_relaxed);
  const int64_t left_ns = std::max<int64_t>(0, deadline_ns - base::MonotonicNs());
  const Clock::time_point deadline = Clock::now() + std::chrono::nanoseconds(left_ns);
  // Everything recorded goes out: in either mode it waits for room until the requester's
  // deadline, then the transport drops its oldest never-sent lines for room (counted).
  room_deadline_ = deadline;
  if (!started_process_) SendProcessStart();
  DrainAll();
  if (crash) {
    SendProcessCrash(crash_);
    crash_pending_.store(false, std::memory_order_release);
  }
  transport_.Flush(deadline);
  if (!crash && activity_ != nullptr && cupti_ != nullptr && CuptiOurs()) {
    // Completes the records of kernels that already ran (not after a fatal signal: CUPTI may
    // hold a lock the crashed thread held). After what the ring held is out: on a faulted
    // context this call may not return, and the requester's wait ends at its deadline anyway.
    cupti_->ActivityFlushAll(0);
    DrainAll();
    transport_.Flush(deadline);
  }
}

bool SenderThread::MayTake(Clock::time_point now) noexcept {
  if (transport_.HasRoom(kRoomForRecord)) {
    waiting_ = false;
    return true;
  }
  return Stalled(now);
}

bool SenderThread::Stalled(Clock::time_point now) noexcept {
  if (!block_) return false;
  const transport::SenderStats t = transport_.stats();
  const uint64_t released = t.acked + t.spilled;
  if (released != released_seen_) {
    released_seen_ = released;
    progress_at_ = now;
    stalled_ = false;
  } else if (!waiting_) {
    progress_at_ = now;  // a new wait: its clock starts now
  }
  waiting_ = true;
  if (!stalled_ && now - progress_at_ >= options_.block_stall_limit) {
    stalled_ = true;
    if (!crash_pending_.load(std::memory_order_acquire)) {
      Log().warn(
          "the collector at {} acknowledged nothing for {} ms: events are dropped and counted "
          "instead of holding the application (CUFLIGHT_ON_FULL=block) until it does again",
          options_.transport.socket_path, options_.block_stall_limit.count());
    }
  }
  return stalled_;
}

void SenderThread::WaitForRoom(size_t bytes) noexcept {
  if (transport_.HasRoom(bytes)) {
    waiting_ = false;
    return;
  }
  // Not cut short by a stop or an urgent request: the line has its seq, so nothing may be queued
  // before it, and either would wait for the same room.
  const Clock::time_point start = Clock::now();
  for (Clock::time_point now = start; now < room_deadline_ && !Stalled(now); now = Clock::now()) {
    Clock::time_point until = std::min(room_deadline_, now + kRoomWaitSlice);
    if (block_) until = std::min(until, progress_at_ + options_.block_stall_limit);
    if (transport_.WaitForRoom(bytes, until)) {
      waiting_ = false;
      break;
    }
  }
  if (finished_ || stop_.load(std::memory_order_acquire)) room_waited_ += Clock::now() - start;
}

uint64_t SenderThread::NextSeq() noexcept {
  // process_start is always seq 0; drops before it show as the gap after it.
  if (next_seq_ == 0) return next_seq_++;
  const uint64_t drops = recorder_ != nullptr ? recorder_->dropped_ring_full() : 0;
  next_seq_ += drops - ring_drops_seen_;
  ring_drops_seen_ = drops;
  return next_seq_++;
}

schema::Header SenderThread::MakeHeader(bool publish) noexcept {
  return MakeHeader(base::NowRealtimeNs(), publish);
}

schema::Header SenderThread::MakeHeader(int64_t ts_ns, bool publish) noexcept {
  schema::Header header;
  header.ts_ns = ts_ns;
  header.pid = facts_.pid;
  header.seq = NextSeq();
  // Before the line can go anywhere: a reader of the black box never gives this seq to another.
  if (publish) PublishState();
  return header;
}

blackbox::SeqState SenderThread::BlackboxState() const noexcept {
  // NextSeq skips the ring's drops as it sees them: seq_base + the ring's drop count is the next
  // seq, whenever it is read.
  return {.seq_base = next_seq_ - ring_drops_seen_,
          .handled_pos = handled_pos_,
          .announced_devices = announced_devices_};
}

void SenderThread::PublishState() noexcept {
  if (options_.blackbox != nullptr) options_.blackbox->PublishState(BlackboxState());
}

template <typename Event>
size_t SenderThread::EncodeLine(const Event& event, char* buf, size_t cap) noexcept {
  if constexpr (std::is_same_v<Event, schema::LaunchEvent>) {
    return launch_encoder_.Encode(event, buf, cap);
  } else {
    return schema::Encode(event, buf, cap);
  }
}

template <typename Event>
bool SenderThread::Send(Event& event, bool preamble) noexcept {
  event.header.pid = facts_.pid;
  // Encoded straight into the transport's storage when it fits there (transport/sender.h, point
  // 13): the line is written once, and sent from where it lies. The storage offered is room a
  // line takes without waiting or dropping. Otherwise (the storage's end is near, the buffer
  // nearly full, a preamble line) into line_, then copied, waiting for room as the mode says.
  const std::span<char> room = preamble ? std::span<char>() : transport_.Reserve();
  size_t n = room.empty() ? 0 : EncodeLine(event, room.data(), room.size());
  bool taken;
  if (n != 0) {
    waiting_ = false;  // there was room, as WaitForRoom would have found
    taken = transport_.Commit(event.header.seq, n);
  } else {
    n = EncodeLine(event, line_.data(), line_.size());
    if (n != 0 && !preamble) WaitForRoom(n);
    const std::string_view line(line_.data(), n);
    taken = n != 0 && (preamble ? transport_.AddPreamble(event.header.seq, line)
                                : transport_.Enqueue(event.header.seq, line));
  }
  if (taken) {
    emitted_.fetch_add(1, std::memory_order_relaxed);
  } else {
    rejected_.fetch_add(1, std::memory_order_relaxed);
  }
  return taken;
}

uint64_t SenderThread::DescribeConfig(const schema::KernelEvent& event,
                                      schema::WaveShape wave) noexcept {
  if (!options_.intern_configs) return ConfigTable::kSendWhole;
  schema::KernelConfigEvent config;
  schema::LaunchEvent unused;
  schema::Split(event, 0, &config, &unused, wave);
  const uint64_t known = configs_.Find(config);
  if (known != 0) return known;
  if (configs_.full()) return ConfigTable::kSendWhole;
  // A preamble line (transport/sender.h, point 5) with a seq below its launch's: merged by seq, it
  // comes before the launch on this connection and on every later one, and at the start of every
  // spill file.
  config.config = next_config_id_;
  // Published (the black box's state says this seq is used) before the launch takes the next: a
  // kill before the launch's record is journaled recovers it with the seq of its launch line (one
  // event, deduplicated if that line was delivered), never with this description's.
  config.header = MakeHeader(event.header.ts_ns, /*publish=*/true);
  uint64_t id = ConfigTable::kSendWhole;
  if (Send(config, /*preamble=*/true)) id = next_config_id_++;
  try {
    configs_.Add(config, id);
  } catch (...) {  // std::bad_alloc: described again (and counted) at its next launch
  }
  return id;
}

bool SenderThread::SendKernel(schema::KernelEvent& event, uint64_t config_id,
                              schema::WaveShape wave, bool* waves_derived) noexcept {
  if (config_id == ConfigTable::kSendWhole) return Send(event, /*preamble=*/false);
  schema::KernelConfigEvent unused;
  schema::LaunchEvent launch;
  schema::Split(event, config_id, &unused, &launch, wave);
  if (waves_derived != nullptr) *waves_derived = !launch.waves.has_value();
  launch.header.pid = facts_.pid;
  return Send(launch, /*preamble=*/false);
}

void SenderThread::SendProcessStart() noexcept {
  started_process_ = true;
  const ProcessStartView view(facts_);
  schema::ProcessStartEvent event = view.Event(MakeHeader());
  Send(event, /*preamble=*/true);
}

void SenderThread::EnsureDeviceEvent(int ordinal) noexcept {
  if (ordinal < 0 || ordinal >= DeviceTable::kMaxDevices || device_sent_[ordinal]) return;
  const DeviceInfo* info = devices_->Get(ordinal);
  if (info == nullptr) return;
  device_sent_[ordinal] = true;
  schema::DeviceEvent event;
  blackbox::BuildDeviceEvent(ordinal, info->name, info->uuid, info->limits, &event);
  event.pci_bus_id = info->pci_bus_id;  // not in the black box: a recovered event has none
  event.header = MakeHeader(/*publish=*/false);
  // The seq is the device's in the black box before a state says it is used (one step).
  announced_devices_ |= uint64_t{1} << ordinal;
  if (options_.blackbox != nullptr) {
    options_.blackbox->AnnounceDevice(ordinal, event.header.seq, event.header.ts_ns);
  }
  PublishState();
  Send(event, /*preamble=*/true);
}

void SenderThread::RememberLaunch(uint64_t context, uint64_t correlation_id) noexcept {
  const int n = options_.api_error_history;
  if (n == 0) return;
  int slot = -1;
  for (int i = 0; i < kMaxContexts; ++i) {
    if (contexts_[i].context == context && contexts_[i].count != 0) {
      slot = i;
      break;
    }
  }
  if (slot < 0) {
    slot = next_context_slot_;
    next_context_slot_ = (next_context_slot_ + 1) % kMaxContexts;
    contexts_[slot] = ContextHistory{context, 0};
  }
  ContextHistory& h = contexts_[slot];
  history_[static_cast<size_t>(slot) * n + h.count % n] = correlation_id;
  ++h.count;
}

void SenderThread::HandleApiError(const LaunchRecord& record) noexcept {
  uint64_t ids[env::kMaxApiErrorHistory] = {};
  size_t id_count = 0;
  const int n = options_.api_error_history;
  for (int i = 0; n > 0 && i < kMaxContexts; ++i) {
    const ContextHistory& h = contexts_[i];
    if (h.count == 0 || h.context != record.context) continue;
    const uint64_t kept = std::min<uint64_t>(h.count, static_cast<uint64_t>(n));
    for (uint64_t k = h.count - kept; k < h.count; ++k) {  // oldest first
      ids[id_count++] = history_[static_cast<size_t>(i) * n + k % n];
    }
    break;
  }
  const char* api = nullptr;
  const CuptiApi* names = options_.callback_names;
  if (names != nullptr && names->GetCallbackName != nullptr &&
      names->GetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, record.cbid, &api) != CUPTI_SUCCESS) {
    api = nullptr;
  }
  char api_fallback[48];
  if (api == nullptr) {
    std::snprintf(api_fallback, sizeof(api_fallback), "driver API callback %u", record.cbid);
    api = api_fallback;
  }
  const auto result = static_cast<CUresult>(record.result);
  const char* error_name = nullptr;
  const char* message = nullptr;
  const DriverApi* driver = options_.driver;
  if (driver != nullptr && driver->GetErrorName != nullptr &&
      driver->GetErrorName(result, &error_name) != CUDA_SUCCESS) {
    error_name = nullptr;
  }
  if (driver != nullptr && driver->GetErrorString != nullptr &&
      driver->GetErrorString(result, &message) != CUDA_SUCCESS) {
    message = nullptr;
  }
  schema::ApiErrorEvent event;
  event.header = MakeHeader(/*publish=*/false);  // HandleRecord publishes
  event.header.ts_ns = record.ts_ns;
  event.api = api;
  event.code = record.result;
  event.error_name = error_name != nullptr ? error_name : "";
  event.message = message != nullptr ? message : "";
  event.device = record.device;
  event.context = record.context;
  event.stream = record.stream;
  event.last_correlation_ids = std::span<const uint64_t>(ids, id_count);
  Send(event, /*preamble=*/false);
}

bool SenderThread::TakeRecord() noexcept {
  if (taken_ == 0) take_pos_ = ring_->popped();
  LaunchRecord record;
  if (!ring_->TryPeekAt(take_pos_, &record)) return false;
  HandleRecord(record, take_pos_);
  ++take_pos_;
  // Freed only after it was handled (until then a reader of the black box finds the record in
  // its slot), and kFreeBatch at a time (ring.h, point 10).
  if (++taken_ == kFreeBatch) FreeTaken();
  return true;
}

void SenderThread::FreeTaken() noexcept {
  if (taken_ == 0) return;
  ring_->ConsumeTo(take_pos_);
  taken_ = 0;
}

bool SenderThread::NoteLaunch(const LaunchRecord& record, double occupancy,
                              std::optional<bool>* timing_window) noexcept {
  // Under sampled, only a launch made in a timing window gets a kernel activity record.
  bool timed = true;
  if (options_.windows != nullptr) {
    timed = options_.windows->OnLaunch(record, stamp_now_);
    *timing_window = timed;
  }
  if (stall_ != nullptr) {
    // A launch outside a timing window gets no kernel record: the tracker judges it from
    // synchronising calls only (stall_tracker.h, point 10).
    // On the sender's clock: when the record was taken, less how long after the launch that was.
    const int64_t delay_ns = std::max<int64_t>(0, stamp_realtime_ns_ - record.ts_ns);
    StallTracker::Launch launch;
    launch.context = record.context;
    launch.stream = record.stream;
    launch.device = record.device;
    launch.correlation_id = static_cast<uint32_t>(record.correlation_id);  // CUPTI's
    launch.tid = record.tid;
    launch.overlaps_previous =
        (record.launch_flags & blackbox::kLaunchProgrammaticSerialization) != 0;
    // The kernel event's names, grid and block are the record's and its function's
    // (blackbox::KernelEventBuilder::BuildFrom).
    launch.function_id = record.function->id;
    launch.name = record.function->name;
    launch.demangled = record.function->demangled;
    launch.grid = {record.grid[0], record.grid[1], record.grid[2]};
    launch.block = {record.block[0], record.block[1], record.block[2]};
    launch.occupancy = occupancy;
    launch.launched_at = stamp_now_ - std::chrono::nanoseconds(delay_ns);
    launch.ts_ns = record.ts_ns;
    launch.timed = records_ && timed;
    stall_->OnLaunch(launch);
  }
  return timed;
}

SenderThread::LaunchSent SenderThread::SendKnownLaunch(const LaunchRecord& record,
                                                       const RecordConfigs::Entry& known) noexcept {
  LaunchSent out;
  schema::LaunchEvent launch;
  out.timed = NoteLaunch(record, known.occupancy, &launch.timing_window);
  if (known.disagreement) fast_disagreements_.fetch_add(1, std::memory_order_relaxed);
  launch.header = MakeHeader(record.ts_ns, /*publish=*/false);
  launch.tid = record.tid;
  launch.correlation_id = record.correlation_id;
  launch.config = known.id;
  launch.grid = {record.grid[0], record.grid[1], record.grid[2]};
  // waves and tail_utilization absent: the reader derives them (config_table.h, point 6).
  out.seq = launch.header.seq;
  out.sent = Send(launch, /*preamble=*/false);
  return out;
}

SenderThread::LaunchSent SenderThread::BuildAndSendKernel(const LaunchRecord& record,
                                                          const DeviceInfo& device,
                                                          const RecordConfigs::Key* key) noexcept {
  LaunchSent out;
  schema::KernelEvent event;
  schema::WaveShape wave;
  if (!builder_.BuildKernel(record, device, &event, &wave)) {
    // The recorder checked the same facts; reaching here means the engine refused the launch
    // (the driver accepted it). Its seq stays unused: the collector counts it lost.
    NextSeq();
    rejected_.fetch_add(1, std::memory_order_relaxed);
    out.built = false;
    return out;
  }
  out.timed = NoteLaunch(record, event.occupancy.occupancy, &event.timing_window);
  event.header.ts_ns = record.ts_ns;
  const uint64_t config_id = DescribeConfig(event, wave);  // before the launch's seq
  event.header = MakeHeader(record.ts_ns, /*publish=*/false);
  out.seq = event.header.seq;
  bool waves_derived = false;
  out.sent = SendKernel(event, config_id, wave, &waves_derived);
  // Its later launches are found by their records (config_table.h, points 5-7).
  if (key != nullptr && config_id != ConfigTable::kSendWhole && waves_derived) {
    by_record_.Add(*key, {.id = config_id,
                          .occupancy = event.occupancy.occupancy,
                          .disagreement = event.engine_max_active_blocks.has_value()});
  }
  return out;
}

void SenderThread::HandleRecord(const LaunchRecord& record, uint64_t pos) noexcept {
  bool journaled = false;
  if (record.kind == RecordKind::kApiError) {
    HandleApiError(record);
  } else if (const DeviceInfo* device = devices_->Get(record.device); device != nullptr) {
    // (The recorder only records launches on known devices.)
    RememberLaunch(record.context, record.correlation_id);
    EnsureDeviceEvent(record.device);
    LaunchSent done;
    if (options_.intern_configs && record.function != nullptr) {
      // A configuration described before, found by what the record says (config_table.h, point
      // 2): the launch line is made from the record, no kernel event built.
      const RecordConfigs::Key key = RecordConfigs::Key::Of(record, record.function->id);
      const RecordConfigs::Entry* known = by_record_.Find(key);
      done = known != nullptr ? SendKnownLaunch(record, *known)
                              : BuildAndSendKernel(record, *device, &key);
    } else {
      done = BuildAndSendKernel(record, *device, nullptr);
    }
    if (done.sent && options_.blackbox != nullptr) {
      // The record and the state that says it is handled, in one step.
      handled_pos_ = pos + 1;
      options_.blackbox->Commit(done.seq, pos, &record, BlackboxState());
      journaled = true;
    }
    if (done.built && activity_ != nullptr && options_.timing && done.timed) {
      timing_watch_.OnLaunch(record.ts_ns);
    }
  }
  handled_pos_ = pos + 1;
  if (!journaled) PublishState();
}

std::string_view SenderThread::Intern(const char* name, std::string_view* demangled) {
  const std::string key = name != nullptr ? name : "";
  auto it = names_.find(key);
  if (it == names_.end()) {
    std::string pretty;
    int status = 0;
    char* d = abi::__cxa_demangle(key.c_str(), nullptr, nullptr, &status);
    if (status == 0 && d != nullptr) pretty = d;
    std::free(d);
    it = names_.emplace(key, std::move(pretty)).first;
  }
  *demangled = it->second;
  return it->first;
}

const DeviceInfo* SenderThread::DeviceOfActivity(int ordinal) noexcept {
  if (const DeviceInfo* known = devices_->Get(ordinal); known != nullptr) return known;
  // No launch callback described this device: a process that only replays graphs on it.
  if (options_.driver == nullptr || ordinal < 0 || ordinal >= DeviceTable::kMaxDevices) {
    return nullptr;
  }
  try {
    return devices_->Publish(ReadDeviceInfo(*options_.driver, ordinal));
  } catch (...) {  // std::bad_alloc
    return nullptr;
  }
}

void SenderThread::HandleActivityBuffer(uint8_t* buffer, size_t valid_size) noexcept {
  if (cupti_ == nullptr) return;
  CUpti_Activity* record = nullptr;
  while (cupti_->NextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
      if (stall_ != nullptr) {
        HandleSynchronization(*reinterpret_cast<const CUpti_ActivitySynchronization2*>(record));
      }
      continue;
    }
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
      continue;
    }
    const auto& kernel = *reinterpret_cast<const KernelActivity*>(record);
    if (kernel.graphId != 0) {
      // A graph's kernel node: no launch callback saw it, so its kernel event comes from here.
      const DeviceInfo* device = DeviceOfActivity(static_cast<int>(kernel.deviceId));
      if (device != nullptr && device->engine) {
        EnsureDeviceEvent(device->ordinal);
        try {
          std::string_view demangled;
          const std::string_view name = Intern(kernel.name, &demangled);
          schema::KernelEvent event;
          schema::WaveShape wave;
          if (builder_.BuildGraphKernel(kernel, *device, name, demangled, &event, &wave)) {
            const uint64_t config_id = DescribeConfig(event, wave);  // before the launch's seq
            event.header = MakeHeader();
            SendKernel(event, config_id, wave);
          }
        } catch (...) {
          rejected_.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
    if (!options_.timing) continue;
    if (timing_watch_.OnRecord()) {
      Log().info("kernel timing records arrive again; the launches since are timed");
    }
    if (kernel.start == 0 || kernel.end == 0 || kernel.end < kernel.start) {
      // Incomplete (a forced flush handed over a kernel still running): no kernel_time with
      // made-up times; counted in timing_dropped.
      timing_incomplete_.fetch_add(1, std::memory_order_relaxed);
      if (stall_ != nullptr) {
        StallTracker::Node node;
        if (kernel.graphId != 0) {  // which node of a graph launch runs (design point 11)
          node.graph_id = kernel.graphId;
          node.node_id = kernel.graphNodeId;
          try {
            node.name = Intern(kernel.name, &node.demangled);
          } catch (...) {  // std::bad_alloc: the node without its name
          }
          node.grid = {static_cast<uint32_t>(kernel.gridX), static_cast<uint32_t>(kernel.gridY),
                       static_cast<uint32_t>(kernel.gridZ)};
          node.block = {static_cast<uint32_t>(kernel.blockX),
                        static_cast<uint32_t>(kernel.blockY),
                        static_cast<uint32_t>(kernel.blockZ)};
        }
        stall_->OnIncomplete(kernel.contextId, kernel.streamId, kernel.correlationId, node);
      }
      continue;
    }
    if (stall_ != nullptr) {
      stall_->OnFinished(kernel.contextId, kernel.streamId, kernel.correlationId, stamp_now_,
                         kernel.end);
    }
    // A launch made across a timing window's edge said timing_window false: no kernel_time.
    if (options_.windows != nullptr && kernel.graphId == 0 &&
        !options_.windows->OnKernelRecord(kernel.correlationId)) {
      continue;
    }
    schema::KernelTimeEvent event;
    EventBuilder::BuildKernelTime(kernel, &event);
    event.header = MakeHeader();
    Send(event, /*preamble=*/false);
  }
}

void SenderThread::StartWindows(Clock::time_point now) noexcept {
  if (options_.windows == nullptr || windows_started_) return;
  windows_started_ = true;
  if (options_.windows->failed() || options_.windows->Start(now)) return;
  Log().warn("kernel timing unavailable (CUPTI refused to enable kernel activity for the first "
             "timing window); kernel events are still recorded, without GPU times or stall "
             "detection");
  timing_watch_.SetUnavailable();
  if (stall_ != nullptr) DisableStallDetection();  // before process_start: it says stall_ms 0
}

void SenderThread::StepYield(Clock::time_point now) noexcept {
  CuptiYield* y = options_.yield;
  if (y == nullptr) return;
  if (const std::optional<uint64_t> for_ms = transport_.TakeYield()) y->Request(*for_ms, now);
  if (y->Poll(now) == CuptiYield::Action::kRelease) {
    // cupti_yield.h, point 2: kernel activity off, CUPTI's buffers handed over (forced under the
    // unversioned API: a buffer left with CUPTI would complete to the next tool's callbacks) and
    // made into events, then the unsubscribe.
    if (activity_ != nullptr && cupti_ != nullptr) {
      if (sync_records_) CollectSynchronizations(false);
      if (options_.kernel_disable_safe) {
        cupti_->SetActivityKind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, false);
      }
      if (cupti_->ActivityFlushAll != nullptr && !forced_flush_stuck_) {
        cupti_->ActivityFlushAll(ForcedFlushAllowed() ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
      }
      activity_->ReadDropped(nullptr, 0);
    }
    DrainAll();
    y->Released(Clock::now());
  }
  if (y->TakeResumed()) {
    // What was pending before the yield will never be seen finishing: start stall tracking anew.
    resumed_at_ns_ = base::MonotonicNs();
    if (stall_ != nullptr) {
      try {
        stall_ = std::make_unique<StallTracker>(options_.stall_threshold);
      } catch (...) {
        stall_.reset();
        Log().warn("cannot allocate the stall tracker; stall detection is off");
      }
    }
  }
}

bool SenderThread::Step(Clock::time_point now) noexcept {
  bool busy = false;
  StampClocks(now);
  if (!started_process_) {
    if (CuptiOurs()) StartWindows(now);
    SendProcessStart();
  }
  if (options_.windows != nullptr && CuptiOurs()) options_.windows->Tick(now);
  const uint32_t urgent = urgent_requested_.load(std::memory_order_acquire);
  if (urgent != urgent_served_) {
    UrgentFlush();
    urgent_served_ = urgent;
    urgent_done_.store(urgent, std::memory_order_release);
    now = Clock::now();
    StampClocks(now);
    busy = true;
  }
  // Events made here wait for room in block mode (bounded by the stall rule); in drop mode they
  // do not wait.
  room_deadline_ = block_ ? Clock::time_point::max() : Clock::time_point::min();
  StepYield(now);
  for (int i = 0; i < kMaxRecordsPerStep; ++i) {
    // Leave records in the ring rather than make the transport drop: the ring then drops the
    // newest launches and counts them, exactly (drop), or the launching threads wait (block).
    if (!MayTake(now) || !TakeRecord()) break;
    busy = true;
  }
  FreeTaken();  // before anything reads the ring's consumer position (Reclaim, SizeApprox)
  // Frees what the function table retired (no record is held now); not while an urgent flush
  // waits: a crashed thread may hold the allocator's lock.
  if (urgent_requested_.load(std::memory_order_relaxed) == urgent_served_) {
    functions_->Reclaim(*ring_);
  }
  ring_high_water_.store(ring_->high_water(), std::memory_order_relaxed);
  if (activity_ != nullptr) {
    if (cupti_ != nullptr && now >= next_activity_flush_ && CuptiOurs()) {
      // Hands over buffers CUPTI holds partly filled, so timing is never older than this (and
      // kernels are seen finishing well within the stall threshold).
      cupti_->ActivityFlushAll(0);
      next_activity_flush_ =
          now + (stall_ != nullptr ? stall_->flush_interval() : kActivityFlushInterval);
    }
    ActivityBuffers::Completed completed;
    bool drained = true;
    while (true) {
      if (!MayTake(now)) {
        drained = false;
        break;
      }
      if (!activity_->PopCompleted(&completed)) break;
      HandleActivityBuffer(completed.buffer, completed.valid_size);
      activity_->Release(completed.buffer, completed.valid_size);
      busy = true;
    }
    if (options_.timing && timing_watch_.Check(base::NowRealtimeNs())) {
      Log().warn("kernel timing records stopped arriving {} s ago while launches went on: another "
                 "CUPTI client (torch.profiler, a second tool) took over the activity buffers or "
                 "disabled kernel records, or the GPU stopped completing kernels; launches from "
                 "now on are counted in timing_stopped",
                 timing_watch_.silence_at_stop_ns() / 1'000'000'000);
    }
    // Only with every completed buffer handled: kernels left in a buffer would look unfinished
    // (and a stall event would take room the transport does not have).
    if (drained) CheckStall(now);
  } else if (MayTake(now)) {
    CheckStall(now);  // no kernel records: from synchronising calls alone
  }
  if (next_stats_ == Clock::time_point{}) {
    next_stats_ = now + options_.stats_interval;
  } else if (now >= next_stats_) {
    cpu_ns_.store(ThreadCpuNs(), std::memory_order_relaxed);
    SendStats();
    next_stats_ = now + options_.stats_interval;
  }
  transport_.Poll(now);
  if (options_.blackbox != nullptr) {
    // Lines the socket took reach the collector whatever happens to this process.
    if (const std::optional<uint64_t> written = transport_.written_seq()) {
      options_.blackbox->ReleaseJournal(*written);
    }
  }
  // Acks the poll read may have made room for records waiting in the ring: take them at once
  // instead of sleeping until the next wake-up.
  if (!busy && ring_->SizeApprox() > 0 && transport_.HasRoom(kRoomForRecord)) busy = true;
  return busy;
}

PipelineCounters SenderThread::counters() const noexcept {
  PipelineCounters c;
  c.dropped_ring_full = recorder_ != nullptr ? recorder_->dropped_ring_full() : 0;
  const transport::SenderStats transport = transport_.stats();
  // Lines the transport took and later dropped for room (dropped_disconnected's and
  // dropped_backpressure's evictions) are counted as dropped, not also as emitted: emitted +
  // dropped is every seq used.
  const uint64_t handed = emitted_.load(std::memory_order_relaxed);
  const uint64_t evicted = transport.dropped_disconnected + transport.dropped_backpressure;
  c.emitted = handed > evicted ? handed - evicted : 0;
  c.dropped_disconnected =
      transport.dropped_disconnected + rejected_.load(std::memory_order_relaxed);
  c.dropped_backpressure = transport.dropped_backpressure;
  const uint64_t untracked = recorder_ != nullptr ? recorder_->untracked() : 0;
  c.launches = functions_->TotalLaunches() + untracked;
  c.filtered = functions_->TotalFiltered() + untracked;
  c.ring_high_water = ring_high_water_.load(std::memory_order_relaxed);
  c.cpu_ns = cpu_ns_.load(std::memory_order_relaxed);
  c.timing_dropped = (activity_ != nullptr ? activity_->lost_records() : 0) +
                     timing_incomplete_.load(std::memory_order_relaxed);
  c.timing_dropped_stall_flush = stall_flush_incomplete_.load(std::memory_order_relaxed);
  c.occupancy_disagreements =
      builder_.disagreements() + fast_disagreements_.load(std::memory_order_relaxed);
  c.api_errors_routine = recorder_ != nullptr ? recorder_->api_errors_routine() : 0;
  c.api_errors_suppressed = recorder_ != nullptr ? recorder_->api_errors_suppressed() : 0;
  c.timing_stop = timing_watch_.stop();
  c.timing_stopped = timing_watch_.stopped_launches();
  c.timing_policy = options_.timing_policy;
  if (options_.windows != nullptr) {
    c.timing_windows = options_.windows->windows();
    c.timing_window_ns = options_.windows->window_ns(Clock::now());
    c.launches_in_window = options_.windows->launches_in_window();
  }
  if (const CuptiYield* y = options_.yield; y != nullptr) {
    c.yields = y->yields();
    c.yielded_ns = y->yielded_ns(Clock::now());
    c.launches_yielded = y->launches_yielded();
    c.yielded = y->yielded();
  }
  return c;
}

template <typename Event>
void SenderThread::FillCounters(const PipelineCounters& c, Event* event) noexcept {
  event->emitted = c.emitted;
  event->dropped_ring_full = c.dropped_ring_full;
  event->dropped_disconnected = c.dropped_disconnected;
  event->dropped_backpressure = c.dropped_backpressure;
  event->dropped = c.dropped_ring_full + c.dropped_disconnected + c.dropped_backpressure;
  event->launches = c.launches;
  event->filtered = c.filtered;
  event->timing_dropped = c.timing_dropped;
  event->timing_dropped_stall_flush = c.timing_dropped_stall_flush;
  event->occupancy_disagreements = c.occupancy_disagreements;
  event->api_errors_routine = c.api_errors_routine;
  event->api_errors_suppressed = c.api_errors_suppressed;
  event->timing_stopped = c.timing_stopped;
  event->timing_stopped_reason = c.timing_stop;
  event->timing_policy = c.timing_policy;
  event->timing_windows = c.timing_windows;
  event->timing_window_ns = c.timing_window_ns;
  event->launches_in_window = c.launches_in_window;
  event->yields = c.yields;
  event->yielded_ns = c.yielded_ns;
  event->launches_yielded = c.launches_yielded;
  event->yielded = c.yielded;
}

void SenderThread::SendStats() noexcept {
  schema::StatsEvent event;
  event.header = MakeHeader();
  const PipelineCounters c = counters();
  FillCounters(c, &event);
  event.ring_capacity = ring_->capacity();
  event.ring_high_water = c.ring_high_water;
  event.cpu_ns = c.cpu_ns;
  event.interval_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.stats_interval).count();
  Send(event, /*preamble=*/false);
}

void SenderThread::SendProcessEnd() noexcept {
  schema::ProcessEndEvent event;
  event.header = MakeHeader();
  const PipelineCounters c = counters();
  event.exit_code.reset();
  FillCounters(c, &event);
  Send(event, /*preamble=*/false);
}

void SenderThread::SendProcessCrash(const CrashInfo& crash) noexcept {
  schema::ProcessCrashEvent event;
  event.header = MakeHeader();
  const PipelineCounters c = counters();
  event.signal = crash.signal;
  event.signal_name = FatalSignalName(crash.signal);
  event.code = crash.code;
  event.addr = crash.addr;
  event.tid = crash.tid;
  event.app_handler = crash.app_handler;
  FillCounters(c, &event);
  Send(event, /*preamble=*/false);
}

bool SenderThread::Finish(Clock::time_point deadline) noexcept {
  if (finished_) return transport_.unacked_lines() == 0;
  finished_ = true;
  // Everything recorded goes to the transport: in drop mode waiting for room until the deadline,
  // in block mode while the collector makes progress (block_stall_limit).
  room_deadline_ = block_ ? Clock::time_point::max() : deadline;
  if (!started_process_) SendProcessStart();
  DrainAll();
  // Records dropped after the last buffer CUPTI completed (the global queue: CUPTI's buffers
  // are global since CUDA 6).
  if (activity_ != nullptr && CuptiOurs()) activity_->ReadDropped(nullptr, 0);
  if (stall_ != nullptr) {
    // A stall that ended before the exit (its kernels' records came with the last flush, or its
    // synchronising call returned) is reported resolved; one still going on stays as last
    // reported.
    StampClocks(Clock::now());
    ReadCallbacksForStalls();
    schema::StallEvent event;
    if (stall_->PollAtExit(Clock::now(), &event)) {
      event.header = MakeHeader();
      Send(event, /*preamble=*/false);
    }
  }
  SendProcessEnd();
  // In block mode the waits for room since the stop (here, and in the thread's last step) do not
  // count against the deadline.
  return transport_.Flush(block_ ? deadline + room_waited_ : deadline);
}

}  // namespace cuflight::inject
