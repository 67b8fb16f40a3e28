// Which launched kernels have not finished, per stream, and when a stream has made no progress
// for the stall threshold (CUFLIGHT_STALL_MS): the sender thread's view, built from what it drains
// anyway (launch records as it builds their kernel events, kernel activity records as CUPTI hands
// them over). Nothing here runs on a launching thread.
//
// 1. A launch is pending from its record until its stream is seen finishing it: a complete kernel
//    activity record with its correlation id, or one of a launch ordered after it on the stream.
//    A later launch's kernel finishing finishes an earlier one only when the stream runs them in
//    launch order, which holds for launches of one thread on a stream (the driver queues a
//    thread's calls in program order) and not otherwise:
//    - launches of two threads on one stream: their correlation ids are taken when each call
//      begins, their kernels queued when it gets the stream, so ids need not be stream order.
//      A stream launched on by more than one thread (`mixed`) pops a launch only by a record of
//      a launch of the same thread, its own record, or a synchronize (7);
//    - programmatic dependent launch (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
//      cuda.h: "allow the grid's execution to overlap with the previous kernel in the stream"):
//      the secondary may end while its primary still runs. The launch before such a one on the
//      stream (the primary) is finished only by its own record or a synchronize.
//    Within those bounds a later kernel finishing (the activity record of a launch not recorded,
//    a sampled-out one, a graph node) finishes every earlier one, and a lost or late record is
//    made up by the next one. A record handled before its launch record is remembered (the last
//    kEarly of a stream), and on a stream of one thread finishes every launch before it; such a
//    record cannot tell a programmatic launch, the one case a primary can be taken as finished.
//    Correlation ids are 32 bits and wrap (correlation_ids.h): each is unwrapped on arrival.
//    A stream of one thread holds its pending launches in id order, so a record looks at those up
//    to its own only; on a mixed stream it looks at all of them (at most kMaxPending).
//    Launches whose stream CUPTI could not name (CUPTI_INVALID_STREAM_ID) are not tracked.
// 2. Progress. A stream's wait starts when its oldest pending launch was launched or the stream
//    was last seen finishing a kernel, whichever is later: kernels queued behind a long one wait
//    from when it finished, not from their own launch. A stream whose wait reaches the threshold
//    is stalled; the process is stalled while any stream is.
// 3. Events (Poll). Only a confirmed stream (point 6) or one a synchronising call shows stalled
//    (point 9) is stalled. Stalled: when the first stream
//    stalls; again every repeat interval (the threshold, at least 1 s, at most 60 s) while one
//    stays stalled; resolved when none is any
//    more. Each lists the kMaxStallStreams longest-waiting streams with their kMaxStallLaunches
//    oldest pending launches.
// 4. Bounded, allocated once: kMaxStreams streams with pending launches (a stream with none is
//    reused for a new one), kMaxPending pending launches, names of kMaxNames functions with
//    pending launches. A launch that finds no room is not tracked (counted in untracked()): the
//    oldest launches, which a stall names, are the ones kept.
// 5. Lost timing records (CUPTI had no activity buffer, or dropped records): a launch pending then
//    may have finished unseen, and nothing later on an idle stream would show it. OnTimingLost
//    marks the launches pending then `unsure` (not those a forced flush showed running). An
//    unsure launch is still finished as any other; a confirmation (6) that finds no record of it
//    at all forgets it (its record was the one lost), and one that finds its record incomplete
//    knows it running: a kernel's record is written when it is launched (6), so a hung kernel's
//    record sits incomplete in CUPTI's buffer while other threads' records are lost, and the hang
//    is still reported.
// 6. Confirmation. A default flush hands over only buffers whose records are all complete
//    (cupti_activity.h, cuptiActivityFlushAll), and one buffer holds the records of many kernels:
//    the records of kernels that finished before a hung one wait with its record. So before a
//    stream is first reported, the sender asks for a forced flush (ConfirmationDue,
//    BeginConfirmation, the records, EndConfirmation): it hands over every buffer, the records of
//    kernels still running or queued incomplete (start and end 0, seen on an H200 with CUDA
//    13.0), and those are never handed over again. Launches it shows finished are dropped, and
//    the stream's progress is when the last of them ended (its record's end against its launch
//    record's time, within [launch, now]), not when that was seen. A stream still over the
//    threshold is then reported at once, naming the launch that holds it; its pending launches
//    are kept (confirmed) until a later record or a synchronize (7) shows them finished. One
//    that has not yet waited the threshold since then keeps its launches and is looked at again
//    when it has (so a hang is never missed; if its kernel ends and nothing later on the stream
//    or a synchronize shows it, it is reported stalled: the one case this can be wrong). Any
//    other stream whose records came back incomplete has its pending launches forgotten, since
//    they may now finish unseen. At most one forced flush per threshold, except that second
//    look.
// 7. Synchronization records (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION): a successful stream or
//    context synchronize has finished every launch made before it on that stream or context
//    (correlation ids below its own), including launches whose records a forced flush consumed,
//    primaries and other threads' launches.
// 8. Synchronization records cost the application: CUPTI makes one on the calling thread for every
//    stream and event query (cudaStreamQuery, cudaEventQuery: NCCL's watchdog, MPI/UCX progress
//    loops, allocators), complete or not (cupti_activity.h, cuptiActivityEnableAllSyncRecords:
//    "By default, the record is generated for all CUDA events and stream irrespective of whether
//    the operations have been completed"), and with per-thread activity buffers
//    (CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, default 1) each polling thread holds a
//    buffer of the pool: enough of them leave none for kernel records, which CUPTI then drops.
//    The sender therefore collects them only while NeedsSynchronizations() (from the first
//    confirmation of a stall to its end), with queries whose work has not completed left out
//    where CUPTI has cuptiActivityEnableAllSyncRecords; the rest of the time a stall's end is
//    seen from kernel records alone, as point 1 says.
// 9. The application's synchronising calls (sync_calls.h), read every check (OnSyncCalls): a
//    thread inside cuStreamSynchronize(S) waits for S; inside cuCtxSynchronize or
//    cuEventSynchronize, for some stream of its context (an event's stream is not known: the
//    library does not subscribe to cuEventRecord). A call that returned successfully finished
//    what was launched before it (OnSynchronized, as point 7). A call in progress *covers* S (a
//    stream call on S, a context or event call on S's context). A stream covered by a call that
//    has waited the threshold is stalled (evidence sync_call), with no forced flush, when it has
//    work not seen finishing that old: pending launches over the threshold (point 2), or for a
//    context or event call launches without records since its last synchronize (point 10); a
//    stream call stalls its stream whatever is known of it (the call itself says it has work,
//    perhaps a copy or a launch not recorded). While a stream is covered by a call, or any
//    stream is stalled by one, no forced flush is made: a hung kernel's incomplete record holds
//    its whole buffer back, so other streams' finished kernels look pending too; their records
//    come when the hang ends, and a forced flush would lose the records of every kernel still
//    queued (point 6). Such a stream is not reported meanwhile, unless a call covers it.
// 10. Without kernel records (timing off; sampled, outside a timing window; Launch::timed false)
//    a launch is not pending: the stream keeps its last kRecent launches (all launches, in the
//    order handled) and a count of launches since its last synchronize seen returning
//    (untimed_since_sync). Only point 9 can then say a stream is stalled: the event lists those
//    last launches (launches_from recent), which of them runs, if any, not known. The stream
//    also keeps its untimed launches not known finished (untimed_first..untimed_last): a later
//    launch of its thread seen finishing, or a synchronize, finishes them. A stream that has
//    such launches, no pending launch, no call covering it and no sign of progress for the
//    threshold cannot be judged from what it has: under the sampled policy AskTimingWindow has
//    the sender open a timing window (timing_windows.h, point 6), so that its next launches get
//    records; one of them that does not finish is pending and reported as any other, after a
//    second threshold. Whenever untimed launches not known finished precede a stream's oldest
//    pending launch, its event lists the last launches (launches_from recent), not the pending
//    ones: any of them may be the one that runs. A stream that gets no launch while the window
//    is open, or whose launches are all untimed (timing off), is not reported: CUPTI makes no
//    record of a kernel launched while its kind was disabled, and asking the driver about the
//    stream from the library (cuStreamQuery) is not sound: the application may destroy the
//    handle meanwhile, and a query of a capturing stream is not permitted (cuda.h,
//    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and may invalidate the capture (docs/protocol.md,
//    "Stalls").
// 11. Graph launches (graph_launches.h). A cuGraphLaunch is a pending launch of its stream
//    (OnGraphLaunch; inserted at its correlation id's place: the log is read apart from the
//    launch ring). The records of its kernel nodes carry its correlation id: one finishing is
//    progress of the stream but does not finish the graph launch (its other nodes may still
//    run); a later launch finishing, a synchronize, or a confirmation that finds no record of it
//    incomplete does. A record of it handed over incomplete names the node running (graphId,
//    graphNodeId, kernel name: cupti_activity.h, CUpti_ActivityKernel10), which the stall event
//    names with the graph launch's correlation id and the graph exec's id.
// 12. A forced flush's cost: the records it handed over incomplete, and on how many streams, are
//    counted (flush_incomplete(), in timing_dropped_stall_flush) and said in the next stalled
//    event (flush_incomplete, flush_incomplete_streams).
// Threads: one at a time (the sender thread). No allocation after the constructor; no lock.
#ifndef CUFLIGHT_LIBINJECT_SRC_STALL_TRACKER_H_
#define CUFLIGHT_LIBINJECT_SRC_STALL_TRACKER_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "correlation_ids.h"
#include "cuflight/schema/events.h"
#include "sync_calls.h"

