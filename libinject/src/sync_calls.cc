#include "sync_calls.h"

namespace cuflight::inject {
namespace {

// The slot the thread held last (design point 2), and the one it holds now (-1: none).
thread_local int t_hint = -1;
thread_local int t_held = -1;

}  // namespace

std::string_view SyncCallName(uint32_t cbid) noexcept {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
      return "cuStreamSynchronize";
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
      return "cuStreamSynchronize_ptsz";
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
      return "cuCtxSynchronize";
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
      return "cuCtxSynchronize_v2";
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
      return "cuEventSynchronize";
    default:
      return "";
  }
}

void SyncCallTable::Enter(const SyncCall& call) noexcept {
  if (t_held >= 0) {
    // This thread's previous call never had its exit callback (a subscription changed between
    // the two): it is not waiting any more, so it is no call in progress.
    Slot& stale = slots_[t_held];
    if (stale.owner.load(std::memory_order_relaxed) == call.tid) {
      const uint32_t seq = stale.seq.load(std::memory_order_relaxed);
      stale.seq.store(seq + 1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_release);
      stale.active.store(0, std::memory_order_relaxed);
      stale.seq.store(seq + 2, std::memory_order_release);
      stale.owner.store(0, std::memory_order_release);
    }
    t_held = -1;
  }
  int chosen = -1;
  const int first = t_hint >= 0 ? t_hint : static_cast<int>(static_cast<uint32_t>(call.tid) % kSlots);
  for (int k = 0; k < kSlots; ++k) {
    const int i = (first + k) % kSlots;
    int32_t free_owner = 0;
    if (slots_[i].owner.load(std::memory_order_relaxed) == 0 &&
        slots_[i].owner.compare_exchange_strong(free_owner, call.tid, std::memory_order_acquire)) {
      chosen = i;
      break;
    }
  }
  if (chosen < 0) {
    untracked_.fetch_add(1, std::memory_order_relaxed);
    t_held = -1;
    return;
  }
  t_hint = chosen;
  t_held = chosen;
  Slot& s = slots_[chosen];
  const uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_relaxed);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);
  s.tid.store(call.tid, std::memory_order_relaxed);
  s.cbid.store(call.cbid, std::memory_order_relaxed);
  s.scope.store(static_cast<uint8_t>(call.scope), std::memory_order_relaxed);
  s.correlation_id.store(call.correlation_id, std::memory_order_relaxed);
  s.context.store(call.context, std::memory_order_relaxed);
  s.stream.store(call.stream, std::memory_order_relaxed);
  s.event.store(call.event, std::memory_order_relaxed);
  s.entered_ns.store(call.entered_ns, std::memory_order_relaxed);
  s.active.store(1, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
}

void SyncCallTable::Exit(int32_t tid, uint32_t correlation_id, int32_t result) noexcept {
  const int i = t_held;
  if (i < 0) return;
  Slot& s = slots_[i];
  t_held = -1;
  if (s.owner.load(std::memory_order_relaxed) != tid ||
      s.correlation_id.load(std::memory_order_relaxed) != correlation_id) {
    return;  // not the call this thread entered (its enter found no slot)
  }
  const uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.result.store(result, std::memory_order_relaxed);
  s.active.store(0, std::memory_order_relaxed);
  s.returned_cbid.store(s.cbid.load(std::memory_order_relaxed), std::memory_order_relaxed);
  s.returned_scope.store(s.scope.load(std::memory_order_relaxed), std::memory_order_relaxed);
  s.returned_tid.store(tid, std::memory_order_relaxed);
  s.returned_correlation_id.store(correlation_id, std::memory_order_relaxed);
  s.returned_context.store(s.context.load(std::memory_order_relaxed), std::memory_order_relaxed);
  s.returned_stream.store(s.stream.load(std::memory_order_relaxed), std::memory_order_relaxed);
  s.returned_entered_ns.store(s.entered_ns.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
  s.returns.store(s.returns.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
  s.owner.store(0, std::memory_order_release);
}

bool SyncCallTable::Read(const Slot& s, bool returned, SyncCall* out, bool* active,
                         uint32_t* returns) noexcept {
  for (int attempt = 0; attempt < 8; ++attempt) {
    const uint32_t before = s.seq.load(std::memory_order_acquire);
    if ((before & 1) != 0) continue;
    if (returned) {
      out->tid = s.returned_tid.load(std::memory_order_relaxed);
      out->cbid = s.returned_cbid.load(std::memory_order_relaxed);
      out->scope = static_cast<SyncScope>(s.returned_scope.load(std::memory_order_relaxed));
      out->correlation_id = s.returned_correlation_id.load(std::memory_order_relaxed);
      out->context = s.returned_context.load(std::memory_order_relaxed);
      out->stream = s.returned_stream.load(std::memory_order_relaxed);
      out->event = 0;
      out->entered_ns = s.returned_entered_ns.load(std::memory_order_relaxed);
    } else {
      out->tid = s.tid.load(std::memory_order_relaxed);
      out->cbid = s.cbid.load(std::memory_order_relaxed);
      out->scope = static_cast<SyncScope>(s.scope.load(std::memory_order_relaxed));
      out->correlation_id = s.correlation_id.load(std::memory_order_relaxed);
      out->context = s.context.load(std::memory_order_relaxed);
      out->stream = s.stream.load(std::memory_order_relaxed);
      out->event = s.event.load(std::memory_order_relaxed);
      out->entered_ns = s.entered_ns.load(std::memory_order_relaxed);
    }
    out->result = s.result.load(std::memory_order_relaxed);
    *active = s.active.load(std::memory_order_relaxed) != 0;
    *returns = s.returns.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) == before) return true;
  }
  return false;
}

int SyncCallTable::InProgress(SyncCall* out, int cap) const noexcept {
  int n = 0;
  for (const Slot& s : slots_) {
    if (n == cap) break;
    if (s.seq.load(std::memory_order_relaxed) == 0) continue;  // never used
    bool active = false;
    uint32_t returns = 0;
    if (Read(s, /*returned=*/false, &out[n], &active, &returns) && active) ++n;
  }
  return n;
}

int SyncCallTable::ReturnedSinceLastLook(SyncCall* out, int cap) noexcept {
  int n = 0;
  for (int i = 0; i < kSlots && n < cap; ++i) {
    const Slot& s = slots_[i];
    if (s.returns.load(std::memory_order_relaxed) == returns_seen_[i]) continue;
    bool active = false;
    uint32_t returns = 0;
    if (!Read(s, /*returned=*/true, &out[n], &active, &returns)) continue;
    returns_seen_[i] = returns;
    ++n;
  }
  return n;
}

}  // namespace cuflight::inject
