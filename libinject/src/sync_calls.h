// The application's synchronising calls in progress, as the CUPTI driver callbacks see them: a
// thread that entered cuStreamSynchronize, cuCtxSynchronize or cuEventSynchronize and has not
// returned. The strongest sign of a hang the library can have without activity records: the
// application itself waits for the GPU, on a stream or context it names (stall_tracker.h, points
// 9-10).
//
// 1. Which calls. The blocking synchronises only: cuStreamSynchronize (and _ptsz),
//    cuCtxSynchronize (and _v2), cuEventSynchronize. Not cuStreamQuery or cuEventQuery: polls
//    that NCCL's watchdog and progress loops make at a high rate (each subscribed call costs an
//    enter and an exit callback); a program that waits by polling is seen by its kernel records
//    only. The ids are Recorder::DriverCallbacks' too, so they are enabled whether api_error
//    events are on or not.
// 2. The table. kSlots slots, each held by one thread from the enter callback to the exit one
//    (cupti_callbacks.h, CUpti_CallbackData.callbackSite: CUPTI_API_ENTER / CUPTI_API_EXIT of the
//    same call on the same thread; the call's correlationId is the same at both). A thread tries
//    the slot it used last first, so it usually reuses its own. Each slot is a seqlock: the
//    writing thread makes the sequence odd, stores the fields, makes it even; a reader retries
//    while it is odd or changed. No allocation, no lock, no system call: a few atomic stores per
//    synchronising call, nothing for a launch.
// 3. What a slot says: the call in progress (active), and apart from it the last call that
//    returned from the slot, with its result (kept through the slot's next enter). The sender
//    thread reads the table every stall check: the calls in progress, and the calls that returned
//    since it last looked (at most one per slot: a thread that synchronises faster than the
//    checks shows its latest; each covers the ones before it on the same stream).
// 4. Full table (more than kSlots threads inside a synchronise at once): the call is not tracked
//    (untracked()); its thread is still seen by its kernel records, if any.
// Threads: Enter and Exit on the application's threads (callbacks), the reads on the sender
// thread.
#ifndef CUFLIGHT_LIBINJECT_SRC_SYNC_CALLS_H_
#define CUFLIGHT_LIBINJECT_SRC_SYNC_CALLS_H_

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <string_view>

namespace cuflight::inject {

// What a synchronising call waits for.
enum class SyncScope : uint8_t {
  kStream = 0,   // every operation on one stream (cuStreamSynchronize)
  kContext = 1,  // every operation of a context (cuCtxSynchronize)
  kEvent = 2,    // one event, recorded on a stream the library does not know (cuEventSynchronize)
};

// Whether a driver callback id is a synchronising call, and its scope. Inline: the recorder asks
// it at every enter callback, launches' included (a compare or two).
inline bool SyncScopeOf(CUpti_CallbackId cbid, SyncScope* scope) noexcept {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
      *scope = SyncScope::kStream;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
      *scope = SyncScope::kContext;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
      *scope = SyncScope::kEvent;
      return true;
    default:
      return false;
  }
}
// The driver API name of a synchronising call's callback id ("" for any other id).
std::string_view SyncCallName(uint32_t cbid) noexcept;

// One synchronising call, as the table holds it.
struct SyncCall {
  int32_t tid = 0;
  uint32_t cbid = 0;
  SyncScope scope = SyncScope::kStream;
  uint32_t correlation_id = 0;  // CUPTI's (32 bits, wrapping)
  uint64_t context = 0;         // CUPTI's ids, as in kernel events (context only for kContext,
  uint64_t stream = 0;          // and for kEvent the calling thread's current context)
  uint64_t event = 0;           // kEvent: the CUevent handle
  int64_t entered_ns = 0;       // CLOCK_MONOTONIC when the call began
  int32_t result = 0;           // when returned: the CUresult
};

class SyncCallTable {
 public:
  static constexpr int kSlots = 128;

  SyncCallTable() = default;
  SyncCallTable(const SyncCallTable&) = delete;
  SyncCallTable& operator=(const SyncCallTable&) = delete;

  // At a synchronising call's enter callback, on its thread. Never blocks.
  void Enter(const SyncCall& call) noexcept;
  // At its exit callback, on the same thread: `correlation_id` names the call (a call whose enter
  // found no slot is ignored).
  void Exit(int32_t tid, uint32_t correlation_id, int32_t result) noexcept;

  // Sender thread. Fills out[0, n) with the calls in progress now, at most `cap`; returns n.
  int InProgress(SyncCall* out, int cap) const noexcept;
  // Sender thread: the calls that returned since the last call of this function (one per slot at
  // most: its latest), at most `cap`.
  int ReturnedSinceLastLook(SyncCall* out, int cap) noexcept;

  uint64_t untracked() const { return untracked_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    std::atomic<int32_t> owner{0};  // the thread inside a call, 0: free
    std::atomic<uint32_t> seq{0};   // odd while being written
    std::atomic<uint32_t> returns{0};  // calls of this slot that returned, all time
    std::atomic<uint8_t> active{0};
    std::atomic<uint8_t> scope{0};
    std::atomic<int32_t> tid{0};
    std::atomic<uint32_t> cbid{0};
    std::atomic<uint32_t> correlation_id{0};
    std::atomic<uint64_t> context{0};
    std::atomic<uint64_t> stream{0};
    std::atomic<uint64_t> event{0};
    std::atomic<int64_t> entered_ns{0};
    std::atomic<int32_t> result{0};
    // The last call that returned (design point 3).
    std::atomic<uint32_t> returned_cbid{0};
    std::atomic<uint8_t> returned_scope{0};
    std::atomic<int32_t> returned_tid{0};
    std::atomic<uint32_t> returned_correlation_id{0};
    std::atomic<uint64_t> returned_context{0};
    std::atomic<uint64_t> returned_stream{0};
    std::atomic<int64_t> returned_entered_ns{0};
  };
  // A consistent copy of a slot's call in progress (`returned` false) or of its last returned call
  // (true); false when a writer kept it changing.
  static bool Read(const Slot& slot, bool returned, SyncCall* out, bool* active,
                   uint32_t* returns) noexcept;

  Slot slots_[kSlots];
  std::atomic<uint64_t> untracked_{0};
  uint32_t returns_seen_[kSlots] = {};  // sender thread's
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_SYNC_CALLS_H_