namespace cuflight::inject {

class StallTracker {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr int kMaxStreams = 256;
  static constexpr int kMaxPending = 8192;
  static constexpr int kMaxNames = 256;
  // Probe window of the name table (a function's name is in one of these slots from its hash).
  static constexpr int kNameProbe = 8;
  // Records handled before their launch records, remembered per stream (design point 1).
  static constexpr int kEarly = 16;
  // Last launches kept per stream (design point 10), and synchronising calls in progress looked
  // at (point 9).
  static constexpr int kRecent = static_cast<int>(schema::kMaxStallLaunches);
  static constexpr int kMaxSyncWaits = 32;

  // A recorded launch whose kernel event was built.
  struct Launch {
    uint64_t context = 0;  // CUPTI's ids, as in the kernel event
    uint64_t stream = 0;
    int32_t device = 0;
    uint32_t correlation_id = 0;  // CUPTI's (32 bits, wrapping)
    int32_t tid = 0;              // the launching thread
    // Launched with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: it may overlap the
    // previous kernel of the stream (design point 1).
    bool overlaps_previous = false;
    uint64_t function_id = 0;  // FunctionInfo::id: names are kept once per function
    std::string_view name;     // read during the call only
    std::string_view demangled;
    schema::Dim3 grid;
    schema::Dim3 block;
    double occupancy = 0;
    Clock::time_point launched_at;  // on the sender's clock
    int64_t ts_ns = 0;              // the launch record's wall-clock time (a confirmation's
                                    // records' end times are read against it)
    // A kernel activity record will come for it (timing all; sampled, inside a window): it is
    // pending until seen finishing. Otherwise it is only remembered (design point 10).
    bool timed = true;
  };

  // A cuGraphLaunch (design point 11).
  struct GraphLaunch {
    uint64_t context = 0;
    uint64_t stream = 0;
    int32_t device = 0;
    uint32_t correlation_id = 0;
    uint32_t graph_exec_id = 0;  // 0: unknown
    int32_t tid = 0;
    Clock::time_point launched_at;
    int64_t ts_ns = 0;
    bool timed = true;  // its nodes' kernel records will come
  };

  // A kernel node's record, for a graph launch's running node (design point 11).
  struct Node {
    uint32_t graph_id = 0;
    uint64_t node_id = 0;  // 0: not a graph node
    std::string_view name;  // read during the call only
    std::string_view demangled;
    schema::Dim3 grid;
    schema::Dim3 block;
  };

  // `threshold` > 0. Allocates the tables (about 0.6 MiB); throws std::bad_alloc.
  explicit StallTracker(std::chrono::milliseconds threshold);
  StallTracker(const StallTracker&) = delete;
  StallTracker& operator=(const StallTracker&) = delete;

  void OnLaunch(const Launch& launch) noexcept;
  void OnGraphLaunch(const GraphLaunch& launch) noexcept;
  // A complete kernel activity record (CUPTI's contextId, streamId, correlationId, end) handled
  // at `now`.
  void OnFinished(uint64_t context, uint64_t stream, uint32_t correlation_id,
                  Clock::time_point now, uint64_t end_ns = 0) noexcept;
  // The synchronising calls in progress now (design point 9); replaces the previous set.
  void OnSyncCalls(std::span<const SyncCall> in_progress) noexcept;
  // Timing records were lost (design point 5): the launches pending now become unsure.
  void OnTimingLost() noexcept;
  // A successful synchronize (design point 7): of `stream`, or with kAllStreams of the context.
  static constexpr uint64_t kAllStreams = ~uint64_t{0};
  void OnSynchronized(uint64_t context, uint64_t stream, uint32_t correlation_id,
                      Clock::time_point now) noexcept;

  // Confirmation (design point 6). Due when a stream not yet confirmed has waited the threshold
  // and the last forced flush is at least a threshold ago; between Begin and End the sender hands
  // over the records of one forced flush: OnFinished for complete ones, OnIncomplete (with the
  // record's correlation id) for others.
  bool ConfirmationDue(Clock::time_point now) const noexcept;
  void BeginConfirmation(Clock::time_point now) noexcept;
  // `node`: the record's graph node facts (node_id 0 for a kernel not run by a graph).
  void OnIncomplete(uint64_t context, uint64_t stream, uint32_t correlation_id,
                    const Node& node) noexcept;
  void OnIncomplete(uint64_t context, uint64_t stream, uint32_t correlation_id) noexcept;
  void EndConfirmation() noexcept;
  // When no forced flush can be had (it did not return): every stream over the threshold is
  // taken as it looks, the records of finished kernels perhaps still held back.
  void ConfirmWithoutRecords(Clock::time_point now) noexcept;
  uint64_t confirmations() const { return confirmations_; }
  // Records the forced flushes of confirmations handed over incomplete, all time (point 12).
  uint64_t flush_incomplete() const { return flush_incomplete_; }
  // Whether a synchronization record could show something no kernel record will (design point
  // 7): a stream is confirmed stalled, or a pending launch's record went with a forced flush.
  // Synchronization records are collected only then (point 8).
  bool NeedsSynchronizations() const noexcept;

  // Under the sampled timing policy (design point 10): true when some stream has untimed
  // launches not known finished for the threshold, no pending launch and no synchronising call
  // covering it, so that the sender opens a timing window: the stream's next launches then get
  // records, and a stream that makes no progress is seen pending and reported. Once per stream
  // for the launches it had when asked, and at most once per threshold per stream.
  bool AskTimingWindow(Clock::time_point now) noexcept;
  uint64_t window_asks() const { return window_asks_; }

  // At most every check interval (a quarter of the threshold, at most 100 ms): whether a stall
  // event is due at `now`. When it is, fills *out (its header excepted) with views into this
  // object, valid until its next non-const call.
  bool Poll(Clock::time_point now, schema::StallEvent* out) noexcept;

  // At the process's exit, after the last activity records were handled: a resolved event when a
  // stall was reported and no stream is stalled any more (never a new stalled event). `now` is
  // taken as at least the time of the last Poll.
  bool PollAtExit(Clock::time_point now, schema::StallEvent* out) noexcept;

  std::chrono::milliseconds threshold() const { return threshold_; }
  // How often the sender should ask CUPTI for completed activity buffers so that kernels are seen
  // finishing well within the threshold: a quarter of it, within [50, 500] ms.
  std::chrono::milliseconds flush_interval() const;
  bool stalled() const { return stalled_; }
  // Launches pending now, and launches not tracked for want of room since construction.
  int pending() const { return pending_; }
  uint64_t untracked() const { return untracked_; }

 private:
  static constexpr uint16_t kNoName = 0xFFFF;
  static constexpr int32_t kNone = -1;

  struct Entry {
    uint64_t correlation_id;  // unwrapped (correlation_ids.h)
    int32_t tid;
    bool primary;  // the next launch on the stream may overlap it (design point 1)
    bool unsure;   // pending when timing records were lost (design point 5)
    bool seen_running;  // a forced flush handed its record over incomplete
    Clock::time_point launched_at;
    int64_t ts_ns;
    schema::Dim3 grid;
    schema::Dim3 block;
    double occupancy;
    uint16_t name;  // index into names_, or kNoName
    int32_t next;   // the next pending launch of the stream, or the next free entry
    bool graph;     // a graph launch (design point 11)
    uint32_t graph_exec_id;
    // A graph launch's node a forced flush showed running: its record's ids and name.
    uint32_t node_graph_id;
    uint64_t node_id;
    uint16_t node_name;
  };

  // One of a stream's last launches (design point 10).
  struct Recent {
    uint64_t correlation_id = 0;  // unwrapped
    uint16_t name = kNoName;
    bool graph = false;
    uint32_t graph_exec_id = 0;
    schema::Dim3 grid;
    schema::Dim3 block;
    double occupancy = 0;
    Clock::time_point launched_at{};
  };

  struct Stream {
    uint64_t context = 0;
    uint64_t stream = 0;
    int32_t device = 0;
    bool used = false;
    bool reported = false;  // in the stall event sent last
    int32_t head = kNone;   // oldest pending launch
    int32_t tail = kNone;
    int64_t count = 0;
    bool confirming = false;  // over the threshold when the confirmation began
    bool confirmed = false;   // its pending launches are known unfinished (design point 6)
    bool incomplete = false;  // the confirmation handed over a record of it incomplete
    int32_t tid = 0;     // the thread of its first launch
    bool mixed = false;  // launched on by more than one thread (design point 1)
    uint64_t finished_up_to = 0;  // highest (unwrapped) correlation id seen finishing on it
    uint64_t synced_below = 0;    // a synchronize finished every launch below this id
    std::array<uint64_t, kEarly> early{};  // records handled before their launch's; 0: none
    int next_early = 0;
    Clock::time_point progress_at{};  // when a kernel of the stream was last seen finishing
    // completed_ when the stream's wait began, for the first event's `completed`.
    uint64_t completed_at_wait = 0;
    Clock::time_point last_used{};
    // Launches without records since the last synchronize seen returning, and the last launches
    // (design point 10): recent[(next_recent - 1) mod kRecent] is the newest.
    int64_t untimed_since_sync = 0;
    // Untimed launches not known finished (point 10): the (unwrapped) id of the first, or a
    // lower bound of it (0: none), the newest, and since when the first waits. A timing window
    // was last asked for them at window_asked_at, when untimed_last was window_asked_for.
    uint64_t untimed_first = 0;
    uint64_t untimed_last = 0;
    Clock::time_point untimed_at{};
    uint64_t window_asked_for = 0;
    Clock::time_point window_asked_at{};
    std::array<Recent, kRecent> recent{};
    int recent_count = 0;
    int next_recent = 0;
    bool flush_incomplete = false;  // the confirmation's flush handed over a record of it incomplete
  };

  struct Name {
    uint64_t function_id = 0;
    uint32_t refs = 0;  // pending launches using it; 0: free
    uint16_t name_size = 0;
    uint16_t demangled_size = 0;
    char name[schema::kMaxStallNameBytes];
    char demangled[schema::kMaxStallNameBytes];
  };

  // The synchronising call in progress that covers `s` and has waited longest (point 9), or
  // null; with `stalling`, only one that has waited the threshold and shows `s` stalled.
  const SyncCall* Covering(const Stream& s, Clock::time_point now, bool stalling) const noexcept;
  static Clock::time_point EnteredAt(const SyncCall& call) noexcept;
  // When the stalled stream's wait began: its pending launches' (point 2), else the call's.
  Clock::time_point StallStart(const Stream& s, const SyncCall* call) const noexcept;
  void Remember(Stream& s, const Recent& recent) noexcept;
  void ReleaseEntry(Entry& entry) noexcept;
  Stream* FindStream(uint64_t context, uint64_t stream) noexcept;
  Stream* FindOrAddStream(uint64_t context, uint64_t stream, Clock::time_point now) noexcept;
  // The stream of a launch or graph launch, found or added, its device and last use updated, and
  // the launch's correlation id unwrapped into *id; null (counted untracked) when CUPTI named no
  // stream or context for it, or no stream has room.
  // Whether a launch of stream *s becomes pending: not when untimed (counted in
  // untimed_since_sync) or when no pending slot is free (untracked); notes its thread (mixed).
  bool AdmitPending(Stream* s, bool timed, int32_t tid, uint64_t id,
                    Clock::time_point launched_at) noexcept;
  // Every untimed launch of `s` below the (unwrapped) id `below` is known finished, at `now`.
  void FinishedUntimedBelow(Stream& s, uint64_t below, Clock::time_point now) noexcept;
  Stream* StreamOfLaunch(uint64_t context, uint64_t stream, int32_t device,
                         uint32_t correlation_id, Clock::time_point launched_at,
                         uint64_t* id) noexcept;
  void RebuildIndex() noexcept;
  uint16_t AcquireName(const Launch& launch) noexcept;
  // A name under `key` (a function id, or a graph node's name's hash with the top bit set).
  uint16_t AcquireName(uint64_t key, std::string_view name, std::string_view demangled) noexcept;
  void ReleaseName(uint16_t name) noexcept;
  // Drops the stream's oldest pending launch.
  void PopHead(Stream& s) noexcept;
  // What RemoveIf does with a pending launch, and whether it looks at the next one.
  enum class Verdict { kKeep, kRemove, kRemoveAndStop, kStop };
  // Walks the stream's pending launches from the oldest, doing what pred(entry) says; returns
  // how many it dropped.
  template <class Pred>
  int64_t RemoveIf(Stream& s, Pred pred) noexcept;
  // A kernel of the stream was seen finishing at `now` (during a confirmation: it ended at
  // `finished_at`, if known); `popped`: pending launches were dropped.
  void Progressed(Stream& s, bool popped, Clock::time_point now,
                  Clock::time_point finished_at = Clock::time_point::min()) noexcept;
  bool OverThreshold(const Stream& s, Clock::time_point now) const noexcept;
  Clock::time_point WaitStart(const Stream& s) const noexcept;

  std::chrono::milliseconds threshold_;
  std::chrono::milliseconds repeat_;
  std::chrono::milliseconds check_interval_;

  std::unique_ptr<Entry[]> entries_;
  int32_t free_ = kNone;
  int pending_ = 0;
  std::vector<Stream> streams_;
  // (context, stream) -> index into streams_, open addressing; rebuilt when a stream is reused.
  std::vector<int16_t> index_;
  int last_stream_ = kNone;  // the stream found last (records come in runs of one stream)
  std::unique_ptr<Name[]> names_;
  CorrelationUnwrapper ids_;

  // Context synchronizes (design point 7): a launch record handled after the synchronize's
  // record is finished when its correlation id is below the context's mark.
  static constexpr int kMaxSyncedContexts = 16;
  struct SyncedContext {
    uint64_t context = 0;
    uint64_t below = 0;  // unwrapped; 0: unused
  };
  std::array<SyncedContext, kMaxSyncedContexts> synced_contexts_{};
  int next_synced_context_ = 0;

  // Synchronising calls in progress (point 9).
  std::array<SyncCall, kMaxSyncWaits> waits_{};
  int wait_count_ = 0;
  // The cost of forced flushes (point 12): all time, and that of the last one until a stalled
  // event says it.
  uint64_t flush_incomplete_ = 0;
  uint64_t window_asks_ = 0;
  uint64_t flush_cost_records_ = 0;
  bool flush_cost_pending_ = false;
  int32_t flush_cost_streams_ = 0;
  // Streams the current confirmation's flush handed over incomplete records of that are not
  // tracked (for flush_cost_streams_): a few kept, the rest counted as one each.
  std::array<uint64_t, 16> untracked_incomplete_{};
  int untracked_incomplete_count_ = 0;

  bool confirming_ = false;
  Clock::time_point next_confirmation_{};
  Clock::time_point last_confirmation_{};
  uint64_t confirmations_ = 0;

  uint64_t untracked_ = 0;
  uint64_t completed_ = 0;  // kernels seen finishing, all time

  Clock::time_point next_check_{};
  Clock::time_point last_poll_{};
  bool stalled_ = false;
  Clock::time_point stall_began_{};
  Clock::time_point next_event_{};
  uint64_t completed_at_event_ = 0;  // completed_ when the last stall event was built

  // The event's storage: the listed streams and their launches.
  std::array<schema::StallStream, schema::kMaxStallStreams> event_streams_{};
  std::array<std::array<schema::StallLaunch, schema::kMaxStallLaunches>, schema::kMaxStallStreams>
      event_launches_{};
  std::array<int, kMaxStreams> order_{};  // scratch: stalled streams by wait
  std::array<const SyncCall*, kMaxStreams> order_call_{};  // scratch: the call stalling each
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_STALL_TRACKER_H_
